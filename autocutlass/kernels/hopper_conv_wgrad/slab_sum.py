"""The second kernel of the wgrad family's workspace split-K: dw = the sum of S fp32 slabs.

Workspace split-K (``HopperConvWgradConfig.split_mode``) has each of the S splits of a wgrad's
pixel loop store its raw fp32 partial of dw to a slab of its own: a contiguous (S, L, M, n_pad)
buffer, L the taps (or 1 when a tile holds several taps and dw is one matrix), M = K output
channels, n_pad = N rounded up to whole 16-byte rows. This kernel then writes, for every
(l, m, n),

    dw[l, m, n] = ((ws[0, l, m, n] + ws[1, l, m, n]) + ws[2, l, m, n]) + ... + ws[S-1, l, m, n]

in fp32, in split order (bitwise deterministic), converted to dw's dtype. A wgrad has no
epilogue, and its narrow layers want many splits (a 64x64x3x3 filter is 5 or 9 output tiles for
132 SMs, a stem's lowered wgrad one): S runs to ``MAX_SPLITS`` (the config's ``SPLIT_MAX``, 132),
loaded ``IN_FLIGHT`` slabs at a time (the GEMM family's reduce kernel, ``hopper_gemm.reduce``,
keeps every split of its at most 16 in registers and applies the GEMM epilogue; its sources are the GEMM family's, so it stays as it is).

One thread per 4 columns of a dw row (one 16-byte fp32 load per slab, an 8-byte store), in blocks of
128 on a flat 1-D grid with a row's vectors fastest (a warp reads and writes contiguous memory). The
kernel launches as a programmatic dependent (PDL) of the wgrad kernel before it and first waits on
``griddepcontrol.wait``, so its launch overlaps that kernel's last CTAs. Until session 25 a thread
covered 16 bytes of dw in blocks of 256, without PDL: a 64x64x3x3 filter's slab sum ran 18 blocks.
The new build measured x1.038-1.041 against cuDNN over the conv suite's 15 wgrad layers with the
shipped H100 configs, against x0.994-1.011 with the old (``benchmarks/probes/conv_wgrad_probe.py
--shipped-only``, alternating, 2026-11-27); rn50-l1-3x3 38.3 -> 35.1 us. dw is (M, N) row-major
(``rank`` 2) or (L, M, N) with any 16-byte-aligned batch and row strides (``rank`` 3: the tap-major
view (R*S, K, C) of a channels_last filter). N is a multiple of the vector (16-byte rows); M, N, L
and n_pad are symbolic, S, the dtype and the rank compile-time.

The DSL is imported when a kernel is compiled, never by ``get_slab_sum``'s look-up of a cached one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autocutlass.device import dsl_version
from autocutlass.errors import KernelCompileError
from autocutlass.kernels.compile_keys import ARCH, digest, target_arch
from autocutlass.kernels.hopper_conv_wgrad.config import SLAB_GROUPS, SPLIT_MAX
from autocutlass.kernels.hopper_conv_wgrad.sources import source_hash
from autocutlass.kernels.object_cache import ObjectCache
from autocutlass.ops.gemm.problem import DType

__all__ = ["IN_FLIGHT", "MAX_SPLITS", "SlabSum", "get_slab_sum", "slab_sum_key"]

MAX_SPLITS = SPLIT_MAX
IN_FLIGHT = 8
"""Slab loads issued before their adds: a thread holds this many 16-byte-of-dw vectors in fp32."""
FUNCTION_NAME = "autocutlass_wgrad_slab_sum"
DTYPES = (DType.BF16, DType.FP16)


@dataclass(frozen=True)
class SlabSum:
    """One compiled slab-sum kernel's class: the split count, dw's dtype and rank."""

    splits: int
    dtype: DType
    rank: int
    groups: int = 1
    """1: one thread sums a vector's slabs in one chain (``SlabSumKernel``); more: that many warps
    each sum a consecutive group of the slabs, added in group order (``GroupedSlabSumKernel``)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", DType(self.dtype))
        if isinstance(self.splits, bool) or not isinstance(self.splits, int) or not 2 <= self.splits <= MAX_SPLITS:
            raise ValueError(f"wgrad slab sum: splits={self.splits!r} is not an int in 2..{MAX_SPLITS}")
        if self.dtype not in DTYPES:
            raise ValueError(f"wgrad slab sum: dw dtype {self.dtype.value} is not one of {[d.value for d in DTYPES]}")
        if self.rank not in (2, 3):
            raise ValueError(f"wgrad slab sum: rank={self.rank!r} is not 2 or 3")
        if self.groups not in SLAB_GROUPS or (self.groups > 1 and self.splits < 2 * self.groups):
            raise ValueError(f"wgrad slab sum: groups={self.groups!r} is not one of {SLAB_GROUPS} with at least two "
                             f"slabs each (splits={self.splits})")  # fmt: skip

    @property
    def vec(self) -> int:
        """dw columns in 16 bytes: dw's rows are whole multiples of it (the compiled signature's
        alignment); a thread sums ``slab_sum_kernel.COLUMNS`` of them."""
        return 16 // self.dtype.bytes


def slab_sum_key(cls: SlabSum) -> str:
    """The on-disk cache key of ``cls``'s kernel (no DSL import)."""
    klass: dict[str, object] = {"splits": cls.splits, "dtype": cls.dtype.value, "rank": cls.rank}
    if cls.groups > 1:
        klass["groups"] = cls.groups
    return digest({"family": "wgrad_slab_sum", "class": klass, "in_flight": IN_FLIGHT, "dsl": dsl_version(),
                   "src": source_hash(), "arch": target_arch()})  # fmt: skip


def _compile(cls: SlabSum) -> Any:
    """Run the DSL compiler on fake tensors with symbolic L, M, N and n_pad."""
    os.environ.setdefault("CUTE_DSL_ARCH", ARCH)
    import cutlass
    from cutlass import cute
    from cutlass.cute.runtime import make_fake_stream, make_fake_tensor

    from autocutlass.kernels.hopper_conv_wgrad.slab_sum_kernel import GroupedSlabSumKernel, SlabSumKernel

    elem = {DType.BF16: cutlass.BFloat16, DType.FP16: cutlass.Float16}[cls.dtype]
    vec = cls.vec

    def sym64(div: int) -> Any:
        return cute.sym_int64(divisibility=div)

    m, n, n_pad = cute.sym_int32(), cute.sym_int32(divisibility=vec), cute.sym_int32(divisibility=4)
    l = cute.sym_int32() if cls.rank == 3 else 1  # noqa: E741
    ws = make_fake_tensor(cutlass.Float32, (cls.splits, l, m, n_pad), (sym64(4), sym64(4), sym64(4), 1),
                          assumed_align=16)  # fmt: skip
    if cls.rank == 2:
        d = make_fake_tensor(elem, (m, n), (sym64(vec), 1), assumed_align=16)
    else:
        d = make_fake_tensor(elem, (l, m, n), (sym64(vec), sym64(vec), 1), assumed_align=16)
    kernel: Any = (SlabSumKernel(cls.splits, elem, cls.rank, vec, IN_FLIGHT) if cls.groups == 1
                   else GroupedSlabSumKernel(cls.splits, elem, cls.rank, vec, IN_FLIGHT, cls.groups))  # fmt: skip
    try:
        return cute.compile(kernel, ws, d, make_fake_stream(use_tvm_ffi_env_stream=True), options="--enable-tvm-ffi")
    except Exception as e:
        raise KernelCompileError(f"DSL compile failed for the wgrad slab sum {cls}: {type(e).__name__}: {e}") from e


_CACHE = ObjectCache("wgrad_slab_sum", FUNCTION_NAME)
STATS = _CACHE.stats


def get_slab_sum(splits: int, dtype: DType, rank: int, cache_dir: Path | None, groups: int = 1) -> Any:
    """The compiled slab sum of (``splits``, dw's ``dtype``, dw's ``rank``, ``groups``): from memory,
    disk or the DSL. Called as ``fn(ws, dw)`` with torch CUDA tensors ws (S, L, M, n_pad) fp32 and dw
    (M, N) or (L, M, N); one launch on torch's current stream."""
    cls = SlabSum(splits, dtype, rank, groups)
    return _CACHE.get(slab_sum_key(cls), cache_dir, lambda: _compile(cls))

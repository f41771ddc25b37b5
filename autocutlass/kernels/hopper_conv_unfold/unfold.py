"""The row unfolding as one kernel: x' of the unfolded convolutions (``lowering``) from x.

For x viewed as (N*H, W*C) 16-bit rows (channels_last memory, each image row one row here) and the
output x' as (N*H, Q*C') rows, the kernel writes

    x'[row, q*C' + s*C + c] = x[row, (q*stride_w + s*dil_w - pad_w)*C + c]   (0 outside the row,
                                                                             and for s*C + c >= S*C)

one thread per 8 consecutive elements of x' (a 16-byte store; C' is a multiple of 8), gathering
its elements with 2-byte loads (neighbouring threads read neighbouring bytes). The bytes are moved
as 16-bit integers: one compiled kernel serves bf16 and fp16. ``lowering.unfold_input`` is the same
map in torch ops (the reference; three passes and a generic strided copy: 89 us for ResNet-50's
stem at batch 32 on an H100, ``benchmarks/results/2026-11-27-h100-s27-*``).

C, S, C' and the geometry along W are compile-time (a layer's kernel class fixes them); N*H, W and
Q are symbolic. The DSL is imported when a kernel is compiled, never by ``get_unfold``'s look-up
of a cached one.
"""

from __future__ import annotations

import functools
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autocutlass.device import dsl_version
from autocutlass.errors import KernelCompileError
from autocutlass.kernels.compile_keys import ARCH, digest, target_arch
from autocutlass.kernels.object_cache import ObjectCache

__all__ = ["RowUnfold", "get_unfold", "unfold_key"]

FUNCTION_NAME = "autocutlass_row_unfold"
PREFIX = "row_unfold"
KERNEL_FILE = Path(__file__).resolve().with_name("unfold_kernel.py")


@dataclass(frozen=True)
class RowUnfold:
    """One compiled unfolding's class: C, S, C' and the stride, padding and dilation along W."""

    c: int
    s: int
    channels: int
    stride_w: int
    pad_w: int
    dil_w: int

    def __post_init__(self) -> None:
        for name in ("c", "s", "channels", "stride_w", "dil_w"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"row unfold: {name}={v!r} is not a positive int")
        if isinstance(self.pad_w, bool) or not isinstance(self.pad_w, int) or self.pad_w < 0:
            raise ValueError(f"row unfold: pad_w={self.pad_w!r} is not a non-negative int")
        if self.channels % 8 or self.channels < self.c * self.s:
            raise ValueError(f"row unfold: channels={self.channels} is not a multiple of 8 holding S*C = {self.s * self.c}")


@functools.cache
def kernel_source_hash() -> str:
    """sha256 of the kernel's file, 16 hex digits."""
    return hashlib.sha256(KERNEL_FILE.read_bytes()).hexdigest()[:16]


def unfold_key(cls: RowUnfold) -> str:
    """The on-disk cache key of ``cls``'s kernel (no DSL import)."""
    return digest({"family": PREFIX, "class": {"c": cls.c, "s": cls.s, "channels": cls.channels,
                   "stride_w": cls.stride_w, "pad_w": cls.pad_w, "dil_w": cls.dil_w}, "dsl": dsl_version(),
                   "self": kernel_source_hash(), "arch": target_arch()})  # fmt: skip


def _compile(cls: RowUnfold) -> Any:
    """Run the DSL compiler on fake tensors with symbolic rows, W*C and Q*C'."""
    os.environ.setdefault("CUTE_DSL_ARCH", ARCH)
    import cutlass
    from cutlass import cute
    from cutlass.cute.runtime import make_fake_stream, make_fake_tensor

    from autocutlass.kernels.hopper_conv_unfold.unfold_kernel import RowUnfoldKernel

    rows = cute.sym_int32()
    x = make_fake_tensor(cutlass.Int16, (rows, cute.sym_int32(divisibility=cls.c)), (cute.sym_int64(), 1))
    out = make_fake_tensor(cutlass.Int16, (rows, cute.sym_int32(divisibility=cls.channels)),
                           (cute.sym_int64(divisibility=8), 1), assumed_align=16)  # fmt: skip
    kernel = RowUnfoldKernel(cls.c, cls.s, cls.channels, cls.stride_w, cls.pad_w, cls.dil_w)
    try:
        return cute.compile(kernel, x, out, make_fake_stream(use_tvm_ffi_env_stream=True), options="--enable-tvm-ffi")
    except Exception as e:  # the DSL raises many types; all mean "did not compile"
        raise KernelCompileError(f"DSL compile failed for the row unfold {cls}: {type(e).__name__}: {e}") from e


_CACHE = ObjectCache(PREFIX, FUNCTION_NAME)
STATS = _CACHE.stats


def get_unfold(cls: RowUnfold, cache_dir: Path | None) -> Any:
    """The compiled unfolding of ``cls``: from memory, disk or the DSL. Called as ``fn(x, out)`` with
    torch CUDA int16 tensors x (N*H, W*C) and out (N*H, Q*C'), last strides 1, out's rows 16-byte
    aligned; one launch on torch's current stream."""
    return _CACHE.get(unfold_key(cls), cache_dir, lambda: _compile(cls))

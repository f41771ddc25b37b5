"""The row unfolding as one kernel: x' of the unfolded convolutions (``lowering``) from x.

For x viewed as (N, H, W*C) 16-bit rows (channels_last memory) and the output x' as (N, H', Q*C')
rows, the kernel writes, with T = ``rows`` filter rows per unfolded pixel,

    x'[n, h', q*C' + (t*S + s)*C + c] = x[n, h, (q*stride_w + s*dil_w - pad_w)*C + c]
        with h = h' (T = 1) or h = h'*g - pad_h + t*dil_h (T > 1; g = ``step``, ``lowering.row_step``);
        0 outside the image and for (t*S + s)*C + c >= T*S*C

one CTA per ``columns_per_cta`` output columns of one x' row: it stages the input span those columns
read (of each of its T rows) in shared memory with coalesced 2-byte loads, then assembles x' from
there, 8 elements (16 bytes) per thread and store. The bytes are moved
as 16-bit integers: one compiled kernel serves bf16 and fp16. ``lowering.unfold_input`` is the same
map in torch ops (the reference; three passes and a generic strided copy: 89 us for ResNet-50's
stem at batch 32 on an H100, ``benchmarks/results/2026-11-27-h100-s27-*``).

C, S, T, C' and the geometry are compile-time (a layer's kernel class fixes them); N, H, H', W and
Q are symbolic. The DSL is imported when a kernel is compiled, never by ``get_unfold``'s look-up
of a cached one.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autocutlass.device import dsl_version
from autocutlass.errors import KernelCompileError
from autocutlass.kernels.compile_keys import ARCH, digest, target_arch
from autocutlass.kernels.object_cache import ObjectCache

__all__ = ["ASSEMBLIES", "RowUnfold", "get_unfold", "unfold_key"]

STAGING_BYTES = 32 * 1024
"""The most shared memory one CTA stages input rows in."""
MAX_COLUMNS = 128
"""Output columns per CTA where their input span fits ``STAGING_BYTES``."""
FUNCTION_NAME = "autocutlass_row_unfold"
PREFIX = "row_unfold"
ASSEMBLIES: dict[str, tuple[str, tuple[str, ...]]] = {
    "gather": ("RowUnfoldKernel", ("unfold_kernel",)),
    "slots": ("SlotUnfoldKernel", ("unfold_kernel", "unfold_slots_kernel")),
}
"""The kernels that assemble x' from the staged span (``RowUnfold.assemble``): the kernel class and
the modules of this package its code comes from (its bases' first, its own last), all of which its
cache key hashes (``kernel_source_hash``)."""


@dataclass(frozen=True)
class RowUnfold:
    """One compiled unfolding's class: C, S, C', the stride, padding and dilation along W, T filter
    rows per unfolded pixel and (T > 1) the padding and dilation along H and the row step g (x' row
    h' starts at input row h'*g - pad_h; for T = 1 they are normalised to 0, 1 and 1: x' keeps x's
    rows)."""

    c: int
    s: int
    channels: int
    stride_w: int
    pad_w: int
    dil_w: int
    rows: int = 1
    pad_h: int = 0
    dil_h: int = 1
    step: int = 1
    assemble: str = "gather"

    def __post_init__(self) -> None:
        if self.assemble not in ASSEMBLIES:
            raise ValueError(f"row unfold: assemble={self.assemble!r} is not one of {sorted(ASSEMBLIES)}")
        for name in ("c", "s", "channels", "stride_w", "dil_w", "rows", "dil_h", "step"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"row unfold: {name}={v!r} is not a positive int")
        for name in ("pad_w", "pad_h"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"row unfold: {name}={v!r} is not a non-negative int")
        used = self.rows * self.s * self.c
        if self.channels % 8 or self.channels < used:
            raise ValueError(f"row unfold: channels={self.channels} is not a multiple of 8 holding T*S*C = {used}")
        if self.rows == 1:
            object.__setattr__(self, "pad_h", 0)
            object.__setattr__(self, "dil_h", 1)
            object.__setattr__(self, "step", 1)


def staged_elements(cls: RowUnfold, columns: int) -> int:
    """The 16-bit elements one CTA stages for ``columns`` output columns: the input pixels they read
    from each of its T rows."""
    return cls.rows * ((columns - 1) * cls.stride_w + (cls.s - 1) * cls.dil_w + 1) * cls.c


def columns_per_cta(cls: RowUnfold) -> int:
    """``MAX_COLUMNS``, halved until the staged span fits ``STAGING_BYTES``; 0 when one column's
    does not (a filter that reaches farther than the kernel stages: ``lowering.unsupported`` says so)."""
    columns = MAX_COLUMNS
    while columns and staged_elements(cls, columns) * 2 > STAGING_BYTES:
        columns //= 2
    return columns


@functools.cache
def kernel_source_hash(assemble: str = "gather") -> str:
    """sha256 of the files of ``assemble``'s kernel (``ASSEMBLIES``), 16 hex digits."""
    here = Path(__file__).resolve()
    code = b"".join(here.with_name(f"{m}.py").read_bytes() for m in ASSEMBLIES[assemble][1])
    return hashlib.sha256(code).hexdigest()[:16]


def unfold_key(cls: RowUnfold) -> str:
    """The on-disk cache key of ``cls``'s kernel (no DSL import)."""
    return digest({"family": PREFIX, "class": dataclasses.asdict(cls), "staging": STAGING_BYTES,
                   "dsl": dsl_version(), "self": kernel_source_hash(cls.assemble), "arch": target_arch()})  # fmt: skip


def _compile(cls: RowUnfold) -> Any:
    """Run the DSL compiler on fake tensors with symbolic N, H, H', W*C and Q*C'."""
    os.environ.setdefault("CUTE_DSL_ARCH", ARCH)
    import cutlass
    from cutlass import cute
    from cutlass.cute.runtime import make_fake_stream, make_fake_tensor

    class_name, modules = ASSEMBLIES[cls.assemble]
    Kernel = getattr(importlib.import_module(f"{__package__}.{modules[-1]}"), class_name)

    n = cute.sym_int32()
    x = make_fake_tensor(cutlass.Int16, (n, cute.sym_int32(), cute.sym_int32(divisibility=cls.c)),
                         (cute.sym_int64(), cute.sym_int64(), 1))  # fmt: skip
    out = make_fake_tensor(cutlass.Int16, (n, cute.sym_int32(), cute.sym_int32(divisibility=cls.channels)),
                           (cute.sym_int64(divisibility=8), cute.sym_int64(divisibility=8), 1), assumed_align=16)  # fmt: skip
    columns = columns_per_cta(cls)
    if not columns:
        raise KernelCompileError(f"row unfold {cls}: one output column's input span exceeds {STAGING_BYTES} bytes")
    kernel = Kernel(cls.c, cls.s, cls.rows, cls.channels, cls.stride_w, cls.pad_w, cls.dil_w, cls.pad_h, cls.dil_h,
                    cls.step, columns)  # fmt: skip
    try:
        return cute.compile(kernel, x, out, make_fake_stream(use_tvm_ffi_env_stream=True), options="--enable-tvm-ffi")
    except Exception as e:  # the DSL raises many types; all mean "did not compile"
        raise KernelCompileError(f"DSL compile failed for the row unfold {cls}: {type(e).__name__}: {e}") from e


_CACHE = ObjectCache(PREFIX, FUNCTION_NAME)
STATS = _CACHE.stats


def get_unfold(cls: RowUnfold, cache_dir: Path | None) -> Any:
    """The compiled unfolding of ``cls``: from memory, disk or the DSL. Called as ``fn(x, out)`` with
    torch CUDA int16 tensors x (N, H, W*C) and out (N, H', Q*C'), last strides 1, out's rows 16-byte
    aligned; one launch on torch's current stream."""
    return _CACHE.get(unfold_key(cls), cache_dir, lambda: _compile(cls))

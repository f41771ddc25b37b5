"""Zero the rows of a grouped GEMM's output past its last group (CuTe DSL), its key and caches.

For ``out`` of torch shape (T, N) (row stride ``ld`` >= N, last stride 1) and the int32 group
ends ``offs`` (E,) of a ``torch._grouped_mm`` of row groups, the kernel writes::

    out[t, :] = 0    for every t with clamp(offs[E - 1], 0, T) <= t < T

reading ``offs[E - 1]`` on the GPU: no host synchronisation, so a call can be captured in a CUDA
graph and replayed with other offsets. Its use: ``torch._grouped_mm`` leaves those rows
unwritten, and autocutlass's grouped_mm returns them as zeros on every path
(``ops.grouped.frontend.torch_grouped``); a ``masked_fill_`` of the whole output costs a read and
a write of all of it (measured: 17-23% of a Mixtral-sized expert GEMM on an H100), this kernel
only the tail's writes and a launch.

**Grid.** ``min(T, MAX_CTAS)`` CTAs of ``THREADS`` threads (at least one). CTA ``b`` zeroes the
tail rows ``end + b``, ``end + b + grid``, ...; the threads of a CTA walk a row's columns with a
stride of ``THREADS`` (one 2- or 4-byte store each, coalesced across the warp). With no tail
(``offs[E - 1] = T``, the usual routing) every CTA reads one int32 and exits.

**Element widths.** The bytes are moved as 16-bit (bf16, fp16 outputs) or 32-bit (fp32) integers
(the caller views the output as int16 or int32): two compiled variants serve every dtype, and a
zero is all-zero bits in each.

**What it relies on** (``*``: declared in the compiled signature, so TVM-FFI's argument checks
refuse a call that breaks it): out int16 or int32* of rank 2*, last stride 1*; offs int32*,
rank 1* with at least one element (not checked: the caller passes the E >= 1 offsets it
validated); T, N < 2**31.

Shapes are symbolic: one compile per width. Compiled functions are cached by
``kernels.object_cache.ObjectCache`` in the process and on disk as
``<cache>/tail_zero-<key>.o``; the key covers the width, the launch constants, the DSL version,
the target architecture and this file's hash (``own_source_hash``); ``kernels.helper_kernels``
restates it to find a cached object without importing the DSL.
"""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path
from typing import Any

ARCH = "sm_90a"
os.environ.setdefault("CUTE_DSL_ARCH", ARCH)  # before the DSL's first import: compiling off-GPU

import cuda.bindings.driver as cuda
import cutlass
from cutlass import cute

from autocutlass.device import dsl_version
from autocutlass.errors import KernelCompileError
from autocutlass.kernels.compile_keys import digest, target_arch
from autocutlass.kernels.object_cache import ObjectCache

FUNCTION_NAME = "autocutlass_tail_zero"
PREFIX = "tail_zero"
THREADS = 256
"""Threads per CTA: they stride over a row's columns."""
MAX_CTAS = 264
"""The most CTAs of a launch (two per SM of an H100 SXM): they stride over the tail's rows."""
WIDTHS = (16, 32)
"""Element widths in bits: 16 (bf16, fp16 outputs viewed as int16), 32 (fp32 viewed as int32)."""


class TailZeroKernel:
    """Compile-time object for one element width; see the module docstring."""

    def __init__(self, width: int) -> None:
        if width not in WIDTHS:
            raise ValueError(f"tail_zero: width={width!r} is not 16 or 32")
        self.dtype = cutlass.Int16 if width == 16 else cutlass.Int32

    @cute.jit
    def __call__(self, out: cute.Tensor, offs: cute.Tensor, stream: cuda.CUstream):
        rows = out.shape[0]
        blocks = cutlass.max(cutlass.min(rows, MAX_CTAS), 1)
        self.kernel(out, offs).launch(grid=[blocks, 1, 1], block=[THREADS, 1, 1], stream=stream)

    @cute.kernel
    def kernel(self, mOut: cute.Tensor, mOffs: cute.Tensor):
        tidx, _, _ = cute.arch.thread_idx()
        bidx, _, _ = cute.arch.block_idx()
        gdim, _, _ = cute.arch.grid_dim()
        rows = mOut.shape[0]
        cols = mOut.shape[1]
        end = mOffs[mOffs.shape[0] - 1]
        end = cutlass.min(cutlass.max(end, 0), rows)
        zero = self.dtype(0)
        for r in cutlass.range(end + bidx, rows, gdim):
            for c in cutlass.range(tidx, cols, THREADS):
                mOut[r, c] = zero


# ------------------------------------------------------------------------------ compile + caches
@functools.cache
def own_source_hash() -> str:
    """sha256 of this file (the kernel's own source), 16 hex digits."""
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]


def tail_zero_compile_key(width: int) -> str:
    """Stable key of one compiled kernel: width, launch constants, DSL version, source, arch."""
    if width not in WIDTHS:
        raise ValueError(f"tail_zero: width={width!r} is not 16 or 32")
    return digest({"family": PREFIX, "width": width, "threads": THREADS, "max_ctas": MAX_CTAS, "dsl": dsl_version(),
                   "self": own_source_hash(), "arch": target_arch()})  # fmt: skip


def _compile(width: int, ptx_dir: Path | None = None) -> Any:
    """Run the DSL compiler on fake tensors with symbolic T, N, row stride and E. With
    ``ptx_dir`` the PTX is kept (written there): for tests."""
    from cutlass.cute.runtime import make_fake_stream, make_fake_tensor

    kernel = TailZeroKernel(width)
    out = make_fake_tensor(kernel.dtype, (cute.sym_int32(), cute.sym_int32()), (cute.sym_int64(), 1))
    offs = make_fake_tensor(cutlass.Int32, (cute.sym_int32(),), (1,))
    try:
        return cute.compile(
            kernel,
            out,
            offs,
            make_fake_stream(use_tvm_ffi_env_stream=True),
            options="--enable-tvm-ffi" + ("" if ptx_dir is None else f" --keep-ptx --dump-dir={ptx_dir}"),
        )
    except Exception as e:  # the DSL raises many types; all mean "did not compile"
        raise KernelCompileError(f"DSL compile failed for the {width}-bit tail zero: {type(e).__name__}: {e}") from e


_CACHE = ObjectCache(PREFIX, FUNCTION_NAME)
STATS = _CACHE.stats


def get_tail_zero(width: int, cache_dir: Path | None) -> Any:
    """The compiled TVM-FFI kernel of ``width`` (16 or 32): from memory, from disk, or compiled.

    Called as ``fn(out, offs)`` with a torch CUDA int16/int32 ``out`` (T, N), last stride 1, and
    int32 ``offs`` (E,), E >= 1; it launches one kernel on torch's current stream and returns
    None. Raises ValueError for another width and KernelCompileError when the DSL fails."""
    return _CACHE.get(tail_zero_compile_key(width), cache_dir, lambda: _compile(width))

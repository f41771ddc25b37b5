"""A 32-bit transposing copy (CuTe DSL), its compile key and its caches.

For a ``src`` of torch shape (R, C) or (L, R, C) with C contiguous, the kernel writes ``dst`` of
shape (C, R) or (L, C, R) with R contiguous::

    dst[l, c, r] = src[l, r, c]

The 32-bit patterns are moved unchanged (compiled for fp32; tf32 operands are fp32 in memory).
Its use: the K-major copy of a tf32 GEMM operand that is not K-major
(``hopper_gemm.runner.k_major_copy``), which torch's ``copy_`` of a transposed view does at about
a quarter of the device's copy bandwidth.

**Tiles.** One CTA of ``THREADS = 256`` threads moves one ``TILE x TILE = 64 x 64`` tile of src
(16 KiB) through shared memory. The grid is flat, ``ceil(C/64) * ceil(R/64) * L`` CTAs with the
C tile fastest, then the R tile, then the batch (a flat x dimension has no 65535 limit).
Each thread owns one 4x4 block of the tile in each phase:

* *Load* (src -> smem): thread t reads src rows ``4*(t // 16) + j`` (j = 0..3) at columns
  ``4*(t % 16) .. +3`` with one 16-byte vector each (``ld.global.v4``), so a warp reads two
  256-byte row segments per instruction; the four loads are issued before the shared stores.
* *Store* (smem -> dst): thread t reads the 4x4 block at tile rows ``4*(t % 16) + j``, tile
  columns ``4*(t // 16) .. +3`` (four 16-byte shared loads), transposes it in registers (a
  renaming, no instructions) and writes dst rows ``4*(t // 16) + k`` (k = 0..3) at columns
  ``4*(t % 16) .. +3`` with one 16-byte vector each (``st.global.v4``): again two 256-byte row
  segments per warp instruction.

**Shared memory.** The tile is stored row-major (64 floats, 256 bytes a row) with the 16-byte
column chunks of row ``i`` XOR-swizzled: chunk ``v`` of row ``i`` lives at chunk
``v ^ ((i >> 2) & 7)``. A 16-byte shared access is served eight lanes at a time; in the load
phase eight lanes store eight consecutive chunks of one row (XOR by one constant: a permutation
of eight distinct bank groups), in the store phase eight lanes read one chunk from rows
``4*lr + j`` for lr = 0..7 (XOR by lr: again eight distinct bank groups). Neither phase has bank
conflicts, and no padding is needed (16 KiB of shared memory per CTA).

**Tails.** A tile that lies wholly inside src takes an unpredicated path. An edge tile
predicates each row (``r < R``) and each 16-byte vector: a vector wholly inside the row is moved
with one 16-byte access, a vector straddling the end of the row element by element (so R and C
need not be multiples of anything); elements outside src are never read and positions outside
dst never written (the shared-memory slots they would fill are left unwritten and unread).

**What it relies on** (``*``: declared in the compiled signature, so TVM-FFI's argument checks
refuse a call that breaks it):

* src: fp32*, last stride 1*, row stride and (rank 3) batch stride multiples of 4 elements*,
  base pointer 16-byte aligned*.
* dst: fp32*, shape (C, R) / (L, C, R) with src's R, C, L*, last stride 1*, other strides
  multiples of 4 elements*, base 16-byte aligned* (a slice ``buf[..., :R]`` of a buffer whose
  rows are padded to a multiple of 4 meets this).
* Not checked: src and dst do not overlap; L, R, C < 2**31 (32-bit extents and indices);
  ``ceil(C/64) * ceil(R/64) * L < 2**31`` (``hopper_gemm.runner.transpose_accepts`` checks all
  of the above but the overlap before calling).

Shapes are symbolic: one compile per rank (2 or 3) serves every (L, R, C). Compiled functions
are cached by ``kernels.object_cache.ObjectCache``: in the process and on disk as
``<cache>/transpose32-<key>.o`` (written atomically; a corrupt entry is reported, removed and
recompiled). The key covers the rank, the tile, the DSL
version, the target architecture and the hash of this file itself (``own_source_hash``), so an
edited kernel is never served from a stale cache entry. This file is not one of the GEMM
family's ``SOURCE_FILES``: a copy kernel changes no GEMM's timing record.

This module imports the DSL at module level (it sets ``CUTE_DSL_ARCH`` to sm_90a first unless it
is set, as compiling off-GPU requires); nothing in ``hopper_gemm/__init__``, ``check`` or
``plan`` imports it (``hopper_gemm.runner`` does, when a runner first needs it).

Resources (ptxas of DSL 4.8.1): 34 registers a thread at rank 2, 32 at rank 3, so 6 or 8 CTAs
(1536 or 2048 threads) fit on an SM; 16 KiB of shared memory a CTA. (A ``min_blocks_per_mp``
launch bound would cap rank 2 at 32 registers too, but in 4.8.1 it makes the compiler query the
driver, which compiling off-GPU cannot.)

Bandwidth: not measured when this was written; tests/test_gpu_transpose.py prints the GB/s of a
4096 x 4096 transpose next to torch's transposing ``copy_``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path
from typing import Any

ARCH = "sm_90a"
os.environ.setdefault("CUTE_DSL_ARCH", ARCH)  # before the DSL's first import: compiling off-GPU

import cuda.bindings.driver as cuda
import cutlass
import cutlass.memory
from cutlass import cute

from autocutlass.device import dsl_version
from autocutlass.errors import KernelCompileError
from autocutlass.kernels.object_cache import ObjectCache


FUNCTION_NAME = "autocutlass_transpose32"
TILE = 64
"""Rows and columns of src moved by one CTA."""
VEC = 4
"""32-bit elements per 16-byte vector."""
CHUNKS = TILE // VEC
"""16-byte vectors per tile row (16)."""
THREADS = CHUNKS * CHUNKS
"""Threads per CTA (256): one 4x4 block of the tile each."""
SWIZZLE_MASK = 7
"""Shared chunk index of tile row i is XORed with ``(i // 4) & SWIZZLE_MASK`` (eight bank groups)."""
ALIGN = 4
"""Elements of 16 bytes: strides of src and dst must be multiples of this."""
RANKS = (2, 3)



# ------------------------------------------------------------------------------------ the kernel
class Transpose32Kernel:
    """Compile-time object for one rank; see the module docstring."""

    def __init__(self, rank: int) -> None:
        if rank not in RANKS:
            raise ValueError(f"transpose: rank={rank!r} is not 2 or 3")
        self.rank = rank

    @cute.jit
    def __call__(self, src: cute.Tensor, dst: cute.Tensor, stream: cuda.CUstream):
        r_ext = src.shape[self.rank - 2]
        c_ext = src.shape[self.rank - 1]
        batches = 1
        if cutlass.const_expr(self.rank == 3):
            batches = src.shape[0]
        tiles_r = cutlass.max((r_ext + TILE - 1) // TILE, 1)
        tiles_c = cutlass.max((c_ext + TILE - 1) // TILE, 1)
        blocks = cutlass.max(tiles_c * tiles_r * batches, 1)
        self.kernel(src, dst, tiles_c, tiles_r, batches).launch(
            grid=[blocks, 1, 1], block=[THREADS, 1, 1], stream=stream
        )

    @cute.kernel
    def kernel(
        self,
        mSrc: cute.Tensor,
        mDst: cute.Tensor,
        tiles_c: cutlass.Int32,
        tiles_r: cutlass.Int32,
        batches: cutlass.Int32,
    ):
        tidx, _, _ = cute.arch.thread_idx()
        bidx, _, _ = cute.arch.block_idx()
        tc = bidx % tiles_c
        rest = bidx // tiles_c
        tr = rest % tiles_r
        li = rest // tiles_r

        allocator = cutlass.memory.SmemAllocator()
        sTile = allocator.allocate_tensor(cutlass.Float32, cute.make_layout(TILE * TILE), byte_alignment=16)

        if li < batches:
            src = self._matrix(mSrc, li)  # (R, C)
            dst = self._matrix(mDst, li)  # (C, R)
            r_ext = src.shape[0]
            c_ext = src.shape[1]
            interior = (tr * TILE + TILE <= r_ext) & (tc * TILE + TILE <= c_ext)

            # ---- load: rows 4*qr + j of the tile, 16-byte chunk qc of each
            qc = tidx % CHUNKS
            qr = tidx // CHUNKS
            frags = [cute.make_rmem_tensor((VEC,), cutlass.Float32) for _ in range(VEC)]
            src_vec = tc * CHUNKS + qc  # chunk index along C of the whole row
            if interior:
                for j in cutlass.range_constexpr(VEC):
                    row = src[(tr * TILE + qr * VEC + j, None)]
                    cute.autovec_copy(cute.local_tile(row, (VEC,), (src_vec,)), frags[j])
            else:
                for j in cutlass.range_constexpr(VEC):
                    r = tr * TILE + qr * VEC + j
                    if r < r_ext:
                        self._load_edge(src[(r, None)], src_vec, c_ext, frags[j])
            for j in cutlass.range_constexpr(VEC):
                slot = (qr * VEC + j) * CHUNKS + (qc ^ (qr & SWIZZLE_MASK))
                cute.autovec_copy(frags[j], cute.local_tile(sTile, (VEC,), (slot,)))

            cute.arch.sync_threads()

            # ---- store: the 4x4 block at tile rows 4*pr + j, tile columns 4*pc + k
            pr = tidx % CHUNKS
            pc = tidx // CHUNKS
            block = [cute.make_rmem_tensor((VEC,), cutlass.Float32) for _ in range(VEC)]
            for j in cutlass.range_constexpr(VEC):
                slot = (pr * VEC + j) * CHUNKS + (pc ^ (pr & SWIZZLE_MASK))
                cute.autovec_copy(cute.local_tile(sTile, (VEC,), (slot,)), block[j])
            outs = [cute.make_rmem_tensor((VEC,), cutlass.Float32) for _ in range(VEC)]
            for k in cutlass.range_constexpr(VEC):
                for j in cutlass.range_constexpr(VEC):
                    outs[k][j] = block[j][k]
            dst_vec = tr * CHUNKS + pr  # chunk index along R of the whole dst row
            if interior:
                for k in cutlass.range_constexpr(VEC):
                    row = dst[(tc * TILE + pc * VEC + k, None)]
                    cute.autovec_copy(outs[k], cute.local_tile(row, (VEC,), (dst_vec,)))
            else:
                for k in cutlass.range_constexpr(VEC):
                    c = tc * TILE + pc * VEC + k
                    if c < c_ext:
                        self._store_edge(outs[k], dst[(c, None)], dst_vec, r_ext)

    @cute.jit
    def _matrix(self, t: cute.Tensor, li) -> cute.Tensor:
        """Batch ``li`` of a rank-3 tensor (the tensor itself at rank 2), as a 2-D tensor."""
        if cutlass.const_expr(self.rank == 2):
            return t
        return t[(li, None, None)]

    @cute.jit
    def _load_edge(self, row: cute.Tensor, vec, extent, frag: cute.Tensor) -> None:
        """Chunk ``vec`` of a 1-D row into ``frag``: one 16-byte load when the chunk lies inside
        the row's ``extent``, else element by element up to the extent."""
        if vec * VEC + VEC <= extent:
            cute.autovec_copy(cute.local_tile(row, (VEC,), (vec,)), frag)
        else:
            for e in cutlass.range_constexpr(VEC):
                if vec * VEC + e < extent:
                    frag[e] = row[vec * VEC + e]

    @cute.jit
    def _store_edge(self, frag: cute.Tensor, row: cute.Tensor, vec, extent) -> None:
        """``frag`` into chunk ``vec`` of a 1-D row: one 16-byte store when the chunk lies inside
        the row's ``extent``, else element by element up to the extent."""
        if vec * VEC + VEC <= extent:
            cute.autovec_copy(frag, cute.local_tile(row, (VEC,), (vec,)))
        else:
            for e in cutlass.range_constexpr(VEC):
                if vec * VEC + e < extent:
                    row[vec * VEC + e] = frag[e]


# ------------------------------------------------------------------------------ compile + caches
def target_arch() -> str:
    return os.environ.get("CUTE_DSL_ARCH", ARCH)


@functools.cache
def own_source_hash() -> str:
    """sha256 of this file (the kernel's own source), 16 hex digits."""
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]


def transpose_compile_key(rank: int) -> str:
    """Stable key of one compiled transpose: rank, tile, DSL version, this file's source, arch."""
    if rank not in RANKS:
        raise ValueError(f"transpose: rank={rank!r} is not 2 or 3")
    payload = {
        "family": "transpose32",
        "rank": rank,
        "tile": TILE,
        "threads": THREADS,
        "swizzle": SWIZZLE_MASK,
        "dsl": dsl_version(),
        "self": own_source_hash(),
        "arch": target_arch(),
    }
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _fake_matrix(rank: int, l: Any, rows: Any, cols: Any) -> Any:
    """A fake fp32 (rows, cols) or (L, rows, cols) tensor: unit last stride, other strides
    multiples of 4 elements, base 16-byte aligned."""
    from cutlass.cute.runtime import make_fake_tensor

    ld = cute.sym_int64(divisibility=ALIGN)
    if rank == 2:
        return make_fake_tensor(cutlass.Float32, (rows, cols), (ld, 1), assumed_align=16)
    batch = cute.sym_int64(divisibility=ALIGN)
    return make_fake_tensor(cutlass.Float32, (l, rows, cols), (batch, ld, 1), assumed_align=16)


def _compile(rank: int, ptx_dir: Path | None = None) -> Any:
    """Run the DSL compiler on fake tensors with symbolic L, R, C shared between src and dst (so
    the call checks that they agree) and symbolic strides. With ``ptx_dir`` the PTX is kept
    (written there, and readable as the result's ``__ptx__``): for tests."""
    from cutlass.cute.runtime import make_fake_stream

    r = cute.sym_int32()
    c = cute.sym_int32()
    l = cute.sym_int32() if rank == 3 else 1
    src = _fake_matrix(rank, l, r, c)
    dst = _fake_matrix(rank, l, c, r)
    try:
        return cute.compile(
            Transpose32Kernel(rank),
            src,
            dst,
            make_fake_stream(use_tvm_ffi_env_stream=True),
            options="--enable-tvm-ffi" + ("" if ptx_dir is None else f" --keep-ptx --dump-dir={ptx_dir}"),
        )
    except Exception as e:  # the DSL raises many types; all mean "did not compile"
        raise KernelCompileError(f"DSL compile failed for the rank-{rank} transpose: {type(e).__name__}: {e}") from e


_CACHE = ObjectCache("transpose32", FUNCTION_NAME)
_memory = _CACHE.memory
STATS = _CACHE.stats


def get_transpose(rank: int, cache_dir: Path | None) -> Any:
    """The compiled TVM-FFI transpose of ``rank`` (2 or 3): from memory, from disk, or compiled.

    The result is called as ``fn(src, dst)`` with torch CUDA fp32 tensors ``src`` (R, C) /
    (L, R, C) and ``dst`` (C, R) / (L, C, R) meeting the module docstring's requirements; it
    launches one kernel on torch's current stream (none of work when a shape is 0, but still one
    launch) and returns None. A call that breaks a declared requirement raises before launching.
    Raises ValueError for another rank and KernelCompileError when the DSL fails.
    """
    key = transpose_compile_key(rank)
    return _CACHE.get(key, cache_dir, lambda: _compile(rank))

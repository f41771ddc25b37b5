"""The reduce kernel of workspace-mode split-K (CuTe DSL), its compile key and its caches.

In workspace mode split s of a GEMM writes its raw fp32 accumulator (no alpha, no epilogue) into
``ws[s]`` of a contiguous fp32 workspace of shape (S, L, M, n_pad), n_pad = N rounded up to a
multiple of 4 (16-byte rows). This kernel then computes, for every (l, m, n)::

    acc = ws[0, l, m, n] + ws[1, l, m, n] + ... + ws[S-1, l, m, n]   (this order: deterministic)
    D[l, m, n] = act(alpha * acc + beta * C[l, m, n] + bias[n])       (fp32 math, then D's dtype)

with the C and bias terms only when compiled in, evaluated by the same helper as the GEMM
epilogue (``autocutlass.kernels.epilogue_math``).

**Work split.** One thread per *vector* of ``COLUMNS = 4`` consecutive columns of one row, on a
flat 1-D grid of ``L * M * N / 4`` threads in blocks of 128, with a row's vectors fastest, so a
warp reads and writes contiguous memory. Each thread issues all S workspace loads first (one
16-byte ``ld.global.v4`` each), sums them in split order, applies the epilogue in registers and
writes its 4 elements of D with one store (8 bytes for bf16/fp16 D, 16 for fp32). C and bias are
read with 4-byte vectors, the alignment the GEMM itself asks of them. No shared memory, no
synchronisation. Until session 25 a thread covered 16 bytes of D (8 columns for bf16) in blocks of
256: the few-tile, long-K GEMMs whose outputs are a few hundred by a few hundred (256 x 256: 32
blocks) left most SMs idle while the loads were in flight (ncu on an H100, session 14: 6.5 us
against cuBLAS's 4.4 us). Four times the blocks fill the GPU there.

**Programmatic dependent launch.** The kernel is launched with PDL (``use_pdl``) and its threads
first wait on ``griddepcontrol.wait``, which returns once the grid before it on the stream (the
split-K GEMM) has finished and its writes are visible. The launch itself then overlaps the
GEMM's last CTAs. The GEMM issues no early trigger (``griddepcontrol.launch_dependents``): one at
its start measured slower (why was not looked into). Measured on an H100
(``benchmarks/probes/splitk_reduce_probe.py``, 2026-11-27, each build against torch.matmul in its
own process): over 27 few-tile, long-K configs, geomean x0.808 with the old reduce, x0.818 with the
new work split, x0.843 with PDL as well, x0.813-0.814 with the GEMM's early trigger; on two large
outputs (32 and 16 MiB of fp32 per split) every build read x0.76-0.81 and x0.63-0.68, run-to-run
noise included.

**The transposed class** (``transposed``, session 25) serves ``swap_ab`` GEMMs: the kernel ran
D' = D^T, so the slabs are (S, L, M', N'_pad) row-major in D''s coordinates while D' itself is the
column-major view of the row-major D (and C' of C; bias runs along D''s rows, D's columns). A
thread still sums 4 columns of one slab row (one 16-byte load per split; the rows' padding to 4
keeps the last vector inside them), but the threads walk the rows fastest, so a warp's stores of
one column of D' are 32 consecutive elements of a row of D; it stores the columns below N' one
element at a time. It lets a few-tile, long-K GEMM whose M leaves a 128-row tile partly empty run
swapped with workspace split-K: 320x640x40960 in 128x160 tiles split 13 ways x0.929 of torch
against x0.802 unswapped (H100, ``benchmarks/probes/swap_split_probe.py``). The row-major classes
compile to the same bytes as before it.

**What it relies on** (``*``: declared in the compiled signature, so that TVM-FFI's argument
checks refuse a call that breaks it; tests/test_gpu_reduce.py sees N and M mismatches refused):

* D: row-major with unit column stride*, base and row/batch strides 16-byte aligned*, and N a
  multiple of ``16 / sizeof(D)``* (implied by 16-byte rows, so a multiple of 4): no vector
  straddles the end of a row, so there is no column tail to predicate. The last block is
  predicated on the thread count.
* ws: shape (S, L, M, n_pad) with S the class's split count*, L and M equal to D's* (L = 1 for
  rank-2 D*); unit last stride*, base and other strides 16-byte aligned*, n_pad a multiple of 4*.
  Not checked: n_pad >= N (the runner owns the buffer).
* C (when compiled in): D's shape*, unit column stride*, base and strides 4-byte aligned*.
* bias (when compiled in): shape (N,)*, contiguous*, D's dtype*, 4-byte aligned*.
* L * M * N / 4 < 2**31 (32-bit thread index).

Shapes are symbolic: one compile serves every (L, M, N) of a class (split count, D dtype,
C dtype or no C, bias or not, activation, rank of D). The compile and cache functions mirror
``compile.py`` (``kernels.object_cache.ObjectCache``): in the process and on disk as
``<cache>/splitk_reduce-<key>.o``, written atomically and loaded with
``cute.runtime.load_module``; a corrupt entry is reported, removed and recompiled. The key covers the class, the DSL version, the GEMM family's ``source_hash()`` and the
target architecture.

This module imports the DSL at module level (it sets ``CUTE_DSL_ARCH`` to sm_90a first unless it
is set, as compiling off-GPU requires); nothing in ``hopper_gemm/__init__``, ``check`` or ``plan``
imports it.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ARCH = "sm_90a"
os.environ.setdefault("CUTE_DSL_ARCH", ARCH)  # before the DSL's first import: compiling off-GPU

import cuda.bindings.driver as cuda
import cutlass
from cutlass import cute

from autocutlass.device import dsl_version
from autocutlass.kernels.hopper_gemm.sources import source_hash
from autocutlass.errors import KernelCompileError
from autocutlass.kernels.epilogue_math import epilogue_value
from autocutlass.kernels.object_cache import ObjectCache
from autocutlass.ops.gemm.problem import Activation, DType

FUNCTION_NAME = "autocutlass_splitk_reduce"
THREADS = 128
"""Threads per block, one vector of D each."""
COLUMNS = 4
"""Columns of D per thread: one 16-byte load of fp32 per split."""
MAX_SPLITS = 16
"""Most splits a class may have: every split's load is unrolled and kept in registers."""
WS_ALIGN = 4
"""fp32 elements of 16 bytes: the workspace's n_pad and strides are multiples of this."""
D_DTYPES = (DType.BF16, DType.FP16, DType.FP32)

CUTLASS_DTYPES = {DType.BF16: cutlass.BFloat16, DType.FP16: cutlass.Float16, DType.FP32: cutlass.Float32}

def vector_width(d_dtype: DType) -> int:
    """Columns of D per thread: 16 bytes of D."""
    return 16 // d_dtype.bytes


@dataclass(frozen=True)
class ReduceClass:
    """Everything one compiled reduce kernel is specialised on (shapes are symbolic)."""

    splits: int
    d_dtype: DType
    c_dtype: DType | None
    bias: bool
    activation: Activation
    rank: int
    transposed: bool = False
    """D is the column-major D' = D^T of a ``swap_ab`` GEMM (see the module docstring)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "d_dtype", DType(self.d_dtype))
        if self.c_dtype is not None:
            object.__setattr__(self, "c_dtype", DType(self.c_dtype))
        object.__setattr__(self, "activation", Activation(self.activation))
        names = [d.value for d in D_DTYPES]
        if isinstance(self.splits, bool) or not isinstance(self.splits, int) or not 1 <= self.splits <= MAX_SPLITS:
            raise ValueError(f"split-K reduce: splits={self.splits!r} is not an int in 1..{MAX_SPLITS}")
        if self.d_dtype not in D_DTYPES:
            raise ValueError(f"split-K reduce: D dtype {self.d_dtype.value} is not one of {names}")
        if self.c_dtype is not None and self.c_dtype not in D_DTYPES:
            raise ValueError(f"split-K reduce: C dtype {self.c_dtype.value} is not one of {names}")
        if self.rank not in (2, 3):
            raise ValueError(f"split-K reduce: rank={self.rank!r} is not 2 or 3")

    @property
    def with_c(self) -> bool:
        return self.c_dtype is not None

    @property
    def vec(self) -> int:
        return COLUMNS

    def as_dict(self) -> dict[str, Any]:
        return {
            "splits": self.splits,
            "d_dtype": self.d_dtype.value,
            "c_dtype": None if self.c_dtype is None else self.c_dtype.value,
            "bias": bool(self.bias),
            "activation": self.activation.value,
            "rank": self.rank,
            **({"transposed": True} if self.transposed else {}),
        }


# ------------------------------------------------------------------------------------ the kernel
class SplitKReduceKernel:
    """Compile-time object for one ``ReduceClass``; see the module docstring."""

    def __init__(self, cls: ReduceClass) -> None:
        self.cls = cls
        self.vec = cls.vec
        self.d_dtype = CUTLASS_DTYPES[cls.d_dtype]

    @cute.jit
    def __call__(
        self,
        ws: cute.Tensor,
        d: cute.Tensor,
        c: cute.Tensor | None,
        bias: cute.Tensor | None,
        alpha: cutlass.Float32,
        beta: cutlass.Float32,
        stream: cuda.CUstream,
    ):
        m = ws.shape[2]
        if cutlass.const_expr(self.cls.transposed):
            vecs_per_row = (d.shape[self.cls.rank - 1] + self.vec - 1) // self.vec
        else:
            vecs_per_row = d.shape[self.cls.rank - 1] // self.vec
        total = ws.shape[1] * m * vecs_per_row
        blocks = cutlass.max((total + THREADS - 1) // THREADS, 1)
        self.kernel(ws, d, c, bias, alpha, beta, vecs_per_row, total).launch(
            grid=[blocks, 1, 1], block=[THREADS, 1, 1], stream=stream, use_pdl=True
        )

    @cute.kernel
    def kernel(
        self,
        mWs: cute.Tensor,
        mD: cute.Tensor,
        mC: cute.Tensor | None,
        mBias: cute.Tensor | None,
        alpha: cutlass.Float32,
        beta: cutlass.Float32,
        vecs_per_row: cutlass.Int32,
        total: cutlass.Int32,
    ):
        tidx, _, _ = cute.arch.thread_idx()
        bidx, _, _ = cute.arch.block_idx()
        g = bidx * THREADS + tidx
        # Launched as a programmatic dependent of the GEMM before it: this wait holds every
        # thread until that grid has finished and its writes are visible.
        cute.arch.griddepcontrol_wait()
        if cutlass.const_expr(self.cls.transposed):
            if g < total:
                self._transposed_vector(mWs, mD, mC, mBias, alpha, beta, vecs_per_row, g)
        elif g < total:
            v = g % vecs_per_row
            row = g // vecs_per_row
            mi = row % mWs.shape[2]
            li = row // mWs.shape[2]
            acc = self._sum_splits(mWs, li, mi, v)
            c_frag = None
            if cutlass.const_expr(self.cls.with_c):
                c_frag = self._load(self._row(mC, li, mi), v)
            b_frag = None
            if cutlass.const_expr(self.cls.bias):
                b_frag = self._load(mBias, v)
            self._epilogue(acc, c_frag, b_frag, alpha, beta)
            out = cute.make_rmem_tensor((self.vec,), self.d_dtype)
            out.store(acc.load().to(self.d_dtype))
            cute.autovec_copy(out, cute.local_tile(self._row(mD, li, mi), (self.vec,), (v,)))

    @cute.jit
    def _transposed_vector(self, mWs, mD, mC, mBias, alpha, beta, vecs_per_row, g):
        """Vector ``v`` of row ``mi`` of the slabs into a column-major D' (``transposed``): threads
        walk the rows fastest, so that a warp's stores of one column of D' (a row of D) are
        contiguous; each sums its 4 columns with one 16-byte load per split (the slabs' rows are
        padded to 4, so the last vector stays inside them), and stores the columns below N'
        one element at a time. bias runs along D''s rows (D's columns)."""
        m = mWs.shape[2]
        mi = g % m
        rest = g // m
        v = rest % vecs_per_row
        li = rest // vecs_per_row
        n = mD.shape[self.cls.rank - 1]
        acc = self._sum_splits(mWs, li, mi, v)
        dst = self._row(mD, li, mi)
        b_val = None
        if cutlass.const_expr(self.cls.bias):
            b_val = mBias[mi]
        for i in cutlass.range_constexpr(self.vec):
            col = v * self.vec + i
            if col < n:
                c_val = None
                if cutlass.const_expr(self.cls.with_c):
                    c_val = self._row(mC, li, mi)[col]
                dst[col] = epilogue_value(acc[i], alpha, beta, c_val, b_val, self.cls.activation).to(self.d_dtype)

    @cute.jit
    def _row(self, t: cute.Tensor, li, mi) -> cute.Tensor:
        """Row (l, m) of a rank-2 (M, N) or rank-3 (L, M, N) tensor, as a 1-D (N,) tensor."""
        if cutlass.const_expr(self.cls.rank == 2):
            return t[(mi, None)]
        return t[(li, mi, None)]

    @cute.jit
    def _load(self, row: cute.Tensor, v) -> cute.Tensor:
        """Vector ``v`` (``COLUMNS`` consecutive elements) of a 1-D tensor, copied into registers with the
        widest loads its alignment allows."""
        frag = cute.make_rmem_tensor((self.vec,), row.element_type)
        cute.autovec_copy(cute.local_tile(row, (self.vec,), (v,)), frag)
        return frag

    @cute.jit
    def _sum_splits(self, mWs: cute.Tensor, li, mi, v) -> cute.Tensor:
        """ws[0] + ws[1] + ... + ws[S-1] over vector ``v`` of row (l, m), left to right; all the
        loads are issued before the first add."""
        parts = []
        for s in cutlass.range_constexpr(self.cls.splits):
            parts.append(self._load(mWs[(s, li, mi, None)], v))
        acc = parts[0]
        for s in cutlass.range_constexpr(1, self.cls.splits):
            acc.store(acc.load() + parts[s].load())
        return acc

    @cute.jit
    def _epilogue(self, acc: cute.Tensor, c_frag, b_frag, alpha, beta) -> None:
        """acc[i] <- act(alpha * acc[i] + beta * c[i] + bias[i]) for the vector, in registers."""
        for i in cutlass.range_constexpr(self.vec):
            c_val = None
            if cutlass.const_expr(c_frag is not None):
                c_val = c_frag[i]
            b_val = None
            if cutlass.const_expr(b_frag is not None):
                b_val = b_frag[i]
            acc[i] = epilogue_value(acc[i], alpha, beta, c_val, b_val, self.cls.activation)


# ------------------------------------------------------------------------------ compile + caches
def target_arch() -> str:
    return os.environ.get("CUTE_DSL_ARCH", ARCH)


def reduce_compile_key(
    splits: int, d_dtype: DType, c_dtype: DType | None, bias: bool, activation: Activation, rank: int,
    transposed: bool = False,
) -> str:
    """Stable key of one compiled reduce kernel: the class, DSL version, kernel sources, arch."""
    cls = ReduceClass(splits, d_dtype, c_dtype, bias, activation, rank, transposed)
    payload = {
        "family": "splitk_reduce",
        "class": cls.as_dict(),
        "dsl": dsl_version(),
        "src": source_hash(),
        "arch": target_arch(),
    }
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _fake_rows(dtype: Any, rank: int, l: Any, m: Any, n: Any, align_bytes: int) -> Any:
    """A fake row-major (M, N) or (L, M, N) tensor: unit column stride, other strides and the
    base pointer ``align_bytes``-aligned."""
    from cutlass.cute.runtime import make_fake_tensor

    div = max(1, align_bytes * 8 // dtype.width)
    ld = cute.sym_int64(divisibility=div)
    if rank == 2:
        return make_fake_tensor(dtype, (m, n), (ld, 1), assumed_align=align_bytes)
    batch = cute.sym_int64(divisibility=div)
    return make_fake_tensor(dtype, (l, m, n), (batch, ld, 1), assumed_align=align_bytes)


def _fake_columns(dtype: Any, rank: int, l: Any, m: Any, n: Any, align_bytes: int) -> Any:
    """A fake column-major (M, N) or (L, M, N) tensor (the transposed view of a row-major one):
    unit row stride, column and batch strides and the base pointer ``align_bytes``-aligned."""
    from cutlass.cute.runtime import make_fake_tensor

    div = max(1, align_bytes * 8 // dtype.width)
    ld = cute.sym_int64(divisibility=div)
    if rank == 2:
        return make_fake_tensor(dtype, (m, n), (1, ld), assumed_align=align_bytes)
    batch = cute.sym_int64(divisibility=div)
    return make_fake_tensor(dtype, (l, m, n), (batch, 1, ld), assumed_align=align_bytes)


def _compile(cls: ReduceClass) -> Any:
    """Run the DSL compiler on fake tensors with symbolic L, M, N (shared between operands, so
    the call checks they agree) and n_pad."""
    from cutlass.cute.runtime import make_fake_stream, make_fake_tensor

    dd = CUTLASS_DTYPES[cls.d_dtype]
    m = cute.sym_int32()
    n = cute.sym_int32() if cls.transposed else cute.sym_int32(divisibility=vector_width(cls.d_dtype))
    l = cute.sym_int32() if cls.rank == 3 else 1
    n_pad = cute.sym_int32(divisibility=WS_ALIGN)
    ws_strides = (cute.sym_int64(divisibility=WS_ALIGN), cute.sym_int64(divisibility=WS_ALIGN),
                  cute.sym_int64(divisibility=WS_ALIGN), 1)
    ws = make_fake_tensor(cutlass.Float32, (cls.splits, l, m, n_pad), ws_strides, assumed_align=16)
    fake = _fake_columns if cls.transposed else _fake_rows
    d = fake(dd, cls.rank, l, m, n, 16)
    c = fake(CUTLASS_DTYPES[cls.c_dtype], cls.rank, l, m, n, 4) if cls.c_dtype is not None else None
    bias = make_fake_tensor(dd, (m,) if cls.transposed else (n,), (1,), assumed_align=4) if cls.bias else None
    try:
        return cute.compile(
            SplitKReduceKernel(cls),
            ws,
            d,
            c,
            bias,
            cutlass.Float32(1.0),
            cutlass.Float32(0.0),
            make_fake_stream(use_tvm_ffi_env_stream=True),
            options="--enable-tvm-ffi",
        )
    except Exception as e:
        raise KernelCompileError(f"DSL compile failed for split-K reduce {cls}: {type(e).__name__}: {e}") from e


_CACHE = ObjectCache("splitk_reduce", FUNCTION_NAME)
_memory = _CACHE.memory
STATS = _CACHE.stats


def get_reduce(
    splits: int,
    d_dtype: DType,
    c_dtype: DType | None,
    bias: bool,
    activation: Activation,
    rank: int,
    cache_dir: Path | None,
    transposed: bool = False,
) -> Any:
    """The compiled TVM-FFI reduce function of a class: from memory, from disk, or compiled.

    The result is called as ``fn(ws, d, c, bias, alpha, beta)``: torch CUDA tensors ``ws``
    (S, L, M, n_pad) fp32, ``d`` (M, N) or (L, M, N), ``c`` like ``d`` in ``c_dtype`` or None,
    ``bias`` (N,) in D's dtype or None (None exactly when the class has no C / no bias), and
    Python floats ``alpha``, ``beta`` (beta is unused without C). It launches one kernel on
    torch's current stream and returns None; the argument checks of the module docstring raise
    before launching. ``splits`` 1..MAX_SPLITS, ``rank`` is D's (2 or 3). ``transposed``: ``d``
    and ``c`` are the column-major D' = D^T and C' of a ``swap_ab`` GEMM, ``bias`` has D''s row
    count. Raises ValueError for an unsupported class and KernelCompileError when the DSL fails.
    """
    cls = ReduceClass(splits, d_dtype, c_dtype, bias, activation, rank, transposed)
    key = reduce_compile_key(splits, d_dtype, c_dtype, bias, activation, rank, transposed)
    return _CACHE.get(key, cache_dir, lambda: _compile(cls))

"""Compile a (config, kernel class) once, with symbolic shapes, and cache the result.

* Fake tensors carry symbolic M, N, K, L and leading dimensions (divisible by the 16-byte TMA
  alignment), so one compiled function serves every shape of its class.
* The TVM-FFI calling convention takes torch tensors directly (about 5 us per call) and reads
  the stream from torch's current stream.
* Caches (``kernels.object_cache.ObjectCache``): in the process, keyed by the compile key, and
  on disk as the exported object ``<cache>/hopper_gemm-<key>.o``, written atomically and loaded
  with ``cute.runtime.load_module``; a corrupt file is reported, removed and recompiled.

The compile key covers the ``Plan`` the kernel is built from (everything the compiler sees:
the config's parameters and the layouts, dtypes and epilogue of the problem the kernel runs,
after any swap or copy), the operand rank, the DSL version, the hash of our kernel sources and
the target architecture.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from autocutlass.device import dsl_version
from autocutlass.kernels.hopper_gemm.sources import source_hash
from autocutlass.errors import CantImplement, KernelCompileError
from autocutlass.kernels.hopper_gemm.check import check, kernel_problem
from autocutlass.kernels.hopper_gemm.config import HopperGemmConfig
from autocutlass.kernels.hopper_gemm.plan import Plan, make_plan
from autocutlass.kernels.object_cache import ObjectCache
from autocutlass.ops.gemm.problem import DType, Major, GemmProblem

ARCH = "sm_90a"
FUNCTION_NAME = "autocutlass_hopper_gemm"


def target_arch() -> str:
    return os.environ.get("CUTE_DSL_ARCH", ARCH)


def compile_key(plan: Plan, rank: int) -> str:
    fields = {k: (v.value if isinstance(v, Enum) else v) for k, v in dataclasses.asdict(plan).items()}
    payload = {
        "family": "hopper_gemm",
        "plan": fields,
        "rank": rank,
        "dsl": dsl_version(),
        "src": source_hash(),
        "arch": target_arch(),
    }
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:24]


@dataclass(frozen=True)
class _Syms:
    m: Any
    n: Any
    k: Any
    l: Any


def _fake_operand(cutlass_dtype: Any, dims: tuple[Any, Any], contiguous_last: bool, rank: int, align_elems: int,
                  batch: Any) -> Any:
    """A fake (rows, cols) or (L, rows, cols) tensor; the contiguous dim is the last one or the row dim."""
    import cutlass.cute as cute
    from cutlass.cute.runtime import make_fake_tensor

    ld = cute.sym_int64(divisibility=align_elems)
    inner = (ld, 1) if contiguous_last else (1, ld)
    if rank == 2:
        return make_fake_tensor(cutlass_dtype, dims, inner, assumed_align=16)
    bs = cute.sym_int64(divisibility=align_elems)
    return make_fake_tensor(cutlass_dtype, (batch, *dims), (bs, *inner), assumed_align=16)


def _compile(plan: Plan, rank: int) -> Any:
    """Run the DSL compiler. Imports cutlass lazily (CUTE_DSL_ARCH must be set before, off-GPU)."""
    os.environ.setdefault("CUTE_DSL_ARCH", ARCH)
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import make_fake_stream
    from cutlass.cute.runtime import make_fake_tensor

    from autocutlass.kernels.hopper_gemm.kernel import CUTLASS_DTYPES, HopperGemmKernel

    s = _Syms(cute.sym_int32(), cute.sym_int32(), cute.sym_int32(), cute.sym_int32())
    ab = CUTLASS_DTYPES[plan.a_dtype]
    dd = CUTLASS_DTYPES[plan.d_dtype]
    ab_align = 16 // plan.a_dtype.bytes
    a = _fake_operand(ab, (s.m, s.k), plan.a_major is Major.ROW, rank, ab_align, s.l)
    b = _fake_operand(ab, (s.k, s.n), plan.b_major is Major.ROW, rank, ab_align, s.l)
    # D and C are row-major, or column-major (the transposed views of the swapped problem).
    d = _fake_operand(dd, (s.m, s.n), not plan.swap_ab, rank, 16 // plan.d_dtype.bytes, s.l)
    c = None
    if plan.with_c:
        assert plan.c_dtype is not None
        c_align = max(1, 4 // plan.c_dtype.bytes)
        c = _fake_operand(CUTLASS_DTYPES[plan.c_dtype], (s.m, s.n), not plan.swap_ab, rank, c_align, s.l)
    bias = None
    if plan.bias:
        bias_len = s.m if plan.swap_ab else s.n  # one value per output column of the caller's D
        bias = make_fake_tensor(dd if plan.d_dtype is not DType.FP32 else cutlass.Float32, (bias_len,), (1,), assumed_align=4)
    scale_a = scale_b = None
    if plan.scaled:
        scale_a = make_fake_tensor(cutlass.Float32, (1,), (1,), assumed_align=4)
        scale_b = make_fake_tensor(cutlass.Float32, (1,), (1,), assumed_align=4)
    workspace = counters = None
    if plan.split_k > 1 or plan.stream_k:
        workspace = make_fake_tensor(cutlass.Float32, (cute.sym_int64(),), (1,), assumed_align=16)
        if not plan.split_workspace:
            counters = make_fake_tensor(cutlass.Int32, (cute.sym_int32(),), (1,), assumed_align=4)
    kernel = HopperGemmKernel(plan)
    try:
        return cute.compile(
            kernel,
            a,
            b,
            d,
            c,
            bias,
            workspace,
            counters,
            scale_a,
            scale_b,
            cutlass.Float32(1.0),
            cutlass.Float32(0.0),
            cutlass.Int32(1),
            make_fake_stream(use_tvm_ffi_env_stream=True),
            options="--enable-tvm-ffi",
        )
    except Exception as e:  # noqa: BLE001 - the DSL raises many types; all mean "did not compile"
        raise KernelCompileError(f"DSL compile failed for {plan}: {type(e).__name__}: {e}") from e


_CACHE = ObjectCache("hopper_gemm", FUNCTION_NAME)
_memory = _CACHE.memory
STATS = _CACHE.stats


def get_compiled(config: HopperGemmConfig, problem: GemmProblem, rank: int, cache_dir: Path | None) -> Any:
    """The compiled TVM-FFI function for (config, class of ``problem``, rank): memory, disk, or
    compile. ``problem`` is the caller's problem; the kernel runs ``kernel_problem(problem, config)``."""
    reason = check(config, problem)
    if reason is not None:
        raise CantImplement(reason)
    plan = make_plan(config, kernel_problem(problem, config))
    return _CACHE.get(compile_key(plan, rank), cache_dir, lambda: _compile(plan, rank))

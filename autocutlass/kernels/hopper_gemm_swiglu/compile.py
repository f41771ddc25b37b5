"""Compile a SwiGLU (config, kernel class) once, with symbolic shapes, and cache the result.

Operands are ``hopper_gemm.compile``'s fake ones (built with its ``_fake_operand``): A (M, K),
B (K, N2) the packed weight's transpose (K-major), D (M, N) with its own symbolic N (the runner
passes N2 = 2N), the bias (N2,). The kernel is ``HopperGemmSwigluKernel``; the compile key names
this family and its own source hash, so a SwiGLU kernel never shares a cache entry with the
plain kernel of the same plan. Caches: ``ObjectCache("hopper_gemm_swiglu", ...)``, in the
process and as ``<cache>/hopper_gemm_swiglu-<key>.o``.
"""

from __future__ import annotations

import dataclasses
import os
from enum import Enum
from pathlib import Path
from typing import Any

from autocutlass.device import dsl_version
from autocutlass.errors import CantImplement, KernelCompileError
from autocutlass.kernels.compile_keys import digest
from autocutlass.kernels.hopper_gemm.compile import ARCH, target_arch
from autocutlass.kernels.hopper_gemm.config import HopperGemmConfig
from autocutlass.kernels.hopper_gemm.plan import Plan, make_plan
from autocutlass.kernels.hopper_gemm_swiglu.check import check, plain
from autocutlass.kernels.hopper_gemm_swiglu.sources import source_hash
from autocutlass.kernels.object_cache import ObjectCache
from autocutlass.ops.gemm.problem import GemmProblem, Major

PREFIX = "hopper_gemm_swiglu"
FUNCTION_NAME = "autocutlass_hopper_gemm_swiglu"


def compile_key(plan: Plan, rank: int) -> str:
    fields = {k: (v.value if isinstance(v, Enum) else v) for k, v in dataclasses.asdict(plan).items()}
    return digest({"family": PREFIX, "plan": fields, "rank": rank, "dsl": dsl_version(), "src": source_hash(),
                   "arch": target_arch()})  # fmt: skip


def _compile(plan: Plan, rank: int, ptx_dir: Path | None = None) -> Any:
    """Run the DSL compiler on fake operands (see the module docstring). With ``ptx_dir`` the PTX
    is kept there (readable as the result's ``__ptx__``): for tests."""
    os.environ.setdefault("CUTE_DSL_ARCH", ARCH)
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import make_fake_stream, make_fake_tensor

    from autocutlass.kernels.hopper_gemm.compile import _fake_operand
    from autocutlass.kernels.hopper_gemm_swiglu.kernel import CUTLASS_DTYPES, HopperGemmSwigluKernel

    assert not (plan.with_c or plan.split_k > 1 or plan.swap_ab or plan.scaled)
    m, n2, n, k, l = (cute.sym_int32() for _ in range(5))  # noqa: E741
    ab_align = 16 // plan.a_dtype.bytes
    a = _fake_operand(CUTLASS_DTYPES[plan.a_dtype], (m, k), plan.a_major is Major.ROW, rank, ab_align, l)
    b = _fake_operand(CUTLASS_DTYPES[plan.b_dtype], (k, n2), plan.b_major is Major.ROW, rank, ab_align, l)
    d = _fake_operand(CUTLASS_DTYPES[plan.d_dtype], (m, n), True, rank, 16 // plan.d_dtype.bytes, l)
    bias = None
    if plan.bias:
        bias = make_fake_tensor(CUTLASS_DTYPES[plan.d_dtype], (n2,), (1,), assumed_align=4)
    workspace = counters = None
    if plan.stream_k:
        workspace = make_fake_tensor(cutlass.Float32, (cute.sym_int64(),), (1,), assumed_align=16)
        counters = make_fake_tensor(cutlass.Int32, (cute.sym_int32(),), (1,), assumed_align=4)
    try:
        return cute.compile(HopperGemmSwigluKernel(plan), a, b, d, None, bias, workspace, counters, None, None,
                            cutlass.Float32(1.0), cutlass.Float32(0.0), cutlass.Int32(1),
                            make_fake_stream(use_tvm_ffi_env_stream=True),
                            options="--enable-tvm-ffi" + ("" if ptx_dir is None else f" --keep-ptx --dump-dir={ptx_dir}"))  # fmt: skip
    except Exception as e:  # noqa: BLE001 - the DSL raises many types; all mean "did not compile"
        raise KernelCompileError(f"DSL compile failed for the SwiGLU {plan}: {type(e).__name__}: {e}") from e


_CACHE = ObjectCache(PREFIX, FUNCTION_NAME)
STATS = _CACHE.stats


def kernel_plan(config: HopperGemmConfig, problem: GemmProblem) -> Plan:
    """The plan of (config, the fused GEMM of the SwiGLU ``problem``)."""
    return make_plan(config, plain(problem))


def get_compiled(config: HopperGemmConfig, problem: GemmProblem, rank: int, cache_dir: Path | None) -> Any:
    """The compiled TVM-FFI function for (config, class of the SwiGLU ``problem``, rank): memory,
    disk, or compile; called like ``hopper_gemm``'s with D (M, N/2) and no C."""
    reason = check(config, problem)
    if reason is not None:
        raise CantImplement(reason)
    plan = kernel_plan(config, problem)
    return _CACHE.get(compile_key(plan, rank), cache_dir, lambda: _compile(plan, rank))

"""Compile a decode GEMV (config, kernel class) once, with symbolic shapes, and cache the result:
``ObjectCache("hopper_gemv", ...)``, in the process and as ``<cache>/hopper_gemv-<key>.o``. The
key covers the plan, the DSL version, the family's source hash and the target architecture."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from autocutlass.device import dsl_version
from autocutlass.errors import CantImplement, KernelCompileError
from autocutlass.kernels.compile_keys import ARCH, digest, target_arch
from autocutlass.kernels.hopper_gemv.check import check
from autocutlass.kernels.hopper_gemv.config import GemvConfig
from autocutlass.kernels.hopper_gemv.plan import GemvPlan, make_plan
from autocutlass.kernels.hopper_gemv.sources import source_hash
from autocutlass.kernels.object_cache import ObjectCache
from autocutlass.ops.gemm.problem import DType, GemmProblem

PREFIX = "hopper_gemv"
FUNCTION_NAME = "autocutlass_hopper_gemv"


def compile_key(plan: GemvPlan) -> str:
    return digest({"family": PREFIX, "plan": plan.as_dict(), "dsl": dsl_version(), "src": source_hash(),
                   "arch": target_arch()})  # fmt: skip


def _compile(plan: GemvPlan, ptx_dir: Path | None = None) -> Any:
    """Run the DSL compiler on fake operands: A (M, K) and B (K, N) K-contiguous with 16-byte
    aligned bases and row strides, D (M, N) and C N-contiguous and element-aligned (the kernel
    stores and reads them one element at a time), symbolic M, N, K."""
    os.environ.setdefault("CUTE_DSL_ARCH", ARCH)
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import make_fake_stream, make_fake_tensor

    from autocutlass.kernels.hopper_gemv.kernel import CUTLASS_DTYPES, VEC, GemvKernel, GemvMmaKernel

    m, n = cute.sym_int32(), cute.sym_int32()
    k = cute.sym_int32(divisibility=VEC)
    ab = CUTLASS_DTYPES[plan.ab_dtype]
    dd = CUTLASS_DTYPES[plan.d_dtype]
    a = make_fake_tensor(ab, (m, k), (cute.sym_int64(divisibility=VEC), 1), assumed_align=16)
    b = make_fake_tensor(ab, (k, n), (1, cute.sym_int64(divisibility=VEC)), assumed_align=16)
    d = make_fake_tensor(dd, (m, n), (cute.sym_int64(), 1), assumed_align=plan.d_dtype.bytes)
    c = None
    if plan.c_dtype is not None:
        cd = CUTLASS_DTYPES[plan.c_dtype]
        c = make_fake_tensor(cd, (m, n), (cute.sym_int64(), 1), assumed_align=plan.c_dtype.bytes)
    bias = None
    if plan.bias:
        bias = make_fake_tensor(dd if plan.d_dtype is not DType.FP32 else cutlass.Float32, (n,), (1,),
                                assumed_align=plan.d_dtype.bytes)  # fmt: skip
    try:
        kernel = GemvMmaKernel(plan) if plan.config.kind == "mma" else GemvKernel(plan)
        return cute.compile(kernel, a, b, d, c, bias, None, None, None, None, cutlass.Float32(1.0),
                            cutlass.Float32(0.0), cutlass.Int32(1), make_fake_stream(use_tvm_ffi_env_stream=True),
                            options="--enable-tvm-ffi" + ("" if ptx_dir is None else f" --keep-ptx --dump-dir={ptx_dir}"))  # fmt: skip
    except Exception as e:  # noqa: BLE001 - the DSL raises many types; all mean "did not compile"
        raise KernelCompileError(f"DSL compile failed for the decode GEMV {plan}: {type(e).__name__}: {e}") from e


_CACHE = ObjectCache(PREFIX, FUNCTION_NAME)
STATS = _CACHE.stats


def get_compiled(config: GemvConfig, problem: GemmProblem, cache_dir: Path | None) -> Any:
    """The compiled TVM-FFI function of (config, class of ``problem``): memory, disk, or compile.
    Called like ``hopper_gemm``'s: ``fn(a, b, d, c, bias, None, None, None, None, alpha, beta, 1)``."""
    reason = check(config, problem)
    if reason is not None:
        raise CantImplement(reason)
    plan = make_plan(config, problem)
    return _CACHE.get(compile_key(plan), cache_dir, lambda: _compile(plan))

"""Compile a (config, grouped kernel class, table size) once, with symbolic shapes, and cache it.

* Fake tensors carry symbolic T, K, N, E and strides (multiples of the 16-byte TMA unit; the
  output's row a whole number of 16-byte units), so one compiled function serves every shape and
  every routing of its class. ``offs`` is an int32 vector of symbolic length.
* TVM-FFI calling convention: torch tensors directly, the stream from torch's current stream.
* Caches (``kernels.object_cache.ObjectCache``): in the process, and on disk as the exported
  object ``<cache>/hopper_grouped-<key>.o``.

The compile key covers the ``GroupedPlan`` (the equivalent GEMM's plan and the table capacity),
the DSL version, the hash of this family's kernel sources (``sources.SOURCE_FILES``, code only)
and the target.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from autocutlass.errors import CantImplement, KernelCompileError
from autocutlass.kernels.compile_keys import ARCH, plan_key
from autocutlass.kernels.hopper_grouped.check import check
from autocutlass.kernels.hopper_grouped.config import HopperGroupedConfig
from autocutlass.kernels.hopper_grouped.plan import GroupedPlan, make_plan
from autocutlass.kernels.hopper_grouped.sources import source_hash
from autocutlass.kernels.object_cache import ObjectCache
from autocutlass.ops.grouped.problem import GroupedGemmProblem
from autocutlass.ops.types import DType, Major

FUNCTION_NAME = "autocutlass_hopper_grouped"


def compile_key(plan: GroupedPlan) -> str:
    return plan_key("hopper_grouped", plan, source_hash())


def _compile(plan: GroupedPlan) -> Any:
    """Run the DSL compiler. Imports cutlass lazily (CUTE_DSL_ARCH must be set before, off-GPU)."""
    os.environ.setdefault("CUTE_DSL_ARCH", ARCH)
    import cutlass
    from cutlass import cute
    from cutlass.cute.runtime import make_fake_stream, make_fake_tensor

    from autocutlass.kernels.hopper_grouped.kernel import (
        CUTLASS_DTYPES,
        HopperGroupedKernel,
    )

    g = plan.gemm
    xw = CUTLASS_DTYPES[g.a_dtype]
    od = CUTLASS_DTYPES[g.d_dtype]
    xw_align = 16 // g.a_dtype.bytes
    out_align = 16 // g.d_dtype.bytes

    def sym(div: int = 1) -> Any:
        return cute.sym_int32(divisibility=div) if div > 1 else cute.sym_int32()

    def sym64(div: int) -> Any:
        return cute.sym_int64(divisibility=div)

    t, k, n, e = sym(), sym(), sym(), sym()
    x = make_fake_tensor(xw, (t, k), (sym64(xw_align), 1), assumed_align=16)
    if g.b_major is Major.ROW:  # (E, K, N), N contiguous
        w = make_fake_tensor(xw, (e, k, n), (sym64(xw_align), sym64(xw_align), 1), assumed_align=16)
    else:  # (E, K, N) viewed from an (E, N, K) weight: K contiguous
        w = make_fake_tensor(xw, (e, k, n), (sym64(xw_align), 1, sym64(xw_align)), assumed_align=16)
    offs = make_fake_tensor(cutlass.Int32, (e,), (1,), assumed_align=4)
    out = make_fake_tensor(od, (t, n), (sym64(out_align), 1), assumed_align=16)
    bias = None
    if g.bias:
        bias_dt = od if g.d_dtype is not DType.FP32 else cutlass.Float32
        bias = make_fake_tensor(bias_dt, (e, n), (sym64(1), 1), assumed_align=4)
    kernel = HopperGroupedKernel(plan)
    try:
        return cute.compile(
            kernel, x, w, offs, out, bias, cutlass.Int32(1), make_fake_stream(use_tvm_ffi_env_stream=True),
            options="--enable-tvm-ffi",
        )  # fmt: skip
    except Exception as exc:
        raise KernelCompileError(f"DSL compile failed for {plan}: {type(exc).__name__}: {exc}") from exc


_CACHE = ObjectCache("hopper_grouped", FUNCTION_NAME)
STATS = _CACHE.stats


def get_compiled(config: HopperGroupedConfig, problem: GroupedGemmProblem, entries: int, cache_dir: Path | None) -> Any:
    """The compiled TVM-FFI function for (config, class of ``problem``, table capacity
    ``entries``): memory, disk, or compile."""
    reason = check(config, problem)
    if reason is not None:
        raise CantImplement(reason)
    plan = make_plan(config, problem, entries)
    return _CACHE.get(compile_key(plan), cache_dir, lambda: _compile(plan))

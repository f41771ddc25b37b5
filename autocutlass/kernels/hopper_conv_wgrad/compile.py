"""Compile a (config, conv wgrad kernel class) once, with symbolic shapes, and cache the result.

* Fake tensors carry symbolic N*P*Q and K (dy), N, H, W, C (x), K and C (dw) and strides
  (multiples of the 16-byte TMA unit); R and S are static (dw's tap mode is R*S long). Stride,
  padding and dilation are run-time Int32 arguments. One compiled function serves every shape,
  stride, padding and dilation of its class (dtype, R x S, config).
* TVM-FFI calling convention: torch tensors directly, the stream from torch's current stream.
* Caches (``kernels.object_cache.ObjectCache``): in the process, and on disk as the exported
  object ``<cache>/hopper_conv_wgrad-<key>.o``.

The compile key covers the ``WgradPlan`` (the implicit GEMM's plan and R, S), the DSL version,
the hash of this family's kernel sources (``sources.SOURCE_FILES``, code only) and the target.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autocutlass.errors import CantImplement, KernelCompileError
from autocutlass.kernels.compile_keys import ARCH, plan_key
from autocutlass.kernels.hopper_conv_wgrad.check import check
from autocutlass.kernels.hopper_conv_wgrad.config import HopperConvWgradConfig
from autocutlass.kernels.hopper_conv_wgrad.plan import WgradPlan, make_plan
from autocutlass.kernels.hopper_conv_wgrad.sources import source_hash
from autocutlass.kernels.object_cache import ObjectCache

if TYPE_CHECKING:
    from autocutlass.ops.conv.problem import ConvProblem

FUNCTION_NAME = "autocutlass_hopper_conv_wgrad"


def compile_key(plan: WgradPlan) -> str:
    return plan_key("hopper_conv_wgrad", plan, source_hash())


def _compile(plan: WgradPlan) -> Any:
    """Run the DSL compiler. Imports cutlass lazily (CUTE_DSL_ARCH must be set before, off-GPU)."""
    os.environ.setdefault("CUTE_DSL_ARCH", ARCH)
    import cutlass
    from cutlass import cute
    from cutlass.cute.runtime import make_fake_stream, make_fake_tensor

    from autocutlass.kernels.hopper_conv_wgrad.kernel import (
        CUTLASS_DTYPES,
        HopperConvWgradKernel,
    )

    g = plan.gemm
    io = CUTLASS_DTYPES[g.a_dtype]
    wd = CUTLASS_DTYPES[g.d_dtype]
    io_align = 16 // g.a_dtype.bytes
    w_align = 16 // g.d_dtype.bytes

    def sym(div: int = 1) -> Any:
        return cute.sym_int32(divisibility=div) if div > 1 else cute.sym_int32()

    def sym64(div: int) -> Any:
        return cute.sym_int64(divisibility=div)

    # dy (NPQ, K), x (N, H, W, C), dw (K, R*S, C): channels contiguous, other strides whole 16-byte units.
    dy = make_fake_tensor(io, (sym(), sym(io_align)), (sym64(io_align), 1), assumed_align=16)
    x = make_fake_tensor(io, (sym(), sym(), sym(), sym(io_align)),
                         (sym64(io_align), sym64(io_align), sym64(io_align), 1), assumed_align=16)  # fmt: skip
    dw = make_fake_tensor(wd, (sym(), plan.r * plan.s, sym(w_align)), (sym64(w_align), sym64(w_align), 1),
                          assumed_align=16)  # fmt: skip
    workspace = counters = None
    if g.split_k > 1 or g.stream_k:
        workspace = make_fake_tensor(cutlass.Float32, (cute.sym_int64(),), (1,), assumed_align=16)
        if not g.split_workspace:  # workspace split-K's slabs need no turnstiles
            counters = make_fake_tensor(cutlass.Int32, (cute.sym_int32(),), (1,), assumed_align=4)
    kernel = HopperConvWgradKernel(plan)
    one = cutlass.Int32(1)
    try:
        return cute.compile(
            kernel, dy, x, dw, workspace, counters, one, one, one, one, one, one, one,
            make_fake_stream(use_tvm_ffi_env_stream=True),
            options="--enable-tvm-ffi",
        )  # fmt: skip
    except Exception as e:
        raise KernelCompileError(f"DSL compile failed for {plan}: {type(e).__name__}: {e}") from e


_CACHE = ObjectCache("hopper_conv_wgrad", FUNCTION_NAME)
STATS = _CACHE.stats


def get_compiled(config: HopperConvWgradConfig, problem: ConvProblem, cache_dir: Path | None) -> Any:
    """The compiled TVM-FFI function for (config, class of ``problem``): memory, disk, or compile."""
    reason = check(config, problem)
    if reason is not None:
        raise CantImplement(reason)
    plan = make_plan(config, problem)
    return _CACHE.get(compile_key(plan), cache_dir, lambda: _compile(plan))

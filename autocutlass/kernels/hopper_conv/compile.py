"""Compile a (config, conv kernel class) once, with symbolic shapes, and cache the result.

* Fake tensors carry symbolic N, H, W, C (x), K, C (w), output pixels and K (y, residual),
  bias length and strides (multiples of the 16-byte TMA unit); R and S are static. Stride,
  padding and dilation are run-time Int32 arguments. One compiled function serves every shape,
  stride, padding and dilation of its class (dtypes, epilogue, R x S, config).
* TVM-FFI calling convention: torch tensors directly, the stream from torch's current stream.
* Caches (``kernels.object_cache.ObjectCache``): in the process, and on disk as the exported
  object ``<cache>/hopper_conv-<key>.o``.

The compile key covers the ``ConvPlan`` (the implicit GEMM's plan and R, S), the DSL version,
the hash of this family's kernel sources (``sources.SOURCE_FILES``, code only) and the target.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autocutlass.device import dsl_version
from autocutlass.errors import CantImplement, KernelCompileError
from autocutlass.kernels.hopper_conv.check import check
from autocutlass.kernels.hopper_conv.config import HopperConvConfig
from autocutlass.kernels.hopper_conv.plan import ConvPlan, make_plan
from autocutlass.kernels.hopper_conv.sources import source_hash
from autocutlass.kernels.object_cache import ObjectCache
from autocutlass.ops.gemm.problem import DType

if TYPE_CHECKING:
    from autocutlass.ops.conv.problem import ConvProblem

ARCH = "sm_90a"
FUNCTION_NAME = "autocutlass_hopper_conv"


def target_arch() -> str:
    return os.environ.get("CUTE_DSL_ARCH", ARCH)


def _plain(v: Any) -> Any:
    if isinstance(v, Enum):
        return v.value
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    return v


def compile_key(plan: ConvPlan) -> str:
    payload = {
        "family": "hopper_conv",
        "plan": _plain(dataclasses.asdict(plan)),
        "dsl": dsl_version(),
        "src": source_hash(),
        "arch": target_arch(),
    }
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _compile(plan: ConvPlan) -> Any:
    """Run the DSL compiler. Imports cutlass lazily (CUTE_DSL_ARCH must be set before, off-GPU)."""
    os.environ.setdefault("CUTE_DSL_ARCH", ARCH)
    import cutlass
    from cutlass import cute
    from cutlass.cute.runtime import make_fake_stream, make_fake_tensor

    from autocutlass.kernels.hopper_conv.kernel import CUTLASS_DTYPES, HopperConvKernel

    g = plan.gemm
    yd = CUTLASS_DTYPES[g.d_dtype]
    y_align = 16 // g.d_dtype.bytes
    sym, sym64 = _sym(cute, 32), _sym(cute, 64)
    # x (N, H, W, C) and w (K, R, S, C): channels contiguous, other strides whole 16-byte units.
    x = fake_channels_last(CUTLASS_DTYPES[g.a_dtype], g.a_dtype.bytes)
    w = fake_channels_last(CUTLASS_DTYPES[g.a_dtype], g.a_dtype.bytes, (plan.r, plan.s))
    d = make_fake_tensor(yd, (sym(), sym(y_align)), (sym64(y_align), 1), assumed_align=16)
    c = None
    if g.with_c:
        assert g.c_dtype is not None
        c_align = max(1, 4 // g.c_dtype.bytes)
        c = make_fake_tensor(CUTLASS_DTYPES[g.c_dtype], (sym(), sym(c_align)), (sym64(c_align), 1), assumed_align=4)
    bias = None
    if g.bias:
        bias = make_fake_tensor(yd if g.d_dtype is not DType.FP32 else cutlass.Float32, (sym(),), (1,), assumed_align=4)
    workspace = counters = None
    if g.split_k > 1 or g.stream_k:
        workspace = make_fake_tensor(cutlass.Float32, (cute.sym_int64(),), (1,), assumed_align=16)
        if not g.split_workspace:  # the workspace's slabs need no turnstiles
            counters = make_fake_tensor(cutlass.Int32, (cute.sym_int32(),), (1,), assumed_align=4)
    kernel = HopperConvKernel(plan)
    one = cutlass.Int32(1)
    try:
        return cute.compile(
            kernel, x, w, d, c, bias, workspace, counters, cutlass.Float32(1.0), cutlass.Float32(0.0),
            one, one, one, one, one, one, one,
            make_fake_stream(use_tvm_ffi_env_stream=True),
            options="--enable-tvm-ffi",
        )  # fmt: skip
    except Exception as e:
        raise KernelCompileError(f"DSL compile failed for {plan}: {type(e).__name__}: {e}") from e


def _sym(cute: Any, bits: int) -> Any:
    """A maker of symbolic ints of ``bits`` bits, of a given divisibility (int64: always given)."""
    if bits == 64:
        return lambda div: cute.sym_int64(divisibility=div)
    return lambda div=1: cute.sym_int32(divisibility=div) if div > 1 else cute.sym_int32()


def fake_channels_last(dtype: Any, elt_bytes: int, middle: tuple[int, int] | None = None) -> Any:
    """A fake 4-D tensor for the DSL compiler in the (N, H, W, C) order of a channels_last view:
    symbolic sizes (C a whole number of 16-byte units; H and W static when ``middle`` gives them, as
    a filter's R and S), channels contiguous, the other strides symbolic whole 16-byte units, a
    16-byte aligned base."""
    from cutlass import cute
    from cutlass.cute.runtime import make_fake_tensor

    align = 16 // elt_bytes
    sym, sym64 = _sym(cute, 32), _sym(cute, 64)
    n = sym()
    hw = (sym(), sym()) if middle is None else middle
    return make_fake_tensor(dtype, (n, *hw, sym(align)), (sym64(align), sym64(align), sym64(align), 1), assumed_align=16)


_CACHE = ObjectCache("hopper_conv", FUNCTION_NAME)
STATS = _CACHE.stats


def get_compiled(config: HopperConvConfig, problem: ConvProblem, cache_dir: Path | None) -> Any:
    """The compiled TVM-FFI function for (config, class of ``problem``): memory, disk, or compile."""
    reason = check(config, problem)
    if reason is not None:
        raise CantImplement(reason)
    plan = make_plan(config, problem)
    return _CACHE.get(compile_key(plan), cache_dir, lambda: _compile(plan))

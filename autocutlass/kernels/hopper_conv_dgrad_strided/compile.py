"""Compile a (config, phase sub-filter class) of the scatter kernel once, with symbolic shapes,
and cache the result.

* Fake tensors: dy as (N, P, Q, K) and the sub-filter as (C, T_h, T_w, K) (channels
  contiguous, other strides whole 16-byte units), the phase view of dx as (N, H_phi, W_phi, C)
  with symbolic strides (16-byte units: C is a multiple of 8 16-bit elements); T_h and T_w are
  static, the four paddings run-time Int32s. One compiled function serves every phase of every
  layer whose sub-filter has T_h x T_w taps (dtypes and config equal).
* TVM-FFI calling convention, the stream from torch's current stream; caches as
  ``hopper_conv.compile`` (``ObjectCache``, prefix ``hopper_conv_dgrad_strided``).

The compile key covers the ``ConvPlan``, the DSL version, this family's source hash and the
target.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from autocutlass.device import dsl_version
from autocutlass.errors import KernelCompileError
from autocutlass.kernels.hopper_conv.compile import ARCH, _plain, fake_channels_last, target_arch
from autocutlass.kernels.hopper_conv.plan import ConvPlan
from autocutlass.kernels.hopper_conv_dgrad_strided.sources import source_hash
from autocutlass.kernels.object_cache import ObjectCache

FAMILY = "hopper_conv_dgrad_strided"
FUNCTION_NAME = "autocutlass_hopper_conv_dgrad_strided"


def compile_key(plan: ConvPlan) -> str:
    payload = {"family": FAMILY, "plan": _plain(dataclasses.asdict(plan)), "dsl": dsl_version(), "src": source_hash(),
               "arch": target_arch()}  # fmt: skip
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _compile(plan: ConvPlan) -> Any:
    """Run the DSL compiler. Imports cutlass lazily (CUTE_DSL_ARCH must be set before, off-GPU)."""
    os.environ.setdefault("CUTE_DSL_ARCH", ARCH)
    import cutlass
    from cutlass import cute
    from cutlass.cute.runtime import make_fake_stream, make_fake_tensor

    from autocutlass.kernels.hopper_conv_dgrad_strided.kernel import CUTLASS_DTYPES, HopperConvScatterKernel

    g = plan.gemm
    x = fake_channels_last(CUTLASS_DTYPES[g.a_dtype], g.a_dtype.bytes)  # dy (N, P, Q, K)
    w = fake_channels_last(CUTLASS_DTYPES[g.a_dtype], g.a_dtype.bytes, (plan.r, plan.s))  # (C, T_h, T_w, K)
    d = fake_channels_last(CUTLASS_DTYPES[g.d_dtype], g.d_dtype.bytes)  # the phase view (N, H_phi, W_phi, C)
    workspace = counters = None
    if g.split_k > 1 or g.stream_k:
        workspace = make_fake_tensor(cutlass.Float32, (cute.sym_int64(),), (1,), assumed_align=16)
        counters = make_fake_tensor(cutlass.Int32, (cute.sym_int32(),), (1,), assumed_align=4)
    kernel = HopperConvScatterKernel(plan)
    one = cutlass.Int32(1)
    try:
        return cute.compile(kernel, x, w, d, workspace, counters, one, one, one, one, one,
                            make_fake_stream(use_tvm_ffi_env_stream=True), options="--enable-tvm-ffi")  # fmt: skip
    except Exception as e:
        raise KernelCompileError(f"DSL compile failed for {plan}: {type(e).__name__}: {e}") from e


_CACHE = ObjectCache(FAMILY, FUNCTION_NAME)
STATS = _CACHE.stats


def get_compiled(plan: ConvPlan, cache_dir: Path | None) -> Any:
    """The compiled TVM-FFI function of ``plan`` (checked by the caller): memory, disk, or compile."""
    return _CACHE.get(compile_key(plan), cache_dir, lambda: _compile(plan))

"""The files whose code decides what the Hopper conv wgrad family generates, and their hash.

This family's config, plan, kernel and compile, the slab sum of its workspace split-K, and the
shared files they import: the GEMM
kernel whose consumers, split-K, stream-K and epilogue the wgrad kernel inherits (with that
kernel's plan, config and tf32 MMA atom), the hardware budgets and the epilogue math.
Feasibility rules, the search space, seeds and the Python launcher are left out. Paths are
relative to ``autocutlass/kernels``.
"""

from __future__ import annotations

import functools

from autocutlass.device import source_hash as _hash

SOURCE_FILES = (
    "budgets.py",
    "epilogue_math.py",
    "hopper_conv_wgrad/compile.py",
    "hopper_conv_wgrad/config.py",
    "hopper_conv_wgrad/kernel.py",
    "hopper_conv_wgrad/plan.py",
    "hopper_conv_wgrad/slab_sum.py",
    "hopper_conv_wgrad/slab_sum_kernel.py",
    "hopper_gemm/config.py",
    "hopper_gemm/kernel.py",
    "hopper_gemm/plan.py",
    "hopper_gemm/wgmma_tf32.py",
)


@functools.cache
def source_hash() -> str:
    """The family's source hash: part of its records' hard key and of its compile-cache keys."""
    return _hash(SOURCE_FILES)

"""The files whose code decides what the Hopper GEMM family generates, and their hash.

The kernel, its compile-time plan, how it is compiled, the config it is keyed by, the split-K
reduce kernel, the tf32 MMA atom, and the shared budgets and epilogue math they import.
Feasibility rules, the search space, seeds and the Python launcher are left out: changing them
does not make a stored timing untrue. Paths are relative to ``autocutlass/kernels``.
"""

from __future__ import annotations

import functools

from autocutlass.device import source_hash as _hash

SOURCE_FILES = (
    "budgets.py",
    "epilogue_math.py",
    "hopper_gemm/compile.py",
    "hopper_gemm/config.py",
    "hopper_gemm/kernel.py",
    "hopper_gemm/plan.py",
    "hopper_gemm/reduce.py",
    "hopper_gemm/wgmma_tf32.py",
)


@functools.cache
def source_hash() -> str:
    """The family's source hash: part of its records' hard key and of its compile-cache keys."""
    return _hash(SOURCE_FILES)

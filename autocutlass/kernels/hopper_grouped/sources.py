"""The files whose code decides what the Hopper grouped-GEMM family generates, and their hash.

This family's config, plan, kernel and compile, and every shared file they import: the GEMM
kernel whose shared-memory layouts, TMA atoms and activation the grouped kernel inherits (with
that kernel's plan, config and tf32 MMA atom, which it imports), the hardware budgets and the
epilogue math. Feasibility rules, the search space, seeds and the Python launcher are left out:
changing them does not make a stored timing untrue. Paths are relative to ``autocutlass/kernels``.
"""

from __future__ import annotations

import functools

from autocutlass.device import source_hash as _hash

SOURCE_FILES = (
    "budgets.py",
    "epilogue_math.py",
    "hopper_gemm/config.py",
    "hopper_gemm/kernel.py",
    "hopper_gemm/plan.py",
    "hopper_gemm/wgmma_tf32.py",
    "hopper_grouped/compile.py",
    "hopper_grouped/config.py",
    "hopper_grouped/kernel.py",
    "hopper_grouped/plan.py",
)


@functools.cache
def source_hash() -> str:
    """The family's source hash: part of its records' hard key and of its compile-cache keys."""
    return _hash(SOURCE_FILES)

"""Kernel families: each a config space, a feasibility check and a compiler.

``kernels`` imports neither ``search`` nor ``db``. Families are looked up by their stable name
(stored in the tuning database with each record).
"""

from __future__ import annotations

import functools

from autocutlass.kernels.base import GemmRunner, KernelFamily
from autocutlass.kernels.hopper_gemm import HopperGemmFamily
from autocutlass.ops.gemm.problem import GemmProblem
from autocutlass.settings import current

__all__ = ["GemmRunner", "KernelFamily", "default_family_for", "family_names", "get_family", "unsupported_reason"]

_FAMILIES = {"hopper_gemm": HopperGemmFamily}


def family_names() -> list[str]:
    return sorted(_FAMILIES)


@functools.cache
def get_family(name: str) -> KernelFamily:
    """The family registered as ``name``, compiling into the configured kernel cache."""
    try:
        cls = _FAMILIES[name]
    except KeyError:
        raise KeyError(f"unknown kernel family {name!r}; known: {family_names()}") from None
    return cls(cache_dir=current().kernel_cache_dir)


def default_family_for(problem: GemmProblem) -> KernelFamily | None:
    """The first family that supports ``problem``, or None."""
    for name in family_names():
        fam = get_family(name)
        if fam.supports(problem) is None:
            return fam
    return None


def unsupported_reason(problem: GemmProblem) -> str:
    """Why no family serves ``problem``: each family's reason, '; '-joined."""
    reasons = [f"{name}: {get_family(name).supports(problem)}" for name in family_names()]
    return "; ".join(reasons)

"""Kernel families: each a config space, a feasibility check and a compiler.

``kernels`` imports neither ``search`` nor ``db``. Families are looked up by their stable name
(stored in the tuning database with each record); ``families_for`` maps a problem of any op to
the families that serve it, so an op module never names a kernel family.
"""

from __future__ import annotations

import functools
from typing import Any

from autocutlass.kernels.base import GemmRunner, KernelFamily
from autocutlass.kernels.hopper_conv import HopperConvFamily
from autocutlass.kernels.hopper_conv_dgrad import HopperConvDgradFamily
from autocutlass.kernels.hopper_conv_wgrad import HopperConvWgradFamily
from autocutlass.kernels.hopper_gemm import HopperGemmFamily
from autocutlass.settings import current

__all__ = [
    "GemmRunner", "KernelFamily", "families_for", "family_names", "get_family", "source_hashes", "unsupported_reason",
]  # fmt: skip

_FAMILIES: dict[str, type[KernelFamily]] = {
    "hopper_gemm": HopperGemmFamily,
    "hopper_conv": HopperConvFamily,
    "hopper_conv_dgrad": HopperConvDgradFamily,
    "hopper_conv_wgrad": HopperConvWgradFamily,
}
"""Families by name, in preference order: where several serve a problem (a pointwise convolution
is a GEMM for hopper_gemm and an implicit GEMM with a 1x1 filter for hopper_conv; a pointwise
dgrad a GEMM and a forward convolution for hopper_conv_dgrad; a pointwise wgrad a GEMM and an
implicit-GEMM wgrad for hopper_conv_wgrad, which is off by default until validated on a GPU), a
miss is tuned under the first, and the stored records of all are looked up."""


def family_names() -> list[str]:
    """Registered families, in preference order."""
    return list(_FAMILIES)


@functools.cache
def get_family(name: str) -> KernelFamily:
    """The family registered as ``name``, compiling into the configured kernel cache."""
    try:
        cls = _FAMILIES[name]
    except KeyError:
        raise KeyError(f"unknown kernel family {name!r}; known: {family_names()}") from None
    return cls(cache_dir=current().kernel_cache_dir)


def families_for(problem: Any) -> list[KernelFamily]:
    """The families that serve ``problem`` (an ``OpProblem`` of any op), in registry order."""
    return [fam for fam in (get_family(name) for name in family_names()) if fam.supports(problem) is None]


def source_hashes() -> dict[str, str]:
    """Each family's source hash (the ``kernel_hash`` of its records' hard keys)."""
    return {name: get_family(name).source_hash() for name in family_names()}


def unsupported_reason(problem: Any) -> str:
    """Why no family serves ``problem``: each family's reason, '; '-joined."""
    reasons = [f"{name}: {get_family(name).supports(problem)}" for name in family_names()]
    return "; ".join(reasons)

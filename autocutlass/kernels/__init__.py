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
from autocutlass.kernels.hopper_conv_dgrad_strided import HopperConvDgradStridedFamily
from autocutlass.kernels.hopper_conv_unfold import HopperConvUnfoldFamily, HopperConvWgradUnfoldFamily
from autocutlass.kernels.hopper_conv_wgrad import HopperConvWgradFamily
from autocutlass.kernels.hopper_gemm import HopperGemmFamily
from autocutlass.kernels.hopper_gemm_gated import HopperGemmGatedFamily
from autocutlass.kernels.hopper_gemm_swiglu import HopperGemmSwigluFamily
from autocutlass.kernels.hopper_gemv import HopperGemvFamily
from autocutlass.kernels.hopper_grouped import HopperGroupedFamily
from autocutlass.settings import Settings, current

__all__ = [
    "GemmRunner", "KernelFamily", "families_for", "family_names", "get_family", "source_hashes", "unsupported_reason",
]  # fmt: skip

_FAMILIES: dict[str, type[KernelFamily]] = {
    "hopper_gemm": HopperGemmFamily,
    "hopper_conv": HopperConvFamily,
    "hopper_conv_dgrad": HopperConvDgradFamily,
    "hopper_conv_dgrad_strided": HopperConvDgradStridedFamily,
    "hopper_conv_wgrad": HopperConvWgradFamily,
    "hopper_conv_unfold": HopperConvUnfoldFamily,
    "hopper_conv_wgrad_unfold": HopperConvWgradUnfoldFamily,
    "hopper_grouped": HopperGroupedFamily,
    "hopper_gemm_gated": HopperGemmGatedFamily,
    "hopper_gemm_swiglu": HopperGemmSwigluFamily,
    "hopper_gemv": HopperGemvFamily,
}
"""Families by name, in preference order: where several serve a problem (a pointwise convolution
is a GEMM for hopper_gemm and an implicit GEMM with a 1x1 filter for hopper_conv; a pointwise
dgrad a GEMM and a forward convolution for hopper_conv_dgrad; a pointwise wgrad a GEMM and an
implicit-GEMM wgrad for hopper_conv_wgrad, which is off by default: it loses to cuDNN), a
miss is tuned under the first, and the stored records of all are looked up. hopper_conv_unfold
and hopper_conv_wgrad_unfold serve the fprop and wgrad of layers whose input channels are not
whole 16-byte units (a 3-channel stem), which no other family serves, through a row-unfolded
input. hopper_gemm_gated
alone serves GEMMs with a multiplying epilogue (linear's ``mul=``), hopper_gemm_swiglu those with
a SwiGLU epilogue (linear's ``activation="swiglu"``). hopper_gemv serves decode GEMMs (M <= 16)
beside hopper_gemm, registered after it: a miss is tuned under hopper_gemm unless it has at most
``hopper_gemv.PREFER_MAX_M`` rows (``prefers``: then under hopper_gemv, which wins there); ``tune
--family`` tunes either, and where both families hold a record of one problem and rank the faster
serves (``dispatch``)."""

GATES: dict[str, tuple[str, str]] = {
    "hopper_grouped": ("grouped_kernels", "AUTOCUTLASS_GROUPED_KERNELS"),
    "hopper_conv_dgrad": ("conv_dgrad_kernel", "AUTOCUTLASS_CONV_DGRAD"),
    "hopper_conv_dgrad_strided": ("conv_dgrad_strided_kernel", "AUTOCUTLASS_CONV_DGRAD_STRIDED"),
    "hopper_gemm_gated": ("gated_kernels", "AUTOCUTLASS_GATED_KERNELS"),
    "hopper_gemm_swiglu": ("swiglu_kernels", "AUTOCUTLASS_SWIGLU_KERNELS"),
    "hopper_gemv": ("gemv_kernels", "AUTOCUTLASS_GEMV_KERNELS"),
}
"""Families that serve problems only while a setting is on (``Settings`` field, variable): new
kernels awaiting their GPU validation or slower than the vendor's (their setting is off by
default: hopper_conv_dgrad_strided), and validated ones a user may switch off (on by default:
hopper_grouped, hopper_conv_dgrad, hopper_gemm_gated, hopper_gemm_swiglu, hopper_gemv)."""

ALL_GATES: dict[str, tuple[str, str]] = {**GATES, "hopper_conv_wgrad": ("conv_wgrad_kernel", "AUTOCUTLASS_CONV_WGRAD")}
"""``GATES`` and hopper_conv_wgrad's, which the family checks itself (its ``supports``): every
setting that switches a family off, for the tools that list or override them."""


def gate_is_opt_out(field: str) -> bool:
    """True when the gate's setting is on by default (the variable switches the family off)."""
    f = Settings.__dataclass_fields__[field]
    return f.default is True


def _gate(name: str, settings: Settings) -> str | None:
    """Why family ``name`` is switched off now, or None."""
    gate = GATES.get(name)
    if gate is None or getattr(settings, gate[0]):
        return None
    if gate_is_opt_out(gate[0]):
        return f"switched off by {gate[1]}=0"
    return f"switched off by default (set {gate[1]}=1 to use it)"


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
    """The families that serve ``problem`` (an ``OpProblem`` of any op): those that prefer it
    (``KernelFamily.prefers``: hopper_gemv for a GEMM of at most 4 rows) first, then registry order;
    a gated family (``GATES``) only while its setting is on. A miss is tuned under the first."""
    s = current()
    names = [name for name in family_names() if _gate(name, s) is None]
    fams = [fam for fam in (get_family(name) for name in names) if fam.supports(problem) is None]
    return sorted(fams, key=lambda fam: not fam.prefers(problem))


def source_hashes() -> dict[str, str]:
    """Each family's source hash (the ``kernel_hash`` of its records' hard keys)."""
    return {name: get_family(name).source_hash() for name in family_names()}


def unsupported_reason(problem: Any) -> str:
    """Why no family serves ``problem``: each family's reason, '; '-joined."""
    s = current()
    reasons = []
    for name in family_names():
        why = get_family(name).supports(problem)
        if why is None:
            why = _gate(name, s)
        reasons.append(f"{name}: {why}")
    return "; ".join(reasons)

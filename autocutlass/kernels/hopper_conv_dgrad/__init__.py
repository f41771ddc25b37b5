"""Hopper (sm_90a) conv2d dgrad family: a stride-1 dgrad as a forward convolution on the fprop
family's kernel.

dx = conv(dy, w') with the filter flipped and its channel axes swapped and the complementary
padding (``lowering``); the configs, space, seeds, check and compiled kernels are ``hopper_conv``'s
for that forward problem (one compiled kernel serves a layer's fprop and its dgrad when their
classes match), the runner transforms the filter (``runner``). Records are keyed by the dgrad
problem and this family's own source hash (``sources``).

Modules: ``lowering`` (the mapping, pure Python), ``runner`` (the callable), ``sources``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autocutlass.errors import CantImplement
from autocutlass.kernels.base import KernelFamily
from autocutlass.kernels.hopper_conv import HopperConvFamily
from autocutlass.kernels.hopper_conv.config import HopperConvConfig
from autocutlass.kernels.hopper_conv_dgrad import sources
from autocutlass.kernels.hopper_conv_dgrad.lowering import fprop_problem, unsupported

if TYPE_CHECKING:
    from autocutlass.ops.conv.problem import ConvProblem

__all__ = ["HopperConvDgradFamily"]


class HopperConvDgradFamily(KernelFamily[HopperConvConfig]):
    name = "hopper_conv_dgrad"
    SOURCE_FILES = sources.SOURCE_FILES

    def __init__(self, cache_dir: Path | None = None) -> None:
        self._cache_dir = cache_dir
        self._fprop = HopperConvFamily(cache_dir)

    def supports(self, problem: ConvProblem) -> str | None:
        reason = unsupported(problem)
        if reason is not None:
            return reason
        why = self._fprop.supports(fprop_problem(problem))
        return None if why is None else f"as the forward convolution of dy with the flipped filter: {why}"

    def space(self, problem: ConvProblem) -> Sequence[HopperConvConfig]:
        """The fprop family's space for the forward problem dgrad runs as (empty when not served)."""
        return [] if unsupported(problem) is not None else self._fprop.space(fprop_problem(problem))

    def check(self, config: HopperConvConfig, problem: ConvProblem) -> str | None:
        reason = unsupported(problem)
        return reason if reason is not None else self._fprop.check(config, fprop_problem(problem))

    def seeds(self, problem: ConvProblem) -> Sequence[HopperConvConfig]:
        """The fprop family's first guesses for the forward problem dgrad runs as (none when not served)."""
        return [] if unsupported(problem) is not None else self._fprop.seeds(fprop_problem(problem))

    def config_to_dict(self, config: HopperConvConfig) -> dict[str, Any]:
        return config.as_dict()

    def config_from_dict(self, d: dict[str, Any]) -> HopperConvConfig:
        return HopperConvConfig.from_dict(d)

    def compile(self, config: HopperConvConfig, problem: ConvProblem) -> Any:
        """A runner in the dgrad convention ``runner(dy, w, dx)`` (``hopper_conv_dgrad.runner``)."""
        from autocutlass.kernels.hopper_conv_dgrad.runner import DgradRunner

        reason = self.check(config, problem)
        if reason is not None:
            raise CantImplement(reason)
        return DgradRunner(config, problem, self._cache_dir)

    def simplicity(self, config: HopperConvConfig) -> tuple[int, ...]:
        return self._fprop.simplicity(config)

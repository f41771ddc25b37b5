"""Hopper (sm_90a) strided conv2d dgrad family: one stride-1 convolution per stride phase.

A strided dgrad (stride > 1, dilation 1) is decomposed by ``phases`` into stride_h x stride_w
phases: the pixels of dx at rows phi_h + j*stride_h and columns phi_w + i*stride_w receive only
the filter taps of one residue class, so each phase is a stride-1 forward convolution of dy
with a flipped sub-filter, every multiply a real one (a 3x3 stride-2 layer's phases have 1, 2, 2
and 4 taps). Each phase runs on the fprop family's kernel with a scatter store (``kernel``:
the phase's pixels are every s-th pixel of dx, written through a strided view, no temporary);
phases no tap reaches (a 1x1 stride-2 layer's three odd phases) are filled with zeros.

One config serves all phases of a layer (one record per layer, as for the other families):
the fprop family's configs, their ``store`` naming the scatter store's two ways (TMA: staged in
shared memory, then 16-byte pieces of each pixel; DIRECT: from registers), with serial split-K
or stream-K (the workspace mode's reduce kernel writes a dense matrix); a config must suit every
computed phase (``check``). Space and seeds are the fprop family's for the phase with the most
taps (the largest K loop), so mapped; the space adds each config's other store.

The family serves from records only (``TUNED_ONLY``): a layer it was never tuned for runs on
cuDNN, and a tuned one on ours only where the tuning's vendor verdict found ours faster.

Modules: ``phases`` (the decomposition, pure Python), ``kernel`` (the scatter kernel),
``compile``, ``runner``, ``sources``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autocutlass.errors import CantImplement
from autocutlass.kernels.base import KernelFamily
from autocutlass.kernels.hopper_conv import HopperConvFamily
from autocutlass.kernels.hopper_conv.config import HopperConvConfig, SplitMode, Store
from autocutlass.kernels.hopper_conv_dgrad_strided import sources
from autocutlass.kernels.hopper_conv_dgrad_strided.phases import Phase, phase_problem, phases, unsupported

if TYPE_CHECKING:
    from autocutlass.ops.conv.problem import ConvProblem

__all__ = ["HopperConvDgradStridedFamily"]


def _computed(problem: ConvProblem) -> list[Phase]:
    return [ph for ph in phases(problem) if ph.computed]


def _largest(problem: ConvProblem) -> Phase:
    """The computed phase with the longest K loop (most taps; ties to the most pixels)."""
    return max(_computed(problem), key=lambda ph: (ph.h.taps * ph.w.taps, ph.h.rows * ph.w.rows))


def scatter_config(config: HopperConvConfig) -> HopperConvConfig:
    """``config`` as this family runs it: splits summed serially."""
    return dataclasses.replace(config, split_mode=SplitMode.SERIAL)


class HopperConvDgradStridedFamily(KernelFamily[HopperConvConfig]):
    name = "hopper_conv_dgrad_strided"
    SOURCE_FILES = sources.SOURCE_FILES
    TUNED_ONLY = True

    def __init__(self, cache_dir: Path | None = None) -> None:
        self._cache_dir = cache_dir
        self._fprop = HopperConvFamily(cache_dir)

    def supports(self, problem: ConvProblem) -> str | None:
        reason = unsupported(problem)
        if reason is not None:
            return reason
        for ph in _computed(problem):
            why = self._fprop.supports(phase_problem(problem, ph))
            if why is not None:
                return f"phase ({ph.h.phi}, {ph.w.phi}) as a forward convolution of dy: {why}"
        return None

    def check(self, config: HopperConvConfig, problem: ConvProblem) -> str | None:
        return self.supports(problem) or self._config_reason(config, problem)

    def _config_reason(self, config: HopperConvConfig, problem: ConvProblem) -> str | None:
        """Why ``config`` cannot run ``problem`` (which the family supports), or None."""
        if config.split_k > 1 and config.split_mode is SplitMode.WORKSPACE:
            return "workspace split-K's reduce kernel writes a dense matrix: the splits must be summed SERIAL"
        if config.gemm_config().n_split:
            return ("tile_m=192 splits each tile's columns between the two consumers' epilogues; the scatter "
                    "store walks one epilogue per tile: use tile_m 64, 128 or 256")
        for ph in _computed(problem):
            why = self._fprop.check(config, phase_problem(problem, ph))
            if why is not None:
                return f"phase ({ph.h.phi}, {ph.w.phi}): {why}"
        return None

    def _mapped(self, configs: Sequence[HopperConvConfig], problem: ConvProblem) -> list[HopperConvConfig]:
        """``configs`` by ``scatter_config``, in order, without repeats and without those ``check`` rejects
        (``problem`` supported)."""
        unique = dict.fromkeys(scatter_config(c) for c in configs)
        return [c for c in unique if self._config_reason(c, problem) is None]

    def space(self, problem: ConvProblem) -> Sequence[HopperConvConfig]:
        """The fprop family's space for the phase with the most taps, mapped by ``scatter_config``
        and kept where every computed phase accepts it (empty when not served)."""
        if self.supports(problem) is not None:
            return []
        fprop = self._fprop.space(phase_problem(problem, _largest(problem)))
        other = {Store.TMA: Store.DIRECT, Store.DIRECT: Store.TMA}
        return self._mapped([*fprop, *(dataclasses.replace(c, store=other[c.store]) for c in fprop)], problem)

    def seeds(self, problem: ConvProblem) -> Sequence[HopperConvConfig]:
        """The fprop family's first guesses for the phase with the most taps, so mapped."""
        if self.supports(problem) is not None:
            return []
        return self._mapped(self._fprop.seeds(phase_problem(problem, _largest(problem))), problem)

    def config_to_dict(self, config: HopperConvConfig) -> dict[str, Any]:
        return config.as_dict()

    def config_from_dict(self, d: dict[str, Any]) -> HopperConvConfig:
        return HopperConvConfig.from_dict(d)

    def compile(self, config: HopperConvConfig, problem: ConvProblem) -> Any:
        """A runner in the dgrad convention ``runner(dy, w, dx)`` (``runner.StridedDgradRunner``):
        the phases' kernels compiled (one per distinct sub-filter size)."""
        from autocutlass.kernels.hopper_conv_dgrad_strided.runner import StridedDgradRunner

        reason = self.check(config, problem)
        if reason is not None:
            raise CantImplement(reason)
        return StridedDgradRunner(config, problem, self._cache_dir)

    def simplicity(self, config: HopperConvConfig) -> tuple[int, ...]:
        return self._fprop.simplicity(config)

"""The dgrad runner: the fprop family's runner on dy and the transformed filter.

Calling convention (conv dgrad): ``runner(dy, w, dx, **_)`` with torch CUDA tensors, all
channels_last: dy (N, K, P, Q), w (K, C, R, S), dx (N, C, H, W) written, never read.

The transformed filter w' (``lowering.transformed_weight``: two small copies) is kept for the
last weight seen (held weakly: it goes when the weight does), keyed by the weight object, its
storage address and its version counter
(``Tensor._version``, which every in-place update through autograd-visible ops bumps, e.g.
``torch.optim``'s steps): a dgrad called again with an unchanged weight (gradient accumulation,
several backward passes) reuses it. Writes through ``.data`` do not bump the version; a weight
updated that way between two backward passes of one step would be read stale, so the cache
holds one weight only and is bypassed while a CUDA graph is captured (the capture then records
the transform itself, so each replay transforms the weight it reads).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from autocutlass.kernels.hopper_conv.config import HopperConvConfig
from autocutlass.kernels.hopper_conv.runner import HopperConvRunner
from autocutlass.kernels.hopper_conv_dgrad.lowering import (
    fprop_problem,
    transformed_weight,
)
from autocutlass.ops.launch import NO_VIEW, derived_per_version

if TYPE_CHECKING:
    from autocutlass.ops.conv.problem import ConvProblem


class DgradRunner:
    """Conv dgrad runner for one (config, kernel class); see the module docstring."""

    def __init__(self, config: HopperConvConfig, problem: ConvProblem, cache_dir: Path | None) -> None:
        self.config = config
        self.problem = problem
        self.fprop = HopperConvRunner(config, fprop_problem(problem), cache_dir)
        self._seen = [NO_VIEW]  # (weight, weakly; w'; (data_ptr, version)): ops.launch.remember_view

    def weight(self, w: Any) -> Any:
        """w' of ``w``: the kept one while ``w`` is the same weight at the same version."""
        return derived_per_version(self._seen, w, transformed_weight)

    def poison_scratch(self) -> None:
        """Verification's hook: the forward runner's (``HopperConvRunner.poison_scratch``)."""
        self.fprop.poison_scratch()

    def __call__(self, dy: Any, w: Any, dx: Any, **_: Any) -> None:
        self.fprop(dy, self.weight(w), dx)

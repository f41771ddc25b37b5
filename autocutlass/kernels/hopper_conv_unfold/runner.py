"""The unfolded convolutions' runners: the forward and wgrad families' runners on the lowered
layer (``lowering``), with the unfolding around them.

Calling conventions (conv ops, every tensor channels_last): fprop ``runner(x, w, y, *, bias=None,
residual=None, alpha=1.0, beta=0.0)``, x (N, C, H, W), w (K, C, R, S), y (N, K, P, Q) written;
wgrad ``runner(dy, x, dw)``, dw (K, C, R, S) written. Each call unfolds x: on the GPU one launch of
the row-unfolding kernel (``unfold``, compiled when the runner is made), on the CPU (the tests' fake
inner runners) ``lowering.unfold_input``, the same map in torch ops. The forward's unfolded filter
w' is kept for the last weight seen, keyed by the weight object, its storage address and its
version counter (``ops.launch.derived_per_version``, as the dgrad family keeps its transformed
filter; its docstring says what that key misses).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from autocutlass.kernels.hopper_conv.config import HopperConvConfig
from autocutlass.kernels.hopper_conv.runner import HopperConvRunner
from autocutlass.kernels.hopper_conv_unfold.lowering import (
    fold_weight_grad,
    unfold_input,
    unfold_weight,
    unfolded_problem,
)
from autocutlass.kernels.hopper_conv_unfold.unfold import RowUnfold, get_unfold
from autocutlass.kernels.hopper_conv_wgrad.config import HopperConvWgradConfig
from autocutlass.kernels.hopper_conv_wgrad.runner import HopperConvWgradRunner
from autocutlass.ops.launch import NO_VIEW, derived_per_version

if TYPE_CHECKING:
    from autocutlass.ops.conv.problem import ConvProblem


class _Unfolding:
    """The layer's geometry along W and the unfolded channel count."""

    def __init__(self, problem: ConvProblem, cache_dir: Path | None) -> None:
        self.problem = problem
        self.lowered = unfolded_problem(problem)
        self.channels = self.lowered.c
        self._w = (problem.s, problem.stride_w, problem.pad_w, problem.dil_w)
        self._unfold = get_unfold(
            RowUnfold(problem.c, problem.s, self.channels, problem.stride_w, problem.pad_w, problem.dil_w), cache_dir
        )

    def input(self, x: Any) -> Any:
        """x' (N, C', H, Q), channels_last, of x (N, C, H, W), channels_last."""
        import torch

        n, c, h, w = x.shape
        if c != self.problem.c:
            raise ValueError(f"x {tuple(x.shape)}: this kernel unfolds layers of C={self.problem.c} input channels")
        if not x.is_cuda:
            return unfold_input(x, *self._w, self.channels)
        s, sw, pw, dw = self._w
        q = (w + 2 * pw - dw * (s - 1) - 1) // sw + 1
        out = torch.empty((n, h, q, self.channels), dtype=x.dtype, device=x.device)
        rows = x.permute(0, 2, 3, 1)
        if not rows.is_contiguous():
            rows = rows.contiguous()
        self._unfold(rows.reshape(n * h, w * c).view(torch.int16), out.view(n * h, q * self.channels).view(torch.int16))
        return out.permute(0, 3, 1, 2)


class UnfoldFpropRunner(_Unfolding):
    """The forward convolution on x' and w' (see the module docstring)."""

    def __init__(self, config: HopperConvConfig, problem: ConvProblem, cache_dir: Path | None) -> None:
        super().__init__(problem, cache_dir)
        self.config = config
        self.inner = HopperConvRunner(config, self.lowered, cache_dir)
        self._seen = [NO_VIEW]  # (weight, weakly; w'; (data_ptr, version)): ops.launch.remember_view

    def weight(self, w: Any) -> Any:
        """w' of ``w``: the kept one while ``w`` is the same weight at the same version."""
        if tuple(w.shape[2:]) != (self.problem.r, self.problem.s):
            raise ValueError(f"w {tuple(w.shape)}: this kernel unfolds {self.problem.r}x{self.problem.s} filters")
        return derived_per_version(self._seen, w, lambda wd: unfold_weight(wd, self.channels))

    def poison_scratch(self) -> None:
        """Verification's hook: the forward runner's."""
        self.inner.poison_scratch()

    def __call__(self, x: Any, w: Any, y: Any, **kw: Any) -> None:
        self.inner(self.input(x), self.weight(w), y, **kw)


class UnfoldWgradRunner(_Unfolding):
    """The wgrad kernel on dy and x', its gradient's first S*C channels copied into dw."""

    def __init__(self, config: HopperConvWgradConfig, problem: ConvProblem, cache_dir: Path | None) -> None:
        super().__init__(problem, cache_dir)
        self.config = config
        self.inner = HopperConvWgradRunner(config, self.lowered, cache_dir)

    def poison_scratch(self) -> None:
        """Verification's hook: the wgrad runner's."""
        self.inner.poison_scratch()

    def __call__(self, dy: Any, x: Any, dw: Any, **_: Any) -> None:
        import torch

        k, _c, r, s = dw.shape
        if (r, s) != (self.problem.r, self.problem.s):
            raise ValueError(f"dw {tuple(dw.shape)}: this kernel unfolds {self.problem.r}x{self.problem.s} filters")
        dwp = torch.empty((k, r, 1, self.channels), dtype=dw.dtype, device=dw.device).permute(0, 3, 1, 2)
        self.inner(dy, self.input(x), dwp)
        fold_weight_grad(dwp, dw)

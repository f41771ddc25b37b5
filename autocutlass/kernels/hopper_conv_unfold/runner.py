"""The unfolded convolutions' runners: the forward and wgrad families' runners on the lowered
layer (``lowering``), with the unfolding around them.

Calling conventions (conv ops, every tensor channels_last): fprop ``runner(x, w, y, *, bias=None,
residual=None, alpha=1.0, beta=0.0)``, x (N, C, H, W), w (K, C, R, S), y (N, K, P, Q) written;
wgrad ``runner(dy, x, dw)``, dw (K, C, R, S) written. Each call unfolds x: on the GPU one launch of
the row-unfolding kernel (``unfold``, compiled when the runner is made), on the CPU (the tests' fake
inner runners) ``lowering.unfold_input``, the same map in torch ops. The forward's unfolded filter
w' is kept for the last weight seen, keyed by the weight object, its storage address and its
version counter (``ops.launch.derived_per_version``, as the dgrad family keeps its transformed
filter; its docstring says what that key misses). N, H and W are read from the tensors at every
call (one runner serves every size of its class).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from autocutlass.kernels.hopper_conv.config import HopperConvConfig
from autocutlass.kernels.hopper_conv.runner import HopperConvRunner
from autocutlass.kernels.hopper_conv_unfold.config import UnfoldedConfig
from autocutlass.kernels.hopper_conv_unfold.lowering import (
    fold_weight_grad,
    lowered_rows,
    row_step,
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
    """The layer's geometry, T and the unfolded channel count (rounded to ``multiple``:
    ``lowering.unfolded_channels``); unfolds x."""

    def __init__(self, problem: ConvProblem, rows: int, cache_dir: Path | None, multiple: int = 0,
                 assemble: str = "gather") -> None:  # fmt: skip
        p = problem
        self.problem = p
        self.rows = rows
        self.lowered = unfolded_problem(p, rows, multiple)
        self.channels = self.lowered.c
        self.step = row_step(p, rows)
        self._taps = self.lowered.r
        self._unfold = get_unfold(
            RowUnfold(p.c, p.s, self.channels, p.stride_w, p.pad_w, p.dil_w, rows, p.pad_h, p.dil_h, self.step, assemble),
            cache_dir,
        )

    def _sizes(self, h: int, w: int) -> tuple[int, int]:
        """(H', Q) of an input of H x W."""
        p = self.problem
        q = (w + 2 * p.pad_w - p.dil_w * (p.s - 1) - 1) // p.stride_w + 1
        if self.rows == 1:
            return h, q
        out_rows = (h + 2 * p.pad_h - p.dil_h * (p.r - 1) - 1) // p.stride_h + 1
        return lowered_rows(out_rows, p.r, p.stride_h, p.dil_h, self.rows), q

    def input(self, x: Any) -> Any:
        """x' (N, C', H', Q), channels_last, of x (N, C, H, W), channels_last."""
        import torch

        p = self.problem
        n, c, h, w = x.shape
        if c != p.c:
            raise ValueError(f"x {tuple(x.shape)}: this kernel unfolds layers of C={p.c} input channels")
        height, q = self._sizes(h, w)
        if not x.is_cuda:
            return unfold_input(x, p.s, p.stride_w, p.pad_w, p.dil_w, self.channels, rows=self.rows, height=height,
                                pad_h=p.pad_h, dil_h=p.dil_h, step=self.step)  # fmt: skip
        out = torch.empty((n, height, q, self.channels), dtype=x.dtype, device=x.device)
        rows = x.permute(0, 2, 3, 1)
        if not rows.is_contiguous():
            rows = rows.contiguous()
        self._unfold(rows.reshape(n, h, w * c).view(torch.int16), out.view(n, height, q * self.channels).view(torch.int16))
        return out.permute(0, 3, 1, 2)


class UnfoldFpropRunner(_Unfolding):
    """The forward convolution on x' and w' (see the module docstring)."""

    def __init__(self, config: UnfoldedConfig[HopperConvConfig], problem: ConvProblem, cache_dir: Path | None) -> None:
        super().__init__(problem, config.rows, cache_dir, config.channels, config.assemble)
        self.config = config
        self.inner = HopperConvRunner(config.inner, self.lowered, cache_dir)
        self._seen = [NO_VIEW]  # (weight, weakly; w'; (data_ptr, version)): ops.launch.remember_view

    def weight(self, w: Any) -> Any:
        """w' of ``w``: the kept one while ``w`` is the same weight at the same version."""
        if tuple(w.shape[2:]) != (self.problem.r, self.problem.s):
            raise ValueError(f"w {tuple(w.shape)}: this kernel unfolds {self.problem.r}x{self.problem.s} filters")
        return derived_per_version(self._seen, w, lambda wd: unfold_weight(wd, self.channels, self.rows))

    def poison_scratch(self) -> None:
        """Verification's hook: the forward runner's."""
        self.inner.poison_scratch()

    def __call__(self, x: Any, w: Any, y: Any, **kw: Any) -> None:
        self.inner(self.input(x), self.weight(w), y, **kw)


class UnfoldWgradRunner(_Unfolding):
    """The wgrad kernel on dy and x', its gradient folded into dw (``lowering.fold_weight_grad``)."""

    def __init__(self, config: UnfoldedConfig[HopperConvWgradConfig], problem: ConvProblem,
                 cache_dir: Path | None) -> None:  # fmt: skip
        super().__init__(problem, config.rows, cache_dir, config.channels, config.assemble)
        self.config = config
        self.inner = HopperConvWgradRunner(config.inner, self.lowered, cache_dir)

    def poison_scratch(self) -> None:
        """Verification's hook: the wgrad runner's."""
        self.inner.poison_scratch()

    def __call__(self, dy: Any, x: Any, dw: Any, **_: Any) -> None:
        import torch

        k, _c, r, s = dw.shape
        if (r, s) != (self.problem.r, self.problem.s):
            raise ValueError(f"dw {tuple(dw.shape)}: this kernel unfolds {self.problem.r}x{self.problem.s} filters")
        dwp = torch.empty((k, self._taps, 1, self.channels), dtype=dw.dtype, device=dw.device).permute(0, 3, 1, 2)
        self.inner(dy, self.input(x), dwp)
        fold_weight_grad(dwp, dw, self.rows)

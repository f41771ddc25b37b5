"""How the search evaluates a conv2d candidate: random channels_last inputs, a NaN-poisoned
output, a float32 reference (``F.conv2d`` with TF32 off, then residual, bias and activation),
the tolerance of the coarsest dtype, and cuDNN as the baseline.

Runners follow the conv calling convention of ``ops.conv.problem.GemmLowering``:
``runner(x, w, y, *, bias=None, residual=None, alpha=1.0, beta=0.0)`` with channels_last tensors
of logical shapes (N, C, H, W), (K, C/groups, R, S) and (N, K, P, Q). The residual enters with
beta = 1, as ``autocutlass.conv2d``'s does.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from autocutlass.ops.compare import (
    activation_ref,
    coarsest_tolerance,
    compare,
    synchronize,
    torch_dtype,
)
from autocutlass.ops.conv.problem import ConvDirection, ConvProblem

_CL = torch.channels_last


@dataclass(frozen=True)
class ConvInputs:
    """x, w and the poisoned y of one problem, plus bias and residual when its epilogue reads them."""

    x: torch.Tensor
    w: torch.Tensor
    y: torch.Tensor
    bias: torch.Tensor | None
    residual: torch.Tensor | None

    @property
    def output(self) -> torch.Tensor:
        return self.y

    @property
    def beta(self) -> float:
        return 0.0 if self.residual is None else 1.0

    def poison(self) -> None:
        self.y.fill_(math.nan)

    def run(self, runner: Any) -> None:
        runner(self.x, self.w, self.y, bias=self.bias, residual=self.residual, alpha=1.0, beta=self.beta)


def _check_served(problem: ConvProblem) -> None:
    if problem.direction is not ConvDirection.FPROP:
        raise ValueError(f"no evaluation for conv2d {problem.direction.value} yet")


def make_inputs(problem: ConvProblem, *, device: torch.device | str, seed: int = 0) -> ConvInputs:
    """Standard-normal x and w (w scaled by 1/sqrt(C*R*S) so outputs stay near unit size),
    channels_last, in the problem's dtypes; y NaN."""
    _check_served(problem)
    gen = torch.Generator(device=device).manual_seed(seed)
    p = problem

    def rnd(shape: tuple[int, ...], scale: float = 1.0) -> torch.Tensor:
        return torch.randn(shape, generator=gen, dtype=torch.float32, device=device) * scale

    fan_in = (p.c // p.groups) * p.r * p.s
    x = rnd((p.n, p.c, p.h, p.w)).to(torch_dtype(p.x_dtype)).contiguous(memory_format=_CL)
    w = rnd((p.k, p.c // p.groups, p.r, p.s), 1 / math.sqrt(fan_in)).to(torch_dtype(p.w_dtype))
    w = w.contiguous(memory_format=_CL)
    out_dt = torch_dtype(p.y_dtype)
    y = torch.full((p.n, p.k, p.p, p.q), math.nan, dtype=out_dt, device=device).contiguous(memory_format=_CL)
    bias = rnd((p.k,)).to(out_dt) if p.epilogue.bias else None
    residual = rnd((p.n, p.k, p.p, p.q)).to(out_dt).contiguous(memory_format=_CL) if p.epilogue.with_c else None
    return ConvInputs(x, w, y, bias, residual)


def _conv(problem: ConvProblem, x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    p = problem
    return F.conv2d(x, w, bias, (p.stride_h, p.stride_w), (p.pad_h, p.pad_w), (p.dil_h, p.dil_w), p.groups)


def reference(problem: ConvProblem, inputs: ConvInputs) -> torch.Tensor:
    """act(conv(x, w) + residual + bias) in float32 with TF32 off."""
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
        out = _conv(problem, inputs.x.float(), inputs.w.float(), None)
    if inputs.residual is not None:
        out = out + inputs.residual.float()
    if inputs.bias is not None:
        out = out + inputs.bias.float().view(1, -1, 1, 1)
    return activation_ref(out, problem.epilogue.activation)


def tolerance(problem: ConvProblem) -> float:
    return coarsest_tolerance(problem.x_dtype, problem.w_dtype, problem.y_dtype)


def check_output(problem: ConvProblem, y: torch.Tensor, ref: torch.Tensor) -> tuple[bool, str | None]:
    return compare(y, ref, tolerance(problem), problem.y_dtype.value)


def verify(runner: Any, problem: ConvProblem, inputs: ConvInputs, ref: torch.Tensor) -> tuple[bool, str | None]:
    """Poison y, run ``runner`` once, wait, compare with ``ref``."""
    inputs.poison()
    inputs.run(runner)
    synchronize(inputs.y)
    return check_output(problem, inputs.y, ref)


def torch_baseline(problem: ConvProblem, inputs: ConvInputs) -> Any:
    """``F.conv2d`` on the same channels_last operands (cuDNN), then what a user would write for
    the residual, the bias-free epilogue and the activation."""
    x, w, bias, res, act = inputs.x, inputs.w, inputs.bias, inputs.residual, problem.epilogue.activation
    if res is None and act.value == "none":
        return lambda: _conv(problem, x, w, bias)

    def composite() -> torch.Tensor:
        y = _conv(problem, x, w, bias)
        if res is not None:
            y = y + res
        return activation_ref(y, act)

    return composite


@contextlib.contextmanager
def baseline_context(problem: ConvProblem) -> Any:
    """cuDNN in benchmark mode (the bar: its best algorithm for the layer), TF32 for TF32 problems."""
    with torch.backends.cudnn.flags(enabled=True, benchmark=True, allow_tf32=problem.x_dtype.value == "tf32"):
        yield

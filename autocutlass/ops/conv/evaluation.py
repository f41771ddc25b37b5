"""How the search evaluates a conv2d candidate: random channels_last inputs, a NaN-poisoned
output, a float32 reference (TF32 off), the tolerance of the coarsest dtype, and cuDNN as the
baseline, for each direction:

* fprop: y = act(conv(x, w) + residual + bias), reference ``F.conv2d``;
* dgrad: dx from dy and w, reference ``aten.convolution_backward`` (its input gradient);
* wgrad: dw from dy and x, reference ``aten.convolution_backward`` (its weight gradient).

Runners follow the conv calling convention (``ops.conv.problem.GemmLowering``):
``runner(a, b, out, *, bias=None, residual=None, alpha=1.0, beta=0.0)`` with channels_last
tensors: (x, w, y) for fprop, of logical shapes (N, C, H, W), (K, C/groups, R, S) and
(N, K, P, Q), whose residual enters with beta = 1 as ``autocutlass.conv2d``'s does; (dy, w, dx)
for dgrad and (dy, x, dw) for wgrad, called as ``runner(a, b, out)`` (the backward directions
have a plain epilogue). The baseline of a backward direction is what autograd runs for it:
``aten.convolution_backward`` with that one output in its mask.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from dataclasses import dataclass, field
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
from autocutlass.ops.guards import Pristine, damage, guarded_nan, poison_scratch, settle
from autocutlass.vendor import MAIN_VARIANT

_CL = torch.channels_last


@dataclass(frozen=True)
class ConvInputs:
    """The forward's x, w and y of one problem (the computed one of the three NaN-poisoned: y for
    fprop, dx = ``x`` for dgrad, dw = ``w`` for wgrad; ``y`` is dy in the backward directions), plus
    bias and residual when an fprop epilogue reads them."""

    x: torch.Tensor
    w: torch.Tensor
    y: torch.Tensor
    bias: torch.Tensor | None
    residual: torch.Tensor | None
    direction: ConvDirection = ConvDirection.FPROP
    pristine: Pristine | None = field(default=None, compare=False, repr=False)
    """Copies of the operands a candidate must leave alone (``ops.guards``), when made by
    ``make_inputs``."""

    def operands(self) -> dict[str, torch.Tensor | None]:
        """The tensors the runner reads (every one but ``output``)."""
        every = {"x": self.x, "w": self.w, "dy" if self.direction is not ConvDirection.FPROP else "y": self.y,
                 "bias": self.bias, "residual": self.residual}  # fmt: skip
        out = self.output
        return {k: t for k, t in every.items() if t is not None and t is not out}

    @property
    def output(self) -> torch.Tensor:
        if self.direction is ConvDirection.DGRAD:
            return self.x
        if self.direction is ConvDirection.WGRAD:
            return self.w
        return self.y

    @property
    def beta(self) -> float:
        return 0.0 if self.residual is None else 1.0

    def poison(self) -> None:
        self.output.fill_(math.nan)

    def run(self, runner: Any) -> None:
        if self.direction is ConvDirection.DGRAD:
            runner(self.y, self.w, self.x)
        elif self.direction is ConvDirection.WGRAD:
            runner(self.y, self.x, self.w)
        else:
            runner(self.x, self.w, self.y, bias=self.bias, residual=self.residual, alpha=1.0, beta=self.beta)


def make_inputs(problem: ConvProblem, *, device: torch.device | str, seed: int = 0) -> ConvInputs:
    """Standard-normal operands, channels_last, in the problem's dtypes, the computed tensor NaN:
    w scaled by 1/sqrt(C*R*S) (fprop outputs and dgrad's dx stay near unit size), dy of a wgrad
    by 1/sqrt(N*P*Q) (so dw, a sum over every output pixel, does too)."""
    gen = torch.Generator(device=device).manual_seed(seed)
    p = problem
    d = p.direction

    def rnd(shape: tuple[int, ...], scale: float = 1.0) -> torch.Tensor:
        return torch.randn(shape, generator=gen, dtype=torch.float32, device=device) * scale

    def nan(shape: tuple[int, ...], dt: torch.dtype) -> torch.Tensor:  # the output, in guard bands
        return guarded_nan(shape, dt, device, memory_format=_CL)

    fan_in = (p.c // p.groups) * p.r * p.s
    in_dt, out_dt = torch_dtype(p.x_dtype), torch_dtype(p.y_dtype)
    x_shape, w_shape, y_shape = (p.n, p.c, p.h, p.w), (p.k, p.c // p.groups, p.r, p.s), (p.n, p.k, p.p, p.q)
    if d is ConvDirection.DGRAD:
        x = nan(x_shape, out_dt)
    else:
        x = rnd(x_shape).to(in_dt).contiguous(memory_format=_CL)
    if d is ConvDirection.WGRAD:
        w = nan(w_shape, out_dt)
    else:
        w = rnd(w_shape, 1 / math.sqrt(fan_in)).to(torch_dtype(p.w_dtype)).contiguous(memory_format=_CL)
    if d is ConvDirection.FPROP:
        y = nan(y_shape, out_dt)
        bias = rnd((p.k,)).to(out_dt) if p.epilogue.bias else None
        residual = rnd(y_shape).to(out_dt).contiguous(memory_format=_CL) if p.epilogue.with_c else None
        inputs = ConvInputs(x, w, y, bias, residual)
    else:
        scale = 1 / math.sqrt(max(p.n * p.p * p.q, 1)) if d is ConvDirection.WGRAD else 1.0
        y = rnd(y_shape, scale).to(in_dt).contiguous(memory_format=_CL)
        inputs = ConvInputs(x, w, y, None, None, d)
    return dataclasses.replace(inputs, pristine=Pristine(inputs.operands()))


def _conv(problem: ConvProblem, x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    p = problem
    return F.conv2d(x, w, bias, (p.stride_h, p.stride_w), (p.pad_h, p.pad_w), (p.dil_h, p.dil_w), p.groups)


def _geometry(p: ConvProblem) -> tuple[list[int], list[int], list[int]]:
    return [p.stride_h, p.stride_w], [p.pad_h, p.pad_w], [p.dil_h, p.dil_w]


def convolution_backward(problem: ConvProblem, dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """The problem's gradient by ``aten.convolution_backward`` (dx for dgrad, dw for wgrad): what
    autograd runs for a convolution (the computed tensor's operand is read for its shape only)."""
    dgrad = problem.direction is ConvDirection.DGRAD
    stride, pad, dil = _geometry(problem)
    grads = torch.ops.aten.convolution_backward(dy, x, w, None, stride, pad, dil, False, [0, 0], problem.groups,
                                                [dgrad, not dgrad, False])  # fmt: skip
    return grads[0] if dgrad else grads[1]


def reference(problem: ConvProblem, inputs: ConvInputs) -> torch.Tensor:
    """fprop: act(conv(x, w) + residual + bias); dgrad / wgrad: the gradient; in float32 with TF32 off."""
    if problem.direction is not ConvDirection.FPROP:
        x = torch.zeros_like(inputs.x, dtype=torch.float32) if problem.direction is ConvDirection.DGRAD else inputs.x.float()
        w = torch.zeros_like(inputs.w, dtype=torch.float32) if problem.direction is ConvDirection.WGRAD else inputs.w.float()
        with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
            return convolution_backward(problem, inputs.y.float(), x, w)
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
    settle(inputs.pristine)
    poison_scratch(runner)
    inputs.run(runner)
    synchronize(inputs.output)
    why = damage(inputs.output, inputs.pristine)
    if why is not None:
        return False, why
    return check_output(problem, inputs.output, ref)


def torch_baseline(problem: ConvProblem, inputs: ConvInputs) -> Any:
    """fprop: ``F.conv2d`` on the same channels_last operands (cuDNN), then what a user would write
    for the residual, the bias-free epilogue and the activation; dgrad / wgrad:
    ``aten.convolution_backward`` with that one output (what autograd runs)."""
    if problem.direction is not ConvDirection.FPROP:
        dy, x, w = inputs.y, inputs.x, inputs.w
        return lambda: convolution_backward(problem, dy, x, w)
    x, w, bias, res, act = inputs.x, inputs.w, inputs.bias, inputs.residual, problem.epilogue.activation
    if res is None and act.value == "none":
        return lambda: _conv(problem, x, w, bias)

    def composite() -> torch.Tensor:
        y = _conv(problem, x, w, bias)
        if res is not None:
            y = y + res
        return activation_ref(y, act)

    return composite


HEURISTIC = "heuristic"
"""The vendor variant (``autocutlass.vendor``) of cuDNN outside benchmark mode: PyTorch's default,
which runs the plan cuDNN's heuristic picks for the layer instead of the fastest it times."""


def baseline_variants(problem: ConvProblem) -> tuple[str, ...]:
    """The variants of torch's path besides benchmark mode that the finals time and record:
    PyTorch's default mode (``HEURISTIC``). Each runs on a thread of its own that never runs
    another variant (``search.handlers``): PyTorch caches the plan cuDNN picked for a layer per
    thread, keyed without ``cudnn.benchmark``, so on a thread that ran the layer in benchmark mode
    the default mode would run benchmark mode's plan."""
    return (HEURISTIC,)


@contextlib.contextmanager
def baseline_context(problem: ConvProblem, variant: str = MAIN_VARIANT) -> Any:
    """cuDNN in benchmark mode (the bar: its best algorithm for the layer), or outside it for the
    ``HEURISTIC`` variant; TF32 for TF32 problems."""
    if variant not in (MAIN_VARIANT, HEURISTIC):
        raise ValueError(f"conv2d has no torch baseline variant {variant!r}")
    with torch.backends.cudnn.flags(enabled=True, benchmark=variant != HEURISTIC,
                                    allow_tf32=problem.x_dtype.value == "tf32"):  # fmt: skip
        yield

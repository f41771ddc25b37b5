"""Verification: random inputs, a NaN-poisoned output, and a float32 reference with a tolerance.

Device-agnostic: the same functions run on CUDA tensors in the benchmark worker and on CPU
tensors in the unit tests (with a Python "runner").

* ``make_inputs`` builds operands in the ``GemmRunner`` layout of ``autocutlass.kernels.base``:
  A is (M, K) or (L, M, K) with K contiguous (``Major.ROW``) or M contiguous (``Major.COL``, a
  transposed view); B is (K, N) or (L, K, N) with N contiguous (ROW) or K contiguous (COL, the
  ``W.t()`` of a row-major (N, K) weight). Rank 2 when L == 1, rank 3 otherwise. D is
  N-contiguous and filled with NaN, so an element the kernel never writes fails the check.
  With a SwiGLU epilogue (``Epilogue.swiglu``) B's N columns are the packed weight's gate rows
  then its up rows, and D has N/2 columns.
* ``reference`` computes act(alpha * A @ B + beta * C + bias) in float32 from the *same*
  (low-precision) operands, with TF32 disabled, so the only legitimate differences are
  accumulation order, the kernel's internal rounding (TF32 inputs) and the output rounding.
* ``check_output`` accepts D when it is finite, its relative Frobenius error is below
  ``tolerance(problem)``, and no single element is off by more than
  ``ELEMENT_RTOL_FACTOR * tol * |ref| + ELEMENT_ATOL_FACTOR * tol * rms(ref)`` (a few wrong
  elements hide in a Frobenius norm of millions).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from autocutlass.ops.compare import (
    activation_ref,
    coarsest_tolerance,
    compare,
    fp32_matmul_precision,
    synchronize,
    torch_dtype,
)
from autocutlass.ops.gemm.problem import Activation, DType, GemmProblem, Major
from autocutlass.ops.guards import Pristine, damage, guarded_nan, poison_scratch, settle, versions

if TYPE_CHECKING:
    from autocutlass.kernels.base import (
        GemmRunner,  # the runner contract, for types only
    )


def tolerance(problem: GemmProblem) -> float:
    """Relative Frobenius tolerance of ``problem``: the coarsest of its A, B and D dtypes."""
    return coarsest_tolerance(problem.a_dtype, problem.b_dtype, problem.d_dtype)


@dataclass(frozen=True)
class GemmInputs:
    """Operands of one problem in the runner layout, plus the scalars the runner is called with."""

    a: torch.Tensor
    b: torch.Tensor
    d: torch.Tensor
    c: torch.Tensor | None
    bias: torch.Tensor | None
    alpha: float
    beta: float
    scale_a: torch.Tensor | None = None
    scale_b: torch.Tensor | None = None
    """fp8 (e4m3) problems: per-tensor float32 scales of one element each (device tensors)."""
    pristine: Pristine | None = field(default=None, compare=False, repr=False)
    """Copies of the operands a candidate must leave alone (``ops.guards``), when made by
    ``make_inputs``."""
    checks: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    """What ``verify`` derives from these inputs once (the alpha check's inputs and reference)."""

    @property
    def output(self) -> torch.Tensor:
        return self.d

    def poison(self) -> None:
        """Fill D with NaN so that unwritten elements show."""
        self.d.fill_(math.nan)

    def run(self, runner: GemmRunner) -> None:
        if self.scale_a is None:
            runner(self.a, self.b, self.d, c=self.c, bias=self.bias, alpha=self.alpha, beta=self.beta)
        else:
            runner(self.a, self.b, self.d, c=self.c, bias=self.bias, alpha=self.alpha, beta=self.beta,
                   scale_a=self.scale_a, scale_b=self.scale_b)  # fmt: skip


def _random(shape: tuple[int, ...], dt: DType, gen: torch.Generator, device: torch.device | str,
            scale: float = 1.0) -> torch.Tensor:  # fmt: skip
    """Normal values of standard deviation ``scale`` from ``gen`` (on ``device``), cast to ``dt``."""
    x = torch.randn(shape, generator=gen, dtype=torch.float32, device=device)
    if dt is DType.E4M3:
        x = x.clamp(-8.0, 8.0)
    if scale != 1.0:
        x = x * scale
    return x.to(device=device, dtype=torch_dtype(dt))


def _b_scale(problem: GemmProblem) -> float:
    """B's standard deviation: 1/sqrt(K), so that the product has unit size like C and the bias
    (unscaled, a product's spread of sqrt(K) would put the activations' curved region near zero
    out of reach and let a dropped bias, a wrong activation or a wrong beta hide under the
    tolerance, which grows with the output's size: at K = 4096, relu read as silu passed). fp8
    operands stay unit-sized (scaled, they would sink into e4m3's subnormals)."""
    return 1.0 if problem.b_dtype is DType.E4M3 else 1.0 / math.sqrt(max(problem.k, 1))


def _squeeze_batch(t: torch.Tensor, problem: GemmProblem) -> torch.Tensor:
    return t[0] if problem.l == 1 else t


def make_inputs(problem: GemmProblem, *, device: torch.device | str, seed: int = 0) -> GemmInputs:
    """Random operands for ``problem`` in the runner layout (see module docstring)."""
    gen = torch.Generator(device=device).manual_seed(seed)
    m, n, k, l = problem.m, problem.n, problem.k, problem.l  # noqa: E741
    if problem.a_major is Major.ROW:
        a = _random((l, m, k), problem.a_dtype, gen, device)
    else:
        a = _random((l, k, m), problem.a_dtype, gen, device).transpose(-1, -2)
    bs = _b_scale(problem)
    if problem.b_major is Major.ROW:
        b = _random((l, k, n), problem.b_dtype, gen, device, bs)
    else:
        b = _random((l, n, k), problem.b_dtype, gen, device, bs).transpose(-1, -2)
    d = guarded_nan((l, m, problem.d_cols), torch_dtype(problem.d_dtype), device)  # NaN, in guard bands
    c = None
    if problem.epilogue.with_c:
        assert problem.c_dtype is not None
        c = _squeeze_batch(_random((l, m, n), problem.c_dtype, gen, device), problem)
    bias = _random((n,), problem.d_dtype, gen, device) if problem.epilogue.bias else None
    scale_a = scale_b = None
    if problem.a_dtype is DType.E4M3:  # per-tensor scales away from 1, so that a dropped one shows
        scale_a = torch.rand((1,), generator=gen, device=device) * 0.5 + 0.75
        scale_b = torch.rand((1,), generator=gen, device=device) * 0.5 + 0.25
    a, b = _squeeze_batch(a, problem), _squeeze_batch(b, problem)
    return GemmInputs(
        a=a,
        b=b,
        d=_squeeze_batch(d, problem),
        c=c,
        bias=bias,
        alpha=1.0,
        beta=0.5 if problem.epilogue.with_c and not problem.epilogue.c_mul else 0.0,
        scale_a=scale_a,
        scale_b=scale_b,
        pristine=Pristine({"A": a, "B": b, "C": c, "bias": bias, "scale_a": scale_a, "scale_b": scale_b}),
    )


def swiglu_ref(y: torch.Tensor) -> torch.Tensor:
    """silu(gate) * up of a (..., 2N) product whose first N columns are the gate's."""
    gate, up = y.chunk(2, dim=-1)
    return activation_ref(gate, Activation.SILU) * up


def reference(problem: GemmProblem, inputs: GemmInputs) -> torch.Tensor:
    """act(alpha * A @ B + beta * C + bias) in float32 (TF32 off), shaped like D; with
    ``epilogue.c_mul``, act(alpha * A @ B + bias) * C; with ``epilogue.swiglu``, silu(gate) * up
    of alpha * A @ B + bias."""
    with fp32_matmul_precision("ieee"):
        acc = torch.matmul(inputs.a.float(), inputs.b.float())
    out = acc * inputs.alpha if inputs.alpha != 1.0 else acc
    if inputs.scale_a is not None and inputs.scale_b is not None:
        out = out * (inputs.scale_a.float() * inputs.scale_b.float())
    mul = problem.epilogue.c_mul
    if inputs.c is not None and not mul:
        out = out + inputs.beta * inputs.c.float()
    if inputs.bias is not None:
        out = out + inputs.bias.float()
    if problem.epilogue.swiglu:
        return swiglu_ref(out)
    out = activation_ref(out, problem.epilogue.activation)
    return out * inputs.c.float() if mul and inputs.c is not None else out


def check_output(problem: GemmProblem, d: torch.Tensor, ref: torch.Tensor) -> tuple[bool, str | None]:
    """(True, None) when ``d`` matches ``ref`` within the problem's tolerance, else (False, why)."""
    return compare(d, ref, tolerance(problem), problem.d_dtype.value)


ALPHA_CHECK = 0.75
"""The alpha of verification's second launch (exact in every dtype). alpha is a run-time argument
every config of a problem takes, and the search times at alpha = 1 (torch.matmul has none): a
kernel that dropped alpha, applied it twice or on one path only (a split-K reduction, a stream-K
fix-up) would pass a check at alpha = 1 and then serve ``gemm(..., alpha=...)`` wrong."""


def verify(runner: GemmRunner, problem: GemmProblem, inputs: GemmInputs, ref: torch.Tensor) -> tuple[bool, str | None]:
    """Poison D, run ``runner`` once, wait for it, check that it wrote nothing outside D and left
    its operands alone (``ops.guards``), compare D with ``ref``; inputs at alpha = 1 then again at
    ``ALPHA_CHECK`` against their own reference (made once per inputs): (ok, reason). D holds
    the last launch's result."""
    ok, why = _launch_and_check(runner, problem, inputs, ref)
    if not ok or inputs.alpha != 1.0:
        return ok, why
    scaled, scaled_ref = _alpha_check(problem, inputs)
    ok, why = _launch_and_check(runner, problem, scaled, scaled_ref)
    return (True, None) if ok else (False, f"alpha={ALPHA_CHECK}: {why}")


def _launch_and_check(runner: GemmRunner, problem: GemmProblem, inputs: GemmInputs, ref: torch.Tensor
                      ) -> tuple[bool, str | None]:  # fmt: skip
    inputs.poison()
    settle(inputs.pristine)
    poison_scratch(runner)
    inputs.run(runner)
    synchronize(inputs.d)
    why = damage(inputs.d, inputs.pristine)
    if why is not None:
        return False, why
    return check_output(problem, inputs.d, ref)


def _alpha_check(problem: GemmProblem, inputs: GemmInputs) -> tuple[GemmInputs, torch.Tensor]:
    """``inputs`` at alpha = ``ALPHA_CHECK`` (the same tensors) and their reference, made once
    per state of the operands (made again when torch changed one in place: a caller's update)."""
    state = versions(inputs.a, inputs.b, inputs.c, inputs.bias, inputs.scale_a, inputs.scale_b)
    got = inputs.checks.get("alpha")
    if got is None or state is None or got[0] != state:
        scaled = dataclasses.replace(inputs, alpha=ALPHA_CHECK, checks={})
        got = inputs.checks["alpha"] = (state, scaled, reference(problem, scaled))
    return got[1], got[2]


def torch_baseline(problem: GemmProblem, inputs: GemmInputs) -> Any:
    """A zero-argument callable computing the problem with plain torch ops on ``inputs``.

    Plain problems: ``torch.matmul(a, b, out=d)`` (cuBLAS). With an epilogue: matmul followed
    by the torch ops a user would write. Called under TF32 precision for TF32 problems. fp8
    problems: ``torch._scaled_mm`` with the same scales and bias into a fresh output (it has no
    out=; D is left alone), then the activation; with ``use_fast_accum=True``, the kernel's own
    accumulation (WGMMA accumulates across all of K), so both sides do the same arithmetic.
    """
    a, b, d = inputs.a, inputs.b, inputs.d
    ep = problem.epilogue
    if problem.a_dtype is DType.E4M3:  # fp8: torch._scaled_mm (cuBLASLt), then the activation
        sa, sb, bias, out_dtype = inputs.scale_a, inputs.scale_b, inputs.bias, d.dtype

        def scaled() -> Any:
            y = torch._scaled_mm(a, b, sa, sb, bias=bias, out_dtype=out_dtype, use_fast_accum=True)
            return activation_ref(y, ep.activation)

        return scaled
    if ep.is_plain:
        return lambda: torch.matmul(a, b, out=d)

    def composite() -> None:
        out = torch.matmul(a, b)
        if inputs.alpha != 1.0:
            out = out * inputs.alpha
        if inputs.c is not None and not ep.c_mul:
            out = out + inputs.beta * inputs.c
        if inputs.bias is not None:
            out = out + inputs.bias
        if ep.swiglu:  # torch's unfused sequence: F.linear's (M, 2N), then silu(gate) * up
            d.copy_(swiglu_ref(out))
            return
        out = activation_ref(out, ep.activation)
        d.copy_(out * inputs.c if ep.c_mul and inputs.c is not None else out)

    return composite


def baseline_context(problem: GemmProblem) -> Any:
    """The torch settings the baseline runs under: TF32 matmuls for TF32 problems only."""
    return fp32_matmul_precision("tf32" if problem.a_dtype is DType.TF32 else "ieee")

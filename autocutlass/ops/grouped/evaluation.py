"""How the search evaluates a grouped GEMM candidate: random operands with a routing, a
NaN-poisoned output, a float32 reference (one matmul per group), the tolerance of the coarsest
dtype, and ``torch._grouped_mm`` as the baseline.

Runners follow the grouped convention of ``ops.grouped.frontend``: ``runner(x, w, offs, out, *,
bias=None)`` with x (T, K) row-major, w (E, K, N) (``Major.ROW``: N contiguous; ``Major.COL``:
the transposed view of an (E, N, K) weight, K contiguous), offs (E,) int32 cumulative row ends
on the device, out (T, N) row-major, bias (E, N) or None.

**Routings** (``offsets``): which rows go to which expert is data, not part of the problem; the
search verifies with ``balanced`` rows (T // E per expert, the first T % E experts one more), then
on ``VERIFY_ROUTINGS``, and times on ``TIMING_ROUTINGS`` (``make_search_inputs``: each timed run
launches the candidate, and torch's baseline likewise, once per routing, back to back; the
timings are per call, the sum divided by the count): one record serves every routing of its
bucket, so it is chosen for more than the balanced one. ``skewed``: expert sizes drawn from a
Zipf(1.2) law, ``torch.multinomial`` of T tokens over weights 1/i^1.2 (i = 1..E) with a
``torch.Generator`` seeded ``seed`` (0 by default): a few experts take most rows and some get
none. ``empty-even``/``one-expert``: the degenerate cases
the GPU tests use (every even expert empty; all rows to the middle expert).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import torch

from autocutlass.ops.compare import (
    activation_ref,
    coarsest_tolerance,
    compare,
    fp32_matmul_precision,
    synchronize,
    torch_dtype,
)
from autocutlass.ops.grouped.problem import ROUTINGS, GroupedGemmProblem
from autocutlass.ops.guards import Pristine, damage, guarded_nan, settle
from autocutlass.ops.types import Major

ZIPF_EXPONENT = 1.2


def expert_sizes(t: int, e: int, routing: str = "balanced", *, seed: int = 0) -> list[int]:
    """Rows per expert (E non-negative ints summing to T) of a routing; see the module docstring."""
    if e <= 0:
        return []
    if routing == "balanced":
        base, extra = divmod(t, e)
        return [base + (1 if i < extra else 0) for i in range(e)]
    if routing == "skewed":
        if t == 0:
            return [0] * e
        gen = torch.Generator().manual_seed(seed)
        weights = torch.tensor([1.0 / (i ** ZIPF_EXPONENT) for i in range(1, e + 1)], dtype=torch.float64)
        picks = torch.multinomial(weights, t, replacement=True, generator=gen)
        return [int(v) for v in torch.bincount(picks, minlength=e).tolist()]
    if routing == "empty-even":
        odd = list(range(1, e, 2)) or [0]
        sizes = [0] * e
        for j, n in enumerate(expert_sizes(t, len(odd))):
            sizes[odd[j]] = n
        return sizes
    if routing == "one-expert":
        sizes = [0] * e
        sizes[e // 2] = t
        return sizes
    raise ValueError(f"unknown routing {routing!r}; known: {', '.join(ROUTINGS)}")


def offsets(t: int, e: int, routing: str = "balanced", *, seed: int = 0, device: Any = "cpu") -> torch.Tensor:
    """The (E,) int32 cumulative row ends of a routing, on ``device``."""
    ends, total = [], 0
    for n in expert_sizes(t, e, routing, seed=seed):
        total += n
        ends.append(total)
    return torch.tensor(ends, dtype=torch.int32, device=device)


@dataclass(frozen=True)
class GroupedInputs:
    """x, w, offs and the poisoned output of one problem, plus the bias when the epilogue reads one."""

    x: torch.Tensor
    w: torch.Tensor
    offs: torch.Tensor
    out: torch.Tensor
    bias: torch.Tensor | None
    variants: dict[str, tuple[GroupedInputs, torch.Tensor]] = field(default_factory=dict, compare=False, repr=False)
    """The same operands routed otherwise, with their references (``verify``), made on first use
    and gone with these inputs."""
    pristine: Pristine | None = field(default=None, compare=False, repr=False)
    """Copies of x, w, the offsets and bias (``ops.guards``), when made by ``make_inputs``."""
    also: tuple[torch.Tensor, ...] = field(default=(), compare=False, repr=False)
    """Offsets of other routings that ``run`` launches first, into the same output (the search's
    timing routings); the output is then ``offs``' result."""

    @property
    def calls_per_run(self) -> int:
        """Launches per ``run``: what a timing of ``run`` is divided by to be per call."""
        return 1 + len(self.also)

    @property
    def output(self) -> torch.Tensor:
        return self.out

    def poison(self) -> None:
        self.out.fill_(math.nan)

    def run(self, runner: Any) -> None:
        for offs in self.also:
            runner(self.x, self.w, offs, self.out, bias=self.bias)
        runner(self.x, self.w, self.offs, self.out, bias=self.bias)


def make_inputs(problem: GroupedGemmProblem, *, device: torch.device | str, seed: int = 0,
                routing: str = "balanced") -> GroupedInputs:  # fmt: skip
    """Standard-normal x and w (w scaled by 1/sqrt(K) so outputs stay near unit size) in the
    problem's dtypes and weight major, ``offsets`` of ``routing``, a NaN output."""
    p = problem
    gen = torch.Generator(device=device).manual_seed(seed)

    def rnd(shape: tuple[int, ...], scale: float = 1.0) -> torch.Tensor:
        return torch.randn(shape, generator=gen, dtype=torch.float32, device=device) * scale

    x = rnd((p.t, p.k)).to(torch_dtype(p.x_dtype))
    scale = 1 / math.sqrt(max(p.k, 1))
    if p.w_major is Major.ROW:
        w = rnd((p.experts, p.k, p.n), scale).to(torch_dtype(p.w_dtype))
    else:
        w = rnd((p.experts, p.n, p.k), scale).to(torch_dtype(p.w_dtype)).transpose(-2, -1)
    out_dt = torch_dtype(p.out_dtype)
    out = guarded_nan((p.t, p.n), out_dt, device)  # NaN, in guard bands
    bias = rnd((p.experts, p.n)).to(out_dt) if p.epilogue.bias else None
    offs = offsets(p.t, p.experts, routing, seed=seed, device=device)
    return GroupedInputs(x, w, offs, out, bias, pristine=Pristine({"x": x, "w": w, "offs": offs, "bias": bias}))


TIMING_ROUTINGS = ("balanced", "skewed")
"""The routings the search times each candidate on (``make_search_inputs``): the record of a
bucket serves any routing, and a config that wins only on equal experts (a pair of 128-row
tiles computes up to 256 rows for an expert's last few) loses on the uneven ones real routers
produce."""


def make_search_inputs(problem: GroupedGemmProblem, *, device: torch.device | str, seed: int = 0) -> GroupedInputs:
    """``make_inputs`` routed as ``TIMING_ROUTINGS[0]``, which ``run`` launches after the other
    timing routings (one expert has only the one routing)."""
    inputs = make_inputs(problem, device=device, seed=seed, routing=TIMING_ROUTINGS[0])
    if problem.experts < 2:
        return inputs
    also = tuple(offsets(problem.t, problem.experts, r, seed=seed, device=device) for r in TIMING_ROUTINGS[1:])
    return dataclasses.replace(inputs, also=also)


def reference(problem: GroupedGemmProblem, inputs: GroupedInputs) -> torch.Tensor:
    """act(x_g @ w_g + bias[g]) per group in float32 (TF32 off); rows past offs[-1] zero. Reads
    ``offs`` on the host (the reference may synchronise)."""
    x, w, bias = inputs.x, inputs.w, inputs.bias
    out = torch.zeros((problem.t, problem.n), dtype=torch.float32, device=x.device)
    start = 0
    with fp32_matmul_precision("ieee"):
        for g, end in enumerate(int(v) for v in inputs.offs.tolist()):
            if end > start:
                y = x[start:end].float() @ w[g].float()
                if bias is not None:
                    y = y + bias[g].float()
                out[start:end] = activation_ref(y, problem.epilogue.activation)
            start = end
    return out


def tolerance(problem: GroupedGemmProblem) -> float:
    return coarsest_tolerance(problem.x_dtype, problem.w_dtype, problem.out_dtype)


def check_output(problem: GroupedGemmProblem, out: torch.Tensor, ref: torch.Tensor) -> tuple[bool, str | None]:
    return compare(out, ref, tolerance(problem), problem.out_dtype.value)


VERIFY_ROUTINGS = ("skewed", "empty-even")
"""Routings a candidate is verified on besides the prepared inputs' own (balanced): experts of
uneven sizes, and empty experts (a kernel that assumed T/E rows per expert passed the balanced
check alone)."""

def _variant(problem: GroupedGemmProblem, inputs: GroupedInputs, routing: str) -> tuple[GroupedInputs, torch.Tensor]:
    """``inputs``' operands routed as ``routing``, and their reference (made once per inputs)."""
    got = inputs.variants.get(routing)
    if got is None:
        offs = offsets(problem.t, problem.experts, routing, device=inputs.x.device)
        variant = GroupedInputs(inputs.x, inputs.w, offs, inputs.out, inputs.bias)
        got = inputs.variants[routing] = (variant, reference(problem, variant))
    return got


def verify(runner: Any, problem: GroupedGemmProblem, inputs: GroupedInputs, ref: torch.Tensor) -> tuple[bool, str | None]:
    """Poison the output, run ``runner`` once, wait, compare with ``ref``; then the same on the
    same operands routed as ``VERIFY_ROUTINGS`` (their references made once per problem)."""
    inputs.poison()
    settle(inputs.pristine)
    inputs.run(runner)
    synchronize(inputs.out)
    harm = damage(inputs.out, inputs.pristine)
    if harm is not None:
        return False, harm
    ok, why = check_output(problem, inputs.out, ref)
    if not ok or problem.experts < 2:
        return ok, why
    for routing in VERIFY_ROUTINGS:
        variant, vref = _variant(problem, inputs, routing)
        variant.poison()
        variant.run(runner)
        synchronize(variant.out)
        harm = damage(variant.out, inputs.pristine)
        if harm is not None:
            return False, f"{routing} routing: {harm}"
        ok, why = check_output(problem, variant.out, vref)
        if not ok:
            return False, f"{routing} routing: {why}"
    return True, None


def torch_baseline(problem: GroupedGemmProblem, inputs: GroupedInputs) -> Any:
    """``torch._grouped_mm`` on the same operands, then what a user would write for the bias of
    each row's expert and the activation (``ops.grouped.frontend.torch_grouped``)."""
    from autocutlass.ops.grouped.frontend import GroupedCall, torch_grouped

    x, w = inputs.x, inputs.w
    if inputs.bias is None and problem.epilogue.activation.value == "none" and problem.out_dtype == problem.x_dtype:
        calls = [partial(torch._grouped_mm, x, w, offs) for offs in (*inputs.also, inputs.offs)]
    else:
        calls = [partial(torch_grouped, GroupedCall(x, w, offs, inputs.bias, torch_dtype(problem.out_dtype),
                                                    problem.epilogue.activation))
                 for offs in (*inputs.also, inputs.offs)]  # fmt: skip
    if len(calls) == 1:
        return calls[0]

    def every_routing() -> torch.Tensor:  # as ``inputs.run`` launches ours; the result is ``offs``'
        for call in calls[:-1]:
            call()
        return calls[-1]()

    return every_routing


def loop_baseline(problem: GroupedGemmProblem, inputs: GroupedInputs) -> Any:
    """A Python loop of ``torch.matmul`` per expert into the output (the sizes read once, here,
    on the host: what a naive MoE layer does, minus its synchronisation)."""
    x, w, out = inputs.x, inputs.w, inputs.out
    spans, start = [], 0
    for g, end in enumerate(int(v) for v in inputs.offs.tolist()):
        if end > start:
            spans.append((g, start, end))
        start = end

    same = out.dtype == x.dtype

    def loop() -> None:
        for g, s, e in spans:
            if same:
                torch.matmul(x[s:e], w[g], out=out[s:e])
            else:
                out[s:e].copy_(torch.matmul(x[s:e], w[g]))

    return loop


def baseline_context(problem: GroupedGemmProblem) -> Any:
    """The torch settings the baseline runs under: full-precision fp32 matmuls (no TF32 problems)."""
    return fp32_matmul_precision("ieee")

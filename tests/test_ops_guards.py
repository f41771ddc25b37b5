"""Verification's guard bands and pristine inputs (``autocutlass.ops.guards``), on CPU tensors with
Python runners: a runner that writes one element past its output, or one before it, or that
changes an operand, fails ``verify`` of the GEMM, conv and grouped evaluations with a reason
naming it, and the changed operand is restored for the candidates after it."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

from autocutlass.ops.conv import evaluation as conv_ev
from autocutlass.ops.conv.problem import ConvDirection, ConvProblem
from autocutlass.ops.gemm import evaluation as gemm_ev
from autocutlass.ops.gemm.problem import GemmProblem
from autocutlass.ops.grouped import evaluation as grouped_ev
from autocutlass.ops.grouped.problem import GroupedGemmProblem
from autocutlass.ops.guards import GUARD_BYTES, Pristine, guard_damage, guarded_nan
from autocutlass.ops.types import Activation, DType, Epilogue, Major


def _storage(t: torch.Tensor) -> torch.Tensor:
    return torch.empty(0, dtype=t.dtype).set_(t.untyped_storage())


@pytest.mark.parametrize("memory_format", [torch.contiguous_format, torch.channels_last])
def test_guarded_nan_is_a_dense_nan_tensor_inside_nan_bands(memory_format: torch.memory_format) -> None:
    t = guarded_nan((2, 3, 4, 5), torch.bfloat16, "cpu", memory_format=memory_format)
    assert t.is_contiguous(memory_format=memory_format) and t.isnan().all()
    assert t.storage_offset() * t.element_size() == GUARD_BYTES and _storage(t).numel() == t.numel() + 2 * 2048
    assert guard_damage(t) is None
    _storage(t)[t.storage_offset() + t.numel()] = 1.0  # one past the last element
    assert guard_damage(t) == "wrote outside the output: 1 after its last element"
    assert guard_damage(t) is None  # the band was filled again
    u = guarded_nan((3, 7), torch.float32, "cpu")
    _storage(u)[0] = 0.0
    assert "before" in (guard_damage(u) or "")
    assert guard_damage(torch.full((3, 7), math.nan)) is None  # no bands: nothing to check


def test_pristine_names_and_restores_a_changed_operand() -> None:
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    keep = a.clone()
    p = Pristine({"A": a, "B": b, "C": None})
    assert p.damage() is None
    a[1, 2] = -a[1, 2]
    assert p.damage() == "changed its input(s) A" and torch.equal(a, keep) and p.damage() is None
    z = torch.zeros(3)
    pz = Pristine({"bias": z})
    z[0] = -0.0  # the same value, other bits: written
    assert pz.damage() == "changed its input(s) bias"


def test_pristine_settles_on_a_callers_in_place_update_but_not_on_a_raw_store() -> None:
    """An in-place torch op (an optimizer step, a test's edit) moves the version counter and is
    taken as the new pristine state; a store that moves no counter (a kernel's, here through
    ``.data``) is still named and undone."""
    w = torch.randn(6, 5)
    p = Pristine({"w": w})
    w.mul_(-0.5)  # the caller's update
    w[:, 2:].zero_()  # through a view: the same counter
    p.settle()
    updated = w.clone()
    assert p.damage() is None and torch.equal(w, updated)
    w.data[0, 0] = 99.0  # no counter moves: as a kernel would write
    p.settle()
    assert p.damage() == "changed its input(s) w" and torch.equal(w, updated)
    p.settle()  # the restore is not an update to keep
    w.data[1, 1] = 42.0
    assert p.damage() == "changed its input(s) w" and torch.equal(w, updated)
    with torch.inference_mode():
        v = torch.randn(3)
        q = Pristine({"v": v})
        v.add_(1.0)
        q.settle()  # no counter on an inference tensor: the copy stays, the change is named
        assert q.damage() == "changed its input(s) v"


def test_gemm_verify_follows_a_callers_update_of_c() -> None:
    """A caller that refills C between verifications (the gated GPU test's ones) is not a
    candidate's damage; the reference made after the refill is what D is checked against."""
    p = GemmProblem(m=24, n=16, k=8, b_major=Major.COL, c_dtype=DType.BF16, epilogue=Epilogue(with_c=True))
    inputs = gemm_ev.make_inputs(p, device="cpu")

    def run(a: Any, b: Any, d: Any, *, c: Any = None, alpha: float = 1.0, beta: float = 0.0, **kw: Any) -> None:
        d.copy_(alpha * (a.float() @ b.float()) + beta * c.float())

    assert gemm_ev.verify(run, p, inputs, gemm_ev.reference(p, inputs)) == (True, None)
    inputs.c.fill_(1.0)  # type: ignore[union-attr]  # the alpha check's reference is made again too
    assert gemm_ev.verify(run, p, inputs, gemm_ev.reference(p, inputs)) == (True, None)
    assert bool((inputs.c == 1.0).all())  # type: ignore[union-attr]


# ---- the evaluations ------------------------------------------------------------------------------
def _gemm_good(problem: GemmProblem) -> Any:
    def run(a: Any, b: Any, d: Any, *, c: Any = None, bias: Any = None, alpha: float = 1.0, beta: float = 0.0,
            **kw: Any) -> None:  # fmt: skip
        y = alpha * (a.float() @ b.float()) + (bias.float() if bias is not None else 0)
        d.copy_(y)

    return run


def test_gemm_verify_catches_writes_outside_d_and_changed_operands() -> None:
    p = GemmProblem(m=40, n=24, k=32, b_major=Major.COL, epilogue=Epilogue(bias=True))
    inputs = gemm_ev.make_inputs(p, device="cpu")
    ref = gemm_ev.reference(p, inputs)
    good = _gemm_good(p)
    assert gemm_ev.verify(good, p, inputs, ref) == (True, None)

    def spills(a: Any, b: Any, d: Any, **kw: Any) -> None:
        good(a, b, d, **kw)
        _storage(d)[d.storage_offset() + d.numel() + 3] = 0.5  # a row tile past M

    ok, why = gemm_ev.verify(spills, p, inputs, ref)
    assert not ok and "outside the output" in str(why)

    a_before = inputs.a.clone()

    def scribbles(a: Any, b: Any, d: Any, **kw: Any) -> None:
        good(a, b, d, **kw)
        a[0, 0] = 7.0  # a store through the wrong descriptor

    ok, why = gemm_ev.verify(scribbles, p, inputs, ref)
    assert not ok and why == "changed its input(s) A"
    assert torch.equal(inputs.a, a_before)  # restored: the next candidate sees the right A
    assert gemm_ev.verify(good, p, inputs, ref) == (True, None)


def test_conv_verify_catches_writes_before_the_output() -> None:
    p = ConvProblem(direction=ConvDirection.FPROP, n=2, c=16, h=6, w=6, k=24, r=3, s=3, pad_h=1, pad_w=1)
    inputs = conv_ev.make_inputs(p, device="cpu")
    ref = conv_ev.reference(p, inputs)
    assert inputs.y.is_contiguous(memory_format=torch.channels_last)

    def good(x: Any, w: Any, y: Any, **kw: Any) -> None:
        y.copy_(ref)

    def spills(x: Any, w: Any, y: Any, **kw: Any) -> None:
        good(x, w, y)
        _storage(y)[y.storage_offset() - 1] = 0.0

    assert conv_ev.verify(good, p, inputs, ref) == (True, None)
    ok, why = conv_ev.verify(spills, p, inputs, ref)
    assert not ok and why == "wrote outside the output: 1 before its first element"

    def scribbles(x: Any, w: Any, y: Any, **kw: Any) -> None:
        good(x, w, y)
        w.zero_()

    ok, why = conv_ev.verify(scribbles, p, inputs, ref)
    assert not ok and why == "changed its input(s) w" and inputs.w.abs().sum() > 0


def test_grouped_verify_catches_writes_past_the_output_on_every_routing() -> None:
    p = GroupedGemmProblem(experts=4, t=64, n=24, k=32, w_major=Major.COL,
                           epilogue=Epilogue(bias=True, activation=Activation.SILU))  # fmt: skip
    inputs = grouped_ev.make_inputs(p, device="cpu")
    ref = grouped_ev.reference(p, inputs)
    from autocutlass.ops.grouped.frontend import GroupedCall, torch_grouped

    def good(x: Any, w: Any, offs: Any, out: Any, *, bias: Any = None) -> None:
        out.copy_(torch_grouped(GroupedCall(x, w, offs, bias, None, p.epilogue.activation)))

    assert grouped_ev.verify(good, p, inputs, ref) == (True, None)
    balanced = inputs.offs.clone()

    def spills_when_skewed(x: Any, w: Any, offs: Any, out: Any, *, bias: Any = None) -> None:
        good(x, w, offs, out, bias=bias)
        if not torch.equal(offs, balanced):
            _storage(out)[out.storage_offset() + out.numel()] = 1.0

    ok, why = grouped_ev.verify(spills_when_skewed, p, inputs, ref)
    assert not ok and "skewed routing" in str(why) and "outside the output" in str(why)

    def moves_offsets(x: Any, w: Any, offs: Any, out: Any, *, bias: Any = None) -> None:
        good(x, w, offs, out, bias=bias)
        offs[0] += 1

    ok, why = grouped_ev.verify(moves_offsets, p, inputs, ref)
    assert not ok and why == "changed its input(s) offs" and torch.equal(inputs.offs, balanced)


def test_gemm_verify_checks_a_run_time_alpha() -> None:
    """Verification launches again at alpha = ALPHA_CHECK: a runner that drops alpha, or applies it
    only to one part of the epilogue, passes at alpha = 1 and fails there, named."""
    p = GemmProblem(m=40, n=24, k=32, b_major=Major.COL, c_dtype=DType.BF16,
                    epilogue=Epilogue(with_c=True, bias=True, activation=Activation.RELU))  # fmt: skip
    inputs = gemm_ev.make_inputs(p, device="cpu")
    ref = gemm_ev.reference(p, inputs)
    assert inputs.alpha == 1.0

    def right(a: Any, b: Any, d: Any, *, c: Any, bias: Any, alpha: float = 1.0, beta: float = 0.0, **kw: Any) -> None:
        d.copy_(torch.relu(alpha * (a.float() @ b.float()) + beta * c.float() + bias.float()))

    def drops_alpha(a: Any, b: Any, d: Any, **kw: Any) -> None:
        right(a, b, d, **{**kw, "alpha": 1.0})

    def scales_c_too(a: Any, b: Any, d: Any, *, c: Any, bias: Any, alpha: float = 1.0, beta: float = 0.0,
                     **kw: Any) -> None:  # fmt: skip
        d.copy_(torch.relu(alpha * (a.float() @ b.float() + beta * c.float()) + bias.float()))

    assert gemm_ev.verify(right, p, inputs, ref) == (True, None)
    for wrong in (drops_alpha, scales_c_too):
        ok, why = gemm_ev.verify(wrong, p, inputs, ref)
        assert not ok and str(why).startswith(f"alpha={gemm_ev.ALPHA_CHECK}:"), why
    assert gemm_ev.verify(right, p, inputs, ref) == (True, None)


# ---- poisoned scratch --------------------------------------------------------------------------
class _RacyRunner:
    """A split-K runner whose last split reads the partial sums before its writer stored them:
    it returns whatever the scratch held (the previous launch's sums) and then stores this
    launch's. Launched again on the same operands, the stale sums are the right ones."""

    def __init__(self, p: GemmProblem) -> None:
        self.scratch = torch.empty(p.m, p.n)
        self.poisoned = 0

    def poison_scratch(self) -> None:
        self.poisoned += 1
        self.scratch.fill_(math.nan)

    def __call__(self, a: Any, b: Any, d: Any, *, alpha: float = 1.0, **kw: Any) -> None:
        d.copy_(self.scratch)  # the race: read first
        self.scratch.copy_(alpha * (a.float() @ b.float()))


def test_verify_poisons_the_runners_scratch_before_each_launch() -> None:
    from autocutlass.kernels.hopper_gemm.runner import SplitKWorkspace

    p = GemmProblem(m=24, n=16, k=32, b_major=Major.COL)
    inputs = gemm_ev.make_inputs(p, device="cpu")
    ref = gemm_ev.reference(p, inputs)
    racy = _RacyRunner(p)
    racy(inputs.a, inputs.b, inputs.d, alpha=inputs.alpha)  # an earlier launch (a timing) left the sums
    ok, why = gemm_ev.verify(racy, p, inputs, ref)
    assert not ok and "384 of 384 output elements are NaN" in str(why), why
    assert racy.poisoned == 1  # the alpha check's launch is not reached
    # the workspace itself: NaN in the partials held and in those allocated after; turnstiles kept
    ws = SplitKWorkspace()
    work, count = torch.zeros(8), torch.zeros(2, dtype=torch.int32)
    ws._bufs[0] = (work, count)
    ws.poison()
    assert bool(work.isnan().all()) and not bool(count.any()) and bool(ws._new_work(4, "cpu").isnan().all())


def test_the_pointwise_conv_lowering_forwards_the_scratch_hook() -> None:
    p = ConvProblem(direction=ConvDirection.FPROP, n=2, c=16, h=4, w=4, k=32, r=1, s=1)
    lowered = p.gemm_lowering()
    assert lowered is not None
    racy = _RacyRunner(lowered.gemm)
    run = lowered.runner(racy)
    run.poison_scratch()  # type: ignore[attr-defined]
    assert racy.poisoned == 1
    assert not hasattr(lowered.runner(lambda *a, **k: None), "poison_scratch")

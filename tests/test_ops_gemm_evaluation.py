"""verify.py on CPU tensors with Python runners, and the timing statistics."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

from autocutlass.ops.gemm.problem import DType, Epilogue, Major, GemmProblem
from autocutlass.search.timing import Timing, percentile, summarize
from autocutlass.ops.gemm.evaluation import check_output, make_inputs, reference, tolerance, verify


def matmul_runner(a: Any, b: Any, d: Any, *, c: Any = None, bias: Any = None, alpha: float = 1.0, beta: float = 0.0) -> None:
    out = alpha * torch.matmul(a.float(), b.float())
    if c is not None:
        out = out + beta * c.float()
    if bias is not None:
        out = out + bias.float()
    d.copy_(out)


@pytest.mark.parametrize("dtype", [DType.BF16, DType.FP16])
@pytest.mark.parametrize("a_major,b_major", [(Major.ROW, Major.ROW), (Major.ROW, Major.COL), (Major.COL, Major.COL)])
def test_a_correct_runner_passes_in_every_layout(dtype: DType, a_major: Major, b_major: Major) -> None:
    p = GemmProblem(m=48, n=40, k=72, a_dtype=dtype, b_dtype=dtype, d_dtype=dtype, a_major=a_major, b_major=b_major)
    inp = make_inputs(p, device="cpu", seed=3)
    assert inp.a.shape == (48, 72) and inp.b.shape == (72, 40) and inp.d.shape == (48, 40)
    assert (inp.a.stride(-1) == 1) == (a_major is Major.ROW)
    assert (inp.b.stride(-1) == 1) == (b_major is Major.ROW)
    assert inp.d.stride(-1) == 1
    ok, reason = verify(matmul_runner, p, inp, reference(p, inp))
    assert ok, reason


def test_batched_inputs_are_rank_three() -> None:
    p = GemmProblem(m=16, n=24, k=32, l=3, b_major=Major.COL)
    inp = make_inputs(p, device="cpu")
    assert inp.a.shape == (3, 16, 32) and inp.b.shape == (3, 32, 24) and inp.d.shape == (3, 16, 24)
    assert inp.b.stride(-2) == 1
    assert verify(matmul_runner, p, inp, reference(p, inp))[0]


def test_epilogue_reference() -> None:
    p = GemmProblem(m=16, n=24, k=32, c_dtype=DType.BF16, epilogue=Epilogue(with_c=True, bias=True))
    inp = make_inputs(p, device="cpu")
    assert inp.c is not None and inp.bias is not None and inp.beta != 0
    assert verify(matmul_runner, p, inp, reference(p, inp))[0]

    def no_bias(a: Any, b: Any, d: Any, **kw: Any) -> None:
        matmul_runner(a, b, d, c=kw["c"], alpha=kw["alpha"], beta=kw["beta"])

    assert not verify(no_bias, p, inp, reference(p, inp))[0]


def test_unwritten_output_is_caught_by_the_nan_poison() -> None:
    p = GemmProblem(m=64, n=64, k=64)
    inp = make_inputs(p, device="cpu")
    ref = reference(p, inp)
    matmul_runner(inp.a, inp.b, inp.d)  # D correct before the check...

    def skips_last_row(a: Any, b: Any, d: Any, **kw: Any) -> None:
        d[:-1].copy_(torch.matmul(a[:-1].float(), b.float()))

    ok, reason = verify(skips_last_row, p, inp, ref)  # ...but verify poisons it first
    assert not ok and "NaN" in reason


def test_wrong_results_are_caught() -> None:
    p = GemmProblem(m=64, n=64, k=64)
    inp = make_inputs(p, device="cpu")
    ref = reference(p, inp)

    def scaled(a: Any, b: Any, d: Any, **kw: Any) -> None:
        d.copy_(1.05 * torch.matmul(a.float(), b.float()))

    ok, reason = verify(scaled, p, inp, ref)
    assert not ok and "Frobenius" in reason

    def one_bad_element(a: Any, b: Any, d: Any, **kw: Any) -> None:
        out = torch.matmul(a.float(), b.float())
        out[5, 7] += out.square().mean().sqrt()  # one rms off: invisible in the Frobenius norm
        d.copy_(out)

    big = GemmProblem(m=256, n=256, k=64)
    big_inp = make_inputs(big, device="cpu")
    ok, reason = verify(one_bad_element, big, big_inp, reference(big, big_inp))
    assert not ok and "(5, 7)" in reason

    def transposed_b(a: Any, b: Any, d: Any, **kw: Any) -> None:
        d.copy_(torch.matmul(a.float(), b.t().float()))

    assert not verify(transposed_b, p, inp, ref)[0]


def test_inf_is_caught() -> None:
    p = GemmProblem(m=8, n=8, k=8)
    ref = torch.ones(8, 8)
    d = torch.ones(8, 8, dtype=torch.bfloat16)
    d[2, 3] = math.inf
    ok, reason = check_output(p, d, ref)
    assert not ok and "(2, 3)" in reason


def test_tolerance_per_dtype() -> None:
    assert tolerance(GemmProblem(m=1, n=1, k=1)) == 1e-2
    assert tolerance(GemmProblem(m=1, n=1, k=1, a_dtype="fp16", b_dtype="fp16", d_dtype="fp16")) == 5e-3
    assert tolerance(GemmProblem(m=1, n=1, k=1, a_dtype="tf32", b_dtype="tf32", d_dtype="fp32")) == 5e-3
    assert tolerance(GemmProblem(m=1, n=1, k=1, a_dtype="fp32", b_dtype="fp32", d_dtype="fp32")) == 1e-5


def test_tf32_rounding_is_within_tolerance_but_bf16_rounding_is_not_fp32_exact() -> None:
    p = GemmProblem(m=64, n=64, k=256, a_dtype="tf32", b_dtype="tf32", d_dtype="fp32")
    inp = make_inputs(p, device="cpu")
    ref = reference(p, inp)

    def tf32_like(a: Any, b: Any, d: Any, **kw: Any) -> None:
        def rnd(x: torch.Tensor) -> torch.Tensor:  # keep 10 mantissa bits
            bits = x.contiguous().view(torch.int32)
            return ((bits + 0x1000) & ~0x1FFF).view(torch.float32)

        d.copy_(torch.matmul(rnd(a), rnd(b)) * kw.get("alpha", 1.0))

    assert verify(tf32_like, p, inp, ref)[0]
    p32 = GemmProblem(m=64, n=64, k=256, a_dtype="fp32", b_dtype="fp32", d_dtype="fp32")
    assert not verify(tf32_like, p32, inp, ref)[0]


# ---- timing statistics ---------------------------------------------------------------------------
def test_percentiles_and_summary() -> None:
    vals = [float(v) for v in range(1, 11)]
    assert percentile(vals, 0.5) == pytest.approx(5.5)
    assert percentile(vals, 0.2) == pytest.approx(2.8)
    assert percentile(vals, 0.0) == 1.0 and percentile(vals, 1.0) == 10.0
    t = summarize(reversed(vals))  # type: ignore[arg-type]
    assert t == Timing(5.5, pytest.approx(2.8), pytest.approx(8.2), 10)  # type: ignore[arg-type]
    assert Timing.from_dict(t.as_dict()) == t
    with pytest.raises(ValueError):
        summarize([1.0, math.nan])


def test_fp8_inputs_carry_scales_and_the_reference_applies_them() -> None:
    from autocutlass.ops.gemm.evaluation import make_inputs, reference

    p = GemmProblem(m=32, n=48, k=64, a_dtype=DType.E4M3, b_dtype=DType.E4M3, d_dtype=DType.BF16, b_major=Major.COL,
                epilogue=Epilogue(bias=True))  # fmt: skip
    x = make_inputs(p, device="cpu", seed=3)
    assert x.a.dtype == torch.float8_e4m3fn and x.b.dtype == torch.float8_e4m3fn and x.d.dtype == torch.bfloat16
    assert x.scale_a is not None and x.scale_b is not None and x.scale_a.shape == (1,)
    s = float(x.scale_a) * float(x.scale_b)
    assert abs(s - 1.0) > 0.05  # a runner that drops the scales fails the check
    ref = reference(p, x)
    want = (x.a.float() @ x.b.float()) * s + x.bias.float()
    assert torch.allclose(ref, want, rtol=1e-5, atol=1e-4)
    calls: list[dict] = []

    def runner(a, b, d, **kw):  # type: ignore[no-untyped-def]
        calls.append(kw)

    x.run(runner)
    assert calls[0]["scale_a"] is x.scale_a and calls[0]["scale_b"] is x.scale_b
    # non-fp8 inputs keep the plain calling convention (no scale keywords)
    y = make_inputs(GemmProblem(m=8, n=8, k=8), device="cpu")
    y.run(runner)
    assert "scale_a" not in calls[1]


@pytest.mark.parametrize("k", [64, 4096, 65536])
@pytest.mark.parametrize("dtype", [DType.BF16, DType.FP16, DType.FP32])
def test_a_wrong_epilogue_fails_verification_at_any_k(k: int, dtype: DType) -> None:
    """The operands make a product of unit size at any K (B scaled by 1/sqrt(K)), so a dropped
    bias, a wrong activation or a wrong beta is far outside the tolerance: unscaled, the product's
    spread of sqrt(K) hid them (relu read as silu passed at K = 4096)."""
    import torch.nn.functional as F

    from autocutlass.ops.compare import torch_dtype
    from autocutlass.ops.gemm import evaluation as ev
    from autocutlass.ops.gemm.problem import Activation, Epilogue

    cases = [
        (Epilogue(bias=True), lambda acc, inp: acc),
        (Epilogue(activation=Activation.RELU), lambda acc, inp: F.silu(acc)),
        (Epilogue(activation=Activation.RELU), lambda acc, inp: F.gelu(acc)),
        (Epilogue(with_c=True), lambda acc, inp: acc + inp.c.float()),
    ]
    for epi, wrong in cases:
        p = GemmProblem(m=64, n=256, k=k, a_dtype=dtype, b_dtype=dtype, d_dtype=dtype,
                        c_dtype=dtype if epi.with_c else None, epilogue=epi)  # fmt: skip
        inp = ev.make_inputs(p, device="cpu")
        ref = ev.reference(p, inp)
        assert ev.check_output(p, ref.to(torch_dtype(dtype)), ref)[0]
        acc = inp.a.float() @ inp.b.float()
        ok, why = ev.check_output(p, wrong(acc, inp).to(torch_dtype(dtype)), ref)
        assert not ok, (epi, k, dtype)


def test_a_reference_that_overflowed_verifies_nothing() -> None:
    from autocutlass.ops.compare import compare

    ref = torch.randn(8, 8)
    ref[1, 2] = float("inf")
    ok, why = compare(torch.zeros(8, 8), ref, 1e-2, "bf16")
    assert not ok and "reference" in why

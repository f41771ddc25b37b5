"""``scaled_mm`` (fp8 e4m3, per-tensor scales) on CPU: the errors it raises (only where torch._scaled_mm
rejects the call), what falls back to torch and why (every other call torch accepts), the ``GemmProblem``
a served call becomes, how the scales reach the runner (and that the other ops'
runners never see scale arguments), the memo, and torch's fallback. CPU fp8 tensors stand in for
GPU ones through the Context/``on_gpu`` seams; torch._scaled_mm runs on CPU in this torch."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from _dispatch_fakes import device_info, make_rig, calls

from autocutlass.ops import launch
from autocutlass.ops.gemm import frontend as validate
from autocutlass.ops.gemm.entries import SCALED_MM
from autocutlass.dispatch import policy
from autocutlass.errors import UnsupportedProblem
from autocutlass.ops.gemm.problem import Activation, DType, Epilogue, Major
from autocutlass.settings import Policy
from autocutlass.ops.gemm.frontend import Call, Context, KernelPlan, Op, Unsupported, plan

F8 = torch.float8_e4m3fn
E5M2 = torch.float8_e5m2
FP8_OUTPUT, FAST_ACCUM_ONLY = validate.FP8_OUTPUT, validate.FAST_ACCUM_ONLY
BF = torch.bfloat16
ACTS: dict[str | None, Callable[[torch.Tensor], torch.Tensor]] = {
    None: lambda y: y, "relu": F.relu, "gelu": F.gelu, "silu": F.silu,
    "gelu_tanh": lambda y: F.gelu(y, approximate="tanh"),
}  # fmt: skip


def f8(*shape: int) -> torch.Tensor:
    return torch.randn(*shape).to(F8)


def wt(n: int, k: int) -> torch.Tensor:
    """B as torch._scaled_mm wants it: W.t() of a row-major (N, K) weight (K contiguous)."""
    return f8(n, k).t()


def scale(v: float, shape: tuple[int, ...] = ()) -> torch.Tensor:
    return torch.full(shape, v, dtype=torch.float32)


def ctx(*, grad: bool = False, cc: tuple[int, int] = (9, 0), gpu: bool = True) -> Context:
    return Context(on_gpu=lambda t: gpu, device_info=lambda i: device_info(cc), grad=grad, tf32=True)


def scaled(a: torch.Tensor, b: torch.Tensor, **kw: Any) -> Call:
    kw.setdefault("scale_a", scale(0.5))
    kw.setdefault("scale_b", scale(2.0))
    kw.setdefault("out_dtype", BF)
    kw.setdefault("fast_accum", True)  # what the kernel serves (use_fast_accum=True)
    return Call(Op.SCALED_MM, a, b, **kw)


def kernel(call: Call, **kw: Any) -> KernelPlan:
    p = plan(call, ctx(**kw))
    assert isinstance(p, KernelPlan), p
    return p


def unsupported(call: Call, **kw: Any) -> str:
    p = plan(call, ctx(**kw))
    assert isinstance(p, Unsupported), p
    return p.reason


def reference(a, b, sa, sb, bias=None, out_dtype=BF, activation=None) -> torch.Tensor:  # noqa: ANN001
    r = (a.float() @ b.float()) * sa * sb
    if bias is not None:
        r = r + bias.float()
    return ACTS[activation](r).to(out_dtype)


def close(x: torch.Tensor, ref: torch.Tensor) -> None:
    assert x.shape == ref.shape and x.dtype == ref.dtype
    torch.testing.assert_close(x.float(), ref.float(), atol=6e-2, rtol=2e-2)


@contextlib.contextmanager
def no_host_reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fail on any Python-level read of a tensor's value (what a scale's ``.item()`` would be)."""
    with monkeypatch.context() as m:
        for name in ("item", "tolist", "__float__", "__bool__"):
            m.setattr(torch.Tensor, name, lambda *args, _n=name: pytest.fail(f"Tensor.{_n} called (a host read)"))
        yield


# ---- the GemmProblem of a served call ------------------------------------------------------------
@pytest.mark.parametrize(
    ("out_dtype", "d_dtype"), [(BF, DType.BF16), (torch.float16, DType.FP16), (torch.float32, DType.FP32)]
)
def test_served_problem_dtypes_and_layouts(out_dtype: torch.dtype, d_dtype: DType) -> None:
    p = kernel(scaled(f8(32, 64), wt(48, 64), out_dtype=out_dtype))
    pr = p.problem
    assert (pr.m, pr.n, pr.k, pr.l) == (32, 48, 64, 1)
    assert (pr.a_dtype, pr.b_dtype, pr.d_dtype, pr.c_dtype) == (DType.E4M3, DType.E4M3, d_dtype, None)
    assert (pr.a_major, pr.b_major) == (Major.ROW, Major.COL)
    assert (pr.align_a, pr.align_b, pr.align_d) == (16, 16, 16)
    assert pr.epilogue == Epilogue()
    assert p.a is None and p.b is None and p.d is None  # the user's tensors, as they are
    assert (p.out_shape, p.out_dtype) == ((32, 48), out_dtype)


@pytest.mark.parametrize("act", list(Activation))
def test_served_problem_epilogue(act: Activation) -> None:
    pr = kernel(scaled(f8(32, 64), wt(48, 64), bias=torch.randn(48).to(BF), activation=act)).problem
    assert pr.epilogue == Epilogue(with_c=False, bias=True, activation=act)


def test_decode_m1_is_served_with_an_output_view() -> None:
    p = kernel(scaled(f8(1, 64), wt(48, 64)))
    assert p.problem.m == 1 and p.problem.align_a == 16 and p.d is not None and p.d.shape == (1, 48)


# ---- errors ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kw", "exc", "words"),
    [
        ({"a": [[1.0]]}, TypeError, "a must be a torch.Tensor, got list"),
        ({"b": None}, TypeError, "b must be a torch.Tensor, got NoneType"),
        ({"scale_a": 1.0}, TypeError, "scale_a must be a torch.Tensor, got float"),
        ({"scale_b": None}, TypeError, "scale_b must be a torch.Tensor"),
        ({"bias": [0.0]}, TypeError, "bias must be a torch.Tensor"),
        ({"out": 3}, TypeError, "out must be a torch.Tensor"),
        ({"scale_result": 2.0}, TypeError, "scale_result must be a torch.Tensor, got float"),
        ({"out_dtype": "bf16"}, TypeError, "out_dtype must be a torch.dtype or None, got str"),
        ({"fast_accum": 1}, TypeError, "use_fast_accum must be a bool, got int"),
        ({"fast_accum": None}, TypeError, "use_fast_accum must be a bool, got NoneType"),
        ({"a": torch.randn(32, 64).to(BF)}, RuntimeError, r"a and b must both be float8.*got torch.bfloat16 and torch.float8_e4m3fn"),
        ({"b": wt(48, 64).view(torch.int8)}, RuntimeError, r"both be float8.*got torch.float8_e4m3fn and torch.int8"),
        ({"b": wt(48, 63)}, RuntimeError, r"a \(32, 64\) and b \(63, 48\) are not compatible"),
        ({"bias": torch.randn(47).to(BF)}, RuntimeError, r"bias has shape \(47,\) \(47 elements\), expected \(48,\)"),
        ({"bias": torch.randn(32, 48).to(BF)}, RuntimeError, r"bias has shape \(32, 48\) \(1536 elements\)"),
        ({"out": torch.empty(32, 47, dtype=BF)}, RuntimeError, r"out= has shape \(32, 47\), expected \(32, 48\)"),
        ({"out": torch.empty(32, 48, dtype=torch.float16)}, RuntimeError, "out= has dtype torch.float16"),
        ({"out": torch.empty(32, 48, dtype=BF, device="meta")}, RuntimeError, "out= is on meta"),
        ({"scale_b": torch.ones((), device="meta")}, RuntimeError, "one device.*scale_b on meta"),
        ({"bias": torch.empty(48, dtype=BF, device="meta")}, RuntimeError, "one device.*bias on meta"),
        ({"scale_result": torch.ones((), device="meta")}, RuntimeError, "one device.*scale_result on meta"),
        ({"out_dtype": None, "out": torch.empty(32, 48, dtype=BF)}, RuntimeError,
         "out= has dtype torch.bfloat16, expected torch.float8_e4m3fn"),  # None: torch's default, fp8 output
    ],
)  # fmt: skip
def test_errors_name_the_problem(kw: dict[str, Any], exc: type[Exception], words: str) -> None:
    args: dict[str, Any] = {"a": f8(32, 64), "b": wt(48, 64), **kw}
    call = scaled(args.pop("a"), args.pop("b"), **args)
    with pytest.raises(exc, match=words):
        plan(call, ctx())
    with pytest.raises(exc, match=words):  # the same on a CPU call: errors come before fallbacks
        plan(call, ctx(gpu=False))


def test_dispatcher_raises_before_memoising() -> None:
    rig = make_rig(Policy.HEURISTIC)
    with pytest.raises(TypeError, match="scale_a must be a torch.Tensor"):
        calls(rig.dispatcher).scaled_mm(f8(32, 64), wt(48, 64), 0.5, scale(1.0), use_fast_accum=True)
    with pytest.raises(TypeError, match="scale_result must be a torch.Tensor"):
        calls(rig.dispatcher).scaled_mm(f8(32, 64), wt(48, 64), scale(1.0), scale(1.0), scale_result=1.0, use_fast_accum=True)
    with pytest.raises(RuntimeError, match="got torch.bfloat16 and torch.float8_e4m3fn"):
        calls(rig.dispatcher).scaled_mm(f8(32, 64).to(BF), wt(48, 64), scale(1.0), scale(1.0), out_dtype=BF, use_fast_accum=True)
    with pytest.raises(TypeError, match="use_fast_accum must be a bool, got int"):  # 1 == True: not True's key
        calls(rig.dispatcher).scaled_mm(f8(32, 64), wt(48, 64), scale(1.0), scale(1.0), out_dtype=BF, use_fast_accum=1)
    with pytest.raises(TypeError, match="use_fast_accum must be a bool, got list"):  # unhashable: caught at the memo
        calls(rig.dispatcher).scaled_mm(f8(32, 64), wt(48, 64), scale(1.0), scale(1.0), out_dtype=BF, use_fast_accum=[True])
    with pytest.raises(ValueError, match="activation='tanh'"):
        calls(rig.dispatcher).scaled_mm(f8(32, 64), wt(48, 64), scale(1.0), scale(1.0), activation="tanh", use_fast_accum=True)
    with pytest.raises(TypeError, match="out_dtype must be a torch.dtype or None, got list"):  # unhashable
        calls(rig.dispatcher).scaled_mm(f8(32, 64), wt(48, 64), scale(1.0), scale(1.0), out_dtype=[BF], use_fast_accum=True)
    with pytest.raises(ValueError, match=r"activation=\['relu'\]"):
        calls(rig.dispatcher).scaled_mm(f8(32, 64), wt(48, 64), scale(1.0), scale(1.0), activation=["relu"], use_fast_accum=True)
    with policy("off"), pytest.raises(RuntimeError, match=r"\(32, 64\).*\(63, 48\)"):
        calls(rig.dispatcher).scaled_mm(f8(32, 64), wt(48, 63), scale(1.0), scale(1.0), use_fast_accum=True)
    assert rig.dispatcher._memo == {} and rig.family.compiled == []


# ---- unsupported: torch serves ---------------------------------------------------------------
def _misaligned_a() -> torch.Tensor:
    buf = f8(32 * 64 + 16)
    return buf[8 : 8 + 32 * 64].view(32, 64)  # base pointer 8 bytes past 16


@pytest.mark.parametrize(
    ("call", "kw", "words"),
    [
        (lambda: scaled(f8(32, 64), wt(48, 64)), {"gpu": False}, "cpu"),
        (lambda: scaled(f8(32, 64), wt(48, 64)), {"cc": (8, 9)}, "cc 8.9"),
        (lambda: scaled(f8(32, 64), wt(48, 64)), {"grad": True}, "requires grad"),
        (lambda: scaled(f8(64, 32).t(), wt(48, 64)), {}, "fp8 WGMMA reads only K-major operands: A row-major (M, K)"),
        (lambda: scaled(f8(32, 64), f8(64, 48)), {}, "B = W.t() of an (N, K) weight"),
        (lambda: scaled(f8(2, 32, 64), wt(48, 64)), {}, "3-D"),
        (lambda: scaled(f8(0, 64), wt(48, 64)), {}, "empty"),
        (lambda: scaled(f8(32, 0), wt(48, 0)), {}, "K = 0"),
        (lambda: scaled(f8(32, 40), wt(48, 40)), {}, "a is only 8-byte aligned"),
        (lambda: scaled(_misaligned_a(), wt(48, 64)), {}, "a is only 8-byte aligned"),
        (lambda: scaled(f8(32, 64), wt(44, 64)), {}, "the output is only 8-byte aligned"),
        (lambda: scaled(f8(32, 64), wt(48, 64), bias=torch.randn(49).to(BF)[1:]), {}, "bias is not 16-byte aligned"),
        (lambda: scaled(f8(32, 64), wt(48, 64), bias=torch.randn(96).to(BF)[::2]), {}, "contiguous (N,) vector"),
        (lambda: scaled(f8(32, 64), wt(48, 64), out=torch.empty(48, 32, dtype=BF).t()), {}, "out= is not contiguous"),
        (lambda: scaled(f8(64, 64)[::2, ::2], wt(48, 32)), {}, "no unit stride"),
        # valid torch._scaled_mm calls outside the served recipe: torch serves them (or raises its own error)
        (lambda: scaled(f8(32, 64).to(E5M2), wt(48, 64).to(E5M2)), {}, "only float8_e4m3fn x float8_e4m3fn is served"),
        (lambda: scaled(f8(32, 64), wt(48, 64).to(E5M2)), {}, "only float8_e4m3fn x float8_e4m3fn is served"),
        (lambda: scaled(f8(32, 64).to(E5M2), wt(48, 64)), {}, "(got torch.float8_e5m2 x torch.float8_e4m3fn)"),
        (lambda: scaled(f8(32, 64).to(torch.float8_e4m3fnuz), wt(48, 64)), {}, "only float8_e4m3fn x float8_e4m3fn"),
        (lambda: scaled(f8(32, 64).view(torch.float4_e2m1fn_x2), wt(48, 64).view(torch.float4_e2m1fn_x2)), {},
         "only float8_e4m3fn x float8_e4m3fn"),  # NVFP4/MXFP4: torch serves them on GPUs that have them
        (lambda: scaled(f8(32, 64), wt(48, 64), out_dtype=None), {}, FP8_OUTPUT),
        (lambda: scaled(f8(32, 64), wt(48, 64), out_dtype=F8), {}, FP8_OUTPUT),
        (lambda: scaled(f8(32, 64), wt(48, 64), out_dtype=E5M2), {}, FP8_OUTPUT),
        (lambda: scaled(f8(32, 64), wt(48, 64), out_dtype=torch.int32), {}, "out_dtype=torch.int32 is not served"),
        (lambda: scaled(f8(32, 64), wt(48, 64), out_dtype=torch.float64), {}, "out_dtype=torch.float64 is not served"),
        (lambda: scaled(f8(32, 64), wt(48, 64), scale_result=scale(2.0)), {}, "scale_result"),
        (lambda: scaled(f8(32, 64), wt(48, 64), scale_a=scale(1.0, (32, 1)), scale_b=scale(1.0, (1, 48))), {},
         "per-tensor scales only; row-wise scaling is served by torch (scale_a has shape (32, 1))"),
        (lambda: scaled(f8(32, 64), wt(48, 64), scale_b=scale(1.0, (1, 48))), {}, "(scale_b has shape (1, 48))"),
        (lambda: scaled(f8(32, 64), wt(48, 64), scale_b=scale(1.0, (2,))), {}, "per-tensor scales only"),
        (lambda: scaled(f8(32, 64), wt(48, 64), scale_a=torch.ones((), dtype=torch.float64)), {},
         "scale_a has dtype torch.float64"),
        (lambda: scaled(f8(32, 64), wt(48, 64), scale_b=torch.ones(1, 48, dtype=BF)), {}, "scale_b has dtype torch.bfloat16"),
        (lambda: scaled(f8(32, 64), wt(48, 64), bias=torch.randn(48)), {},
         "bias has dtype torch.float32, out_dtype is torch.bfloat16"),
        (lambda: scaled(f8(32, 64), wt(48, 64), bias=torch.randn(48).half(), out_dtype=torch.float32), {},
         "bias has dtype torch.float16, out_dtype is torch.float32"),
        (lambda: scaled(f8(32, 64), wt(48, 64), bias=torch.randn(1, 48).to(BF)), {}, "is not a contiguous (N,) vector"),
        (lambda: scaled(f8(32, 64), wt(48, 64), fast_accum=False), {}, FAST_ACCUM_ONLY),
    ],
)  # fmt: skip
def test_unsupported_reasons(call, kw: dict[str, Any], words: str) -> None:  # noqa: ANN001
    assert words in unsupported(call(), **kw)


def test_served_recipe_is_exactly_one_point() -> None:
    """The base call of the table above is served: each row's one change is what falls back."""
    base = kernel(scaled(f8(32, 64), wt(48, 64), bias=torch.randn(48).to(BF)))
    assert base.problem.a_dtype is DType.E4M3 and base.problem.epilogue.bias


def test_b_with_a_padded_leading_dimension_is_served_when_16_byte_aligned() -> None:
    b = f8(48, 80)[:, :64].t()  # K contiguous, leading dimension 80 bytes
    assert kernel(scaled(f8(32, 64), b)).problem.align_b == 16
    b = f8(48, 72)[:, :64].t()  # 72 bytes: 8-byte aligned
    assert "b is only 8-byte aligned" in unsupported(scaled(f8(32, 64), b))


@pytest.mark.parametrize("op", [Op.MATMUL, Op.GEMM, Op.LINEAR])
def test_fp8_through_the_other_ops_points_to_scaled_mm(op: Op) -> None:
    b = f8(48, 64) if op is Op.LINEAR else wt(48, 64)
    reason = unsupported(Call(op, f8(32, 64), b))
    assert "served only through autocutlass.scaled_mm" in reason
    e5m2 = torch.float8_e5m2
    assert "scaled_mm" in unsupported(Call(Op.MATMUL, f8(32, 64).to(e5m2), wt(48, 64).to(e5m2)))


# ---- dispatch: how the runner is called --------------------------------------------------------
@pytest.fixture
def rig():  # noqa: ANN201
    return make_rig(Policy.HEURISTIC)


@pytest.mark.parametrize("out_dtype", [BF, torch.float16, torch.float32])
@pytest.mark.parametrize("act", [None, "relu", "gelu", "gelu_tanh", "silu"])
@pytest.mark.parametrize("with_bias", [False, True])
def test_served_call_matches_the_reference(
    rig, out_dtype: torch.dtype, act: str | None, with_bias: bool  # noqa: ANN001
) -> None:
    a, b = f8(40, 64), wt(96, 64)
    sa, sb = scale(0.75), scale(0.25)
    bias = torch.randn(96).to(out_dtype) if with_bias else None
    y = calls(rig.dispatcher).scaled_mm(a, b, sa, sb, bias, out_dtype, None, act, use_fast_accum=True)
    close(y, reference(a, b, sa, sb, bias, out_dtype, act))
    (launch,) = rig.family.launches
    assert launch.problem.d_dtype is validate._OUTPUT_DTYPES[out_dtype]
    assert launch.a.data_ptr() == a.data_ptr() and launch.b.data_ptr() == b.data_ptr()  # views, no copies
    assert launch.d.dtype is out_dtype and (launch.bias is bias) and launch.c is None
    assert rig.dispatcher.stats().fallbacks == 0


@pytest.mark.parametrize("shape", [(), (1,), (1, 1)])
def test_runner_gets_the_users_scales_as_1_element_views(rig, shape: tuple[int, ...], monkeypatch) -> None:  # noqa: ANN001
    """Views of the user's tensors, not copies, and never read on the host (miss and hit)."""
    a, b = f8(40, 64), wt(96, 64)
    sa, sb = scale(0.5, shape), scale(4.0, shape)
    with no_host_reads(monkeypatch):
        y = calls(rig.dispatcher).scaled_mm(a, b, sa, sb, out_dtype=BF, use_fast_accum=True)  # miss
        y2 = calls(rig.dispatcher).scaled_mm(a, b, sa, sb, out_dtype=BF, use_fast_accum=True)  # hit
    close(y, reference(a, b, sa, sb))
    assert torch.equal(y, y2)
    for launch in rig.family.launches:
        assert launch.scale_a is not None and launch.scale_b is not None
        assert launch.scale_a.shape == (1,) and launch.scale_a.data_ptr() == sa.data_ptr()
        assert launch.scale_b.shape == (1,) and launch.scale_b.data_ptr() == sb.data_ptr()
        if shape == (1,):
            assert launch.scale_a is sa and launch.scale_b is sb  # already (1,): passed as given


def test_other_ops_runners_get_no_scale_arguments(rig) -> None:  # noqa: ANN001
    x, w = torch.randn(8, 64).to(BF), torch.randn(96, 64).to(BF)
    calls(rig.dispatcher).linear(x, w)
    calls(rig.dispatcher).matmul(x, w.t())
    calls(rig.dispatcher).gemm(x, w.t(), torch.randn(8, 96).to(BF), 1.0, 1.0)
    calls(rig.dispatcher).scaled_mm(f8(8, 64), wt(96, 64), scale(1.0), scale(1.0), out_dtype=BF, use_fast_accum=True)
    kinds = [(launch.problem.a_dtype, launch.scale_a is None) for launch in rig.family.launches]
    assert kinds == [(DType.BF16, True)] * 3 + [(DType.E4M3, False)]  # and the fake runner asserted the kwargs


def test_memo_hit_on_an_identical_call_reads_the_new_scales(rig, monkeypatch) -> None:  # noqa: ANN001
    d = rig.dispatcher
    a, b, bias = f8(40, 64), wt(96, 64), torch.randn(96).to(BF)
    y = calls(d).scaled_mm(a, b, scale(1.0), scale(1.0), bias, BF, None, "silu", use_fast_accum=True)
    close(y, reference(a, b, 1.0, 1.0, bias, BF, "silu"))
    monkeypatch.setattr(validate, "plan", lambda *x: pytest.fail("planned on a hit"))
    a2, b2, bias2 = f8(40, 64), wt(96, 64), torch.randn(96).to(BF)  # new tensors, same metadata
    sa, sb = scale(0.5), scale(3.0)  # scale values are not in the key: read by the kernel per call
    close(calls(d).scaled_mm(a2, b2, sa, sb, bias2, BF, None, "silu", use_fast_accum=True), reference(a2, b2, sa, sb, bias2, BF, "silu"))
    s = d.stats()
    assert (s.memo_misses, s.memo_hits, s.compiles) == (1, 1, 1)
    assert len(rig.family.launches) == 2 and rig.family.launches[1].scale_a.data_ptr() == sa.data_ptr()


def test_memo_key_separates_out_dtype_bias_activation_and_scale_metadata(rig) -> None:  # noqa: ANN001
    d = rig.dispatcher
    a, b = f8(40, 64), wt(96, 64)
    one = scale(1.0)
    calls(d).scaled_mm(a, b, one, one, out_dtype=BF, use_fast_accum=True)
    calls(d).scaled_mm(a, b, one, one, out_dtype=torch.float16, use_fast_accum=True)
    calls(d).scaled_mm(a, b, one, one, torch.randn(96).to(BF), BF, use_fast_accum=True)
    calls(d).scaled_mm(a, b, one, one, out_dtype=BF, activation="relu", use_fast_accum=True)
    calls(d).scaled_mm(a, b, scale(1.0, (1,)), one, out_dtype=BF, use_fast_accum=True)
    calls(d).scaled_mm(a, b, one, one.reshape(1, 1), out_dtype=BF, use_fast_accum=True)
    assert (d.stats().fallbacks, len(rig.family.launches)) == (0, 6)
    # keys of calls torch serves: validated, then memoised as fallbacks
    calls(d).scaled_mm(a, b, one, one, use_fast_accum=True)  # out_dtype None: fp8 output
    calls(d).scaled_mm(a, b, one, one, out_dtype=BF)  # use_fast_accum=False
    calls(d).scaled_mm(a, b, one, one, out_dtype=BF, use_fast_accum=True, scale_result=scale(2.0))
    calls(d).scaled_mm(a, b, scale(1.0, (40, 1)), scale(1.0, (1, 96)), out_dtype=BF, use_fast_accum=True)  # row-wise
    got = _as_torch_does(  # torch's own error (most CPUs: "Invalid scaling configuration"), through the fallback
        lambda: torch._scaled_mm(a, b, one.double(), one, out_dtype=BF, use_fast_accum=True),
        lambda: calls(d).scaled_mm(a, b, one.double(), one, out_dtype=BF, use_fast_accum=True))
    assert got is None or torch.equal(*got)
    s = d.stats()
    assert (s.memo_misses, s.memo_hits, s.fallbacks) == (11, 0, 5)
    calls(d).scaled_mm(f8(40, 64), wt(96, 64), scale(2.0), scale(3.0), out_dtype=BF, use_fast_accum=True)  # values differ
    calls(d).scaled_mm(a, b, one, one, out_dtype=BF, use_fast_accum=True, scale_result=scale(5.0))  # ditto: scale_result
    assert (d.stats().memo_hits, d.stats().fallbacks, len(rig.family.launches)) == (2, 6, 7)


def test_runner_is_shared_across_m(rig) -> None:  # noqa: ANN001
    for m in (1, 16, 300):
        calls(rig.dispatcher).scaled_mm(f8(m, 64), wt(96, 64), scale(1.0), scale(1.0), out_dtype=BF, use_fast_accum=True)
    assert rig.dispatcher.stats().compiles == 1 and len(rig.family.launches) == 3


def test_out_is_written_in_place(rig) -> None:  # noqa: ANN001
    a, b, sa, sb = f8(40, 64), wt(96, 64), scale(0.5), scale(2.0)
    out = torch.full((40, 96), float("nan"), dtype=torch.float32)
    assert calls(rig.dispatcher).scaled_mm(a, b, sa, sb, None, torch.float32, out, use_fast_accum=True) is out
    close(out, reference(a, b, sa, sb, out_dtype=torch.float32))
    assert rig.family.launches[-1].d.data_ptr() == out.data_ptr()


@pytest.mark.parametrize("alias", ["a", "bias", "scale_a"])
def test_out_aliasing_an_input_is_still_right(rig, alias: str) -> None:  # noqa: ANN001
    m, n, k = 32, 32, 64
    out = torch.zeros(m, n, dtype=torch.float32)  # 4096 bytes
    a, b, bias, sa, sb = f8(m, k), wt(n, k), torch.randn(n), scale(0.5), scale(2.0)
    if alias == "a":
        a = out.view(F8)[:, :k]  # (32, 64) of the output's bytes, leading dimension 128
        a.copy_(f8(m, k))
    elif alias == "bias":
        bias = out[0]
        bias.copy_(torch.randn(n))
    else:
        sa = out[0, 0]
        sa.fill_(0.5)
    ref = reference(a.clone(), b, sa.clone(), sb, bias.clone(), torch.float32)
    assert calls(rig.dispatcher).scaled_mm(a, b, sa, sb, bias, torch.float32, out, use_fast_accum=True) is out
    close(out, ref)
    # A served call (compiled, no fallback) whose entry saw the overlap: torch computed it into
    # fresh memory, then copied; the runner never ran.
    assert len(rig.family.compiled) == 1 and rig.dispatcher.stats().fallbacks == 0
    assert rig.family.launches == []


# ---- torch's fallback ----------------------------------------------------------------------------
def test_unsupported_layout_runs_torch_scaled_mm(rig, caplog) -> None:  # noqa: ANN001
    a, w = f8(40, 64), f8(96, 64)
    b = w.t().contiguous()  # row-major B: torch._scaled_mm (on CPU) takes it, fp8 WGMMA does not
    sa, sb, bias = scale(0.5), scale(2.0), torch.randn(96).to(BF)
    with caplog.at_level("WARNING", logger="autocutlass"):
        y = calls(rig.dispatcher).scaled_mm(a, b, sa, sb, bias, BF, None, "gelu", use_fast_accum=True)
        calls(rig.dispatcher).scaled_mm(a, b, sa, sb, bias, BF, None, "gelu", use_fast_accum=True)
    assert torch.equal(y, F.gelu(torch._scaled_mm(a, b, sa, sb, bias=bias, out_dtype=BF)))
    assert rig.family.launches == [] and rig.dispatcher.stats().fallbacks == 2
    logged = [r.getMessage() for r in caplog.records]
    assert len(logged) == 1 and "autocutlass.scaled_mm: served by torch: fp8 WGMMA reads only K-major" in logged[0]


def test_fallback_copies_into_out(rig) -> None:  # noqa: ANN001
    a, b, sa, sb = f8(40, 64), f8(64, 96), scale(0.5), scale(2.0)
    out = torch.empty(40, 96, dtype=torch.float16)
    assert calls(rig.dispatcher).scaled_mm(a, b, sa, sb, None, torch.float16, out, "relu", use_fast_accum=True) is out
    assert torch.equal(out, F.relu(torch._scaled_mm(a, b, sa, sb, out_dtype=torch.float16)))


def test_torch_call_without_monkeypatching_matches_the_reference() -> None:
    a, b, sa, sb, bias = f8(40, 64), wt(96, 64), scale(0.5), scale(2.0), torch.randn(96)
    r = validate.torch_call(scaled(a, b, scale_a=sa, scale_b=sb, bias=bias, out_dtype=torch.float32,
                                   activation=Activation.SILU))  # fmt: skip
    close(r, reference(a, b, sa, sb, bias, torch.float32, "silu"))


def test_torch_fallback_is_what_is_called(rig, monkeypatch) -> None:  # noqa: ANN001
    """The fallback passes the scales and arguments to torch._scaled_mm unchanged (as given)."""
    seen: list[tuple[Any, ...]] = []
    real = torch._scaled_mm

    def spy(a, b, scale_a, scale_b, **kw):  # noqa: ANN001, ANN003, ANN202
        seen.append((a, b, scale_a, scale_b, kw))
        return real(a, b, scale_a, scale_b, **kw)

    monkeypatch.setattr(torch, "_scaled_mm", spy)
    a, b, sa, sb = f8(40, 64), f8(64, 96), scale(0.5), scale(2.0, (1,))
    calls(rig.dispatcher).scaled_mm(a, b, sa, sb, out_dtype=torch.float16, use_fast_accum=True)
    ((ga, gb, gsa, gsb, kw),) = seen
    assert ga is a and gb is b and gsa is sa and gsb is sb and kw == {"bias": None, "scale_result": None, "out_dtype": torch.float16, "use_fast_accum": True}


def test_3d_operands_fall_back_and_torch_raises(rig) -> None:  # noqa: ANN001
    with pytest.raises(RuntimeError, match="matrix"):
        calls(rig.dispatcher).scaled_mm(f8(2, 40, 64), wt(96, 64), scale(1.0), scale(1.0), out_dtype=BF, use_fast_accum=True)
    assert rig.family.launches == []


def test_strict_raises_the_reason() -> None:
    rig = make_rig(Policy.HEURISTIC, strict=True)
    with pytest.raises(UnsupportedProblem, match="autocutlass.scaled_mm: fp8 WGMMA reads only K-major operands"):
        calls(rig.dispatcher).scaled_mm(f8(40, 64), f8(64, 96), scale(1.0), scale(1.0), out_dtype=BF, use_fast_accum=True)


def test_grad_runs_in_torch(rig) -> None:  # noqa: ANN001
    a, b = f8(40, 64), wt(96, 64)
    sa = scale(1.0).requires_grad_()
    calls(rig.dispatcher).scaled_mm(a, b, sa, scale(1.0), out_dtype=BF, use_fast_accum=True)
    assert rig.family.launches == [] and rig.dispatcher.stats().fallbacks == 1
    with torch.no_grad():
        calls(rig.dispatcher).scaled_mm(a, b, sa, scale(1.0), out_dtype=BF, use_fast_accum=True)
    assert len(rig.family.launches) == 1


def test_off_policy_runs_torch_and_is_not_a_fallback() -> None:
    rig = make_rig(Policy.OFF)
    a, b, sa, sb = f8(40, 64), wt(96, 64), scale(0.5), scale(2.0)
    assert torch.equal(calls(rig.dispatcher).scaled_mm(a, b, sa, sb, out_dtype=BF, use_fast_accum=True),
                       torch._scaled_mm(a, b, sa, sb, out_dtype=BF, use_fast_accum=True))
    assert rig.family.compiled == [] and rig.dispatcher.stats().fallbacks == 0


def test_tune_policy_looks_up_and_tunes_the_fp8_problem() -> None:
    rig = make_rig(Policy.TUNE)
    calls(rig.dispatcher).scaled_mm(f8(100, 64), wt(96, 64), scale(1.0), scale(1.0), out_dtype=torch.float16, use_fast_accum=True)
    (tuned,) = rig.tuner.calls
    assert tuned.a_dtype is DType.E4M3 and tuned.d_dtype is DType.FP16 and tuned.m == 100
    assert rig.store.lookups == [tuned, tuned] and rig.misses() == [tuned]  # again after: the vendor verdict


# ---- the multi-GPU guard -----------------------------------------------------------------------
def test_entry_switches_to_the_operands_device(monkeypatch: pytest.MonkeyPatch) -> None:
    devices: list[int] = []

    @contextlib.contextmanager
    def fake_device(i: int) -> Iterator[None]:
        devices.append(i)
        yield

    monkeypatch.setattr(launch, "single_gpu", lambda: False)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "device", fake_device)
    a, b = f8(8, 64), wt(16, 64)
    p = kernel(scaled(a, b))
    p = KernelPlan(**{**p.__dict__, "device_index": 1})
    calls: list[dict[str, Any]] = []
    entry = SCALED_MM.kernel_entry(p, lambda a, b, d, **kw: calls.append(kw), scaled(a, b))
    entry(a, b, scale(1.0), scale(1.0), None, torch.bfloat16, None, None, True, None)
    assert devices == [1] and len(calls) == 1 and set(calls[0]) == {"bias", "scale_a", "scale_b"}



def test_use_fast_accum_false_runs_torch_with_it(rig, monkeypatch) -> None:  # noqa: ANN001
    """torch's default (use_fast_accum=False: cuBLAS promotes partial sums to fp32) is not what the
    kernel does (WGMMA accumulates across all of K), so it is served by torch, with the flag."""
    from autocutlass.ops.gemm.frontend import FAST_ACCUM_ONLY

    a, b = f8(32, 64), wt(48, 64)
    assert unsupported(scaled(a, b, fast_accum=False)) == FAST_ACCUM_ONLY
    assert isinstance(plan(scaled(a, b, fast_accum=True), ctx()), KernelPlan)
    seen: list[bool] = []
    real = torch._scaled_mm

    def spy(*args: Any, **kw: Any) -> torch.Tensor:
        seen.append(kw.get("use_fast_accum"))
        return real(*args, **kw)

    monkeypatch.setattr(torch, "_scaled_mm", spy)
    sa, sb = scale(0.5), scale(2.0)
    y = calls(rig.dispatcher).scaled_mm(a, b, sa, sb, out_dtype=BF)  # the default: use_fast_accum=False
    assert seen == [False] and y.dtype is BF
    calls(rig.dispatcher).scaled_mm(a, b, sa, sb, out_dtype=BF, use_fast_accum=True)  # a different memo key: the kernel
    assert seen == [False]


def _as_torch_does(torch_call: Any, ours_call: Any) -> Any:
    """Run ``ours_call`` expecting what ``torch_call`` (torch._scaled_mm itself) does on this machine:
    its result, or its exception (type and message). torch's CPU kernel differs by ISA: on some CPUs
    it rejects a float64 output or accepts float64 scales that others reject, so a test of the
    fallback asks torch first. Returns (ours, torch's) results, or None where torch raised."""
    try:
        want = torch_call()
    except Exception as e:  # noqa: BLE001 - whatever torch raises, the fallback must raise too
        with pytest.raises(type(e), match=re.escape(str(e))):
            ours_call()
        return None
    return ours_call(), want


# ---- calls torch._scaled_mm accepts but the kernel does not serve: torch runs them -------------
@pytest.fixture
def spy_torch(monkeypatch):  # noqa: ANN001, ANN201
    """Records every torch._scaled_mm call's arguments (as the fallback passes them)."""
    seen: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    real = torch._scaled_mm

    def spy(*args: Any, **kw: Any) -> torch.Tensor:
        seen.append((args, kw))
        return real(*args, **kw)

    monkeypatch.setattr(torch, "_scaled_mm", spy)
    return seen


def _torch_served_cases() -> list[Any]:
    a, b, e5a, e5b = f8(40, 64), wt(96, 64), f8(40, 64).to(E5M2), wt(96, 64).to(E5M2)
    one = scale(0.5)
    rw_a, rw_b = torch.rand(40, 1) + 0.5, torch.rand(1, 96) + 0.5
    return [  # (id, args of scaled_mm, kwargs of Dispatcher.scaled_mm (use_fast_accum=True unless given), reason)
        ("e5m2", (e5a, e5b, one, one), {"out_dtype": BF}, "only float8_e4m3fn x float8_e4m3fn"),
        ("e4m3_x_e5m2", (a, e5b, one, one), {"out_dtype": BF}, "only float8_e4m3fn x float8_e4m3fn"),
        ("e5m2_x_e4m3", (e5a, b, one, one), {"out_dtype": torch.float16}, "only float8_e4m3fn x float8_e4m3fn"),
        ("rowwise", (a, b, rw_a, rw_b), {"out_dtype": BF}, "per-tensor scales only; row-wise scaling"),
        ("rowwise_fp32_out", (a, b, rw_a, rw_b), {"out_dtype": torch.float32}, "per-tensor scales only"),
        ("out_dtype_none", (a, b, one, one), {}, "out_dtype None/fp8: fp8 output is served by torch"),
        ("out_dtype_fp8", (a, b, one, one), {"out_dtype": F8}, "out_dtype None/fp8"),
        ("out_dtype_fp64", (a, b, one, one), {"out_dtype": torch.float64}, "out_dtype=torch.float64 is not served"),
        ("scale_result_fp8_out", (a, b, one, one), {"out_dtype": F8, "scale_result": scale(4.0)}, "out_dtype None/fp8"),
        ("scale_result", (a, b, one, one), {"out_dtype": BF, "scale_result": scale(4.0)}, "scale_result"),
        ("bias_fp32_bf16_out", (a, b, one, one), {"out_dtype": BF, "bias": torch.randn(96)}, "bias has dtype"),
        ("bias_bf16_fp16_out", (a, b, one, one), {"out_dtype": torch.float16, "bias": torch.randn(96).to(BF)},
         "bias has dtype torch.bfloat16, out_dtype is torch.float16"),
        ("bias_1xN", (a, b, one, one), {"out_dtype": BF, "bias": torch.randn(1, 96).to(BF)}, "(N,) vector"),
        ("e5m2_relu", (e5a, e5b, one, one), {"out_dtype": BF, "activation": "relu"}, "only float8_e4m3fn"),
        ("slow_accum", (a, b, one, one), {"out_dtype": BF, "use_fast_accum": False}, "use_fast_accum=False"),
    ]


TORCH_SERVED = _torch_served_cases()


@pytest.mark.parametrize(("args", "kw", "reason"), [c[1:] for c in TORCH_SERVED], ids=[c[0] for c in TORCH_SERVED])
def test_torch_served_calls_fall_back_with_torchs_result(
    rig, spy_torch, caplog, args: tuple[Any, ...], kw: dict[str, Any], reason: str  # noqa: ANN001
) -> None:
    """They used to raise (or, for use_fast_accum=False, already fell back): now torch._scaled_mm
    runs them with the arguments as given, counted as fallbacks, memoised, logged once."""
    kw = {"use_fast_accum": True, **kw}
    act = kw.pop("activation", None)
    torch_kw = {"bias": kw.get("bias"), "scale_result": kw.get("scale_result"), "out_dtype": kw.get("out_dtype"),
                "use_fast_accum": kw["use_fast_accum"]}  # fmt: skip
    d = rig.dispatcher
    try:
        expected = ACTS[act](torch._scaled_mm(*args, **torch_kw))
    except RuntimeError:  # this CPU's torch cannot run the case (oneDNN on some: no float64 output)
        spy_torch.clear()
        assert _as_torch_does(lambda: torch._scaled_mm(*args, **torch_kw),
                              lambda: calls(d).scaled_mm(*args, activation=act, **kw)) is None
        assert d.stats().fallbacks == 1 and rig.family.launches == []
        return
    spy_torch.clear()
    with caplog.at_level("WARNING", logger="autocutlass"):
        y = calls(d).scaled_mm(*args, activation=act, **kw)
        y2 = calls(d).scaled_mm(*args, activation=act, **kw)  # a memo hit: torch again
    assert y.dtype == expected.dtype and torch.equal(y.float(), expected.float())
    assert torch.equal(y2.float(), expected.float())
    assert len(spy_torch) == 2
    got_args, got_kw = spy_torch[0]
    assert all(g is x for g, x in zip(got_args, args, strict=True)) and got_kw == torch_kw
    s = d.stats()
    assert (s.fallbacks, s.memo_misses, s.memo_hits, s.compiles) == (2, 1, 1, 0) and rig.family.launches == []
    logged = [r.getMessage() for r in caplog.records]
    assert len(logged) == 1 and reason in logged[0], logged


@pytest.mark.parametrize(
    ("scale_a", "scale_b"),
    [(torch.ones((), dtype=torch.float64), scale(1.0)),  # another scale dtype
     (scale(1.0), scale(1.0, (2,))),  # float32, neither per-tensor nor row-wise
     (scale(1.0, (40, 1)), scale(1.0))],  # row-wise A with a per-tensor B
)  # fmt: skip
def test_scales_torch_rejects_raise_torchs_error_through_the_fallback(rig, scale_a, scale_b) -> None:  # noqa: ANN001
    """torch's own error ("Invalid scaling configuration"), or on a CPU whose torch accepts the
    scales (float64 ones on some), torch's own result."""
    a, b = f8(40, 64), wt(96, 64)
    got = _as_torch_does(lambda: torch._scaled_mm(a, b, scale_a, scale_b, out_dtype=BF, use_fast_accum=True),
                         lambda: calls(rig.dispatcher).scaled_mm(a, b, scale_a, scale_b, out_dtype=BF, use_fast_accum=True))
    assert got is None or torch.equal(*got)
    assert rig.dispatcher.stats().fallbacks == 1 and rig.family.launches == []


@pytest.mark.parametrize(
    ("kw", "reason"),
    [({"b": wt(96, 64).to(E5M2)}, "only float8_e4m3fn x float8_e4m3fn is served"),
     ({"scale_a": scale(1.0, (40, 1)), "scale_b": scale(1.0, (1, 96))},
      "per-tensor scales only; row-wise scaling is served by torch"),
     ({"out_dtype": None}, "out_dtype None/fp8: fp8 output is served by torch; pass out_dtype=torch.bfloat16"),
     ({"scale_result": scale(1.0)}, "scale_result"),
     ({"bias": torch.randn(96)}, "bias has dtype torch.float32, out_dtype is torch.bfloat16")],
)  # fmt: skip
def test_strict_raises_unsupported_for_torch_served_calls(kw: dict[str, Any], reason: str) -> None:
    rig = make_rig(Policy.HEURISTIC, strict=True)
    args = {"a": f8(40, 64), "b": wt(96, 64), "scale_a": scale(1.0), "scale_b": scale(1.0), "out_dtype": BF, **kw}
    with pytest.raises(UnsupportedProblem, match=re.escape(f"autocutlass.scaled_mm: {reason}")):
        calls(rig.dispatcher).scaled_mm(**args, use_fast_accum=True)
    assert rig.dispatcher.stats().fallbacks == 0 and rig.dispatcher._memo == {}


def test_served_call_stays_served_next_to_fallbacks(rig) -> None:  # noqa: ANN001
    """A served key and its torch-served neighbours (one argument changed) do not share entries."""
    d = rig.dispatcher
    a, b, sa, sb, bias = f8(40, 64), wt(96, 64), scale(0.5), scale(2.0), torch.randn(96).to(BF)
    for _ in range(2):
        close(calls(d).scaled_mm(a, b, sa, sb, bias, BF, use_fast_accum=True), reference(a, b, sa, sb, bias))
        calls(d).scaled_mm(a, b, sa, sb, bias, None, use_fast_accum=True)  # fp8 output: torch
        calls(d).scaled_mm(a, b, sa, sb, bias, BF, use_fast_accum=True, scale_result=scale(1.0))  # torch
        calls(d).scaled_mm(a.to(E5M2), b, sa, sb, bias, BF, use_fast_accum=True)  # torch
    s = d.stats()
    assert (s.memo_misses, s.memo_hits, s.fallbacks, s.compiles) == (4, 4, 6, 1)
    assert len(rig.family.launches) == 2


def test_non_bool_use_fast_accum_never_shares_a_bools_entry(rig) -> None:  # noqa: ANN001
    """torch._scaled_mm rejects use_fast_accum=1 (TypeError); 1 == True must not hit True's entry."""
    d = rig.dispatcher
    a, b, one = f8(40, 64), wt(96, 64), scale(1.0)
    calls(d).scaled_mm(a, b, one, one, out_dtype=BF, use_fast_accum=True)
    calls(d).scaled_mm(a, b, one, one, out_dtype=BF, use_fast_accum=False)
    for bad in (1, 0, 1.0):
        with pytest.raises(TypeError, match="use_fast_accum must be a bool"):
            calls(d).scaled_mm(a, b, one, one, out_dtype=BF, use_fast_accum=bad)
    assert d.stats().memo_hits == 0 and len(d._memo) == 2

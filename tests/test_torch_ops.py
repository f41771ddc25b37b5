"""The ``torch.ops.autocutlass`` custom ops on CPU: schemas, ``opcheck``, fake kernels' layouts,
gradients (``gradcheck`` and ``gradgradcheck`` in float64 through the torch fallback), autocast,
and, with the dispatch fakes standing in for an sm_90 GPU, the backward GEMMs served as kernel
calls of the layouts the formulas promise."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.autograd import gradcheck, gradgradcheck
from torch.library import opcheck

from _dispatch_fakes import make_rig
import autocutlass
from autocutlass import api, torch_ops  # noqa: F401  (registers the ops)
from autocutlass.ops.types import Major
from autocutlass.settings import Policy

ops = torch.ops.autocutlass
BF, F64 = torch.bfloat16, torch.float64
CL = torch.channels_last


@pytest.fixture(autouse=True)
def fresh_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("AUTOCUTLASS_POLICY", "AUTOCUTLASS_STRICT", "AUTOCUTLASS_LOG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AUTOCUTLASS_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("AUTOCUTLASS_SHIPPED_DBS", "off")
    autocutlass.reset()
    logging.getLogger("autocutlass").setLevel(logging.ERROR)  # the CPU fallbacks' log lines
    yield
    logging.getLogger("autocutlass").setLevel(logging.NOTSET)
    autocutlass.reset()


def r(*shape: int, dtype: torch.dtype = torch.float32, grad: bool = False) -> torch.Tensor:
    return torch.randn(*shape, dtype=dtype).requires_grad_(grad)


def cl(t: torch.Tensor) -> torch.Tensor:
    return t.detach().contiguous(memory_format=CL).requires_grad_(t.requires_grad)


# ---- registration and opcheck ---------------------------------------------------------------
def test_ops_and_their_mutations() -> None:
    names = {"matmul", "matmul_out", "linear", "gemm", "gemm_out", "scaled_mm", "scaled_mm_out", "conv2d"}
    for name in names:
        schema = getattr(ops, name).default._schema
        written = [a.name for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write]
        assert written == (["out"] if name.endswith("_out") else []), (name, written)
        assert len(schema.returns) == (0 if name.endswith("_out") else 1), name


OPCHECK_CASES = {
    "mm": lambda: (ops.matmul.default, (r(4, 8, grad=True), r(8, 3, grad=True))),
    "mm_t": lambda: (ops.matmul.default, (r(8, 4, grad=True).t(), r(3, 8, grad=True).t())),
    "mm_fold": lambda: (ops.matmul.default, (r(2, 4, 8, grad=True), r(8, 3, grad=True))),
    "bmm": lambda: (ops.matmul.default, (r(2, 4, 8, grad=True), r(2, 8, 3, grad=True))),
    "mm_vec": lambda: (ops.matmul.default, (r(8, grad=True), r(2, 8, 3, grad=True))),
    "mm_out": lambda: (ops.matmul_out.default, (r(4, 8), r(8, 3), torch.empty(4, 3))),
    "linear": lambda: (ops.linear.default, (r(2, 4, 8, grad=True), r(16, 8, grad=True), r(16, grad=True), None)),
    "linear_silu": lambda: (ops.linear.default, (r(2, 4, 8, grad=True), r(16, 8, grad=True), None, "silu")),
    "linear_residual_gelu": lambda: (ops.linear.default, (r(2, 4, 8, grad=True), r(16, 8, grad=True), r(16, grad=True),
                                                          "gelu", r(2, 4, 16, grad=True))),
    "linear_residual_bcast": lambda: (ops.linear.default, (r(2, 4, 8, grad=True), r(16, 8, grad=True), None, None,
                                                           r(4, 16, grad=True))),
    "gemm": lambda: (ops.gemm.default, (r(4, 8, grad=True), r(8, 3, grad=True), r(4, 3, grad=True), 0.5, 2.0)),
    "gemm_bcast_c": lambda: (ops.gemm.default, (r(2, 4, 8, grad=True), r(2, 8, 3, grad=True), r(3, grad=True), 1.0,
                                                1.0)),
    "gemm_out": lambda: (ops.gemm_out.default, (r(4, 8), r(8, 3), r(4, 3), 0.5, 2.0, torch.empty(4, 3))),
    "conv_pointwise": lambda: (ops.conv2d.default, (cl(r(2, 16, 5, 7, grad=True)), cl(r(8, 16, 1, 1, grad=True)),
                                                    r(8, grad=True), [1, 1], [0, 0], None, [1, 1], 1, None, None)),
    "conv_residual_relu": lambda: (ops.conv2d.default, (cl(r(2, 16, 5, 7, grad=True)), cl(r(8, 16, 1, 1, grad=True)),
                                                        None, [1, 1], [0, 0], None, [1, 1], 1, "relu",
                                                        cl(r(2, 8, 5, 7, grad=True)))),
    "conv_3x3_nchw": lambda: (ops.conv2d.default, (r(2, 4, 7, 6, grad=True), r(6, 2, 3, 3, grad=True), None, [2, 1],
                                                   [1, 1], None, [1, 1], 2, None, None)),
    "conv_same": lambda: (ops.conv2d.default, (r(2, 4, 7, 6, grad=True), r(6, 4, 2, 3, grad=True), r(6, grad=True),
                                               [1, 1], [0, 0], "same", [1, 2], 1, None, None)),
}  # fmt: skip


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("case", sorted(OPCHECK_CASES))
def test_opcheck(case: str) -> None:
    op, args = OPCHECK_CASES[case]()
    opcheck(op, args)


def test_opcheck_scaled_mm() -> None:
    """``test_schema`` compares fp8 tensors with an op CPU fp8 lacks; the other utilities run."""
    f8 = torch.float8_e4m3fn
    a, b, one = r(16, 32).to(f8), r(16, 32).to(f8).t(), torch.tensor(1.0)
    utils = ("test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")
    opcheck(ops.scaled_mm.default, (a, b, one, one, None, None, BF, True, "relu"), test_utils=utils)
    out = torch.empty(16, 16, dtype=BF)
    opcheck(ops.scaled_mm_out.default, (a, b, one, one, None, None, BF, True, None, out), test_utils=utils)


def _fake_and_real(op, *args):  # noqa: ANN001, ANN202
    real = op(*args)
    mode = FakeTensorMode()
    with mode:
        fake = op(*(mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args))
    return fake, real


def test_fake_kernels_return_the_real_layouts() -> None:
    for op, args in (
        (ops.matmul.default, (r(8, 4).t(), r(3, 8).t())),
        (ops.linear.default, (r(2, 4, 8), r(16, 8), None, "gelu")),
        (ops.gemm.default, (r(2, 4, 8), r(2, 8, 3), r(2, 4, 3), 2.0, 1.0)),
    ):
        fake, real = _fake_and_real(op, *args)
        assert fake.shape == real.shape and fake.stride() == real.stride() and real.is_contiguous()
    conv = ops.conv2d.default
    pointwise = (cl(r(2, 16, 5, 7)), cl(r(8, 16, 1, 1)), None, [1, 1], [0, 0], None, [1, 1], 1, None, None)
    fake, real = _fake_and_real(conv, *pointwise)
    assert fake.stride() == real.stride() and real.is_contiguous(memory_format=CL) and not real.is_contiguous()
    nchw = (r(2, 4, 7, 6), r(6, 4, 3, 3), None, [1, 1], [1, 1], None, [1, 1], 1, None, None)
    fake, real = _fake_and_real(conv, *nchw)
    assert fake.stride() == real.stride() and real.is_contiguous()


# ---- gradients through the fallback, in float64 ----------------------------------------------
def _gradchecks(f, *args) -> None:  # noqa: ANN001
    assert gradcheck(f, args)
    assert gradgradcheck(f, args)


@pytest.mark.parametrize(
    "sa, sb",
    [((4, 8), (8, 3)), ((2, 4, 8), (8, 3)), ((2, 4, 8), (2, 8, 3)), ((1, 4, 8), (3, 8, 5)), ((4, 8), (2, 8, 3)),
     ((8,), (2, 8, 3)), ((8,), (8,)), ((2, 4, 8), (8,)), ((2, 1, 4, 8), (3, 8, 5))],
)  # fmt: skip
def test_matmul_gradients(sa: tuple[int, ...], sb: tuple[int, ...]) -> None:
    _gradchecks(autocutlass.matmul, r(*sa, dtype=F64, grad=True), r(*sb, dtype=F64, grad=True))


@pytest.mark.parametrize("activation", [None, "relu", "gelu", "gelu_tanh", "silu"])
def test_linear_gradients(activation: str | None) -> None:
    x, w, b = r(2, 3, 8, dtype=F64, grad=True), r(6, 8, dtype=F64, grad=True), r(6, dtype=F64, grad=True)
    _gradchecks(lambda x, w, b: autocutlass.linear(x, w, b, activation=activation), x, w, b)
    # the op called directly with its activation fused: the backward recomputes the pre-activation
    _gradchecks(lambda x, w, b: ops.linear(x, w, b, activation), x, w, b)
    _gradchecks(lambda x, w: autocutlass.linear(x, w), r(8, dtype=F64, grad=True), w)  # a 1-D x


@pytest.mark.parametrize("activation", [None, "relu", "gelu_tanh", "silu"])
def test_linear_residual_gradients(activation: str | None) -> None:
    x, w, b = r(2, 3, 8, dtype=F64, grad=True), r(6, 8, dtype=F64, grad=True), r(6, dtype=F64, grad=True)
    for res in (r(2, 3, 6, dtype=F64, grad=True), r(6, dtype=F64, grad=True)):  # the result's shape; broadcast
        _gradchecks(lambda x, w, b, res: autocutlass.linear(x, w, b, activation=activation, residual=res), x, w, b, res)
        _gradchecks(lambda x, w, b, res: ops.linear(x, w, b, activation, res), x, w, b, res)  # fused: recomputed
    with torch.no_grad():
        z = F.linear(x, w, b) + res
        want = {None: z, "relu": F.relu(z), "gelu_tanh": F.gelu(z, approximate="tanh"), "silu": F.silu(z)}[activation]
        assert torch.equal(autocutlass.linear(x, w, b, activation=activation, residual=res), want)


def test_linear_records_the_activation_outside_the_kernel() -> None:
    x, w = r(3, 8, grad=True), r(6, 8, grad=True)
    y = autocutlass.linear(x, w, activation="silu")
    assert "Silu" in type(y.grad_fn).__name__  # torch's silu on the op's output, which autograd saved
    with torch.no_grad():
        assert torch.allclose(autocutlass.linear(x, w, activation="silu"), y)


def test_gemm_gradients() -> None:
    def f(alpha: float, beta: float):  # noqa: ANN202
        return lambda a, b, c: autocutlass.gemm(a, b, c, alpha=alpha, beta=beta)

    _gradchecks(f(0.5, 2.0), r(4, 8, dtype=F64, grad=True), r(8, 3, dtype=F64, grad=True), r(4, 3, dtype=F64, grad=True))
    _gradchecks(f(-1.5, 1.0), r(2, 4, 8, dtype=F64, grad=True), r(2, 8, 3, dtype=F64, grad=True),
                r(3, dtype=F64, grad=True))  # fmt: skip
    c = r(4, 3, dtype=F64, grad=True)
    autocutlass.gemm(r(4, 8, dtype=F64), r(8, 3, dtype=F64), c, beta=0.0).sum().backward()
    assert c.grad is None  # beta == 0: C is ignored, as in BLAS


def test_conv2d_gradients() -> None:
    x, w = cl(r(2, 8, 2, 3, dtype=F64, grad=True)), cl(r(4, 8, 1, 1, dtype=F64, grad=True))
    b, res = r(4, dtype=F64, grad=True), cl(r(2, 4, 2, 3, dtype=F64, grad=True))
    _gradchecks(lambda x, w, b, res: autocutlass.conv2d(x, w, b, activation="silu", residual=res), x, w, b, res)
    _gradchecks(lambda x, w, b, res: ops.conv2d(x, w, b, [1, 1], [0, 0], None, [1, 1], 1, "gelu", res), x, w, b, res)
    assert gradcheck(lambda x, w, b: autocutlass.conv2d(x, w, b, stride=2, padding=1, groups=2),
                     (r(1, 4, 5, 4, dtype=F64, grad=True), r(4, 2, 3, 3, dtype=F64, grad=True), r(4, dtype=F64, grad=True)))
    for padding in ("same", "valid"):  # 'same' with a 2x3 filter dilated (1, 2) pads unevenly
        assert gradcheck(lambda x, w, b, padding=padding: autocutlass.conv2d(x, w, b, padding=padding, dilation=(1, 2)),
                         (r(1, 2, 5, 6, dtype=F64, grad=True), r(3, 2, 2, 3, dtype=F64, grad=True), r(3, dtype=F64, grad=True)))


# ---- errors: the eager API's, whichever path a call takes ---------------------------------------
BAD_CALLS = {
    "matmul shapes": lambda g: autocutlass.matmul(r(3, 4, grad=g), r(5, 6)),
    "matmul dtypes": lambda g: autocutlass.matmul(r(3, 4, grad=g), r(4, 6, dtype=F64)),
    "linear weight not a tensor": lambda g: autocutlass.linear(r(3, 4, grad=g), 3),
    "linear activation": lambda g: autocutlass.linear(r(3, 4, grad=g), r(5, 4), activation="tanh"),
    "linear bias": lambda g: autocutlass.linear(r(3, 4, grad=g), r(5, 4), r(6)),
    "gemm c": lambda g: autocutlass.gemm(r(3, 4, grad=g), r(4, 5), r(2, 5), beta=1.0),
    "conv channels": lambda g: autocutlass.conv2d(r(1, 3, 5, 5, grad=g), r(4, 2, 1, 1)),
    "conv padding": lambda g: autocutlass.conv2d(r(1, 3, 5, 5, grad=g), r(4, 3, 1, 1), padding="full"),
    "conv activation": lambda g: autocutlass.conv2d(r(1, 3, 5, 5, grad=g), r(4, 3, 1, 1), activation="x"),
}


def _error(f) -> Exception:  # noqa: ANN001
    with pytest.raises(Exception) as info:
        f()
    return info.value


@pytest.mark.parametrize("case", sorted(BAD_CALLS))
def test_the_autograd_path_raises_the_eager_errors(case: str) -> None:
    eager = _error(lambda: BAD_CALLS[case](False))  # the dispatcher
    graph = _error(lambda: BAD_CALLS[case](True))  # the custom op, for autograd
    assert type(graph) is type(eager) and str(graph) == str(eager)


# ---- autocast -----------------------------------------------------------------------------------
def test_cpu_autocast_casts_as_torch_does() -> None:
    x, w, b = r(3, 16), r(8, 16, grad=True), r(8, grad=True)
    a, bb, c = r(4, 16), r(16, 8), r(4, 8)
    xc, wc = cl(r(2, 16, 3, 3)), cl(r(8, 16, 1, 1, grad=True))
    with torch.autocast("cpu", dtype=BF):
        got = {
            "linear": autocutlass.linear(x, w, b, activation="relu"),  # grad: the op's Autocast kernel
            "linear_nograd": autocutlass.linear(x, w.detach(), b.detach()),  # eager: torch's fallback autocasts
            "matmul": autocutlass.matmul(a, bb.requires_grad_()),
            "gemm": autocutlass.gemm(a, bb, c, alpha=2.0, beta=0.5),
            "conv2d": autocutlass.conv2d(xc, wc),
        }
        want = {
            "linear": F.relu(F.linear(x, w, b)),
            "linear_nograd": F.linear(x, w, b),
            "matmul": a @ bb,
            "gemm": torch.addmm(c, a, bb, alpha=2.0, beta=0.5),
            "conv2d": F.conv2d(xc, wc),
        }
    for name, y in got.items():
        assert y.dtype == want[name].dtype == BF, name
        torch.testing.assert_close(y, want[name], msg=name)
    got["linear"].float().sum().backward()
    assert w.grad is not None and w.grad.dtype == torch.float32  # the cast is recorded: grads reach the fp32 leaf


# ---- the policy override ---------------------------------------------------------------------
def test_policy_is_read_when_the_op_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    rig = make_rig(Policy.HEURISTIC)
    monkeypatch.setattr(api, "_default", rig.dispatcher)
    x, w = r(16, 32, dtype=BF, grad=True), r(48, 32, dtype=BF, grad=True)
    with autocutlass.policy("off"):
        y = autocutlass.linear(x, w)
    assert rig.family.launches == [] and rig.dispatcher.stats().fallbacks == 0  # 'off' runs torch
    y2 = autocutlass.linear(x, w)
    assert len(rig.family.launches) == 1
    torch.testing.assert_close(y, y2, atol=0.05, rtol=0.02)


# ---- backward GEMMs on the kernel path (the dispatch fakes stand in for the GPU) -----------------
def _layout(launch) -> tuple[Major, Major]:  # noqa: ANN001
    return launch.problem.a_major, launch.problem.b_major


def test_linear_backward_runs_our_gemms(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forward X W^T ('nt'), dX = dY W ('nn', the batch folded into M), dW = dY^T X ('tn'), each
    fingerprinted and launched like any call; bias grads are a sum. Grads match torch's."""
    rig = make_rig(Policy.HEURISTIC)
    monkeypatch.setattr(api, "_default", rig.dispatcher)
    x = r(4, 16, 32, dtype=BF, grad=True)
    w, b = r(48, 32, dtype=BF, grad=True), r(48, dtype=BF, grad=True)
    dy = r(4, 16, 48, dtype=BF)
    y = autocutlass.linear(x, w, b, activation="gelu")
    y.backward(dy)
    assert rig.dispatcher.stats().fallbacks == 0
    fwd, dx, dw = rig.family.launches
    assert _layout(fwd) == (Major.ROW, Major.COL) and (fwd.problem.m, fwd.problem.n, fwd.problem.k) == (64, 48, 32)
    assert _layout(dx) == (Major.ROW, Major.ROW) and (dx.problem.m, dx.problem.n, dx.problem.k) == (64, 32, 48)
    assert _layout(dw) == (Major.COL, Major.ROW) and (dw.problem.m, dw.problem.n, dw.problem.k) == (48, 32, 64)
    assert fwd.problem.epilogue.bias and fwd.problem.epilogue.activation.value == "none"  # gelu outside
    xr, wr, br = (t.detach().clone().requires_grad_() for t in (x, w, b))
    F.gelu(F.linear(xr, wr, br)).backward(dy)
    for got, want in ((y, F.gelu(F.linear(xr, wr, br))), (x.grad, xr.grad), (w.grad, wr.grad), (b.grad, br.grad)):
        torch.testing.assert_close(got, want, atol=0.05, rtol=0.02)
    assert w.grad.stride() == w.stride()  # written row-major, like the weight


def test_linear_residual_stays_in_the_kernel_while_training(monkeypatch: pytest.MonkeyPatch) -> None:
    """The residual is the forward kernel's C (its gradient is dZ itself, nothing to keep), the
    activation runs outside; d residual = dZ."""
    rig = make_rig(Policy.HEURISTIC)
    monkeypatch.setattr(api, "_default", rig.dispatcher)
    x, w, res = r(4, 16, 32, dtype=BF, grad=True), r(48, 32, dtype=BF, grad=True), r(4, 16, 48, dtype=BF, grad=True)
    dy = r(4, 16, 48, dtype=BF)
    y = autocutlass.linear(x, w, activation="silu", residual=res)
    y.backward(dy)
    assert rig.dispatcher.stats().fallbacks == 0
    fwd = rig.family.launches[0]
    assert fwd.problem.epilogue.with_c and fwd.c is not None and fwd.c.data_ptr() == res.data_ptr()
    assert fwd.problem.epilogue.activation.value == "none"  # silu outside, on the op's output
    xr, wr, rr = (t.detach().clone().requires_grad_() for t in (x, w, res))
    want = F.silu(F.linear(xr, wr) + rr)
    want.backward(dy)
    for got, ref in ((y, want), (x.grad, xr.grad), (w.grad, wr.grad), (res.grad, rr.grad)):
        torch.testing.assert_close(got, ref, atol=0.05, rtol=0.02)


def test_matmul_and_gemm_backward_run_our_gemms(monkeypatch: pytest.MonkeyPatch) -> None:
    rig = make_rig(Policy.HEURISTIC)
    monkeypatch.setattr(api, "_default", rig.dispatcher)
    a, b, c = r(2, 32, 16, dtype=BF, grad=True), r(2, 16, 24, dtype=BF, grad=True), r(2, 32, 24, dtype=BF, grad=True)
    dy = r(2, 32, 24, dtype=BF)
    autocutlass.gemm(a, b, c, alpha=0.5, beta=2.0).backward(dy)
    assert rig.dispatcher.stats().fallbacks == 0
    fwd, da, db = rig.family.launches
    assert fwd.problem.l == da.problem.l == db.problem.l == 2 and fwd.problem.epilogue.with_c
    assert da.alpha == db.alpha == 0.5  # alpha scales the backward GEMMs in their epilogue
    torch.testing.assert_close(a.grad, 0.5 * dy @ b.detach().mT, atol=0.05, rtol=0.02)
    torch.testing.assert_close(b.grad, 0.5 * a.detach().mT @ dy, atol=0.05, rtol=0.02)
    torch.testing.assert_close(c.grad, 2.0 * dy)
    rig.family.launches.clear()
    a3, w = r(4, 16, 32, dtype=BF, grad=True), r(32, 24, dtype=BF, grad=True)
    autocutlass.matmul(a3, w).backward(r(4, 16, 24, dtype=BF))
    _, _, dw = rig.family.launches
    assert dw.problem.l == 1 and (dw.problem.m, dw.problem.n, dw.problem.k) == (32, 24, 64)  # A's batch folded into K


def test_pointwise_conv_backward_runs_our_gemms(monkeypatch: pytest.MonkeyPatch) -> None:
    rig = make_rig(Policy.HEURISTIC)
    monkeypatch.setattr(api, "_default", rig.dispatcher)
    x, w = cl(r(2, 32, 4, 6, dtype=BF, grad=True)), cl(r(48, 32, 1, 1, dtype=BF, grad=True))
    b, dy = r(48, dtype=BF, grad=True), cl(r(2, 48, 4, 6, dtype=BF))
    y = autocutlass.conv2d(x, w, b, activation="relu")
    y.backward(dy)
    assert rig.dispatcher.stats().fallbacks == 0 and len(rig.family.launches) == 3  # fprop, dgrad, wgrad
    assert x.grad.is_contiguous(memory_format=CL)
    xr, wr, br = (t.detach().clone().requires_grad_() for t in (x, w, b))
    F.relu(F.conv2d(xr, wr, br)).backward(dy)
    for got, want in ((x.grad, xr.grad), (w.grad, wr.grad), (b.grad, br.grad)):
        torch.testing.assert_close(got, want, atol=0.05, rtol=0.02)


# ---- nothing tunes while tracing -------------------------------------------------------------
def test_a_tuning_miss_while_tracing_serves_the_best_record_and_is_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    from _dispatch_fakes import FakeConfig, FakeStore, Record, calls

    from autocutlass import dispatch

    rig = make_rig(Policy.TUNE, store=FakeStore(fallback=Record("fake", {"tile": 64}, "nearest")))
    a, b = r(32, 64, dtype=BF), r(64, 48, dtype=BF)
    monkeypatch.setattr(dispatch, "_tracing", lambda: True)
    calls(rig.dispatcher).matmul(a, b)
    assert rig.tuner.calls == [] and rig.family.launches[-1].config == FakeConfig(64)  # the nearest record
    assert len(rig.misses()) == 1  # recorded for `autocutlass tune --pending`
    monkeypatch.setattr(dispatch, "_tracing", lambda: False)
    calls(rig.dispatcher).matmul(a, b)  # not memoised: the first call outside tunes
    assert len(rig.tuner.calls) == 1 and rig.family.launches[-1].config == FakeConfig(256)


# ---- conv2d's eager autograd path -----------------------------------------------------------------
CONV_CASES = {
    "relu, bias, residual": (lambda: (cl(r(2, 8, 5, 6, dtype=F64, grad=True)), cl(r(4, 8, 3, 3, dtype=F64, grad=True)),
                                      r(4, dtype=F64, grad=True), cl(r(2, 4, 5, 6, dtype=F64, grad=True))),
                             dict(padding=1, activation="relu")),
    "same, uneven": (lambda: (r(1, 2, 5, 6, dtype=F64, grad=True), r(3, 2, 2, 3, dtype=F64, grad=True),
                              r(3, dtype=F64, grad=True), None), dict(padding="same", dilation=(1, 2))),
    "stride 2, groups 2": (lambda: (r(1, 4, 5, 4, dtype=F64, grad=True), r(4, 2, 3, 3, dtype=F64, grad=True), None, None),
                           dict(stride=2, padding=1, groups=2)),
    "unbatched": (lambda: (r(8, 5, 6, dtype=F64, grad=True), r(4, 8, 1, 1, dtype=F64, grad=True), None, None), {}),
}


@pytest.mark.parametrize("case", list(CONV_CASES))
def test_conv2d_eager_autograd_path_equals_the_ops_path(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Outside torch.compile, autocast and dispatch modes a recording conv2d runs ``_EagerConv2d``
    (no torch.library autograd wrapper); its output and every gradient equal the op path's."""
    make, kw = CONV_CASES[case]
    used: list[bool] = []
    real = torch_ops.eager_autograd

    def spy(*tensors: Any) -> bool:
        used.append(real(*tensors))
        return used[-1]

    results = []
    for path in ("eager", "ops"):
        monkeypatch.setattr(torch_ops, "eager_autograd", spy if path == "eager" else (lambda *t: False))
        torch.manual_seed(0)
        x, w, b, res = make()
        y = autocutlass.conv2d(x, w, b, residual=res, **kw)
        y.backward(torch.ones_like(y) + torch.arange(y.numel(), dtype=y.dtype).reshape(y.shape) / y.numel())
        results.append((y.detach(), *(t.grad for t in (x, w, b, res) if t is not None)))
    assert used == [True]
    for got, want in zip(*results, strict=True):
        assert torch.equal(got, want)


def test_conv2d_eager_path_steps_aside_for_autocast_and_tracing() -> None:
    x, w = r(1, 4, 5, 5, grad=True), r(4, 4, 3, 3)
    assert torch_ops.eager_autograd(x, w, None)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert not torch_ops.eager_autograd(x, w, None)
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        assert not torch_ops.eager_autograd(x, w, None)
    assert not torch_ops.eager_autograd(x, w.as_subclass(_Sub))  # a tensor subclass: the ops path
    seen: list[bool] = []

    def traced(t: torch.Tensor) -> torch.Tensor:
        seen.append(torch_ops.eager_autograd(t, w))
        return t * 2

    torch.jit.trace(traced, (x,), check_trace=False)
    assert seen == [False]  # torch.jit traces the op


class _Sub(torch.Tensor):
    pass

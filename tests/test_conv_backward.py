"""conv2d's backward on CPU: ``gradcheck``/``gradgradcheck`` in float64 through the torch fallback
(strides, padding, dilation, bias, residual, activations), ``opcheck`` of the dgrad and wgrad ops,
the dgrad/wgrad problems' keys and GEMM lowerings, the backward as separate dispatcher calls
fingerprinted per direction (the dispatch fakes standing in for an sm_90 GPU), one logged reason
per fingerprint for what falls back, and torch.compile training with no graph break."""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Iterator
from typing import Any
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from _dispatch_fakes import make_rig
from torch import nn
from torch._dynamo.testing import AotEagerAndRecordGraphs, CompileCounterWithBackend
from torch._dynamo.utils import counters
from torch.autograd import gradcheck, gradgradcheck
from torch.library import opcheck

import autocutlass
from autocutlass import api, torch_ops  # noqa: F401  (registers the ops)
from autocutlass.dispatch import torch_served
from autocutlass.ops.conv.backward import CONV2D_DGRAD, CONV2D_WGRAD
from autocutlass.ops.conv.problem import ConvDirection, ConvProblem
from autocutlass.ops.gemm.problem import GemmProblem, Major
from autocutlass.ops.registry import problem_from_dict
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
    torch._dynamo.reset()
    counters.clear()
    logging.getLogger("autocutlass").setLevel(logging.ERROR)
    yield
    logging.getLogger("autocutlass").setLevel(logging.NOTSET)
    torch._dynamo.reset()
    autocutlass.reset()


def r(*shape: int, dtype: torch.dtype = torch.float32, grad: bool = False, cl: bool = False) -> torch.Tensor:
    t = torch.randn(*shape, dtype=dtype)
    if cl:
        t = t.contiguous(memory_format=CL)
    return t.requires_grad_(grad)


# ---- gradients through the fallback, in float64 ----------------------------------------------
GEOMETRIES = {
    "3x3 s1 p1": {"stride": 1, "padding": 1},
    "3x3 s2 p1": {"stride": 2, "padding": 1},
    "3x3 s2 p0 odd input": {"stride": 2, "padding": 0},
    "3x3 dil2 p2": {"stride": 1, "padding": 2, "dilation": 2},
    "2x3 s(2,1) p(1,0) dil(1,2)": {"stride": (2, 1), "padding": (1, 0), "dilation": (1, 2)},
    "same uneven": {"padding": "same", "dilation": (1, 2)},
    "valid": {"padding": "valid"},
}


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("cl", [False, True], ids=["nchw", "channels_last"])
@pytest.mark.parametrize("name", sorted(GEOMETRIES))
def test_gradcheck_through_the_fallback(name: str, cl: bool) -> None:
    kw = GEOMETRIES[name]
    rs = (2, 3) if "2x3" in name or "same" in name else (3, 3)
    x, w, b = r(2, 4, 7, 6, dtype=F64, grad=True, cl=cl), r(3, 4, *rs, dtype=F64, grad=True, cl=cl), r(3, dtype=F64, grad=True)
    y = autocutlass.conv2d(x.detach(), w.detach(), b.detach(), **kw)
    res = r(*y.shape, dtype=F64, grad=True, cl=cl)
    assert gradcheck(lambda x, w, b, res: autocutlass.conv2d(x, w, b, **kw, activation="silu", residual=res),
                     (x, w, b, res))  # fmt: skip
    assert gradcheck(lambda x, w: autocutlass.conv2d(x, w, **kw, activation="relu"), (x, w))
    # the op called directly with its activation fused: its backward recomputes the pre-activation
    assert gradcheck(lambda x, w, b: autocutlass.conv2d(x, w, b, **kw), (x, w, b))


def test_gradgradcheck_through_our_ops() -> None:
    """The dgrad and wgrad ops are differentiable (double backward: conv, dgrad and wgrad again)."""
    x, w, b = r(2, 4, 6, 5, dtype=F64, grad=True, cl=True), r(3, 4, 3, 3, dtype=F64, grad=True, cl=True), r(3, dtype=F64, grad=True)
    assert gradgradcheck(lambda x, w, b: autocutlass.conv2d(x, w, b, stride=2, padding=1, activation="gelu"), (x, w, b))
    dy = r(2, 3, 3, 3, dtype=F64, grad=True, cl=True)
    args = ([2, 2], [1, 1], [1, 1], 1)
    assert gradcheck(lambda dy, w: ops.conv2d_dgrad(dy, w, [2, 4, 6, 5], *args), (dy, w))
    assert gradcheck(lambda dy, x: ops.conv2d_wgrad(dy, x, [3, 4, 3, 3], *args), (dy, x))


def test_unbatched_and_grouped_inputs() -> None:
    x, w = r(4, 6, 5, dtype=F64, grad=True), r(6, 2, 3, 3, dtype=F64, grad=True)
    assert gradcheck(lambda x, w: autocutlass.conv2d(x, w, padding=1, groups=2), (x, w))


def test_gradients_match_torch_and_land_in_the_forward_layout() -> None:
    x, w, b = r(2, 8, 9, 7, grad=True, cl=True), r(6, 8, 3, 3, grad=True, cl=True), r(6, grad=True)
    y = autocutlass.conv2d(x, w, b, stride=2, padding=1, activation="relu")
    y.sum().backward()  # dY is an expanded tensor of ones: made channels_last before the ops
    xr, wr, br = (t.detach().clone().requires_grad_() for t in (x, w, b))
    F.relu(F.conv2d(xr, wr, br, stride=2, padding=1)).sum().backward()
    for got, want in ((x.grad, xr.grad), (w.grad, wr.grad), (b.grad, br.grad)):
        torch.testing.assert_close(got, want)
    assert x.grad.is_contiguous(memory_format=CL) and w.grad.is_contiguous(memory_format=CL)


# ---- the dgrad and wgrad ops -----------------------------------------------------------------
OPCHECK = {
    "dgrad cl": lambda: (ops.conv2d_dgrad.default, (r(2, 6, 4, 3, grad=True, cl=True), r(6, 8, 3, 3, grad=True, cl=True),
                                                    [2, 8, 7, 5], [2, 2], [1, 1], [1, 1], 1)),
    "dgrad nchw groups": lambda: (ops.conv2d_dgrad.default, (r(2, 6, 7, 3, grad=True), r(6, 4, 3, 3, grad=True),
                                                             [2, 8, 7, 5], [1, 1], [1, 0], [1, 1], 2)),
    "wgrad cl": lambda: (ops.conv2d_wgrad.default, (r(2, 6, 4, 3, grad=True, cl=True), r(2, 8, 7, 5, grad=True, cl=True),
                                                    [6, 8, 3, 3], [2, 2], [1, 1], [1, 1], 1)),
    "wgrad dilated": lambda: (ops.conv2d_wgrad.default, (r(1, 4, 5, 5, grad=True, cl=True), r(1, 8, 9, 9, grad=True, cl=True),
                                                         [4, 8, 3, 3], [1, 1], [0, 0], [2, 2], 1)),
}  # fmt: skip


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("case", sorted(OPCHECK))
def test_opcheck(case: str) -> None:
    op, args = OPCHECK[case]()
    opcheck(op, args)


def test_ops_compute_torch_nn_grad() -> None:
    dy, w, x = r(2, 6, 4, 3, cl=True), r(6, 8, 3, 3, cl=True), r(2, 8, 7, 5, cl=True)
    dx = ops.conv2d_dgrad(dy, w, [2, 8, 7, 5], [2, 2], [1, 1], [1, 1], 1)
    dw = ops.conv2d_wgrad(dy, x, [6, 8, 3, 3], [2, 2], [1, 1], [1, 1], 1)
    torch.testing.assert_close(dx, torch.nn.grad.conv2d_input(x.shape, w, dy, 2, 1))
    torch.testing.assert_close(dw, torch.nn.grad.conv2d_weight(x, w.shape, dy, 2, 1))
    assert dx.is_contiguous(memory_format=CL) and dw.is_contiguous(memory_format=CL)


def test_ops_raise_for_inconsistent_shapes() -> None:
    dy, w = r(2, 6, 4, 3, cl=True), r(6, 8, 3, 3, cl=True)
    with pytest.raises(RuntimeError, match="grad_output has shape"):
        ops.conv2d_dgrad(dy, w, [2, 8, 9, 9], [2, 2], [1, 1], [1, 1], 1)
    with pytest.raises(RuntimeError, match="dtype"):
        ops.conv2d_wgrad(dy, r(2, 8, 7, 5, cl=True).double(), [6, 8, 3, 3], [2, 2], [1, 1], [1, 1], 1)


# ---- problems, keys and lowerings ------------------------------------------------------------
def _layer(direction: str, **kw) -> ConvProblem:
    return ConvProblem(direction, n=kw.pop("n", 32), h=14, w=14, c=256, k=512, r=kw.pop("r", 3), s=kw.pop("s", 3),
                       pad_h=kw.pop("pad_h", 1), pad_w=kw.pop("pad_w", 1), **kw)  # fmt: skip


def test_each_direction_is_its_own_fingerprint() -> None:
    f, d, w = (_layer(x) for x in ("fprop", "dgrad", "wgrad"))
    assert len({f.key(), d.key(), w.key()}) == 3 and len({f.bucket_key(), d.bucket_key(), w.bucket_key()}) == 3
    assert len({f.neighbour_key(), d.neighbour_key(), w.neighbour_key()}) == 3
    for p in (d, w):
        assert problem_from_dict(p.as_dict()) == p and p.as_dict()["direction"] == p.direction.value
        assert p.bucket() == dataclasses.replace(p, n=32) and _layer(p.direction, n=17).bucket_key() == p.bucket_key()
        assert p.flops == f.flops and p.describe().startswith(f"conv2d {p.direction.value} ")
        assert p.kernel_class_key() != f.kernel_class_key()
    assert f.key() == _layer(ConvDirection.FPROP).key()  # fprop keys unchanged by the new directions


def test_pointwise_backward_lowers_to_gemms() -> None:
    kw = {"r": 1, "s": 1, "pad_h": 0, "pad_w": 0}
    d = _layer("dgrad", **kw).gemm_lowering()
    w = _layer("wgrad", **kw).gemm_lowering()
    assert d is not None and w is not None
    pixels = 32 * 14 * 14
    assert d.gemm == GemmProblem(m=pixels, n=256, k=512, a_major=Major.ROW, b_major=Major.ROW)
    assert w.gemm == GemmProblem(m=512, n=256, k=pixels, a_major=Major.COL, b_major=Major.ROW)
    assert _layer("dgrad").gemm_lowering() is None and _layer("wgrad", stride_h=2, **kw).gemm_lowering() is None


@pytest.mark.parametrize("direction", ["dgrad", "wgrad"])
def test_lowering_adapter_presents_the_gemm_operands(direction: str) -> None:
    p = ConvProblem(direction, n=2, h=3, w=5, c=16, k=24, r=1, s=1)
    lowering = p.gemm_lowering()
    assert lowering is not None
    run = lowering.runner(lambda a, b, d, *, c=None, bias=None, alpha=1.0, beta=0.0: d.copy_(a @ b))
    w = r(24, 16, 1, 1, cl=True)
    for n, h, wd in ((2, 3, 5), (5, 3, 5), (1, 4, 2)):  # one runner for every batch and resolution
        dy, x = r(n, 24, h, wd, cl=True), r(n, 16, h, wd, cl=True)
        if direction == "dgrad":
            out = torch.full((n, 16, h, wd), float("nan")).contiguous(memory_format=CL)
            run(dy, w, out)
            torch.testing.assert_close(out, torch.nn.grad.conv2d_input(x.shape, w, dy))
        else:
            out = torch.full((24, 16, 1, 1), float("nan")).contiguous(memory_format=CL)
            run(dy, x, out)
            torch.testing.assert_close(out, torch.nn.grad.conv2d_weight(x, w.shape, dy))


# ---- the backward through the dispatcher (fake GEMM family: serves pointwise layers) ----------
def test_backward_is_three_dispatcher_calls_fingerprinted_per_direction(monkeypatch: pytest.MonkeyPatch) -> None:
    rig = make_rig(Policy.CACHED)  # looks each problem up, records the misses, runs the default config
    monkeypatch.setattr(api, "_default", rig.dispatcher)
    x, w, b = r(2, 32, 4, 6, dtype=BF, grad=True, cl=True), r(48, 32, 1, 1, dtype=BF, grad=True, cl=True), r(48, dtype=BF, grad=True)
    dy = r(2, 48, 4, 6, dtype=BF, cl=True)
    autocutlass.conv2d(x, w, b).backward(dy)
    _fwd, dgrad, wgrad = rig.family.launches
    assert rig.dispatcher.stats().fallbacks == 0
    assert (dgrad.problem.m, dgrad.problem.n, dgrad.problem.k) == (48, 32, 48)
    assert (wgrad.problem.m, wgrad.problem.n, wgrad.problem.k, wgrad.problem.a_major) == (48, 32, 48, Major.COL)
    looked_up = [p for p in rig.store.lookups if isinstance(p, ConvProblem)]
    assert [p.direction.value for p in looked_up] == ["fprop", "dgrad", "wgrad"] and rig.misses() == looked_up
    assert all(p.epilogue.is_plain for p in looked_up[1:])
    xr, wr, br = (t.detach().clone().requires_grad_() for t in (x, w, b))
    F.conv2d(xr, wr, br).backward(dy)
    for got, want in ((x.grad, xr.grad), (w.grad, wr.grad), (b.grad, br.grad)):
        torch.testing.assert_close(got, want, atol=0.05, rtol=0.02)


def test_unserved_directions_run_torch_with_one_reason_per_fingerprint(monkeypatch: pytest.MonkeyPatch,
                                                                       caplog: pytest.LogCaptureFixture) -> None:  # fmt: skip
    rig = make_rig(Policy.HEURISTIC)
    monkeypatch.setattr(api, "_default", rig.dispatcher)
    logging.getLogger("autocutlass").setLevel(logging.WARNING)
    x, w = r(2, 32, 6, 6, dtype=BF, grad=True, cl=True), r(48, 32, 3, 3, dtype=BF, grad=True, cl=True)
    with caplog.at_level(logging.WARNING, logger="autocutlass"):
        for _ in range(2):
            autocutlass.conv2d(x, w, padding=1).float().sum().backward()
    lines = [m for m in caplog.messages if "served by torch" in m]
    assert len(lines) == 3, lines  # fprop, dgrad, wgrad: each once, though the step ran twice
    assert any("conv2d_dgrad" in m and "conv2d dgrad 2x6x6x32 k48 3x3" in m for m in lines)
    assert any("conv2d_wgrad" in m and "conv2d wgrad 2x6x6x32 k48 3x3" in m for m in lines)
    xr, wr = (t.detach().clone().requires_grad_() for t in (x, w))
    (2 * F.conv2d(xr, wr, padding=1).float().sum()).backward()
    torch.testing.assert_close(x.grad, xr.grad, atol=0.05, rtol=0.02)
    torch.testing.assert_close(w.grad, wr.grad, atol=0.5, rtol=0.02)


# ---- torch.compile --------------------------------------------------------------------------
class ConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(8, 16, 3, padding=1)
        self.c2 = nn.Conv2d(16, 16, 3, stride=2, padding=1, bias=False)
        self.c3 = nn.Conv2d(16, 8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = autocutlass.conv2d(x, self.c1.weight, self.c1.bias, padding=1, activation="relu")
        h2 = autocutlass.conv2d(h, self.c2.weight, stride=2, padding=1)
        return autocutlass.conv2d(h2, self.c3.weight, self.c3.bias, activation="silu", residual=h2[:, :8].contiguous(memory_format=CL))


def _targets(gm: torch.fx.GraphModule) -> list[str]:
    return [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]


def test_training_compiles_whole_with_our_backward_ops() -> None:
    model = ConvNet().to(memory_format=CL)
    backend = AotEagerAndRecordGraphs()
    compiled = torch.compile(model, backend=backend, fullgraph=True)
    x = r(2, 8, 9, 9, grad=True, cl=True)
    compiled(x).square().mean().backward()
    assert not counters["graph_break"]
    bw = _targets(backend.bw_graphs[0])
    assert bw.count("autocutlass.conv2d_dgrad.default") == 3 and bw.count("autocutlass.conv2d_wgrad.default") == 3
    ref = ConvNet().to(memory_format=CL)
    ref.load_state_dict(model.state_dict())
    xr = x.detach().clone().requires_grad_()
    ref(xr).square().mean().backward()
    torch.testing.assert_close(x.grad, xr.grad)
    for (name, p), pr in zip(model.named_parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(p.grad, pr.grad, msg=name)


def test_a_new_batch_size_does_not_recompile_the_backward() -> None:
    model = ConvNet().to(memory_format=CL)
    cnt = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(model, backend=cnt, fullgraph=True, dynamic=True)
    for batch in (2, 3, 5):
        compiled(r(batch, 8, 9, 9, cl=True)).sum().backward()
    assert cnt.frame_count == 1 and not counters["graph_break"]


def test_training_under_compile_runs_our_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    rig = make_rig(Policy.HEURISTIC)
    monkeypatch.setattr(api, "_default", rig.dispatcher)
    conv = nn.Conv2d(32, 48, 1, dtype=BF).to(memory_format=CL)
    compiled = torch.compile(lambda x: autocutlass.conv2d(x, conv.weight, conv.bias), backend="aot_eager", fullgraph=True)
    x = r(2, 32, 4, 6, dtype=BF, grad=True, cl=True)
    compiled(x).float().square().mean().backward()
    assert rig.dispatcher.stats().fallbacks == 0 and len(rig.family.launches) == 3  # fprop, dgrad, wgrad
    xr, wr, br = (t.detach().clone().requires_grad_() for t in (x, conv.weight, conv.bias))
    F.conv2d(xr, wr, br).float().square().mean().backward()
    for got, want in ((x.grad, xr.grad), (conv.weight.grad, wr.grad), (conv.bias.grad, br.grad)):
        torch.testing.assert_close(got, want, atol=0.05, rtol=0.05)


def test_front_ends_are_named_after_their_ops() -> None:
    assert (CONV2D_DGRAD.name, CONV2D_WGRAD.name) == ("conv2d_dgrad", "conv2d_wgrad")


# ---- evaluation: what the search verifies and times ------------------------------------------
@pytest.mark.parametrize("direction", ["dgrad", "wgrad"])
def test_evaluation_verifies_backward_runners(direction: str) -> None:
    from autocutlass.ops.conv import evaluation as ev

    p = ConvProblem(direction, n=2, h=9, w=7, c=16, k=24, r=3, s=3, stride_h=2, pad_h=1, pad_w=1, dil_w=2)
    inputs = ev.make_inputs(p, device="cpu", seed=1)
    assert bool(inputs.output.isnan().all()) and inputs.output.is_contiguous(memory_format=CL)
    ref = ev.reference(p, inputs)
    geo = ([p.stride_h, p.stride_w], [p.pad_h, p.pad_w], [p.dil_h, p.dil_w], 1)
    fe = CONV2D_DGRAD if direction == "dgrad" else CONV2D_WGRAD

    def right(dy: torch.Tensor, other: torch.Tensor, out: torch.Tensor) -> None:
        out.copy_(fe.torch_entry(None)(dy, other, list(out.shape), *geo))

    def half(dy: torch.Tensor, other: torch.Tensor, out: torch.Tensor) -> None:  # leaves half unwritten
        right(dy, other, out)
        out[: out.shape[0] // 2].fill_(math.nan)

    assert ev.verify(right, p, inputs, ref) == (True, None)
    ok, why = ev.verify(half, p, inputs, ref)
    assert not ok and "NaN" in (why or "")
    baseline = ev.torch_baseline(p, inputs)()
    assert ev.check_output(p, baseline, ref)[0]


# ---- the eager backward: torch-served dgrad and wgrad merged into one op ---------------------
def _convolution_backwards(step: Any) -> int:
    """How many ``aten::convolution_backward`` ops ``step()`` ran (the eager autograd path)."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        step()
    return sum(1 for e in prof.events() if e.name == "aten::convolution_backward")


MERGED = {
    "bias s2 channels_last": ((2, 8, 9, 7), (6, 8, 3, 3), True, {"stride": 2, "padding": 1}, True),
    "same uneven dilated": ((2, 4, 7, 6), (3, 4, 2, 3), True, {"padding": "same", "dilation": (1, 2)}, False),
    "unbatched no bias": ((4, 6, 5), (6, 4, 3, 3), False, {"padding": 1}, False),
    "groups": ((2, 8, 6, 6), (6, 4, 3, 3), True, {"padding": 1, "groups": 2}, True),
}


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("case", sorted(MERGED))
def test_eager_backward_served_by_torch_is_one_convolution_backward(case: str) -> None:
    """On the eager path, when torch serves both directions (CPU tensors here; on a GPU the gated
    backward kernels' fallbacks and vendor verdicts), dX, dW and db come from one
    ``aten.convolution_backward``, as torch's own conv does, not one per direction plus a bias
    sum; the gradients are torch's and the dispatcher counts both directions' fallbacks."""
    xs, ws, with_bias, kw, cl = MERGED[case]
    x, w = r(*xs, grad=True, cl=cl and len(xs) == 4), r(*ws, grad=True, cl=cl)
    b = r(ws[0], grad=True) if with_bias else None
    xr, wr = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    br = b.detach().clone().requires_grad_() if b is not None else None
    dy = r(*F.conv2d(xr, wr, br, **kw).shape)
    F.conv2d(xr, wr, br, **kw).backward(dy)
    for step in range(2):  # the first builds the entries, the second runs the memoised ones
        for t in (x, w, b):
            if t is not None:
                t.grad = None
        before = api.dispatcher().stats().fallbacks
        assert _convolution_backwards(lambda: autocutlass.conv2d(x, w, b, **kw).backward(dy)) == 1, step
        assert api.dispatcher().stats().fallbacks - before == 3  # fprop, dgrad, wgrad
        torch.testing.assert_close(x.grad, xr.grad)
        torch.testing.assert_close(w.grad, wr.grad)
        if b is not None:
            torch.testing.assert_close(b.grad, br.grad)


@pytest.mark.parametrize("wanted", ["dx", "dw"])
def test_eager_backward_of_one_gradient_runs_only_its_direction(wanted: str) -> None:
    x, w, b = r(2, 8, 6, 5, grad=wanted == "dx"), r(6, 8, 3, 3, grad=wanted == "dw"), r(6)
    dy = r(2, 6, 6, 5)
    before = api.dispatcher().stats().fallbacks
    assert _convolution_backwards(lambda: autocutlass.conv2d(x, w, b, padding=1).backward(dy)) == 1
    assert api.dispatcher().stats().fallbacks - before == 2  # fprop and the one direction
    gx, gw = torch.ops.aten.convolution_backward(dy, x.detach(), w.detach(), None, [1, 1], [1, 1], [1, 1], False,
                                                 [0, 0], 1, [True, True, False])[:2]  # fmt: skip
    torch.testing.assert_close(x.grad if wanted == "dx" else w.grad, gx if wanted == "dx" else gw)
    assert (w.grad if wanted == "dx" else x.grad) is None


def test_kernel_served_directions_are_not_merged(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where our kernels serve the directions (the fake family: pointwise layers as GEMMs), the
    eager backward launches them, one per direction, and runs no torch convolution backward."""
    rig = make_rig(Policy.HEURISTIC)
    monkeypatch.setattr(api, "_default", rig.dispatcher)
    x, w = r(2, 32, 4, 6, dtype=BF, grad=True, cl=True), r(48, 32, 1, 1, dtype=BF, grad=True, cl=True)
    dy = r(2, 48, 4, 6, dtype=BF, cl=True)
    assert _convolution_backwards(lambda: autocutlass.conv2d(x, w).backward(dy)) == 0
    assert len(rig.family.launches) == 3 and rig.dispatcher.stats().fallbacks == 0


def test_a_torch_served_direction_takes_the_bias_gradient_with_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """dgrad on our kernel (the fake family), wgrad on torch (X 2 bytes off a 16-byte boundary: no
    TMA operand): dW and db come from one ``aten.convolution_backward`` (no separate sum of dY),
    dX from our launch, all three equal to torch's."""
    rig = make_rig(Policy.HEURISTIC)
    monkeypatch.setattr(api, "_default", rig.dispatcher)
    base = torch.randn(2 * 4 * 6 * 32 + 1, dtype=BF)
    x = base[1:].view(2, 4, 6, 32).permute(0, 3, 1, 2).requires_grad_()  # channels_last, misaligned
    w, b = r(48, 32, 1, 1, dtype=BF, grad=True, cl=True), r(48, dtype=BF, grad=True)
    dy = r(2, 48, 4, 6, dtype=BF, cl=True)

    def step() -> None:
        for t in (x, w, b):
            t.grad = None
        autocutlass.conv2d(x, w, b).backward(dy)

    step()
    rig.family.launches.clear()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        step()
    names = [e.name for e in prof.events()]
    assert names.count("aten::convolution_backward") == 1 and "aten::sum" not in names
    assert [launch.problem.a_major for launch in rig.family.launches] == [Major.ROW]  # dgrad's GEMM (wgrad's: COL)
    xr, wr, br = (t.detach().clone().requires_grad_() for t in (x, w, b))
    F.conv2d(xr, wr, br).backward(dy)
    for got, want in ((x.grad, xr.grad), (w.grad, wr.grad), (b.grad, br.grad)):
        torch.testing.assert_close(got, want, atol=0.05, rtol=0.02)


def test_torch_served_marks_entries_that_run_torch() -> None:
    rig = make_rig(Policy.HEURISTIC)
    d = rig.dispatcher
    dy, w = r(2, 48, 4, 6, dtype=BF, cl=True), r(48, 32, 3, 3, dtype=BF, cl=True)
    args = ([2, 32, 4, 6], [1, 1], [1, 1], [1, 1], 1)
    fallback = d.entry(CONV2D_DGRAD, dy, w, *args)  # 3x3: the fake family does not serve it
    count = torch_served(fallback)
    assert count is not None
    before = d.stats().fallbacks
    count()
    assert d.stats().fallbacks == before + 1  # counts one call without running it
    assert d.entry(CONV2D_DGRAD, dy, w, *args) is fallback  # memoised, as call memoises it
    torch.testing.assert_close(fallback(dy, w, *args), torch.nn.grad.conv2d_input(args[0], w, dy, padding=1))
    pointwise = d.entry(CONV2D_DGRAD, dy, r(48, 32, 1, 1, dtype=BF, cl=True), [2, 32, 4, 6], [1, 1], [0, 0], [1, 1], 1)
    assert torch_served(pointwise) is None  # our kernel
    off = make_rig(Policy.OFF).dispatcher.entry(CONV2D_DGRAD, dy, w, *args)
    assert torch_served(off) is not None


def _aten_ops(model: nn.Module, x: torch.Tensor) -> dict[str, int]:
    """The aten ops of one forward + backward of ``model`` (after a warm-up step)."""
    model(x).sum().backward()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        model(x).sum().backward()
    counts: dict[str, int] = {}
    for e in prof.events():
        if e.name.startswith("aten::"):
            counts[e.name] = counts.get(e.name, 0) + 1
    return counts


@pytest.mark.parametrize("frozen", ["nothing", "weight", "input"])
@pytest.mark.parametrize("cl", [True, False], ids=["channels_last", "nchw"])
def test_the_eager_torch_served_backward_copies_nothing_torch_does_not(frozen: str, cl: bool) -> None:
    """On the torch-served eager path (CPU tensors here), a conv's forward + backward makes no
    copy that torch's own conv makes not: no layout conversion of dY, of the gradients or of a
    stand-in operand, whichever gradients are wanted (a frozen weight: dgrad alone; an input
    that needs no grad: wgrad alone; both: one merged call)."""
    fmt = CL if cl else torch.contiguous_format
    x = torch.randn(2, 16, 9, 9).contiguous(memory_format=fmt).requires_grad_(frozen != "input")
    model = nn.Sequential(nn.Conv2d(16, 24, 3, padding=1), nn.ReLU(), nn.Conv2d(24, 8, 1)).to(memory_format=fmt)
    if frozen == "weight":
        for p in model.parameters():
            p.requires_grad_(False)
    ref = _aten_ops(model, x)
    autocutlass.swap_conv2d_(model)
    ours = _aten_ops(model, x)
    for op in ("aten::copy_", "aten::clone", "aten::contiguous", "aten::convolution_backward", "aten::sum"):
        assert ours.get(op, 0) == ref.get(op, 0), (op, ours.get(op, 0), ref.get(op, 0))


def test_an_nchw_input_under_compile_runs_our_kernels_on_its_channels_last_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch.compile (fullgraph: no graph break) of a conv whose input is NCHW and whose weight is
    channels_last: the traced call makes x channels_last (``channels_last_input``; CPU tensors
    stand in for CUDA ones) and our kernels serve the forward, dgrad and wgrad (the rig's family);
    dX reaches the NCHW input; gradients as F.conv2d's."""
    from autocutlass.ops.conv import frontend

    rig = make_rig(Policy.HEURISTIC)
    monkeypatch.setattr(api, "_default", rig.dispatcher)
    monkeypatch.setattr(frontend, "_is_cuda", lambda t: True)
    conv = nn.Conv2d(32, 48, 1, dtype=BF).to(memory_format=CL)
    compiled = torch.compile(lambda x: autocutlass.conv2d(x, conv.weight, conv.bias), backend="aot_eager", fullgraph=True)
    x = r(2, 32, 4, 6, dtype=BF, grad=True)  # NCHW
    assert not x.is_contiguous(memory_format=CL)
    y = compiled(x)
    assert y.is_contiguous(memory_format=CL)
    y.float().square().mean().backward()
    assert not counters["graph_break"]
    assert rig.dispatcher.stats().fallbacks == 0 and len(rig.family.launches) == 3  # fprop, dgrad, wgrad
    xr, wr, br = (t.detach().clone().requires_grad_() for t in (x, conv.weight, conv.bias))
    F.conv2d(xr, wr, br).float().square().mean().backward()
    for got, want in ((x.grad, xr.grad), (conv.weight.grad, wr.grad), (conv.bias.grad, br.grad)):
        torch.testing.assert_close(got, want, atol=0.05, rtol=0.05)

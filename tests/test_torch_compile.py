"""torch.compile over autocutlass on CPU: whole graphs (no breaks) holding ``torch.ops.autocutlass``
ops forwards and backwards, dynamic batch sizes without recompiling, the eager API's errors
raised while tracing, the policy read when the graph runs (never while tracing), CPU tensors run
by torch, autocast, and the dispatch fakes standing in for an sm_90 GPU inside compiled graphs."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch._dynamo.testing import AotEagerAndRecordGraphs, CompileCounterWithBackend
from torch._dynamo.utils import counters

from _dispatch_fakes import make_rig
import autocutlass
from autocutlass import api, dispatch
from autocutlass.settings import Policy

BF = torch.bfloat16


@pytest.fixture(autouse=True)
def fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
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


class Block(nn.Module):
    """A transformer MLP's shape: up (with SiLU fused), down, a matmul, a gemm, a residual."""

    def __init__(self, d: int = 32, h: int = 64, dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        self.up = nn.Linear(d, h, dtype=dtype)
        self.down = nn.Linear(h, d, bias=False, dtype=dtype)
        self.mix = nn.Parameter(torch.randn(d, d, dtype=dtype) / d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = autocutlass.linear(x, self.up.weight, self.up.bias, activation="silu")
        y = self.down(h)
        y = autocutlass.gemm(y, self.mix, x, alpha=0.5, beta=1.0)
        return autocutlass.matmul(y, self.mix.t())


def _targets(gm: torch.fx.GraphModule) -> list[str]:
    return [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]


def test_a_model_compiles_whole_with_our_ops_forwards_and_backwards() -> None:
    model = autocutlass.swap_linear_(Block())
    backend = AotEagerAndRecordGraphs()
    compiled = torch.compile(model, backend=backend, fullgraph=True)
    x = torch.randn(4, 8, 32, requires_grad=True)
    y = compiled(x)
    y.square().mean().backward()
    assert not counters["graph_break"]
    fw, bw = _targets(backend.fw_graphs[0]), _targets(backend.bw_graphs[0])
    assert fw.count("autocutlass.linear.default") == 2 and "autocutlass.gemm.default" in fw
    assert "autocutlass.matmul.default" in fw and "aten.silu.default" in fw  # SiLU outside the kernel when training
    assert bw.count("autocutlass.matmul.default") >= 4 and "autocutlass.gemm.default" in bw  # dX, dW of each GEMM
    ref = Block()
    ref.load_state_dict(model.state_dict())
    xr = x.detach().clone().requires_grad_()
    yr = ref(xr)
    yr.square().mean().backward()
    torch.testing.assert_close(y, yr)
    torch.testing.assert_close(x.grad, xr.grad)
    for (name, p), pr in zip(model.named_parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(p.grad, pr.grad, msg=name)


def test_inference_keeps_the_fused_activation() -> None:
    backend = AotEagerAndRecordGraphs()
    model = Block()
    with torch.no_grad():
        torch.compile(model, backend=backend, fullgraph=True)(torch.randn(4, 32))
    fw = _targets(backend.fw_graphs[0])
    assert "aten.silu.default" not in fw and fw.count("autocutlass.linear.default") == 1


def test_a_new_batch_size_does_not_recompile() -> None:
    model = autocutlass.swap_linear_(Block())
    for dynamic in (True, None):
        torch._dynamo.reset()
        cnt = CompileCounterWithBackend("aot_eager")
        compiled = torch.compile(model, backend=cnt, fullgraph=True, dynamic=dynamic)
        for i, batch in enumerate((2, 3, 5, 9)):
            x = torch.randn(batch, 7, 32)
            if dynamic is None and i == 0:
                torch._dynamo.mark_dynamic(x, 0)
            compiled(x).sum().backward()
        assert cnt.frame_count == 1, dynamic
    assert not counters["graph_break"]


def test_inductor_compiles_our_ops() -> None:
    """The default backend: Inductor's generated code calls our ops with the layouts the fake
    kernels promised (a stride mismatch fails its runtime asserts)."""
    model = autocutlass.swap_linear_(Block())
    compiled = torch.compile(model, fullgraph=True)
    x = torch.randn(3, 5, 32, requires_grad=True)
    y = compiled(x)
    y.sum().backward()
    ref = Block()
    ref.load_state_dict(model.state_dict())
    torch.testing.assert_close(y, ref(x))


# ---- errors raised while tracing are the eager API's ---------------------------------------------
def _r(*shape: int) -> torch.Tensor:
    return torch.randn(*shape)


BAD = {
    "matmul shapes": lambda: autocutlass.matmul(_r(3, 4), _r(5, 6)),
    "matmul out dtype": lambda: autocutlass.matmul(_r(3, 4), _r(4, 6), out=torch.empty(3, 6, dtype=BF)),
    "linear dtypes": lambda: autocutlass.linear(_r(3, 4), _r(5, 4).double()),
    "linear weight": lambda: autocutlass.linear(_r(3, 4), 3),
    "linear activation": lambda: autocutlass.linear(_r(3, 4), _r(5, 4), activation="tanh"),
    "gemm c": lambda: autocutlass.gemm(_r(3, 4), _r(4, 5), _r(2, 5), beta=1.0),
    "conv channels": lambda: autocutlass.conv2d(_r(1, 3, 5, 5), _r(4, 2, 1, 1)),
    "conv padding": lambda: autocutlass.conv2d(_r(1, 3, 5, 5), _r(4, 3, 1, 1), padding="full"),
    "scaled_mm dtypes": lambda: autocutlass.scaled_mm(_r(16, 32).to(BF), _r(32, 16).to(BF), torch.tensor(1.0),
                                                      torch.tensor(1.0), out_dtype=BF),
    "scaled_mm fast_accum": lambda: autocutlass.scaled_mm(_r(16, 32).to(torch.float8_e4m3fn),
                                                          _r(32, 16).to(torch.float8_e4m3fn), torch.tensor(1.0),
                                                          torch.tensor(1.0), use_fast_accum=1),
}  # fmt: skip


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("case", sorted(BAD))
def test_traced_calls_raise_the_eager_errors(case: str) -> None:
    """With ``fullgraph=True`` Dynamo wraps the error (``TorchRuntimeError`` for a fake kernel's,
    ``Unsupported`` for one raised in traced Python) and quotes it; without, it raises the eager
    error itself or the same wrapper."""
    logging.getLogger("torch._subclasses.fake_tensor").disabled = True  # it logs the fake kernel's raise
    try:
        with pytest.raises(Exception) as eager:
            BAD[case]()
        for fullgraph in (True, False):
            torch._dynamo.reset()
            with pytest.raises(Exception) as traced:
                torch.compile(BAD[case], backend="aot_eager", fullgraph=fullgraph)()
            same = type(traced.value) is type(eager.value) and str(traced.value) == str(eager.value)
            assert same or repr(eager.value) in str(traced.value) or str(eager.value) in str(traced.value), (
                fullgraph, traced.value)  # fmt: skip
    finally:
        logging.getLogger("torch._subclasses.fake_tensor").disabled = False


def test_a_fused_residual_compiles_whole_and_trains() -> None:
    backend = AotEagerAndRecordGraphs()
    w = torch.randn(16, 32, requires_grad=True)

    def f(x: torch.Tensor, res: torch.Tensor) -> torch.Tensor:
        return autocutlass.linear(x, w, activation="silu", residual=res)

    x, res = torch.randn(4, 6, 32, requires_grad=True), torch.randn(4, 6, 16, requires_grad=True)
    y = torch.compile(f, backend=backend, fullgraph=True)(x, res)
    y.square().mean().backward()
    assert not counters["graph_break"]
    fw = [n for n in backend.fw_graphs[0].graph.nodes if str(n.target) == "autocutlass.linear.default"]
    assert len(fw) == 1 and len(fw[0].args) == 5 and fw[0].args[4] is not None  # the residual, in the op
    xr, wr, rr = (t.detach().clone().requires_grad_() for t in (x, w, res))
    yr = F.silu(F.linear(xr, wr) + rr)
    yr.square().mean().backward()
    torch.testing.assert_close(y, yr)
    for got, want in ((x.grad, xr.grad), (w.grad, wr.grad), (res.grad, rr.grad)):
        torch.testing.assert_close(got, want)


# ---- CPU tensors, the policy, autocast ----------------------------------------------------------
def test_cpu_tensors_in_a_compiled_graph_run_torch() -> None:
    x, w, b = _r(6, 32), _r(16, 32), _r(16)
    y = torch.compile(lambda x: autocutlass.linear(x, w, b, activation="gelu"), backend="aot_eager", fullgraph=True)(x)
    torch.testing.assert_close(y, F.gelu(F.linear(x, w, b)))
    assert autocutlass.stats().fallbacks == 1  # the op ran, in the graph, and its dispatcher ran torch


class _CountingOverride:
    """Stands in for ``dispatch.POLICY_OVERRIDE``: records each read of the policy."""

    def __init__(self, value: Policy | None = None) -> None:
        self.reads = 0
        self.value = value

    @property
    def policy(self) -> Policy | None:
        self.reads += 1
        return self.value


def test_the_policy_is_read_when_the_graph_runs_never_while_tracing(monkeypatch: pytest.MonkeyPatch) -> None:
    override = _CountingOverride()
    monkeypatch.setattr(dispatch, "POLICY_OVERRIDE", override)
    model = Block()
    x = _r(4, 32)
    with torch.no_grad():
        torch.export.export(model, (x,))  # traces only (fake kernels)
        assert override.reads == 0 and autocutlass.stats().memo_misses == 0
        compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
        compiled(x)
    assert override.reads == 3  # one read per op, when it ran: linear, gemm, matmul (down is a plain nn.Linear)


def test_policy_around_a_compiled_call_reaches_its_ops(monkeypatch: pytest.MonkeyPatch) -> None:
    rig = make_rig(Policy.HEURISTIC)
    monkeypatch.setattr(api, "_default", rig.dispatcher)
    model = Block(dtype=BF)
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
    x = torch.randn(16, 32, dtype=BF)
    with torch.no_grad():
        with autocutlass.policy("off"):
            compiled(x)
        assert rig.family.launches == []
        y = compiled(x)
    assert len(rig.family.launches) == 3 and rig.dispatcher.stats().fallbacks == 0  # down is a plain nn.Linear
    torch.testing.assert_close(y, model(x), atol=0.05, rtol=0.02)


def test_training_under_compile_runs_our_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    rig = make_rig(Policy.HEURISTIC)
    monkeypatch.setattr(api, "_default", rig.dispatcher)
    model = autocutlass.swap_linear_(Block(dtype=BF))
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
    x = torch.randn(2, 16, 32, dtype=BF)
    compiled(x).float().square().mean().backward()
    s = rig.dispatcher.stats()
    # the forward's 4 GEMMs; backward: dA and dB of each, but no dX for the first (x needs no grad)
    assert s.fallbacks == 0 and len(rig.family.launches) == 4 + 7
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model(x).float().square().mean().backward()  # eager: the same ops
    for g, p in zip(grads, model.parameters(), strict=True):
        torch.testing.assert_close(g, p.grad, atol=0.02, rtol=0.02)


def test_autocast_under_compile() -> None:
    model = Block()
    x = _r(4, 32)
    with torch.autocast("cpu", dtype=BF):
        y = torch.compile(model, backend="aot_eager", fullgraph=True)(x)
        want = model(x)
    assert y.dtype == want.dtype == BF
    torch.testing.assert_close(y, want)

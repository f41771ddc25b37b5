"""``autocutlass.grouped_mm`` on CPU: semantics against a per-expert loop of matmuls (every form of
``torch._grouped_mm``, bias, out_dtype, activations, empty experts, rows past the last offset),
the validation errors, the planned ``GroupedGemmProblem`` and its keys, the custom op (opcheck,
fake kernel, gradients against per-expert references, torch.compile without graph breaks), the
evaluation module, and dispatch over a fake grouped kernel family standing in for an sm_90 GPU."""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from _dispatch_fakes import FakeStore, FakeTuner, device_info, settings
from torch._dynamo.testing import AotEagerAndRecordGraphs, CompileCounterWithBackend
from torch._dynamo.utils import counters
from torch.library import opcheck

import autocutlass
from autocutlass import torch_ops  # noqa: F401  (registers the ops)
from autocutlass.dispatch import Dispatcher, Layers
from autocutlass.errors import UnsupportedProblem
from autocutlass.ops.base import Unsupported
from autocutlass.ops.grouped import evaluation
from autocutlass.ops.grouped.frontend import GROUPED_MM, GroupedCall, GroupedPlan, plan
from autocutlass.ops.grouped.problem import GroupedGemmProblem
from autocutlass.ops.registry import evaluation_for, problem_from_dict
from autocutlass.ops.types import Activation, DType, Epilogue, Major
from autocutlass.settings import Policy

ops = torch.ops.autocutlass
BF = torch.bfloat16
ACTS = {None: lambda t: t, "relu": F.relu, "gelu": F.gelu, "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
        "silu": F.silu}  # fmt: skip


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


def offs_of(sizes: list[int]) -> torch.Tensor:
    return torch.tensor(sizes, dtype=torch.int32).cumsum(0, dtype=torch.int32)


def loop_ref(x: torch.Tensor, w: torch.Tensor, offs: torch.Tensor | None, bias: torch.Tensor | None = None,
             act: str | None = None) -> torch.Tensor:  # fmt: skip
    """The per-group loop of matmuls every form must equal (float32)."""
    x, w = x.float(), w.float()
    b = None if bias is None else bias.float()
    ends = [] if offs is None else [int(v) for v in offs]
    if x.dim() == 2 and w.dim() == 3:
        out, start = torch.zeros(x.shape[0], w.shape[-1]), 0
        for g, end in enumerate(ends):
            if end > start:
                out[start:end] = x[start:end] @ w[g] + (0 if b is None else b[g])
            start = end
        served = (torch.arange(x.shape[0]) < ends[-1]).unsqueeze(1)
        return torch.where(served, ACTS[act](out), 0.0)
    if x.dim() == 2 and w.dim() == 2:
        out, start = torch.zeros(len(ends), x.shape[0], w.shape[1]), 0
        for g, end in enumerate(ends):
            out[g] = x[:, start:end] @ w[start:end] + (0 if b is None else b[g])
            start = end
        return ACTS[act](out)
    if x.dim() == 3 and w.dim() == 3:
        return ACTS[act](x @ w + (0 if b is None else b.unsqueeze(1)))
    out, start = torch.zeros(x.shape[1], w.shape[1]), 0
    for g, end in enumerate(ends):
        out[:, start:end] = x[g] @ w[:, start:end]
        start = end
    return ACTS[act](out)


# ---- semantics ------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, BF, torch.float16])
@pytest.mark.parametrize("sizes", [[3, 0, 5, 4], [0, 0, 12, 0], [1, 1, 1, 1], [4, 4, 2, 0]])
def test_2d_3d_matches_the_per_expert_loop(dtype: torch.dtype, sizes: list[int]) -> None:
    x, w = torch.randn(13, 16).to(dtype), torch.randn(4, 16, 24).to(dtype)
    offs = offs_of(sizes)  # the last offset may stop before T = 13: those rows are zero
    y = autocutlass.grouped_mm(x, w, offs)
    assert y.shape == (13, 24) and y.dtype == dtype and y.is_contiguous()
    tol = 1e-5 if dtype is torch.float32 else 3e-2
    torch.testing.assert_close(y.float(), loop_ref(x, w, offs), rtol=tol, atol=tol)
    # the transposed view of an (E, N, K) weight, and torch itself on the served rows
    wt = w.transpose(-2, -1).contiguous().transpose(-2, -1)
    torch.testing.assert_close(autocutlass.grouped_mm(x, wt, offs), y)
    end = int(offs[-1])
    torch.testing.assert_close(y[:end], torch._grouped_mm(x, w, offs)[:end])


@pytest.mark.parametrize("act", sorted(ACTS, key=str))
def test_bias_and_activation(act: str | None) -> None:
    x, w, b = torch.randn(10, 16), torch.randn(3, 16, 8), torch.randn(3, 8)
    offs = offs_of([4, 0, 5])
    y = autocutlass.grouped_mm(x, w, offs, bias=b, activation=act)
    torch.testing.assert_close(y, loop_ref(x, w, offs, b, act))
    assert not y[9:].any()  # past offs[-1]: zero, bias and activation included


def test_out_dtype_float32_accumulates_in_float32() -> None:
    x, w = torch.randn(9, 32).to(BF), torch.randn(2, 32, 16).to(BF)
    offs, b = offs_of([4, 5]), torch.randn(2, 16)
    y = autocutlass.grouped_mm(x, w, offs, bias=b, out_dtype=torch.float32, activation="relu")
    assert y.dtype == torch.float32
    torch.testing.assert_close(y, loop_ref(x, w, offs, b, "relu"), rtol=1e-5, atol=1e-5)
    assert autocutlass.grouped_mm(x, w, offs, out_dtype=BF).dtype == BF


def test_the_other_forms() -> None:
    e_offs = offs_of([8, 0, 16])
    xk, wk = torch.randn(6, 24), torch.randn(24, 8)  # 2d x 2d: groups along K (the weight gradient)
    torch.testing.assert_close(autocutlass.grouped_mm(xk, wk, e_offs), loop_ref(xk, wk, e_offs))
    bias = torch.randn(3, 8)
    torch.testing.assert_close(autocutlass.grouped_mm(xk, wk, e_offs, bias=bias), loop_ref(xk, wk, e_offs, bias))
    xb, wb = torch.randn(3, 5, 16), torch.randn(3, 16, 8)  # 3d x 3d: batched
    torch.testing.assert_close(autocutlass.grouped_mm(xb, wb, activation="silu"), loop_ref(xb, wb, None, None, "silu"))
    xn, wn = torch.randn(3, 5, 16), torch.randn(16, 24)  # 3d x 2d: groups along N
    torch.testing.assert_close(autocutlass.grouped_mm(xn, wn, e_offs), loop_ref(xn, wn, e_offs))


# ---- errors -----------------------------------------------------------------------------------------
X, W, OFFS = torch.randn(10, 16), torch.randn(3, 16, 8), offs_of([3, 3, 4])
BAD = {
    "offs int64": (lambda: autocutlass.grouped_mm(X, W, OFFS.long()), "int32"),
    "offs 2d": (lambda: autocutlass.grouped_mm(X, W, OFFS.view(1, 3)), "1D"),
    "offs missing": (lambda: autocutlass.grouped_mm(X, W), "offsets tensor not provided"),
    "offs for 3d x 3d": (lambda: autocutlass.grouped_mm(torch.randn(3, 4, 16), W, OFFS), "not needed"),
    "offs length": (lambda: autocutlass.grouped_mm(X, W, OFFS[:2]), "batch sizes"),
    "offs decreasing": (lambda: autocutlass.grouped_mm(X, W, torch.tensor([3, 2, 9], dtype=torch.int32)),
                        "non-decreasing"),
    "offs negative": (lambda: autocutlass.grouped_mm(X, W, torch.tensor([-1, 2, 9], dtype=torch.int32)), "negative"),
    "offs past T": (lambda: autocutlass.grouped_mm(X, W, torch.tensor([3, 5, 11], dtype=torch.int32)), "past T"),
    "K mismatch": (lambda: autocutlass.grouped_mm(torch.randn(10, 15), W, OFFS), "contraction"),
    "dtypes differ": (lambda: autocutlass.grouped_mm(X.to(BF), W, OFFS), "same dtype"),
    "float64": (lambda: autocutlass.grouped_mm(X.double(), W.double(), OFFS), "float64"),
    "rank": (lambda: autocutlass.grouped_mm(torch.randn(10), W, OFFS), "2D or 3D"),
    "strides": (lambda: autocutlass.grouped_mm(torch.randn(16, 10).t(), W, OFFS), "16 bytes"),
    "bias shape": (lambda: autocutlass.grouped_mm(X, W, OFFS, bias=torch.randn(8)), "one row of N per group"),
    "bias dtype": (lambda: autocutlass.grouped_mm(X, W, OFFS, bias=torch.randn(3, 8).to(BF)), "dtype"),
    "out_dtype": (lambda: autocutlass.grouped_mm(X, W, OFFS, out_dtype=torch.float16), "out_dtype"),
    "activation": (lambda: autocutlass.grouped_mm(X, W, OFFS, activation="tanh"), "activation"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(BAD))
@pytest.mark.parametrize("grad", [False, True])
def test_bad_calls_raise_clear_errors(case: str, grad: bool) -> None:
    """The same error on the eager path and through the custom op (autograd recording)."""
    f, words = BAD[case]
    W.requires_grad_(grad)
    try:
        with pytest.raises((RuntimeError, ValueError, TypeError)) as info:
            f()
    finally:
        W.requires_grad_(False)
    assert words in str(info.value), str(info.value)
    assert "grouped_mm" in str(info.value) or case == "activation"


def test_not_tensors_raise_type_errors() -> None:
    with pytest.raises(TypeError, match="w must be a torch.Tensor"):
        autocutlass.grouped_mm(X, 3, OFFS)
    with pytest.raises(TypeError, match="out_dtype"):
        autocutlass.grouped_mm(X, W, OFFS, out_dtype="bf16")


# ---- planning: the problem a served call becomes ----------------------------------------------------
class _GPU:
    """A ``PlanContext`` treating CPU tensors as on an sm_90 GPU."""

    def __init__(self, cc: tuple[int, int] = (9, 0)) -> None:
        self.cc = cc

    def on_gpu(self, t: torch.Tensor) -> bool:
        return True

    def device_info(self, index: int) -> Any:
        return device_info(self.cc)


def test_plan_builds_the_problem() -> None:
    x, w = torch.randn(100, 64).to(BF), torch.randn(8, 64, 48).to(BF)
    offs = offs_of([12] * 8)
    p = plan(GroupedCall(x, w, offs, torch.randn(8, 48).to(BF), None, Activation.SILU), _GPU())
    assert isinstance(p, GroupedPlan) and p.out_shape == (100, 48) and p.out_dtype == BF
    assert p.problem == GroupedGemmProblem(experts=8, t=100, n=48, k=64, w_major=Major.ROW,
                                           epilogue=Epilogue(bias=True, activation=Activation.SILU))  # fmt: skip
    wt = torch.randn(8, 48, 64).to(BF).transpose(-2, -1)
    p = plan(GroupedCall(x, wt, offs, None, torch.float32), _GPU())
    assert isinstance(p, GroupedPlan)
    assert p.problem.w_major is Major.COL and p.problem.out_dtype is DType.FP32 and p.out_dtype == torch.float32
    shifted = torch.randn(8 * 20 * 64 + 4).to(BF)[4:].view(8, 20, 64).transpose(-2, -1)  # base 8 bytes past 16
    odd = plan(GroupedCall(x, shifted, offs), _GPU())
    assert isinstance(odd, GroupedPlan) and (odd.problem.align_w, odd.problem.align_out) == (8, 8)


@pytest.mark.parametrize(
    "call, words",
    [
        (lambda: GroupedCall(torch.randn(10, 16), torch.randn(3, 16, 8), OFFS), "float32"),
        (lambda: GroupedCall(torch.randn(4, 16).to(BF), torch.randn(16, 8).to(BF), offs_of([8, 8])), "2d_2d"),
        (lambda: GroupedCall(torch.randn(3, 4, 16).to(BF), torch.randn(3, 16, 8).to(BF), None), "3d_3d"),
        (lambda: GroupedCall(torch.randn(16, 16).to(BF).t(), torch.randn(3, 16, 8).to(BF), offs_of([3, 3, 4])),
         "column-major"),
        (lambda: GroupedCall(torch.randn(0, 16).to(BF), torch.randn(3, 16, 8).to(BF), torch.zeros(3, dtype=torch.int32)),
         "empty"),
    ],
)  # fmt: skip
def test_plan_leaves_to_torch(call: Any, words: str) -> None:
    p = plan(call(), _GPU())
    assert isinstance(p, Unsupported) and words in p.reason, p
    assert "cc 8.0" in plan(GroupedCall(X.to(BF), W.to(BF), OFFS), _GPU((8, 0))).reason  # type: ignore[union-attr]


def test_problem_keys_and_bucket() -> None:
    p = GroupedGemmProblem(experts=128, t=4000, n=1536, k=2048, w_major=Major.COL)
    assert p.bucket().t == 4096 and p.bucket_key() == GroupedGemmProblem(experts=128, t=4096, n=1536, k=2048,
                                                                         w_major=Major.COL).key()  # fmt: skip
    assert problem_from_dict(p.as_dict()) == p
    assert p.neighbour_key() == GroupedGemmProblem(experts=128, t=17, n=1536, k=2048, w_major=Major.COL).neighbour_key()
    assert p.neighbour_key() != GroupedGemmProblem(experts=128, t=17, n=1536, k=2048).neighbour_key()
    assert '"t":' not in p.kernel_class_key() and '"w_major":"col"' in p.kernel_class_key()
    assert p.flops == 2 * 4000 * 1536 * 2048
    assert evaluation_for(p) is evaluation


# ---- the custom op ----------------------------------------------------------------------------------
OPCHECK = {
    "2d_3d": lambda: (torch.randn(10, 16, requires_grad=True), torch.randn(3, 16, 8, requires_grad=True),
                      offs_of([3, 0, 6]), None, None, None),
    "2d_3d_bias_silu": lambda: (torch.randn(10, 16, requires_grad=True), torch.randn(3, 16, 8, requires_grad=True),
                                offs_of([3, 0, 7]), torch.randn(3, 8, requires_grad=True), None, "silu"),
    "2d_3d_transposed_w": lambda: (torch.randn(10, 16, requires_grad=True),
                                   torch.randn(3, 8, 16).transpose(-2, -1).requires_grad_(), offs_of([5, 5, 0]),
                                   None, None, None),
    "2d_2d": lambda: (torch.randn(6, 24, requires_grad=True), torch.randn(24, 8, requires_grad=True),
                      offs_of([8, 0, 16]), torch.randn(3, 8, requires_grad=True), None, None),
    "3d_3d": lambda: (torch.randn(3, 5, 16, requires_grad=True), torch.randn(3, 16, 8, requires_grad=True), None,
                      None, None, "relu"),
    "3d_2d": lambda: (torch.randn(3, 5, 16, requires_grad=True), torch.randn(16, 24, requires_grad=True),
                      offs_of([8, 8, 8]), None, None, None),
    "bf16_out_f32": lambda: (torch.randn(10, 16).to(BF), torch.randn(3, 16, 8).to(BF), offs_of([3, 3, 4]),
                             torch.randn(3, 8), torch.float32, "gelu"),
}  # fmt: skip


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("case", sorted(OPCHECK))
def test_opcheck(case: str) -> None:
    opcheck(ops.grouped_mm.default, OPCHECK[case]())


def test_fake_kernel_returns_the_real_layout() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    for case in OPCHECK.values():
        args = case()
        real = ops.grouped_mm(*args)
        mode = FakeTensorMode()
        with mode:
            fake = ops.grouped_mm(*(mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args))
        assert fake.shape == real.shape and fake.stride() == real.stride() and fake.dtype == real.dtype


def _grads(f: Any, *inputs: torch.Tensor) -> list[torch.Tensor]:
    leaves = [t.detach().clone().requires_grad_() for t in inputs]
    out = f(*leaves)
    torch.manual_seed(1)
    out.backward(torch.randn_like(out))
    return [t.grad for t in leaves]


@pytest.mark.parametrize("act", [None, "relu", "silu"])
@pytest.mark.parametrize("w_view", ["row", "col"])
def test_gradients_match_the_per_expert_loop(act: str | None, w_view: str) -> None:
    x, b = torch.randn(11, 16), torch.randn(3, 8)
    w = torch.randn(3, 16, 8) if w_view == "row" else torch.randn(3, 8, 16).transpose(-2, -1)
    offs = offs_of([4, 0, 5])  # an empty expert, and rows past the last offset
    ours = _grads(lambda x, w, b: autocutlass.grouped_mm(x, w, offs, bias=b, activation=act), x, w, b)
    ref = _grads(lambda x, w, b: loop_ref(x, w, offs, b, act), x, w, b)
    for got, want in zip(ours, ref, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    # the op called directly with its activation fused: the backward recomputes the pre-activation
    fused = _grads(lambda x, w, b: ops.grouped_mm(x, w, offs, b, None, act), x, w, b)
    for got, want in zip(fused, ref, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("form", ["2d_2d", "3d_3d", "3d_2d"])
def test_gradients_of_the_other_forms(form: str) -> None:
    offs = offs_of([8, 0, 16])
    if form == "2d_2d":
        x, w, o, b = torch.randn(6, 24), torch.randn(24, 8), offs, torch.randn(3, 8)
    elif form == "3d_3d":
        x, w, o, b = torch.randn(3, 5, 16), torch.randn(3, 16, 8), None, torch.randn(3, 8)
    else:
        x, w, o, b = torch.randn(3, 5, 16), torch.randn(16, 24), offs, None
    extra = () if b is None else (b,)

    def ours(x: Any, w: Any, *b: Any) -> Any:
        return autocutlass.grouped_mm(x, w, o, bias=b[0] if b else None)

    def ref(x: Any, w: Any, *b: Any) -> Any:
        return loop_ref(x, w, o, b[0] if b else None)

    for got, want in zip(_grads(ours, x, w, *extra), _grads(ref, x, w, *extra), strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_gradients_with_unaligned_n_and_out_dtype() -> None:
    """N = 6 (12-byte rows of dY: padded before torch._grouped_mm), bf16 operands into float32."""
    x, w = torch.randn(9, 16).to(BF), torch.randn(2, 6, 16).to(BF).transpose(-2, -1)
    offs = offs_of([4, 5])
    ours = _grads(lambda x, w: autocutlass.grouped_mm(x, w, offs, out_dtype=torch.float32), x, w)
    ref = _grads(lambda x, w: loop_ref(x, w, offs), x.float(), w.float())
    for got, want in zip(ours, ref, strict=True):
        torch.testing.assert_close(got.float(), want, rtol=3e-2, atol=3e-2)


def test_torch_compile_fullgraph_forwards_and_backwards() -> None:
    backend = AotEagerAndRecordGraphs()
    w1, w2 = torch.randn(4, 16, 32, requires_grad=True), torch.randn(4, 32, 16, requires_grad=True)

    def moe(x: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
        h = autocutlass.grouped_mm(x, w1, offs, activation="silu")
        return autocutlass.grouped_mm(h, w2, offs)

    compiled = torch.compile(moe, backend=backend, fullgraph=True)
    x, offs = torch.randn(12, 16, requires_grad=True), offs_of([3, 0, 6, 3])
    y = compiled(x, offs)
    y.square().sum().backward()
    assert not counters["graph_break"]
    fw, bw = (_targets(g) for g in (backend.fw_graphs[0], backend.bw_graphs[0]))
    assert fw.count("autocutlass.grouped_mm.default") == 2 and "aten.silu.default" in fw
    assert bw.count("autocutlass.grouped_mm.default") == 4  # dX and dW of each
    xr, w1r, w2r = (t.detach().clone().requires_grad_() for t in (x, w1, w2))
    yr = loop_ref(F.silu(loop_ref(xr, w1r, offs)), w2r, offs)
    yr.square().sum().backward()
    torch.testing.assert_close(y, yr, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(x.grad, xr.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(w1.grad, w1r.grad, rtol=1e-4, atol=1e-4)


def test_a_new_routing_or_token_count_does_not_recompile() -> None:
    cnt = CompileCounterWithBackend("aot_eager")
    w = torch.randn(4, 16, 8)
    compiled = torch.compile(lambda x, o: autocutlass.grouped_mm(x, w, o), backend=cnt, fullgraph=True, dynamic=True)
    for t, sizes in ((12, [3, 0, 6, 3]), (17, [5, 5, 5, 2]), (9, [0, 0, 0, 9])):
        x, o = torch.randn(t, 16), offs_of(sizes)
        torch.testing.assert_close(compiled(x, o), loop_ref(x, w, o))
    assert cnt.frame_count == 1 and not counters["graph_break"]


def _targets(gm: torch.fx.GraphModule) -> list[str]:
    return [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]


# ---- evaluation ------------------------------------------------------------------------------------
@pytest.mark.parametrize("routing", evaluation.ROUTINGS)
def test_routings(routing: str) -> None:
    for t, e in ((256, 8), (100, 128), (0, 4), (4096, 256)):
        sizes = evaluation.expert_sizes(t, e, routing)
        assert len(sizes) == e and sum(sizes) == t and min(sizes) >= 0
        offs = evaluation.offsets(t, e, routing)
        assert offs.dtype == torch.int32 and offs.shape == (e,) and (offs.numel() == 0 or int(offs[-1]) == t)
    assert evaluation.expert_sizes(10, 4) == [3, 3, 2, 2]
    assert evaluation.expert_sizes(4096, 8, "skewed") == evaluation.expert_sizes(4096, 8, "skewed")  # seeded
    skewed = evaluation.expert_sizes(256, 128, "skewed")
    assert skewed.count(0) > 0 and max(skewed) > 256 // 128 * 4


@pytest.mark.parametrize("w_major", list(Major))
def test_evaluation_verifies_a_correct_runner_and_rejects_wrong_ones(w_major: Major) -> None:
    p = GroupedGemmProblem(experts=4, t=37, n=24, k=32, x_dtype=DType.BF16, w_dtype=DType.BF16, out_dtype=DType.BF16,
                           w_major=w_major, epilogue=Epilogue(bias=True, activation=Activation.GELU))  # fmt: skip
    inputs = evaluation.make_inputs(p, device="cpu", routing="skewed")
    assert inputs.w.shape == (4, 32, 24) and inputs.w.stride(-1 if w_major is Major.ROW else -2) == 1
    ref = evaluation.reference(p, inputs)

    def good(x: Any, w: Any, offs: Any, out: Any, *, bias: Any = None) -> None:
        out.copy_(torch_grouped_ref(x, w, offs, bias, p.epilogue.activation))

    def drops_bias(x: Any, w: Any, offs: Any, out: Any, *, bias: Any = None) -> None:
        good(x, w, offs, out)

    def skips_tail(x: Any, w: Any, offs: Any, out: Any, *, bias: Any = None) -> None:
        good(x, w, offs, out, bias=bias)
        out[: int(offs[0])] = math.nan

    assert evaluation.verify(good, p, inputs, ref) == (True, None)
    assert not evaluation.verify(drops_bias, p, inputs, ref)[0]
    if int(inputs.offs[0]) > 0:
        assert "NaN" in str(evaluation.verify(skips_tail, p, inputs, ref)[1])
    base = evaluation.torch_baseline(p, inputs)()
    assert evaluation.check_output(p, base, ref)[0]


def test_evaluation_verifies_uneven_and_empty_routings_too() -> None:
    """The search's inputs are routed evenly; a runner that ignores the offsets and gives each
    expert T/E rows passes that routing alone, and fails the skewed and empty-expert ones that
    ``verify`` adds (the prepared inputs' timing routing is left as it is)."""
    p = GroupedGemmProblem(experts=4, t=64, n=24, k=32, x_dtype=DType.BF16, w_dtype=DType.BF16, out_dtype=DType.BF16,
                           w_major=Major.COL)  # fmt: skip
    inputs = evaluation.make_inputs(p, device="cpu")
    ref = evaluation.reference(p, inputs)
    even = inputs.offs.clone()

    def good(x: Any, w: Any, offs: Any, out: Any, *, bias: Any = None) -> None:
        out.copy_(torch_grouped_ref(x, w, offs, bias, Activation.NONE))

    def even_rows(x: Any, w: Any, offs: Any, out: Any, *, bias: Any = None) -> None:
        good(x, w, even, out)

    assert evaluation.verify(good, p, inputs, ref) == (True, None)
    ok, why = evaluation.verify(even_rows, p, inputs, ref)
    assert not ok and "skewed routing" in str(why)
    assert torch.equal(inputs.offs, even) and set(inputs.variants) == set(evaluation.VERIFY_ROUTINGS)


@pytest.mark.parametrize("epilogue", [Epilogue(), Epilogue(bias=True, activation=Activation.SILU)])
def test_the_search_times_every_timing_routing_and_reports_per_call(epilogue: Epilogue,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The search's inputs launch a candidate once per ``TIMING_ROUTINGS`` routing (the others
    first, the output left as the first's result), torch's baseline does the same, and the
    handlers divide a run's timing by its launches."""
    from autocutlass.search.handlers import per_call
    from autocutlass.search.timing import Timing

    p = GroupedGemmProblem(experts=4, t=64, n=24, k=32, w_major=Major.COL, epilogue=epilogue)
    inputs = evaluation.make_search_inputs(p, device="cpu")
    assert evaluation.TIMING_ROUTINGS == ("balanced", "skewed") and inputs.calls_per_run == 2
    assert torch.equal(inputs.offs, evaluation.offsets(64, 4, "balanced"))
    assert [o.tolist() for o in inputs.also] == [evaluation.offsets(64, 4, "skewed").tolist()]
    ref = evaluation.reference(p, inputs)
    seen: list[list[int]] = []

    def good(x: Any, w: Any, offs: Any, out: Any, *, bias: Any = None) -> None:
        seen.append(offs.tolist())
        out.copy_(torch_grouped_ref(x, w, offs, bias, p.epilogue.activation))

    inputs.poison()
    inputs.run(good)
    assert seen == [inputs.also[0].tolist(), inputs.offs.tolist()]  # skewed, then balanced
    assert evaluation.check_output(p, inputs.output, ref)[0]
    assert evaluation.verify(good, p, inputs, ref) == (True, None)

    calls: list[list[int]] = []
    real = torch._grouped_mm

    def counting(x: Any, w: Any, offs: Any = None, *args: Any, **kw: Any) -> torch.Tensor:
        calls.append(offs.tolist())
        return real(x, w, offs, *args, **kw)

    monkeypatch.setattr(torch, "_grouped_mm", counting)
    base = evaluation.torch_baseline(p, inputs)()
    assert calls == [inputs.also[0].tolist(), inputs.offs.tolist()]
    assert evaluation.check_output(p, base, ref)[0]  # the baseline's result is the timing routing's

    assert per_call(Timing(4.0, 2.0, 6.0, 9), inputs) == Timing(2.0, 1.0, 3.0, 9)
    single = evaluation.make_inputs(p, device="cpu")
    assert single.calls_per_run == 1 and per_call(Timing(4.0, 2.0, 6.0, 9), single) == Timing(4.0, 2.0, 6.0, 9)
    one = GroupedGemmProblem(experts=1, t=64, n=24, k=32, w_major=Major.COL)
    assert evaluation.make_search_inputs(one, device="cpu").calls_per_run == 1  # one expert: one routing


def test_the_search_handler_prepares_the_search_inputs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The benchmark worker builds an op's inputs with its evaluation's ``make_search_inputs``
    when it has one (grouped GEMM: several timing routings), else ``make_inputs`` (GEMM)."""
    import types

    import autocutlass.device as device_mod
    from autocutlass.ops.gemm import evaluation as gemm_evaluation
    from autocutlass.ops.gemm.problem import GemmProblem
    from autocutlass.search.handlers import BenchHandler

    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr(device_mod, "current_device", lambda i: types.SimpleNamespace(l2_bytes=1 << 20))
    made: list[str] = []

    def fake(name: str) -> Any:
        def make(problem: Any, *, device: Any, seed: int = 0) -> str:
            made.append(name)
            return name

        return make

    monkeypatch.setattr(evaluation, "make_search_inputs", fake("grouped search"))
    monkeypatch.setattr(evaluation, "make_inputs", fake("grouped plain"))
    monkeypatch.setattr(evaluation, "reference", lambda problem, inputs: None)
    monkeypatch.setattr(gemm_evaluation, "make_inputs", fake("gemm plain"))
    monkeypatch.setattr(gemm_evaluation, "reference", lambda problem, inputs: None)
    handler = BenchHandler()
    handler._prepare(GroupedGemmProblem(experts=2, t=8, n=8, k=8))
    handler._prepare(GemmProblem(m=8, n=8, k=8))
    assert made == ["grouped search", "gemm plain"]


def torch_grouped_ref(x: Any, w: Any, offs: Any, bias: Any, act: Activation) -> torch.Tensor:
    from autocutlass.ops.grouped.frontend import torch_grouped

    return torch_grouped(GroupedCall(x, w, offs, bias, None, act))


# ---- dispatch over a fake grouped family (CPU tensors stand in for an sm_90 GPU) ------------------
@dataclass(frozen=True)
class FakeGroupedConfig:
    tile_m: int = 128


class FakeGroupedFamily:
    name = "fake_grouped"

    def __init__(self) -> None:
        self.launches: list[tuple[FakeGroupedConfig, GroupedGemmProblem]] = []

    def source_hash(self) -> str:
        return "fake"

    def supports(self, problem: Any) -> str | None:
        return None if isinstance(problem, GroupedGemmProblem) else "not grouped"

    def check(self, config: FakeGroupedConfig, problem: Any) -> str | None:
        return None

    def seeds(self, problem: Any) -> list[FakeGroupedConfig]:
        return [FakeGroupedConfig(64)]

    def config_from_dict(self, d: dict[str, Any]) -> FakeGroupedConfig:
        return FakeGroupedConfig(**d)

    def compile(self, config: FakeGroupedConfig, problem: GroupedGemmProblem) -> Any:
        def run(x: Any, w: Any, offs: Any, out: Any, *, bias: Any = None) -> None:
            p = problem
            assert x.shape == (out.shape[0], p.k) and x.stride(1) == 1
            assert w.shape == (p.experts, p.k, p.n) and w.stride(-1 if p.w_major is Major.ROW else -2) == 1
            assert offs.dtype == torch.int32 and offs.shape == (p.experts,)
            assert out.is_contiguous() and (bias is not None) == p.epilogue.bias
            self.launches.append((config, problem))
            out.copy_(torch_grouped_ref(x, w, offs, bias, p.epilogue.activation))

        return run


def _rig(policy: Policy = Policy.HEURISTIC, strict: bool = False) -> tuple[Dispatcher, FakeGroupedFamily]:
    fam = FakeGroupedFamily()
    store = FakeStore()
    layers = Layers(get_family=lambda n: fam, families_for=lambda p: [fam] if fam.supports(p) is None else [],
                    open_store=lambda s: (store, store), tune=FakeTuner({"tile_m": 128}),
                    why_unsupported=lambda p: "none")  # fmt: skip
    d = Dispatcher(settings(policy=policy, strict=strict), layers=layers, device_info=lambda i: device_info(),
                   on_gpu=lambda t: True)  # fmt: skip
    return d, fam


def test_dispatch_launches_the_kernel_and_memoises() -> None:
    d, fam = _rig()
    x, w = torch.randn(40, 32).to(BF), torch.randn(4, 32, 16).to(BF)
    for sizes in ([10, 10, 10, 10], [0, 40, 0, 0], [1, 2, 3, 4]):  # new routings: memo hits
        offs, b = offs_of(sizes), torch.randn(4, 16).to(BF)
        y = d.call(GROUPED_MM, x, w, offs, b, None, "relu")
        torch.testing.assert_close(y.float(), loop_ref(x, w, offs, b, "relu"), rtol=3e-2, atol=3e-2)
    assert len(fam.launches) == 3 and d.stats().memo_misses == 1 and d.stats().memo_hits == 2
    assert fam.launches[0][1].epilogue == Epilogue(bias=True, activation=Activation.RELU)
    y2 = d.call(GROUPED_MM, x, torch.randn(4, 16, 32).to(BF).transpose(-2, -1), offs_of([40, 0, 0, 0]), None, None,
                None)  # fmt: skip
    assert y2.shape == (40, 16) and fam.launches[-1][1].w_major is Major.COL


def test_dispatch_checks_offsets_once_per_fingerprint_and_falls_back_with_a_reason(
    caplog: pytest.LogCaptureFixture,
) -> None:
    d, _ = _rig()
    x, w = torch.randn(10, 16).to(BF), torch.randn(3, 16, 8).to(BF)
    with pytest.raises(RuntimeError, match="past T"):
        d.call(GROUPED_MM, x, w, torch.tensor([3, 5, 11], dtype=torch.int32), None, None, None)
    caplog.set_level(logging.WARNING, logger="autocutlass")
    xk, wk = torch.randn(4, 16).to(BF), torch.randn(16, 8).to(BF)
    for _ in range(2):
        d.call(GROUPED_MM, xk, wk, offs_of([8, 8]), None, None, None)
    lines = [r.getMessage() for r in caplog.records if "2d_2d" in r.getMessage()]
    assert len(lines) == 1 and "served by torch" in lines[0] and d.stats().fallbacks == 2
    strict, _ = _rig(strict=True)
    with pytest.raises(UnsupportedProblem, match="2d_2d"):
        strict.call(GROUPED_MM, xk, wk, offs_of([8, 8]), None, None, None)

"""On an sm_90 GPU: autograd on our kernels (bf16 forward and backward of matmul, linear, gemm and
a pointwise conv2d against torch in float32, every GEMM served, none falling back), a training
step of a swapped model against torch's, and torch.compile (default mode for training,
``mode="reduce-overhead"`` for inference: CUDA graphs captured, not skipped, and replayed without
running Python). Skipped without CUDA (tests/conftest.py)."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch._dynamo.utils import counters

import autocutlass
from autocutlass.ops.compare import REL_FROBENIUS_TOL, compare
from autocutlass.ops.types import DType

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("isolated_env")]

BF = torch.bfloat16
CL = torch.channels_last
TOL = 2 * REL_FROBENIUS_TOL[DType.BF16]
"""bf16 gradients pass through two roundings (dY, then the GEMM's output): twice the forward's."""


def cuda(*shape: int, grad: bool = False) -> torch.Tensor:
    return (torch.randn(*shape, device="cuda", dtype=BF) / shape[-1] ** 0.25).requires_grad_(grad)


def close(x: torch.Tensor, ref: torch.Tensor, label: str) -> None:
    assert x.shape == ref.shape, (label, x.shape, ref.shape)
    ok, why = compare(x.float(), ref.float(), TOL, label)
    assert ok, f"{label}: {why}"


def served(f, *args):  # noqa: ANN001, ANN202
    """Run f (forward and backward) and assert that no GEMM fell back to torch."""
    before = autocutlass.stats().fallbacks
    r = f(*args)
    torch.cuda.synchronize()
    assert autocutlass.stats().fallbacks == before, "a GEMM fell back to torch"
    return r


def _reference(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    return [t.detach().float().requires_grad_(t.requires_grad) for t in tensors]


def _check(ours, theirs, inputs: list[torch.Tensor], label: str) -> None:  # noqa: ANN001
    """ours(*inputs) in bf16 and theirs(*float32 copies): outputs and every input's gradient."""
    ref_inputs = _reference(inputs)
    y = served(ours, *inputs)
    dy = torch.randn_like(y)
    served(lambda: y.backward(dy))
    yr = theirs(*ref_inputs)
    yr.backward(dy.float())
    close(y, yr, f"{label} y")
    for i, (t, tr) in enumerate(zip(inputs, ref_inputs, strict=True)):
        if t.requires_grad:
            close(t.grad, tr.grad, f"{label} d{i}")


@pytest.mark.parametrize("activation", [None, "silu", "gelu_tanh"])
def test_linear_forward_and_backward(activation: str | None) -> None:
    act = {None: lambda t: t, "silu": F.silu, "gelu_tanh": lambda t: F.gelu(t, approximate="tanh")}[activation]
    x, w, b = cuda(4, 256, 1024, grad=True), cuda(2048, 1024, grad=True), cuda(2048, grad=True)
    _check(lambda x, w, b: autocutlass.linear(x, w, b, activation=activation), lambda x, w, b: act(F.linear(x, w, b)),
           [x, w, b], f"linear {activation}")  # fmt: skip
    assert w.grad.stride() == w.stride()


def test_matmul_and_gemm_forward_and_backward() -> None:
    _check(autocutlass.matmul, torch.matmul, [cuda(2, 512, 768, grad=True), cuda(768, 1024, grad=True)], "matmul 3x2")
    _check(autocutlass.matmul, torch.matmul, [cuda(4, 256, 512, grad=True), cuda(4, 512, 384, grad=True)], "bmm")
    _check(lambda a, b, c: autocutlass.gemm(a, b, c, alpha=0.5, beta=2.0),
           lambda a, b, c: torch.addmm(c, a, b, alpha=0.5, beta=2.0),
           [cuda(512, 768, grad=True), cuda(768, 1024, grad=True), cuda(512, 1024, grad=True)], "gemm")  # fmt: skip


def test_pointwise_conv2d_forward_and_backward() -> None:
    """The float32 reference takes the ReLU mask of our bf16 output: a pre-activation within bf16
    rounding of 0 flips the mask between the two and moves a whole pixel's dX (14 elements of 401k
    past the tolerance in one run of the random inputs, 2026-11-28). A dropped or swapped
    activation still fails the forward comparison (negative outputs, or values of another shape)."""
    torch.manual_seed(0)
    x = cuda(8, 256, 14, 14).contiguous(memory_format=CL).requires_grad_()
    w = cuda(512, 256, 1, 1).contiguous(memory_format=CL).requires_grad_()
    b = cuda(512, grad=True)
    leaves = [t.detach().requires_grad_() for t in (x, w, b)]  # the recorded path _check takes: the same kernel
    mask = (autocutlass.conv2d(*leaves, activation="relu") > 0).float().detach()
    _check(lambda x, w, b: autocutlass.conv2d(x, w, b, activation="relu"), lambda x, w, b: F.conv2d(x, w, b) * mask,
           [x, w, b], "conv 1x1")  # fmt: skip
    assert x.grad.is_contiguous(memory_format=CL)


class MLP(nn.Module):
    def __init__(self, d: int = 1024, h: int = 2816) -> None:
        super().__init__()
        self.gate = nn.Linear(d, h, bias=False)
        self.up = nn.Linear(d, h, bias=False)
        self.down = nn.Linear(h, d, bias=False)
        self.head = nn.Linear(d, 512)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.down(F.silu(self.gate(x)) * self.up(x))
        return self.head(x)


def _step(model: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    opt.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(x).flatten(0, 1).float(), target.flatten())
    loss.backward()
    opt.step()
    return loss.detach()


def test_training_step_matches_torch() -> None:
    torch.manual_seed(0)
    ref = MLP().to("cuda", BF)
    ours = autocutlass.swap_linear_(copy.deepcopy(ref))
    x, target = torch.randn(4, 512, 1024, device="cuda", dtype=BF), torch.randint(0, 512, (4, 512), device="cuda")
    opt_ref, opt_ours = (torch.optim.AdamW(m.parameters(), lr=1e-3) for m in (ref, ours))
    before = autocutlass.stats().fallbacks
    loss = _step(ours, opt_ours, x, target)
    assert autocutlass.stats().fallbacks == before
    loss_ref = _step(ref, opt_ref, x, target)
    assert abs(loss.item() - loss_ref.item()) < 1e-2 * abs(loss_ref.item())
    for (name, p), pr in zip(ours.named_parameters(), ref.parameters(), strict=True):
        close(p.grad, pr.grad, name)


def test_compiled_training_matches_eager() -> None:
    torch.manual_seed(0)
    model = autocutlass.swap_linear_(MLP().to("cuda", BF))
    x, target = torch.randn(2, 256, 1024, device="cuda", dtype=BF), torch.randint(0, 512, (2, 256), device="cuda")
    counters.clear()
    compiled = torch.compile(model, fullgraph=True)
    F.cross_entropy(compiled(x).flatten(0, 1).float(), target.flatten()).backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    F.cross_entropy(model(x).flatten(0, 1).float(), target.flatten()).backward()
    for g, p in zip(grads, model.parameters(), strict=True):
        close(g, p.grad, "compiled grad")
    assert not counters["graph_break"]


def test_reduce_overhead_captures_cuda_graphs_of_our_kernels() -> None:
    torch.manual_seed(0)
    model = autocutlass.swap_linear_(MLP().to("cuda", BF)).eval()
    counters.clear()
    compiled = torch.compile(model, mode="reduce-overhead", fullgraph=True)
    x = torch.randn(1, 64, 1024, device="cuda", dtype=BF)
    with torch.no_grad():
        for _ in range(3):  # warm-up (our ops compile and memoise), record, replay
            y = compiled(x)
        hits = autocutlass.stats().memo_hits
        y = compiled(x).clone()
        torch.cuda.synchronize()
        assert autocutlass.stats().memo_hits == hits  # a replay runs no Python, no dispatcher
        want = model(x)
    close(y, want, "reduce-overhead")
    assert counters["inductor"]["cudagraph_skips"] == 0 and not counters["graph_break"]


def test_reduce_overhead_trains_a_convnet_on_our_kernels() -> None:
    """Training steps of a swapped convnet (3x3 convs whose dgrad runs our kernel on a flipped copy
    of the filter, a strided 3x3, a 1x1) under ``torch.compile(mode="reduce-overhead")``: CUDA
    graphs recorded and replayed for the forward and the backward, no tensor of ours left in the
    graphs' pool (the dgrad's kept filter copy is made off the default stream there: it raised
    "tensors in the cudagraph pool not tracked as outputs" until session 32), and every step's
    gradients as the same model's eager step gives them, SGD updating the weights in place
    between steps (each replay transforms the weight it reads)."""
    torch.manual_seed(0)
    ref = nn.Sequential(nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(), nn.Conv2d(128, 128, 3, padding=1), nn.ReLU(),
                        nn.Conv2d(128, 128, 3, 2, 1, bias=False), nn.Conv2d(128, 64, 1, bias=False))  # fmt: skip
    ref = ref.to("cuda", BF).to(memory_format=CL)
    model = autocutlass.swap_conv2d_(copy.deepcopy(ref))
    eager = copy.deepcopy(model)
    x = torch.randn(8, 64, 30, 30, device="cuda", dtype=BF).to(memory_format=CL)
    dy = torch.randn(8, 64, 15, 15, device="cuda", dtype=BF).to(memory_format=CL)
    for m in (model, eager):  # eager warm-up: our kernels tuned or looked up, compiled and memoised
        m(x).backward(dy)
        m.zero_grad(set_to_none=True)
    counters.clear()
    compiled = torch.compile(model, mode="reduce-overhead")
    opts = [torch.optim.SGD(m.parameters(), lr=1e-2) for m in (model, eager)]
    for step in range(4):  # warm-up, record, replays
        for opt in opts:
            opt.zero_grad(set_to_none=True)
        compiled(x).backward(dy)
        eager(x).backward(dy)
        torch.cuda.synchronize()
        for (name, p), q in zip(model.named_parameters(), eager.parameters(), strict=True):
            close(p.grad, q.grad, f"step {step} {name}")
        for opt in opts:
            opt.step()
    assert counters["inductor"]["cudagraph_skips"] == 0

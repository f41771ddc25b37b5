"""Autograd, autocast and torch.compile edges of the graph path (CPU): ``linear(..., mul=)`` and
SwiGLU under autocast while autograd records (the checks and the product outside the op see the
cast operands: no error, the autocast dtype), CPU autocast of eager calls with mixed dtypes (as
``F.linear``), ``grouped_mm`` outputs and gradients past ``offs[-1]`` (zeros, never unwritten
memory), an empty grouped backward, and the packed modules under ``fullgraph=True``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import autocutlass as ac
from autocutlass.nn import swap_gated_mlp_, swap_qkv_

BF = torch.bfloat16


@pytest.fixture(autouse=True)
def fresh(monkeypatch: pytest.MonkeyPatch, tmp_path) -> Iterator[None]:  # noqa: ANN001
    monkeypatch.setenv("AUTOCUTLASS_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("AUTOCUTLASS_SHIPPED_DBS", "off")
    ac.reset()
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()
    ac.reset()


def test_gated_linear_trains_under_autocast() -> None:
    torch.manual_seed(0)
    wg, wu = torch.randn(8, 5, requires_grad=True), torch.randn(8, 5, requires_grad=True)
    x = torch.randn(3, 5)
    with torch.autocast("cpu", dtype=BF):
        y = ac.linear(x, wg, activation="silu", mul=ac.linear(x, wu))
        ref = F.silu(F.linear(x, wg)) * F.linear(x, wu)
        m = torch.randn(3, 8)  # float32: cast like the op's operands
        assert ac.linear(x, wg, mul=m).dtype == ac.linear(x, wg.detach(), mul=m).dtype == BF
        sw = ac.linear(x, torch.cat([wg, wu]), activation="swiglu")
    assert y.dtype == ref.dtype == BF and sw.dtype == BF
    torch.testing.assert_close(y, ref, rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(sw, ref, rtol=2e-2, atol=2e-2)
    y.float().sum().backward()
    assert wg.grad is not None and wu.grad is not None


def test_a_swapped_gated_mlp_trains_under_autocast() -> None:
    class MLP(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.gate_proj, self.up_proj, self.down_proj = nn.Linear(16, 32), nn.Linear(16, 32), nn.Linear(32, 16)
            self.act_fn = nn.SiLU()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))

    torch.manual_seed(1)
    ref, ours = MLP(), MLP()
    ours.load_state_dict(ref.state_dict())
    ours = swap_gated_mlp_(ours)
    x = torch.randn(4, 16)
    with torch.autocast("cpu", dtype=BF):
        a, b = ref(x), ours(x)
    assert a.dtype == b.dtype == BF
    torch.testing.assert_close(b, a, rtol=2e-2, atol=2e-2)
    a.float().sum().backward()
    b.float().sum().backward()
    torch.testing.assert_close(ours.gate_proj.weight.grad, ref.gate_proj.weight.grad, rtol=5e-2, atol=5e-2)


def test_cpu_autocast_inference_with_mixed_dtypes_casts_as_torch() -> None:
    x, w = torch.randn(3, 5, dtype=BF), torch.randn(6, 5)
    with torch.no_grad(), torch.autocast("cpu", dtype=BF):
        for got, want in ((ac.linear(x, w), F.linear(x, w)), (ac.matmul(x, w.t()), torch.matmul(x, w.t())),
                          (ac.gemm(x, w.t()), torch.matmul(x, w.t()))):  # fmt: skip
            assert got.dtype == want.dtype == BF
            torch.testing.assert_close(got, want)


def test_grouped_outputs_and_gradients_past_the_last_offset_are_zero() -> None:
    offs = torch.tensor([4, 8], dtype=torch.int32)
    x, w = torch.randn(4, 12, requires_grad=True), torch.randn(12, 4, requires_grad=True)  # 2d_2d: groups along K
    ac.grouped_mm(x, w, offs).sum().backward()
    assert torch.equal(x.grad[:, 8:], torch.zeros(4, 4)) and torch.equal(w.grad[8:], torch.zeros(4, 4))
    x3 = torch.randn(2, 3, 8)  # 3d_2d: groups along N
    w2 = torch.randn(8, 12)
    y = ac.grouped_mm(x3, w2, offs)
    assert y.shape == (3, 12) and torch.equal(y[:, 8:], torch.zeros(3, 4))  # (M, N): group g's columns from x[g]
    torch.testing.assert_close(y[:, :4], x3[0] @ w2[:, :4])
    torch.testing.assert_close(y[:, 4:8], x3[1] @ w2[:, 4:8])


def test_an_empty_grouped_batch_backpropagates() -> None:
    x = torch.randn(0, 16, requires_grad=True)
    w = torch.randn(4, 16, 8, requires_grad=True)
    y = ac.grouped_mm(x, w, torch.zeros(4, dtype=torch.int32))
    y.sum().backward()
    assert y.shape == (0, 8) and torch.equal(w.grad, torch.zeros(4, 16, 8)) and x.grad.shape == (0, 16)


def test_packed_modules_compile_with_fullgraph() -> None:
    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.q_proj, self.k_proj, self.v_proj = nn.Linear(16, 16), nn.Linear(16, 8), nn.Linear(16, 8)
            self.gate_proj, self.up_proj, self.down_proj = nn.Linear(32, 48), nn.Linear(32, 48), nn.Linear(48, 16)
            self.act_fn = nn.SiLU()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
            h = torch.cat([q, k, v], -1)
            return self.down_proj(self.act_fn(self.gate_proj(h)) * self.up_proj(h))

    torch.manual_seed(2)
    ref = Block()
    ours = Block()
    ours.load_state_dict(ref.state_dict())
    root = nn.Module()
    root.b = ours
    swap_qkv_(root)
    swap_gated_mlp_(root)
    x = torch.randn(3, 16)
    compiled = torch.compile(root.b, fullgraph=True, backend="aot_eager")
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), ref(x), rtol=1e-4, atol=1e-4)

"""``autocutlass.nn.hits.LinearHits``: an ``autocutlass.nn.Linear`` (and the packed SwiGLU and q/k/v
calls) run the entry the last call ran without building a memo key while nothing that decides it
changed, and go through the dispatcher again when something did: a dropped memo entry (the
dispatcher's epoch), another policy, another dispatcher, another input layout, a replaced weight,
autograd recording. Counted by the memo keys the dispatcher builds; results checked against torch
(CPU tensors: the dispatcher's torch entries)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import autocutlass
from autocutlass import api
from autocutlass.nn import Linear
from autocutlass.ops.gemm.entries import LINEAR


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The policies of the linear memo keys built."""
    seen: list[Any] = []
    real = type(LINEAR).memo_key

    def memo_key(self: Any, policy: Any, *args: Any) -> Any:
        seen.append(policy)
        return real(self, policy, *args)

    monkeypatch.setattr(type(LINEAR), "memo_key", memo_key)
    autocutlass.reset()
    yield seen
    autocutlass.reset()


def _lin(bias: bool = True) -> Linear:
    torch.manual_seed(0)
    return Linear.from_linear(torch.nn.Linear(32, 24, bias=bias).bfloat16())


def _check(lin: Linear, x: torch.Tensor) -> None:
    torch.testing.assert_close(lin(x), F.linear(x, lin.weight, lin.bias))


def test_repeated_calls_skip_the_memo_key_and_count_as_hits(keys: list) -> None:
    lin, x = _lin(), torch.randn(3, 5, 32).bfloat16()
    with torch.no_grad():
        for _ in range(4):
            _check(lin, x)
        before = autocutlass.stats().memo_hits
        lin(x)
        assert autocutlass.stats().memo_hits == before + 1
    assert len(keys) == 1


def test_what_sends_a_call_back_through_the_dispatcher(keys: list) -> None:
    lin, x = _lin(), torch.randn(4, 32).bfloat16()
    with torch.no_grad():
        _check(lin, x)
        _check(lin, x.clone())  # another tensor of the same layout: remembered
        assert len(keys) == 1
        _check(lin, torch.randn(6, 32).bfloat16())  # another shape
        assert len(keys) == 2
        _check(lin, torch.randn(6, 64).bfloat16()[:, ::2])  # strided
        assert len(keys) == 3
        x = torch.randn(6, 32).bfloat16()
        _check(lin, x)
        api.dispatcher().clear()  # memo entries dropped: the epoch moved
        _check(lin, x)
        assert len(keys) == 5
        with autocutlass.policy("off"):
            _check(lin, x)
        assert keys[-1] != keys[-2] and len(keys) == 6
        _check(lin, x)  # back to the dispatcher's own policy
        assert len(keys) == 7
        lin.weight.data = torch.randn(24, 32).bfloat16()  # new storage, same Parameter
        _check(lin, x)
        assert len(keys) == 8
        lin.bias = torch.nn.Parameter(torch.randn(24).bfloat16())  # another bias tensor
        _check(lin, x)
        assert len(keys) == 9
        base = torch.randn(48).bfloat16()
        lin.bias.data = base[:24]  # new storage: its data pointer moved
        _check(lin, x)
        assert len(keys) == 10
        lin.bias.data = base[::2]  # the same Parameter and data pointer, another stride
        _check(lin, x)
        assert len(keys) == 11
        lin.bias = torch.nn.Parameter(torch.randn(24).bfloat16())
        _check(lin, x)
        assert len(keys) == 12
        autocutlass.reset()  # another dispatcher
        _check(lin, x)
        assert len(keys) == 13
        _check(lin, x)
        assert len(keys) == 13


def test_float32_and_recording_calls_take_the_dispatcher_each_time(keys: list) -> None:
    lin = Linear.from_linear(torch.nn.Linear(32, 24))
    x = torch.randn(4, 32)
    with torch.no_grad():
        for _ in range(3):
            _check(lin, x)
    assert len(keys) == 3  # float32: the key holds torch's TF32 setting too
    lin = _lin()
    xb = torch.randn(4, 32).bfloat16().requires_grad_()
    for _ in range(2):
        y = lin(xb)
        y.float().sum().backward()
    assert xb.grad is not None and lin.weight.grad is not None
    torch.testing.assert_close(xb.grad, 2 * lin.weight.float().sum(0).bfloat16().expand(4, 32), rtol=0.02, atol=0.05)


def test_copies_start_empty_and_swaps_do_not_share_caches(keys: list) -> None:
    lin, x = _lin(), torch.randn(2, 32).bfloat16()
    with torch.no_grad():
        _check(lin, x)
        twin = copy.deepcopy(lin)
        assert twin._ac_hits is not lin._ac_hits
        _check(twin, x)
        assert len(keys) == 2
        plain = lin.to_linear()
        assert "_ac_hits" not in plain.__dict__
        again = Linear.from_linear(plain)
        assert again._ac_hits is None


def test_the_packed_swiglu_and_qkv_calls_are_remembered_too(keys: list) -> None:
    from torch import nn

    class MLP(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.gate_proj, self.up_proj = nn.Linear(32, 48, bias=False), nn.Linear(32, 48, bias=False)
            self.down_proj, self.act_fn = nn.Linear(48, 32, bias=False), nn.SiLU()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))

    class Attn(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.q_proj, self.k_proj, self.v_proj = nn.Linear(32, 32), nn.Linear(32, 16), nn.Linear(32, 16)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.cat([self.q_proj(x), self.k_proj(x).exp(), self.v_proj(x)], -1)

    torch.manual_seed(0)
    model = nn.Sequential(Attn(), nn.Linear(64, 32), MLP()).bfloat16()
    ref = copy.deepcopy(model)
    autocutlass.swap_qkv_(autocutlass.swap_gated_mlp_(model))
    x = torch.randn(2, 32).bfloat16()
    with torch.no_grad():
        want = ref(x)
        keys.clear()
        for _ in range(3):
            torch.testing.assert_close(model(x), want, rtol=0.02, atol=0.02)
    # the first forward builds the keys of the packed q/k/v and SwiGLU calls (down_proj and the middle
    # Linear are plain nn.Linear here: torch's own); the next two none
    assert len(keys) == 2


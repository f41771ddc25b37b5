"""``autocutlass.nn`` and the one-line model swaps, on CPU: the modules are torch's with our
forward, share the original parameters (no copy), keep state_dict keys, and swap back."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from _dispatch_fakes import make_rig
import autocutlass
import autocutlass.kernels.hopper_conv_unfold.lowering as unfold_lowering
import autocutlass.nn.swap as swap_mod
from autocutlass import api
from autocutlass.nn import (
    Conv2d,
    Linear,
    servable_conv2d,
    servable_linear,
    swap_conv2d_,
    unswap_conv2d_,
)
from autocutlass.settings import Policy

BF = torch.bfloat16


@pytest.fixture(autouse=True)
def quiet() -> Iterator[None]:
    logging.getLogger("autocutlass").setLevel(logging.ERROR)  # CPU fallbacks log once per reason
    yield
    logging.getLogger("autocutlass").setLevel(logging.NOTSET)


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(10, 32)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 32)) for _ in range(2)
        )
        self.odd = nn.Linear(32, 12)  # 12 out features: skipped by the default filter
        self.head = nn.Linear(32, 16, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.embed(ids)
        for b in self.blocks:
            h = h + b(h)
        return self.head(h) + self.odd(h).sum(-1, keepdim=True)


def test_linear_is_an_nn_linear_with_our_forward() -> None:
    m = nn.Linear(32, 16)
    a = Linear.from_linear(m)
    assert isinstance(a, nn.Linear) and type(a) is Linear
    assert a.weight is m.weight and a.bias is m.bias  # shared, not copied
    assert list(a.state_dict()) == list(m.state_dict()) == ["weight", "bias"]
    assert (a.in_features, a.out_features) == (32, 16)
    x = torch.randn(3, 5, 32)
    torch.testing.assert_close(a(x), m(x))
    made = Linear(32, 16, bias=False, dtype=BF)  # constructible like nn.Linear
    assert made.bias is None and made.weight.dtype == BF
    back = a.to_linear()
    assert type(back) is nn.Linear and back.weight is m.weight


def test_from_linear_keeps_hooks_and_training_flag() -> None:
    m = nn.Linear(8, 8).eval()
    seen = []
    m.register_forward_hook(lambda mod, args, out: seen.append(out.shape))
    a = Linear.from_linear(m)
    a(torch.randn(2, 8))
    assert seen == [torch.Size([2, 8])] and not a.training


def test_swap_linear_in_place_and_back() -> None:
    net = Net()
    keys = list(net.state_dict())
    weights = {n: p for n, p in net.named_parameters()}
    ids = torch.randint(0, 10, (2, 7))
    want = net(ids)
    assert autocutlass.swap_linear_(net) is net
    kinds = {n: type(m) for n, m in net.named_modules() if isinstance(m, nn.Linear)}
    assert kinds == {"blocks.0.0": Linear, "blocks.0.2": Linear, "blocks.1.0": Linear, "blocks.1.2": Linear,
                     "odd": nn.Linear, "head": Linear}  # fmt: skip
    assert list(net.state_dict()) == keys
    assert all(p is weights[n] for n, p in net.named_parameters())
    torch.testing.assert_close(net(ids), want)
    assert autocutlass.unswap_linear_(net) is net
    assert all(type(m) is nn.Linear for m in net.modules() if isinstance(m, nn.Linear))
    assert all(p is weights[n] for n, p in net.named_parameters())


def test_filter_fn_and_shared_modules() -> None:
    net = Net()
    net.tied = net.head  # reachable under two names
    autocutlass.swap_linear_(net, filter_fn=lambda m, fqn: fqn in ("head", "blocks.1.0"))
    assert type(net.head) is Linear and net.tied is net.head
    assert type(net.blocks[1][0]) is Linear and type(net.blocks[0][0]) is nn.Linear
    assert [n for n, _ in net.named_parameters()].count("head.weight") == 1


def test_a_root_linear_is_returned() -> None:
    m = nn.Linear(16, 16)
    swapped = autocutlass.swap_linear_(m)
    assert type(swapped) is Linear and swapped.weight is m.weight
    assert type(autocutlass.unswap_linear_(swapped)) is nn.Linear


def test_default_filter() -> None:
    assert servable_linear(nn.Linear(32, 64, dtype=BF))
    assert servable_linear(nn.Linear(32, 64, dtype=torch.float16))
    assert servable_linear(nn.Linear(32, 64))
    assert not servable_linear(nn.Linear(32, 64, dtype=torch.float64))
    assert not servable_linear(nn.Linear(30, 64)) and not servable_linear(nn.Linear(32, 60))

    class Custom(nn.Linear):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return super().forward(x) * 2

    net = nn.Sequential(Custom(8, 8), nn.Linear(8, 8, dtype=torch.float64))
    autocutlass.swap_linear_(net)
    assert type(net[0]) is Custom and type(net[1]) is nn.Linear  # subclasses keep their own forward


def test_an_optimizer_built_before_the_swap_trains_the_swapped_model() -> None:
    net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))
    opt = torch.optim.AdamW(net.parameters(), lr=1e-2)
    autocutlass.swap_linear_(net)
    before = [p.detach().clone() for p in net.parameters()]
    net(torch.randn(4, 16)).square().mean().backward()
    opt.step()
    assert all(not torch.equal(b, p) for b, p in zip(before, net.parameters(), strict=True))


def test_swapped_training_runs_our_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the dispatch fakes standing in for the GPU: forward and backward GEMMs of every
    swapped layer are kernel launches; the unswappable layer runs torch."""
    rig = make_rig(Policy.HEURISTIC)
    monkeypatch.setattr(api, "_default", rig.dispatcher)
    net = nn.Sequential(nn.Linear(32, 64, dtype=BF), nn.SiLU(), nn.Linear(64, 32, dtype=BF))
    autocutlass.swap_linear_(net)
    net(torch.randn(4, 8, 32, dtype=BF)).float().square().mean().backward()
    assert rig.dispatcher.stats().fallbacks == 0
    assert len(rig.family.launches) == 2 + 3  # two forwards; dW, dX of the second and dW of the first


def test_autocast_through_a_swapped_model() -> None:
    net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))
    ref = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))
    ref.load_state_dict(net.state_dict())
    autocutlass.swap_linear_(net)
    x = torch.randn(4, 16)
    with torch.autocast("cpu", dtype=BF):
        y, want = net(x), ref(x)
    assert y.dtype == want.dtype == BF
    torch.testing.assert_close(y, want)


# ---- Conv2d -------------------------------------------------------------------------------------
def test_conv2d_module_and_swap() -> None:
    net = nn.Sequential(nn.Conv2d(16, 32, 1), nn.ReLU(), nn.Conv2d(32, 32, 3, padding=1), nn.Conv2d(32, 16, 1))
    net = net.to(memory_format=torch.channels_last)
    x = torch.randn(2, 16, 5, 6).contiguous(memory_format=torch.channels_last)
    want = net(x)
    weights = [p for p in net.parameters()]
    assert swap_conv2d_(net) is net
    assert [type(m) for m in net] == [Conv2d, nn.ReLU, Conv2d, Conv2d]
    assert all(p is q for p, q in zip(net.parameters(), weights, strict=True))
    y = net(x)
    torch.testing.assert_close(y, want)
    assert y.is_contiguous(memory_format=torch.channels_last)
    unswap_conv2d_(net)
    assert all(type(m) is nn.Conv2d for m in net if isinstance(m, nn.Conv2d))


def test_conv2d_module_padding_modes() -> None:
    m = nn.Conv2d(4, 8, 3, padding=1, padding_mode="reflect")
    a = Conv2d.from_conv2d(m)
    x = torch.randn(1, 4, 6, 5)
    torch.testing.assert_close(a(x), m(x))
    assert not servable_conv2d(m) and servable_conv2d(nn.Conv2d(8, 8, 1, padding="same"))
    assert servable_conv2d(nn.Conv2d(8, 8, 3, stride=2, padding=1)) and not servable_conv2d(nn.Conv2d(8, 8, 1, groups=2))
    # an image stem (3 channels) through its row-unfolded input: 7 taps x 3 channels -> 24 channels;
    # too wide a row (37 x 7 = 259 -> 264 channels) is not swapped
    assert servable_conv2d(nn.Conv2d(3, 64, 7, stride=2, padding=3)) and servable_conv2d(nn.Conv2d(4, 320, 3, padding=1))
    assert not servable_conv2d(nn.Conv2d(37, 64, 7)) and servable_conv2d(nn.Conv2d(36, 64, 7))
    assert swap_mod.MAX_UNFOLDED_CHANNELS == unfold_lowering.MAX_UNFOLDED_CHANNELS
    assert not servable_conv2d(nn.Conv2d(8, 8, 9, stride=9)) and not servable_conv2d(nn.Conv2d(8, 12, 1))
    g = torch.randn(1, 8, 6, 5)
    x.requires_grad_()
    a(x).backward(g)
    xr = x.detach().clone().requires_grad_()
    F.conv2d(F.pad(xr, (1, 1, 1, 1), mode="reflect"), m.weight, m.bias).backward(g)
    torch.testing.assert_close(x.grad, xr.grad)

"""``autocutlass.nn.conv_site``: an ``autocutlass.nn.Conv2d`` called again with the same signature
runs what served its last call without building memo keys (forward, and the backward's dgrad and
wgrad), runs ``F.conv2d`` with torch's own autograd where torch serves all three directions, and
goes through the dispatcher again when anything that decides the entries changed. Kernel-served
calls use the test rig's fake family (pointwise layers as GEMMs, computed in float32 with torch);
torch-served ones are CPU tensors on the real dispatcher. Results checked against ``F.conv2d``."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest
import torch
from _dispatch_fakes import make_rig
from torch import nn

import autocutlass
from autocutlass import api
from autocutlass.nn import Conv2d
from autocutlass.ops.conv.backward import CONV2D_DGRAD
from autocutlass.ops.conv.frontend import CONV2D
from autocutlass.settings import Policy

BF, CL = torch.bfloat16, torch.channels_last
pytestmark = pytest.mark.usefixtures("fresh_autocutlass")


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The conv front-ends whose memo keys were built, in order ('conv2d', 'conv2d_dgrad', ...)."""
    seen: list[str] = []
    for fe in (CONV2D, CONV2D_DGRAD):
        real = type(fe).memo_key

        def memo_key(self: Any, policy: Any, *args: Any, real: Any = real) -> Any:
            seen.append(self.name)
            return real(self, policy, *args)

        monkeypatch.setattr(type(fe), "memo_key", memo_key)
    return seen


def _rig(monkeypatch: pytest.MonkeyPatch, policy: Policy = Policy.HEURISTIC) -> Any:
    rig = make_rig(policy)
    monkeypatch.setattr(api, "_default", rig.dispatcher)
    return rig


def _pair(cin: int, cout: int, k: int, dtype: torch.dtype = BF, **kw: Any) -> tuple[nn.Conv2d, Conv2d]:
    torch.manual_seed(0)
    ref = nn.Conv2d(cin, cout, k, **kw).to(dtype).to(memory_format=CL)
    return ref, Conv2d.from_conv2d(copy.deepcopy(ref))


def _step(m: nn.Module, x: torch.Tensor, dy: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """One forward + backward: (y, dx, dw, db) with fresh gradients."""
    x = x.detach().clone().requires_grad_(x.requires_grad)
    for p in m.parameters():
        p.grad = None
    y = m(x)
    y.backward(dy)
    return y.detach(), x.grad, m.weight.grad, m.bias.grad if m.bias is not None else None


def _same(got: tuple[Any, ...], want: tuple[Any, ...], tol: float = 0.02) -> None:
    for g, w in zip(got, want, strict=True):
        if w is None:
            assert g is None
        else:
            torch.testing.assert_close(g, w, rtol=tol, atol=tol)


def test_kernel_served_training_calls_skip_every_memo_key(monkeypatch: pytest.MonkeyPatch, keys: list) -> None:
    """From the third step on, a kernel-served conv (all three directions: the fake family) builds
    no memo key, launches its three kernels and matches torch's gradients."""
    rig = _rig(monkeypatch)
    ref, mod = _pair(32, 48, 1)
    x = torch.randn(2, 32, 4, 6, dtype=BF).contiguous(memory_format=CL).requires_grad_()
    dy = torch.randn(2, 48, 4, 6, dtype=BF).contiguous(memory_format=CL)
    want = _step(ref, x, dy)
    for _ in range(2):
        _same(_step(mod, x, dy), want)
    built, launched, hits = len(keys), len(rig.family.launches), rig.dispatcher.stats().memo_hits
    for _ in range(3):
        _same(_step(mod, x, dy), want)
    assert len(keys) == built  # no key built
    assert len(rig.family.launches) == launched + 9  # fprop, dgrad, wgrad each step: our kernels
    assert rig.dispatcher.stats().memo_hits == hits + 9 and rig.dispatcher.stats().fallbacks == 0
    assert type(mod(x).grad_fn).__name__ == "_SiteConv2dBackward"


@pytest.mark.parametrize("vendor_host", [True, False])
def test_torch_served_sites_run_torch_conv_with_its_own_autograd(keys: list, vendor_host: bool) -> None:
    """CPU tensors: torch serves every direction; once the first backward showed it, the module's
    training calls are ``F.conv2d`` recorded by torch's autograd (one node, torch's backward),
    with host times in verdicts or without."""
    import dataclasses

    d = api.dispatcher()
    d.settings = dataclasses.replace(d.settings, vendor_host=vendor_host)
    ref, mod = _pair(8, 6, 3, padding=1, stride=2)
    x = torch.randn(2, 8, 9, 7, dtype=BF).contiguous(memory_format=CL).requires_grad_()
    dy = torch.randn(2, 6, 5, 4, dtype=BF).contiguous(memory_format=CL)
    want = _step(ref, x, dy)
    _same(_step(mod, x, dy), want, 0.0)
    assert type(mod(x).grad_fn).__name__ == "_SiteConv2dBackward"  # the site's first call: backward unknown
    _same(_step(mod, x, dy), want, 0.0)
    built = len(keys)
    before = api.dispatcher().stats()
    y = mod(x)
    assert type(y.grad_fn).__name__ == "ConvolutionBackward0"
    after = api.dispatcher().stats()
    assert (after.memo_hits, after.fallbacks) == (before.memo_hits + 1, before.fallbacks + 1)  # the forward's
    _same(_step(mod, x, dy), want, 0.0)
    assert len(keys) == built


def _first_two_steps(ref: nn.Module, mod: nn.Module) -> tuple[torch.Tensor, torch.Tensor, tuple[torch.Tensor, ...]]:
    """(x, dy, torch's step) for a (2, 32, 4, 4) -> (2, 16, 4, 4) layer pair, after two right steps
    of ``mod``: the site's first call, then its Function, whose backward keeps the entries."""
    x = torch.randn(2, 32, 4, 4, dtype=BF).contiguous(memory_format=CL).requires_grad_()
    dy = torch.randn(2, 16, 4, 4, dtype=BF).contiguous(memory_format=CL)
    want = _step(ref, x, dy)
    for _ in range(2):
        _same(_step(mod, x, dy), want)
    return x, dy, want


def _serves_only(rig: Any, direction: str) -> None:
    """The rig's fake family serves one conv direction ('fprop', 'dgrad' or 'wgrad'); torch the others."""
    from autocutlass.ops.conv.problem import ConvDirection

    real, only = rig.family.supports, ConvDirection(direction)

    def supports(problem: Any) -> str | None:
        if getattr(problem, "direction", only) is not only:
            return f"the test serves {direction} only"
        return real(problem)

    rig.family.supports = supports


def test_a_layer_whose_forward_and_wgrad_torch_serves_runs_torch_conv(monkeypatch: pytest.MonkeyPatch,
                                                                       keys: list) -> None:  # fmt: skip
    """Torch serves the forward and the wgrad, our kernel could serve the dgrad: once the first
    backward showed it, training calls are ``F.conv2d`` under torch's autograd (its one backward call
    computes dX with dW), right, and launch nothing of ours."""
    rig = _rig(monkeypatch)
    _serves_only(rig, "dgrad")
    ref, mod = _pair(32, 16, 1)
    x, dy, want = _first_two_steps(ref, mod)
    assert len(rig.family.launches) == 2  # our dgrad beside torch's wgrad, each time
    assert type(mod(x).grad_fn).__name__ == "ConvolutionBackward0"
    launched = len(rig.family.launches)
    for _ in range(2):
        _same(_step(mod, x, dy), want)
    assert len(rig.family.launches) == launched


@pytest.mark.parametrize("margin_ms, ours", [(None, True), (0.001, False), (1.0, True)])
def test_a_forward_whose_backward_torch_computes_runs_torch_conv_unless_its_margin_pays_our_node(
        monkeypatch: pytest.MonkeyPatch, margin_ms: float | None, ours: bool) -> None:  # fmt: skip
    """Our kernel serves the forward, torch the dgrad and the wgrad: once the first backward showed
    it, training calls keep our forward (in the site's Function) only where the forward's entry beat
    torch's by more than ``NODE_HOST_MS`` or has no vendor margin; otherwise they are ``F.conv2d``,
    launching nothing of ours. Inference calls run our forward either way."""
    from autocutlass import torch_ops

    rig = _rig(monkeypatch)
    _serves_only(rig, "fprop")
    monkeypatch.setattr(torch_ops, "vendor_margin_of", lambda entry: margin_ms)
    ref, mod = _pair(32, 16, 1)
    x, dy, want = _first_two_steps(ref, mod)
    assert len(rig.family.launches) == 2
    for _ in range(2):
        _same(_step(mod, x, dy), want)
    assert len(rig.family.launches) == (4 if ours else 2)
    assert rig.dispatcher.stats().site_torch == (0 if ours else 2)
    assert type(mod(x).grad_fn).__name__ == ("_SiteConv2dBackward" if ours else "ConvolutionBackward0")
    with torch.no_grad():
        _same((mod(x),), (want[0],))
    assert len(rig.family.launches) == (6 if ours else 3)


@pytest.mark.parametrize("margin_ms, vendor_host, ours",
                         [(None, True, True), (0.04, True, False), (0.06, True, True), (0.005, False, True)])  # fmt: skip
def test_a_site_of_our_kernels_trains_on_them_only_where_their_margins_pay_our_node(
        monkeypatch: pytest.MonkeyPatch, margin_ms: float | None, vendor_host: bool, ours: bool) -> None:  # fmt: skip
    """Our kernel serves all three directions, each beating torch's by ``margin_ms`` per call: once
    the first backward kept the entries, training calls run them in the site's Function only where
    the three margins together exceed ``NODE_HOST_MS`` (0.12 ms does not, 0.18 does; no vendor
    record: ours), or exceed 0 with ``vendor_host`` off (GPU time alone); otherwise ``F.conv2d``
    under torch's autograd, launching nothing of ours."""
    import dataclasses

    from autocutlass import torch_ops
    from autocutlass.nn import conv_site

    rig = _rig(monkeypatch)
    rig.dispatcher.settings = dataclasses.replace(rig.dispatcher.settings, vendor_host=vendor_host)
    monkeypatch.setattr(torch_ops, "vendor_margin_of", lambda entry: margin_ms)
    assert conv_site.NODE_HOST_MS == 0.14
    ref, mod = _pair(32, 16, 1)
    x, dy, want = _first_two_steps(ref, mod)
    assert len(rig.family.launches) == 6  # forward, dgrad and wgrad, twice
    before = rig.dispatcher.stats().site_torch
    for _ in range(2):
        _same(_step(mod, x, dy), want)
    assert len(rig.family.launches) == (12 if ours else 6)
    assert rig.dispatcher.stats().site_torch - before == (0 if ours else 2)
    assert type(mod(x).grad_fn).__name__ == ("_SiteConv2dBackward" if ours else "ConvolutionBackward0")


def test_a_dgrad_wanted_alone_stays_on_our_kernel(monkeypatch: pytest.MonkeyPatch, keys: list) -> None:
    """The same layer with a frozen weight and no bias gradient (only dX wanted): our dgrad serves
    every step through the site's Function."""
    rig = _rig(monkeypatch)
    _serves_only(rig, "dgrad")
    ref, mod = _pair(32, 16, 1)
    for m in (ref, mod):
        m.requires_grad_(False)
    x = torch.randn(2, 32, 4, 4, dtype=BF).contiguous(memory_format=CL).requires_grad_()
    dy = torch.randn(2, 16, 4, 4, dtype=BF).contiguous(memory_format=CL)
    want = _step(ref, x, dy)
    for _ in range(3):
        _same(_step(mod, x, dy), want)
    assert len(rig.family.launches) == 3
    assert type(mod(x).grad_fn).__name__ == "_SiteConv2dBackward"


def test_inference_calls_run_the_forward_entry(monkeypatch: pytest.MonkeyPatch, keys: list) -> None:
    rig = _rig(monkeypatch)
    ref, mod = _pair(32, 16, 1, bias=False)
    x = torch.randn(3, 32, 5, 5, dtype=BF).contiguous(memory_format=CL)
    with torch.no_grad():
        mod(x)
        built, launched = len(keys), len(rig.family.launches)
        for _ in range(3):
            torch.testing.assert_close(mod(x), ref(x), rtol=0.02, atol=0.02)
    assert len(keys) == built and len(rig.family.launches) == launched + 3


def test_what_sends_a_call_back_through_the_dispatcher(monkeypatch: pytest.MonkeyPatch, keys: list) -> None:
    rig = _rig(monkeypatch)
    ref, mod = _pair(32, 16, 1)
    x = torch.randn(2, 32, 4, 4, dtype=BF).contiguous(memory_format=CL).requires_grad_()
    dy = torch.randn(2, 16, 4, 4, dtype=BF).contiguous(memory_format=CL)

    def fresh(step: Any) -> int:
        """Memo keys the step built, after two calls settled the site."""
        n = len(keys)
        step()
        return len(keys) - n

    def check(xx: torch.Tensor = x, g: torch.Tensor = dy) -> None:
        _same(_step(mod, xx, g), _step(ref, xx, g))

    check(), check()
    assert fresh(check) == 0
    x2 = torch.randn(4, 32, 4, 4, dtype=BF).contiguous(memory_format=CL).requires_grad_()
    dy2 = torch.randn(4, 16, 4, 4, dtype=BF).contiguous(memory_format=CL)
    assert fresh(lambda: check(x2, dy2)) > 0  # another batch size
    check(x2, dy2)
    assert fresh(lambda: check(x2, dy2)) == 0
    assert fresh(lambda: check(x2.detach(), dy2)) > 0  # no dX wanted: another signature
    api.dispatcher().clear()  # memoised entries dropped: the epoch moved
    assert fresh(lambda: check(x2, dy2)) > 0
    check(x2, dy2)
    launched = len(rig.family.launches)
    with autocutlass.policy("off"):  # torch serves everything now
        assert fresh(lambda: check(x2, dy2)) > 0
    assert len(rig.family.launches) == launched
    assert fresh(lambda: check(x2, dy2)) > 0  # the dispatcher's own policy again
    check(x2, dy2)
    changes = {
        "weight storage": lambda: setattr(mod.weight, "data", mod.weight.data.clone()),  # same Parameter
        "bias tensor": lambda: setattr(mod, "bias", nn.Parameter(mod.bias.detach().clone())),
        "cudnn.benchmark": lambda: setattr(torch.backends.cudnn, "benchmark", True),
        "dispatcher": autocutlass.reset,
    }
    for name, change in changes.items():
        ref.load_state_dict(mod.state_dict())
        change()
        try:
            assert fresh(lambda: check(x2, dy2)) > 0, name
            check(x2, dy2)
            assert fresh(lambda: check(x2, dy2)) == 0, name
        finally:
            torch.backends.cudnn.benchmark = False
            monkeypatch.setattr(api, "_default", rig.dispatcher)


def test_a_changed_gradient_layout_looks_the_backward_up_again(monkeypatch: pytest.MonkeyPatch, keys: list) -> None:
    """The kept backward entries are for a dY of the kept layout: an NCHW dY (made channels_last
    first, as the op's backward does) or another alignment is looked up, and right."""
    _rig(monkeypatch)
    ref, mod = _pair(32, 16, 1)
    x = torch.randn(2, 32, 4, 4, dtype=BF).contiguous(memory_format=CL).requires_grad_()
    dy = torch.randn(2, 16, 4, 4, dtype=BF).contiguous(memory_format=CL)
    for _ in range(2):
        _same(_step(mod, x, dy), _step(ref, x, dy))
    n = len(keys)
    odd = torch.randn(2 * 16 * 16 + 1, dtype=BF)[1:].view(2, 4, 4, 16).permute(0, 3, 1, 2)  # 2-byte offset
    _same(_step(mod, x, odd), _step(ref, x, odd))
    assert "conv2d_dgrad" in keys[n:]


def test_double_backward_through_a_site() -> None:
    """The backward of a site's call records when asked (create_graph): gradgradcheck in float64."""
    _, mod = _pair(4, 3, 3, dtype=torch.float64, padding=1)
    x = torch.randn(2, 4, 5, 5, dtype=torch.float64).contiguous(memory_format=CL).requires_grad_()
    for _ in range(3):  # the first makes the site, then the site's Function, then torch's own conv
        assert torch.autograd.gradgradcheck(lambda x, w, b: mod(x), (x, mod.weight, mod.bias))


def test_padding_modes_and_strings_through_the_module(keys: list) -> None:
    ref, mod = _pair(4, 4, 3, dtype=torch.float64, padding=1, padding_mode="reflect")
    x = torch.randn(1, 4, 6, 6, dtype=torch.float64).requires_grad_()
    dy = torch.randn(1, 4, 6, 6, dtype=torch.float64)
    for _ in range(3):
        _same(_step(mod, x, dy), _step(ref, x, dy), 1e-12)
    ref, mod = _pair(4, 4, 3, dtype=torch.float64, padding="same")
    n = len(keys)
    for _ in range(3):
        _same(_step(mod, x, dy), _step(ref, x, dy), 1e-12)
    assert keys[n:].count("conv2d") == 3  # a string padding: the dispatcher each call


def test_copies_start_without_a_site(monkeypatch: pytest.MonkeyPatch) -> None:
    _rig(monkeypatch)
    _, mod = _pair(32, 16, 1)
    x = torch.randn(2, 32, 4, 4, dtype=BF).contiguous(memory_format=CL)
    with torch.no_grad():
        mod(x), mod(x)
    assert mod._ac_hits is not None and mod._ac_hits._site is not None
    for twin in (copy.deepcopy(mod), pickle.loads(pickle.dumps(mod))):
        assert twin._ac_hits is not mod._ac_hits and twin._ac_hits._site is None
    assert "_ac_hits" not in mod.to_conv2d().__dict__
    assert Conv2d.from_conv2d(mod.to_conv2d())._ac_hits is None


def test_float32_calls_take_the_dispatcher_each_time(keys: list) -> None:
    ref, mod = _pair(4, 4, 3, dtype=torch.float32, padding=1)
    x = torch.randn(1, 4, 6, 6).contiguous(memory_format=CL)
    with torch.no_grad():
        for _ in range(3):
            torch.testing.assert_close(mod(x), ref(x))
    assert keys.count("conv2d") == 3  # the key holds torch's TF32 setting too


# ---- an NCHW input of a channels_last weight (a GroupNorm's output) ------------------------------
def test_channels_last_input_makes_only_the_copy_cudnn_makes() -> None:
    """``channels_last_input``: an NCHW x of a channels_last weight becomes channels_last (cuDNN's
    own copy); every other case comes back as the very same tensor."""
    from autocutlass.ops.conv.frontend import channels_last_input

    gpu = lambda t: True  # noqa: E731 - CPU tensors stand in for CUDA ones
    x = torch.randn(2, 16, 5, 7, dtype=BF)  # NCHW
    w = torch.randn(8, 16, 3, 3, dtype=BF).contiguous(memory_format=CL)
    y = channels_last_input(x, w, 1, gpu)
    assert y is not x and y.is_contiguous(memory_format=CL) and torch.equal(y, x)
    xc = x.contiguous(memory_format=CL)
    assert channels_last_input(xc, w, 1, gpu) is xc  # already channels_last
    assert channels_last_input(x, w.contiguous(), 1, gpu) is x  # an NCHW weight: cuDNN runs NCHW
    assert channels_last_input(x, w, 2, gpu) is x  # groups
    assert channels_last_input(x, w, 1, lambda t: False) is x  # not on the GPU
    assert channels_last_input(x, w, 1) is x  # the default asks the tensor: a CPU tensor
    x64, w64 = x.double(), w.double()
    assert channels_last_input(x64, w64, 1, gpu) is x64  # a dtype no kernel serves
    assert channels_last_input(x.float(), w, 1, gpu).is_contiguous()  # dtypes differ
    x3 = x[0]
    assert channels_last_input(x3, w, 1, gpu) is x3  # unbatched
    w1 = torch.randn(8, 16, 1, 1, dtype=BF).contiguous(memory_format=CL)  # 1x1: CL and contiguous alike
    assert channels_last_input(x, w1, 1, gpu) is x
    assert channels_last_input("x", w, 1, gpu) == "x"


def test_nchw_input_of_a_channels_last_layer_is_served_and_trains(monkeypatch: pytest.MonkeyPatch) -> None:
    """A module whose input is NCHW (a GroupNorm writes NCHW) and whose weight is channels_last:
    its forward and both backward directions run our kernels (the rig's fake family) on the
    channels_last copy, as autocutlass.conv2d's do, and the gradients, dX included, match torch's;
    without the copy every direction ran torch (a fallback per call)."""
    from autocutlass.ops.conv import frontend

    rig = _rig(monkeypatch)
    monkeypatch.setattr(frontend, "_is_cuda", lambda t: True)
    ref, mod = _pair(32, 48, 1)
    x = torch.randn(2, 32, 4, 6, dtype=BF).requires_grad_()  # NCHW
    dy = torch.randn(2, 48, 4, 6, dtype=BF)  # NCHW too: a GroupNorm's backward writes it so
    want = _step(ref, x, dy)
    for _ in range(3):
        got = _step(mod, x, dy)
        _same(got, want)
        assert got[0].is_contiguous(memory_format=CL)  # the layout F.conv2d gives
    assert rig.dispatcher.stats().fallbacks == 0 and len(rig.family.launches) == 9
    y = autocutlass.conv2d(x.detach(), mod.weight.detach(), mod.bias.detach())
    assert len(rig.family.launches) == 10 and rig.dispatcher.stats().fallbacks == 0
    torch.testing.assert_close(y, want[0], rtol=0.02, atol=0.02)

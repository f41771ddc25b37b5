"""``swap_qkv_``: the q/k/v projections of one input become ``PackedLinear`` siblings computing
their outputs with one ``autocutlass.linear`` on a packed weight, with the same state_dict and
shared parameters; the parts are handed out only to siblings called with the same input, unchanged,
with unchanged weights; training, replaced parameters, cross-attention and a lone query take the
siblings' own GEMMs. CPU tensors: torch computes (the dispatcher's fallback), and each test counts
the ``autocutlass.linear`` calls to see which path ran."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import torch
from torch import nn

import autocutlass
from autocutlass import api
from autocutlass.nn import Linear, PackedLinear, swap_qkv_, unswap_qkv_
from autocutlass.nn import packed as packed_mod

H = 16


class Attention(nn.Module):
    """Uses every projection's output distinctly, so that a swapped part changes the result."""

    def __init__(self, *, bias: bool = False, kv_in: int = H) -> None:
        super().__init__()
        self.q_proj = nn.Linear(H, 32, bias=bias)
        self.k_proj = nn.Linear(kv_in, 8, bias=bias)
        self.v_proj = nn.Linear(kv_in, 8, bias=bias)
        self.o_proj = nn.Linear(48, H, bias=bias)

    def forward(self, x: torch.Tensor, memory: torch.Tensor | None = None) -> torch.Tensor:
        src = x if memory is None else memory
        q, k, v = self.q_proj(x), self.k_proj(src), self.v_proj(src)
        return self.o_proj(torch.cat([q * 2, k.sin(), v - 1], dim=-1))


class Model(nn.Module):
    def __init__(self, **kw: Any) -> None:
        super().__init__()
        self.layers = nn.ModuleList([Attention(**kw), Attention(**kw)])

    def forward(self, x: torch.Tensor, memory: torch.Tensor | None = None) -> torch.Tensor:
        for layer in self.layers:
            x = x + layer(x, memory)
        return x


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, ...]]:
    """The weight shapes of the autocutlass.linear calls made."""
    seen: list[tuple[int, ...]] = []
    real = api.linear

    def linear(x: Any, w: Any, *args: Any, **kw: Any) -> Any:
        seen.append(tuple(w.shape))
        return real(x, w, *args, **kw)

    monkeypatch.setattr(api, "linear", linear)
    return seen


def _pair(dtype: torch.dtype = torch.float32, **kw: Any) -> tuple[Model, Model]:
    torch.manual_seed(0)
    ref = Model(**kw).to(dtype)
    ours = Model(**kw).to(dtype)
    ours.load_state_dict(ref.state_dict())
    return ref, swap_qkv_(ours)


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("shape", [(5, H), (2, 3, H), (1, 1, H)])
def test_packed_siblings_compute_the_original_outputs_with_one_gemm(counted: list, bias: bool, shape: tuple) -> None:
    ref, ours = _pair(bias=bias)
    keys = list(ref.state_dict())
    assert list(ours.state_dict()) == keys
    for layer in ours.layers:
        assert all(isinstance(getattr(layer, n), PackedLinear) for n in ("q_proj", "k_proj", "v_proj"))
        assert type(layer.o_proj) is nn.Linear
    x = torch.randn(*shape)
    with torch.no_grad():
        want = ref(x)
        counted.clear()
        got = ours(x)
    torch.testing.assert_close(got, want)
    assert counted == [(48, H), (48, H)]  # one packed GEMM per attention, nothing else through autocutlass
    for (k, a), b in zip(ours.state_dict().items(), ref.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, msg=k)


def test_parameters_view_one_packed_storage() -> None:
    _, ours = _pair()
    layer = ours.layers[0]
    w = layer.q_proj._group.weight
    assert w.shape == (48, H)
    for n, start in (("q_proj", 0), ("k_proj", 32), ("v_proj", 40)):
        p = getattr(layer, n).weight
        assert isinstance(p, nn.Parameter) and p.data_ptr() == w[start].data_ptr()


def test_a_part_is_not_served_for_a_changed_input_or_weights(counted: list) -> None:
    ref, ours = _pair()
    a, b = ref.layers[0], ours.layers[0]
    x = torch.randn(4, H)
    with torch.no_grad():
        torch.testing.assert_close(b.q_proj(x), a.q_proj(x))
        x.mul_(3)  # in place: the parts computed before are stale
        torch.testing.assert_close(b.k_proj(x), a.k_proj(x))
        torch.testing.assert_close(b.v_proj(x), a.v_proj(x))
        b.q_proj(x)
        for m in (a.k_proj, b.k_proj):  # an in-place update of one sibling's weights (the packed storage)
            m.weight.add_(0.5)
        torch.testing.assert_close(b.k_proj(x), a.k_proj(x))
        torch.testing.assert_close(b.v_proj(x), a.v_proj(x))
        y = x.clone()  # equal values, another tensor: not served the parts of x
        b.q_proj(x)
        for m in (a.v_proj, b.v_proj):
            m.weight.add_(-1.0)
        torch.testing.assert_close(b.v_proj(y), a.v_proj(y))


def test_replaced_parameters_take_their_own_gemm(counted: list) -> None:
    ref, ours = _pair()
    state = {k: torch.randn_like(v) for k, v in ref.state_dict().items()}
    ref.load_state_dict(state)
    ours.load_state_dict(state, assign=True)  # new tensors: the packed storage no longer theirs
    x = torch.randn(3, H)
    with torch.no_grad():
        counted.clear()
        torch.testing.assert_close(ours(x), ref(x))
    assert counted == [(32, H), (8, H), (8, H)] * 2


def test_training_reaches_every_parameter(counted: list) -> None:
    ref, ours = _pair()
    x = torch.randn(6, H)
    ref(x).square().sum().backward()
    counted.clear()
    ours(x).square().sum().backward()
    assert (32, H) in counted and (48, H) not in counted  # the siblings' own GEMMs while recording
    for (k, a), b in zip(ours.named_parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(a.grad, b.grad, msg=k)


def test_cross_attention_and_a_lone_query_stop_packing(counted: list) -> None:
    ref, ours = _pair()
    x, mem = torch.randn(4, H), torch.randn(4, H)
    with torch.no_grad():
        for _ in range(4):
            torch.testing.assert_close(ours(x, mem), ref(x, mem))
        counted.clear()
        ours(x, mem)
    assert counted == [(32, H), (8, H), (8, H)] * 2  # packing stopped: no unused rows computed
    _, ours = _pair()
    q, want = ours.layers[0].q_proj, ref.layers[0].q_proj
    with torch.no_grad():
        for _ in range(4):
            torch.testing.assert_close(q(x), want(x))
        counted.clear()
        q(x)
    assert counted == [(32, H)]


def test_another_thread_does_not_take_the_parts(counted: list) -> None:
    ref, ours = _pair()
    a, b = ref.layers[0], ours.layers[0]
    x = torch.randn(2, H)
    got: list[torch.Tensor] = []

    def other() -> None:
        with torch.no_grad():
            got.append(b.k_proj(x))

    counted.clear()
    with torch.no_grad():
        b.q_proj(x)
        t = threading.Thread(target=other)
        t.start()
        t.join()
        torch.testing.assert_close(got[0], a.k_proj(x))
    assert counted.count((48, H)) == 2


def test_unpackable_siblings_are_left_alone() -> None:
    torch.manual_seed(0)
    cross = Attention(kv_in=24)  # k/v read another width: not one input
    mixed = Attention()
    mixed.k_proj = nn.Linear(H, 8, bias=True)  # one with a bias, two without
    for m in (cross, mixed):
        swap_qkv_(m)
        assert not any(isinstance(c, PackedLinear) for c in m.modules())


def test_after_swap_linear_and_unswap(counted: list) -> None:
    ref, _ = _pair()
    ours = Model()
    ours.load_state_dict(ref.state_dict())
    ours = swap_qkv_(autocutlass.swap_linear_(ours, filter_fn=lambda m, fqn: True))
    assert isinstance(ours.layers[0].q_proj, PackedLinear) and type(ours.layers[0].o_proj) is Linear
    x = torch.randn(3, H)
    with torch.no_grad():
        torch.testing.assert_close(ours(x), ref(x))
        unswap_qkv_(ours)
        assert type(ours.layers[0].q_proj) is Linear  # the class it was made from
        counted.clear()
        torch.testing.assert_close(ours(x), ref(x))
    assert counted.count((48, H)) == 0 and len(counted) == 8
    assert not any(isinstance(m, PackedLinear) for m in ours.modules())


def test_a_module_computing_something_else_is_not_packed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The swap's own check: were the packed parts wrong, the siblings would keep their weights."""
    monkeypatch.setattr(packed_mod.PackedGroup, "compute",
                        lambda self, i, x: api.linear(x, self.weight, self.bias)[..., :self.sizes[i]])  # fmt: skip
    layer = Attention()
    w = layer.k_proj.weight
    before = w.data_ptr()
    swap_qkv_(layer)
    assert type(layer.k_proj) is nn.Linear and layer.k_proj.weight is w and w.data_ptr() == before


def test_swap_qkv_rejects_non_modules() -> None:
    with pytest.raises(TypeError, match="torch.nn.Module"):
        swap_qkv_("model")  # type: ignore[arg-type]


def test_inference_mode_packs_too(counted: list) -> None:
    """Inference tensors keep no version counter: the parts are still handed out (and the swap
    made under inference mode, weights included, works)."""
    ref, ours = _pair(bias=True)
    x = torch.randn(2, 5, H)
    with torch.inference_mode():
        want = ref(x)
        counted.clear()
        torch.testing.assert_close(ours(x), want)
        assert counted == [(48, H), (48, H)]
        torch.manual_seed(1)
        made = Model()  # parameters created under inference mode: inference tensors too
        plain = Model()
        plain.load_state_dict(made.state_dict())
        swap_qkv_(made)
        counted.clear()
        torch.testing.assert_close(made(x), plain(x))
        assert counted.count((48, H)) == 2


def test_an_update_through_a_siblings_parameters_is_seen(counted: list) -> None:
    """Each Parameter keeps its own version counter after ``bind`` (``param.data = view``): an
    in-place update through it (an optimizer step, ``load_state_dict`` copying in place) does not
    bump the packed tensor's. A part computed before such an update is not handed out."""
    ref, ours = _pair(bias=True)
    a, b = ref.layers[0], ours.layers[0]
    x = torch.randn(3, H)
    with torch.no_grad():
        b.q_proj(x)  # computes every part
        new = {"weight": torch.randn(8, H), "bias": torch.randn(8)}
        for m in (a.k_proj, b.k_proj):
            m.load_state_dict(new)
        torch.testing.assert_close(b.k_proj(x), a.k_proj(x))
        b.q_proj(x)
        for m in (a.v_proj, b.v_proj):
            m.bias.add_(10.0)  # the bias alone
        torch.testing.assert_close(b.v_proj(x), a.v_proj(x))
        torch.testing.assert_close(b.k_proj(x), a.k_proj(x))


def test_a_part_computed_in_inference_mode_stays_there() -> None:
    """A part computed under ``inference_mode`` (an inference tensor) is not handed to a sibling
    called outside it, where an in-place update of it would raise."""
    _, ours = _pair()
    b = ours.layers[0]
    x = torch.randn(3, H)
    with torch.inference_mode():
        b.q_proj(x)
    with torch.no_grad():
        k = b.k_proj(x)
    assert not k.is_inference()
    k.add_(1.0)

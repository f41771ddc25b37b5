"""``autocutlass.nn.experts`` on CPU: the experts function against a per-token loop over each
token's experts (gated and plain experts, transposed weights, biases, a custom gate, (T, E)
routing weights, experts without tokens, bf16, gradients, torch.compile without graph breaks),
its errors, and with transformers installed, the registered backend on tiny Qwen3-MoE, Mixtral and
gpt-oss models against their eager experts."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch._dynamo.testing import CompileCounterWithBackend

import autocutlass
from autocutlass.nn import experts as ex


@pytest.fixture(autouse=True)
def fresh_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("AUTOCUTLASS_POLICY", "AUTOCUTLASS_STRICT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AUTOCUTLASS_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("AUTOCUTLASS_SHIPPED_DBS", "off")
    autocutlass.reset()
    logging.getLogger("autocutlass").setLevel(logging.ERROR)
    yield
    logging.getLogger("autocutlass").setLevel(logging.NOTSET)
    autocutlass.reset()


class Experts(nn.Module):
    """Expert weights as transformers 5 keeps them: gate_up_proj (E, 2I, H) [gate; up] and
    down_proj (E, H, I), or (E, in, out) when ``transposed``; optional biases; ``gated=False``:
    up_proj (E, I, H) and an activation alone."""

    def __init__(self, e: int, h: int, i: int, *, gated: bool = True, bias: bool = False, transposed: bool = False,
                 dtype: torch.dtype = torch.float32, act: Any = F.silu) -> None:  # fmt: skip
        super().__init__()
        self.has_gate, self.has_bias, self.is_transposed = gated, bias, transposed
        up = 2 * i if gated else i

        def p(*shape: int) -> nn.Parameter:
            return nn.Parameter((torch.randn(*shape) / shape[-1] ** 0.5).to(dtype))

        name = "gate_up_proj" if gated else "up_proj"
        setattr(self, name, p(e, h, up) if transposed else p(e, up, h))
        self.down_proj = p(e, i, h) if transposed else p(e, h, i)
        if bias:
            setattr(self, f"{name}_bias", p(e, up))
            self.down_proj_bias = p(e, h)
        self.act_fn = act


def w_of(m: Experts, name: str, e: int) -> torch.Tensor:
    """Expert ``e``'s weight ``name`` as (out, in)."""
    w = getattr(m, name)[e]
    return w.t() if m.is_transposed else w


def loop_ref(m: Experts, x: torch.Tensor, idx: torch.Tensor, wts: torch.Tensor, gate: Any = None) -> torch.Tensor:
    """Token by token, each of its experts, in float32: sum_j wts[t, j] * expert_{idx[t, j]}(x[t])."""
    up_name = "gate_up_proj" if m.has_gate else "up_proj"
    out = torch.zeros(x.shape, dtype=torch.float32)
    for t in range(x.shape[0]):
        for j in range(idx.shape[1]):
            e = int(idx[t, j])
            z = x[t].float() @ w_of(m, up_name, e).float().t()
            if m.has_bias:
                z = z + getattr(m, f"{up_name}_bias")[e].float()
            if m.has_gate:
                z = gate(z) if gate is not None else m.act_fn(z[: z.shape[0] // 2]) * z[z.shape[0] // 2 :]
            else:
                z = m.act_fn(z)
            y = z @ w_of(m, "down_proj", e).float().t()
            if m.has_bias:
                y = y + m.down_proj_bias[e].float()
            w = wts[t, j] if wts.shape[1] == idx.shape[1] else wts[t, e]
            out[t] += w.float() * y
    return out


def routing(t: int, e: int, k: int, *, seed: int = 0, only: list[int] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-k expert indices (distinct per token, from ``only`` when given) and softmax weights."""
    g = torch.Generator().manual_seed(seed)
    pool = torch.tensor(only if only is not None else list(range(e)))
    idx = torch.stack([pool[torch.randperm(len(pool), generator=g)[:k]] for _ in range(t)])
    return idx, torch.softmax(torch.randn(t, k, generator=g), dim=-1)


@pytest.mark.parametrize("gated", [True, False])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("transposed", [False, True])
def test_matches_the_per_token_loop(gated: bool, bias: bool, transposed: bool) -> None:
    torch.manual_seed(1)
    m = Experts(6, 16, 24, gated=gated, bias=bias, transposed=transposed, act=F.gelu if not gated else F.silu)
    x = torch.randn(13, 16)
    idx, wts = routing(13, 6, 2)
    with torch.no_grad():
        got = ex.experts_forward(m, x, idx, wts)
        ref = loop_ref(m, x, idx, wts)
    assert got.shape == x.shape and got.dtype == x.dtype
    torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-5)


def test_each_part_counts() -> None:
    """Dropping a bias, a routing weight or exchanging gate and up changes the result: the
    comparison above would see each."""
    torch.manual_seed(2)
    m = Experts(4, 16, 8, bias=True)
    x = torch.randn(9, 16)
    idx, wts = routing(9, 4, 2)
    with torch.no_grad():
        ref = loop_ref(m, x, idx, wts)
        swapped = loop_ref(m, x, idx, wts, gate=lambda z: z[: z.shape[0] // 2] * F.silu(z[z.shape[0] // 2 :]))
        assert not torch.allclose(swapped, ref, atol=1e-3)
        m.down_proj_bias.zero_()
        assert not torch.allclose(ex.experts_forward(m, x, idx, wts), ref, atol=1e-3)
    with torch.no_grad():
        m2 = Experts(4, 16, 8)
        ones = torch.ones_like(wts)
        assert not torch.allclose(ex.experts_forward(m2, x, idx, ones), loop_ref(m2, x, idx, wts), atol=1e-3)


def test_custom_gate_and_expert_weights_per_expert() -> None:
    """A module's own ``_apply_gate`` (gpt-oss clamps and mixes) is used, and (T, E) routing weights
    (DeepSeek-V2 style) are read at each pair's expert."""
    torch.manual_seed(3)
    m = Experts(5, 16, 8, bias=True)

    def clamped(z: torch.Tensor) -> torch.Tensor:
        gate, up = z[..., 0::2].clamp(max=1.0), z[..., 1::2].clamp(-1.0, 1.0)
        return (up + 1) * gate * torch.sigmoid(1.7 * gate)

    m._apply_gate = clamped  # type: ignore[method-assign]
    x = torch.randn(11, 16)
    idx, _ = routing(11, 5, 3)
    dense = torch.rand(11, 5)
    with torch.no_grad():
        got = ex.experts_forward(m, x, idx, dense)
        ref = loop_ref(m, x, idx, dense, gate=clamped)
    torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-5)


def test_experts_without_tokens_and_one_token() -> None:
    torch.manual_seed(4)
    m = Experts(8, 16, 8)
    x = torch.randn(5, 16)
    idx, wts = routing(5, 8, 2, only=[1, 6, 7])  # experts 0, 2-5 get nothing
    with torch.no_grad():
        torch.testing.assert_close(ex.experts_forward(m, x, idx, wts), loop_ref(m, x, idx, wts), rtol=1e-4, atol=1e-5)
        one = ex.experts_forward(m, x[:1], idx[:1], wts[:1])
        torch.testing.assert_close(one, loop_ref(m, x[:1], idx[:1], wts[:1]), rtol=1e-4, atol=1e-5)


def test_no_tokens() -> None:
    m = Experts(4, 16, 8)
    idx = torch.zeros(0, 2, dtype=torch.long)
    with torch.no_grad():
        out = ex.experts_forward(m, torch.randn(0, 16), idx, torch.zeros(0, 2))
    assert out.shape == (0, 16)


def test_bias_of_another_dtype_is_added_in_the_outputs() -> None:
    """A float32 bias on bf16 experts (transformers adds it to the bf16 output in place)."""
    torch.manual_seed(9)
    m = Experts(4, 32, 16, dtype=torch.bfloat16, bias=True)
    m.gate_up_proj_bias.data = m.gate_up_proj_bias.data.float()
    m.down_proj_bias.data = m.down_proj_bias.data.float()
    x = torch.randn(9, 32, dtype=torch.bfloat16)
    idx, wts = routing(9, 4, 2)
    with torch.no_grad():
        got = ex.experts_forward(m, x, idx, wts)
    torch.testing.assert_close(got.float(), loop_ref(m, x, idx, wts), rtol=3e-2, atol=3e-2)


def test_bf16() -> None:
    torch.manual_seed(5)
    m = Experts(4, 32, 16, dtype=torch.bfloat16, bias=True)
    x = torch.randn(17, 32, dtype=torch.bfloat16)
    idx, wts = routing(17, 4, 2)
    wts = wts.to(torch.bfloat16)
    with torch.no_grad():
        got = ex.experts_forward(m, x, idx, wts)
        ref = loop_ref(m, x, idx, wts)
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got.float(), ref, rtol=3e-2, atol=3e-2)


def test_gradients_match_the_loop() -> None:
    """Gradients of the input, every expert weight and bias, and the routing weights."""
    torch.manual_seed(6)
    m = Experts(4, 8, 8, bias=True)
    x = torch.randn(7, 8, requires_grad=True)
    idx, wts = routing(7, 4, 2)
    wts.requires_grad_(True)
    grad = torch.randn(7, 8)
    ex.experts_forward(m, x, idx, wts).backward(grad)
    got = [x.grad, wts.grad, *(p.grad for p in m.parameters())]
    x2, w2 = x.detach().clone().requires_grad_(True), wts.detach().clone().requires_grad_(True)
    for p in m.parameters():
        p.grad = None
    loop_ref(m, x2, idx, w2).backward(grad)
    want = [x2.grad, w2.grad, *(p.grad for p in m.parameters())]
    for g, w in zip(got, want, strict=True):
        assert g is not None and w is not None
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5)


def test_compiles_without_graph_breaks() -> None:
    torch._dynamo.reset()
    torch.manual_seed(7)
    m = Experts(4, 16, 8)
    x = torch.randn(6, 16)
    idx, wts = routing(6, 4, 2)
    cnt = CompileCounterWithBackend("aot_eager")
    fn = torch.compile(lambda a, b, c: ex.experts_forward(m, a, b, c), backend=cnt, fullgraph=True)
    with torch.no_grad():
        got = fn(x, idx, wts)
    assert cnt.frame_count == 1
    torch.testing.assert_close(got, loop_ref(m, x, idx, wts), rtol=1e-4, atol=1e-5)
    torch._dynamo.reset()


def test_errors() -> None:
    m = Experts(4, 8, 8)
    x = torch.randn(3, 8)
    idx, wts = routing(3, 4, 2)
    with pytest.raises(ValueError, match="top_k_weights of shape"):
        ex.experts_forward(m, x, idx, torch.ones(3, 3))
    with pytest.raises(ValueError, match="hidden_states"):
        ex.experts_forward(m, x[None], idx, wts)
    with pytest.raises(TypeError, match="set_experts_implementation"):
        autocutlass.swap_experts_(nn.Linear(4, 4))


# ---- with transformers (>= 5) installed ----------------------------------------------------------
def test_same_numbers_as_transformers_grouped_mm_function() -> None:
    """bf16 experts with float32 routing weights (Mixtral's router): the product is taken in float32
    as transformers' own function takes it, so the two agree to the last bits of a bf16 result."""
    moe = pytest.importorskip("transformers.integrations.moe")
    torch.manual_seed(10)
    m = Experts(8, 64, 32, dtype=torch.bfloat16)
    m.num_experts, m.has_post_expert_norm, m._is_expert_parallel = 8, False, False
    m._apply_gate = lambda z: F.silu(z[..., : z.shape[-1] // 2]) * z[..., z.shape[-1] // 2 :]  # type: ignore[method-assign]
    x = torch.randn(40, 64, dtype=torch.bfloat16)
    idx, wts = routing(40, 8, 2)
    with torch.no_grad():
        got = ex.experts_forward(m, x, idx, wts)
        theirs = moe.ALL_EXPERTS_FUNCTIONS["grouped_mm"](m, x, idx, wts)
    assert got.dtype == theirs.dtype == torch.bfloat16
    torch.testing.assert_close(got, theirs, rtol=1e-2, atol=2e-3)
    assert (got != theirs).float().mean() < 0.02


def _tiny(kind: str) -> Any:
    transformers = pytest.importorskip("transformers")
    if not hasattr(transformers, "Qwen3MoeConfig"):
        pytest.skip("transformers without Qwen3-MoE")
    common = dict(vocab_size=96, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                  max_position_embeddings=64)  # fmt: skip
    if kind == "qwen3moe":
        cfg = transformers.Qwen3MoeConfig(**common, head_dim=16, intermediate_size=128, moe_intermediate_size=32,
                                          num_experts=8, num_experts_per_tok=2, decoder_sparse_step=1)  # fmt: skip
        return transformers.Qwen3MoeForCausalLM(cfg)
    if kind == "mixtral":
        cfg = transformers.MixtralConfig(**common, intermediate_size=48, num_local_experts=4, num_experts_per_tok=2)
        return transformers.MixtralForCausalLM(cfg)
    cfg = transformers.GptOssConfig(**common, head_dim=16, intermediate_size=32, num_local_experts=4,
                                    num_experts_per_tok=2, layer_types=["full_attention"] * 2)  # fmt: skip
    return transformers.GptOssForCausalLM(cfg)


@pytest.mark.parametrize("kind", ["qwen3moe", "mixtral", "gptoss"])
def test_transformers_models_match_their_eager_experts(kind: str) -> None:
    torch.manual_seed(8)
    model = _tiny(kind).eval()
    if not hasattr(model, "set_experts_implementation"):
        pytest.skip("transformers without the experts interface")
    with torch.no_grad():
        for p in model.parameters():  # gpt-oss initialises expert weights at zero: no test at all
            p.normal_(0.0, 0.05)
    ids = torch.randint(0, 96, (2, 9))
    with torch.no_grad():
        model.set_experts_implementation("eager")
        ref = model(ids).logits
        assert autocutlass.swap_experts_(model) is model
        assert model.get_experts_implementation()[""] == ex.BACKEND
        before = autocutlass.stats().fallbacks
        got = model(ids).logits
        assert autocutlass.stats().fallbacks > before  # the experts ran through autocutlass.grouped_mm
        autocutlass.unswap_experts_(model)
        assert model.get_experts_implementation()[""] == "eager"
    torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-4)

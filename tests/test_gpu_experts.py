"""``swap_experts_`` on the GPU: tiny transformers MoE models (Qwen3-MoE, gpt-oss: biases,
transposed weights, its clamped gate) in bf16 on CUDA against their eager experts, with the
grouped kernels on (served by hopper_grouped, heuristic configs) and off (torch._grouped_mm), and a
CUDA graph of the swapped experts replayed with a new routing."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import autocutlass
from autocutlass.nn import experts as ex

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("isolated_env")]

transformers = pytest.importorskip("transformers")


def _model(kind: str) -> Any:
    common = dict(vocab_size=256, hidden_size=256, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                  head_dim=64, max_position_embeddings=256)  # fmt: skip
    if kind == "qwen3moe":
        cfg = transformers.Qwen3MoeConfig(**common, intermediate_size=512, moe_intermediate_size=128, num_experts=16,
                                          num_experts_per_tok=4, decoder_sparse_step=1)  # fmt: skip
        model = transformers.Qwen3MoeForCausalLM(cfg)
    else:
        cfg = transformers.GptOssConfig(**common, intermediate_size=128, num_local_experts=8, num_experts_per_tok=2,
                                        layer_types=["full_attention"] * 2)  # fmt: skip
        model = transformers.GptOssForCausalLM(cfg)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.05)
    return model.to("cuda", torch.bfloat16).eval()


@pytest.mark.parametrize("kind", ["qwen3moe", "gptoss"])
@pytest.mark.parametrize("kernels", ["1", "0"])
def test_model_matches_eager_experts(kind: str, kernels: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOCUTLASS_GROUPED_KERNELS", kernels)
    autocutlass.reset()
    torch.manual_seed(0)
    model = _model(kind)
    ids = torch.randint(0, 256, (3, 77), device="cuda")
    with torch.no_grad():
        model.set_experts_implementation("eager")
        ref = model(ids).logits.float()
        autocutlass.swap_experts_(model)
        got = model(ids).logits.float()
    s = autocutlass.stats()
    if kernels == "1":
        assert s.fallbacks == 0, s  # every grouped GEMM ran the hopper_grouped kernel
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got, ref, rtol=5e-2, atol=5e-2)


def test_cuda_graph_replays_new_routing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOCUTLASS_GROUPED_KERNELS", "1")
    autocutlass.reset()
    torch.manual_seed(1)
    e, h, t, k = 16, 256, 64, 4
    experts = _model("qwen3moe").model.layers[0].mlp.experts
    x = torch.randn(t, h, device="cuda", dtype=torch.bfloat16)
    idx = torch.stack([torch.randperm(e, device="cuda")[:k] for _ in range(t)])
    wts = torch.softmax(torch.randn(t, k, device="cuda"), -1).to(torch.bfloat16)
    with torch.no_grad():
        for _ in range(2):  # warm-up: the entry is built and memoised
            ex.experts_forward(experts, x, idx, wts)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = ex.experts_forward(experts, x, idx, wts)
        idx.copy_(torch.stack([torch.randperm(e, device="cuda")[:k] for _ in range(t)]))
        x.copy_(torch.randn_like(x))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        experts.config._experts_implementation = "eager"  # the module's own loop, as reference
        ref = experts(x, idx, wts)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out.float(), ref.float(), rtol=5e-2, atol=5e-2)

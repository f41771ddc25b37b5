"""``swap_qkv_`` on the GPU: a Llama-shaped attention's q/k/v projections packed into one weight,
served by our GEMM kernels (policy heuristic, no fallback), against the unswapped module in
float32; decode (one row: contiguous parts) and prefill (strided parts, viewed into heads and
transposed as Llama's attention does), with and without biases (Qwen2's projections have them),
under no_grad and inference_mode (whose tensors keep no version counter)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import autocutlass
from autocutlass.nn import PackedLinear
from autocutlass.ops.compare import compare

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("isolated_env")]

HID, HEADS, KV_HEADS, DIM = 1024, 8, 2, 128


class Attention(nn.Module):
    def __init__(self, bias: bool) -> None:
        super().__init__()
        self.q_proj = nn.Linear(HID, HEADS * DIM, bias=bias)
        self.k_proj = nn.Linear(HID, KV_HEADS * DIM, bias=bias)
        self.v_proj = nn.Linear(HID, KV_HEADS * DIM, bias=bias)
        self.o_proj = nn.Linear(HEADS * DIM, HID, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, -1, DIM).transpose(1, 2)
        k = self.k_proj(x).view(b, t, -1, DIM).transpose(1, 2)
        v = self.v_proj(x).view(b, t, -1, DIM).transpose(1, 2)
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return self.o_proj(o.transpose(1, 2).reshape(b, t, -1))


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("shape", [(1, 1), (4, 1), (1, 333), (2, 64)])
@pytest.mark.parametrize("mode", ["no_grad", "inference_mode"])
def test_packed_attention_matches_the_original(bias: bool, shape: tuple[int, int], mode: str) -> None:
    torch.manual_seed(0)
    ref = Attention(bias).to("cuda", torch.bfloat16).eval()
    ours = Attention(bias).to("cuda", torch.bfloat16).eval()
    ours.load_state_dict(ref.state_dict())
    autocutlass.swap_qkv_(autocutlass.swap_linear_(ours))
    assert isinstance(ours.q_proj, PackedLinear)
    x = torch.randn(*shape, HID, device="cuda", dtype=torch.bfloat16)
    with getattr(torch, mode)():
        want = ref.float()(x.float())
        before = autocutlass.stats()
        got = ours(x)
        torch.cuda.synchronize()
        after = autocutlass.stats()
    assert after.fallbacks == before.fallbacks, "fell back to torch"
    assert after.memo_hits + after.memo_misses - before.memo_hits - before.memo_misses == 2  # packed + o_proj
    ok, why = compare(got.float(), want, 0.03, "bf16")
    assert ok, why

"""The hopper_gemm_gated family on the GPU: D = act(A @ B + bias) * C against the float32 reference
(random data, NaN-poisoned D) over tiles, schedules, both stores, clusters, serial split-K,
stream-K, swap_ab (decode), residues and every activation; then ``autocutlass.linear(..., mul=)``
served by the kernel (AUTOCUTLASS_GATED_KERNELS=1) against torch's ``act(F.linear) * mul``, a
Llama-sized gated MLP included. The family stays gated until these pass."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
import torch.nn.functional as F

import autocutlass
from autocutlass.kernels.hopper_gemm import HopperGemmConfig as C
from autocutlass.ops.gemm.problem import Activation, DType, Epilogue, GemmProblem, Major

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("isolated_env")]

T = Major.COL
A = Activation


def gated(m: int, n: int, k: int, act: Activation = A.SILU, *, bias: bool = False, d: DType = DType.BF16,
          **kw: object) -> GemmProblem:  # fmt: skip
    return GemmProblem(m=m, n=n, k=k, d_dtype=d, c_dtype=d, b_major=T,
                       epilogue=Epilogue(with_c=True, bias=bias, activation=act, c_mul=True), **kw)  # type: ignore[arg-type]  # fmt: skip


CASES = [
    (C(128, 256, 64, cluster_m=2), gated(1000, 1000, 1000, bias=True)),
    (C(128, 128, 64, schedule="pingpong"), gated(2048, 2048, 1024, A.GELU_TANH)),
    (C(256, 128, 64), gated(700, 640, 384, A.RELU)),
    (C(128, 256, 64, swizzle=4, store="direct"), gated(1000, 1000, 1000, A.GELU, bias=True)),
    (C(64, 128, 64), gated(264, 392, 200, A.NONE, a_major=T)),
    (C(128, 128, 64, split_k=3), gated(257, 392, 1000)),
    (C(64, 128, 128, split_k=8, store="direct"), gated(128, 4096, 14336, bias=True)),
    (C(128, 128, 64, stream_k=True), gated(1536, 1536, 8192)),
    (C(128, 16, 128, swap_ab=True), gated(16, 6144, 4096)),
    (C(64, 16, 128, swap_ab=True, split_k=11), gated(13, 6144, 4096, bias=True)),
    (C(128, 16, 128, swap_ab=True, store="direct"), gated(9, 1032, 1024, A.GELU_TANH, bias=True)),
    (C(128, 128, 64), gated(500, 512, 512, d=DType.FP32)),
]


@pytest.mark.parametrize(("cfg", "prob"), CASES, ids=[f"{c}|{p.describe()}" for c, p in CASES])
def test_gated_kernel_matches_reference(cfg: C, prob: GemmProblem) -> None:
    from autocutlass.kernels.hopper_gemm_gated import HopperGemmGatedFamily
    from autocutlass.ops.gemm.evaluation import make_inputs, reference, verify

    fam = HopperGemmGatedFamily(cache_dir=None)
    assert fam.check(cfg, prob) is None, fam.check(cfg, prob)
    runner = fam.compile(cfg, prob)
    for seed in (0, 1):
        inputs = make_inputs(prob, device="cuda", seed=seed)
        ok, why = verify(runner, prob, inputs, reference(prob, inputs))
        assert ok, why
        # a multiplier of ones gives the additive family's product: a dropped or doubled C shows
        inputs.c.fill_(1.0)  # type: ignore[union-attr]
        ok, why = verify(runner, prob, inputs, reference(prob, inputs))
        assert ok, why


@pytest.fixture
def gated_on(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("AUTOCUTLASS_GATED_KERNELS", "1")
    autocutlass.reset()
    yield
    autocutlass.reset()


@pytest.mark.parametrize("m", [1, 16, 333, 4096])
def test_linear_mul_is_served_by_the_kernel(gated_on: None, m: int) -> None:
    x = torch.randn(m, 4096, device="cuda", dtype=torch.bfloat16)
    wg, wu = (torch.randn(14336, 4096, device="cuda", dtype=torch.bfloat16) * 0.02 for _ in range(2))
    up = F.linear(x, wu)
    before = autocutlass.stats().fallbacks
    y = autocutlass.linear(x, wg, activation="silu", mul=up)
    torch.cuda.synchronize()
    assert autocutlass.stats().fallbacks == before, "fell back to torch"
    ref = (F.silu(F.linear(x.float(), wg.float())) * up.float()).to(torch.bfloat16)
    from autocutlass.ops.compare import compare

    ok, why = compare(y, ref, 0.02, "bf16")
    assert ok, why

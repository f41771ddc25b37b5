"""The hopper_gemm_swiglu family on the GPU: D = silu(A @ B_gate + b_gate) * (A @ B_up + b_up)
against the float32 reference (random data, NaN-poisoned D) over tiles (64, 128, 192, 256),
schedules, both stores, clusters (B multicast splits the packed tile), stream-K, fp16 and
M-major A, with and without bias, M residues (1, 7, 129, 1000) and N residues against tile_n;
then ``autocutlass.linear(..., activation="swiglu")`` served by the kernel
(AUTOCUTLASS_SWIGLU_KERNELS=1) against torch's ``silu(g) * u``, and a swapped ``GatedMLP``.
The family stays gated until these pass."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import autocutlass
from autocutlass.kernels.hopper_gemm import HopperGemmConfig as C
from autocutlass.ops.gemm.problem import Activation, DType, Epilogue, GemmProblem, Major

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("isolated_env")]


def swiglu(m: int, n_out: int, k: int, *, bias: bool = False, dt: DType = DType.BF16, **kw: object) -> GemmProblem:
    """The fused GEMM of an (m, n_out) SwiGLU: N = 2 * n_out packed weight rows."""
    return GemmProblem(m=m, n=2 * n_out, k=k, a_dtype=dt, b_dtype=dt, d_dtype=dt, b_major=Major.COL,
                       epilogue=Epilogue(bias=bias, activation=Activation.SILU, swiglu=True), **kw)  # type: ignore[arg-type]  # fmt: skip


CASES = [
    (C(128, 256, 64, cluster_m=2), swiglu(1000, 1024, 1000, bias=True)),
    (C(128, 256, 64, cluster_n=2, swizzle=2, raster="along_n"), swiglu(129, 1408, 512)),
    (C(128, 128, 64, schedule="pingpong"), swiglu(1000, 640, 384, bias=True)),
    (C(128, 128, 64, schedule="pingpong", cluster_m=2), swiglu(7, 1088, 512)),
    (C(256, 128, 64), swiglu(700, 576, 384)),
    (C(64, 128, 128, store="direct"), swiglu(1, 1024, 4096, bias=True)),
    (C(128, 256, 64, store="direct"), swiglu(129, 1152, 200)),
    (C(64, 64, 128, cluster_m=2), swiglu(7, 96, 256, bias=True)),
    (C(128, 192, 64), swiglu(1000, 960, 320, bias=True)),
    (C(128, 128, 64, stream_k=True), swiglu(1536, 768, 8192)),
    (C(128, 128, 64), swiglu(264, 512, 200, a_major=Major.COL)),
    (C(128, 256, 64), swiglu(1000, 1024, 512, bias=True, dt=DType.FP16)),
]


@pytest.mark.parametrize(("cfg", "prob"), CASES, ids=[f"{c.short()}|{p.describe()}" for c, p in CASES])
def test_swiglu_kernel_matches_reference(cfg: C, prob: GemmProblem) -> None:
    from autocutlass.kernels.hopper_gemm_swiglu import HopperGemmSwigluFamily
    from autocutlass.ops.gemm.evaluation import make_inputs, reference, verify

    fam = HopperGemmSwigluFamily(cache_dir=None)
    assert fam.check(cfg, prob) is None, fam.check(cfg, prob)
    runner = fam.compile(cfg, prob)
    for seed in (0, 1):
        inputs = make_inputs(prob, device="cuda", seed=seed)
        assert inputs.d.shape[-1] == prob.n // 2
        ok, why = verify(runner, prob, inputs, reference(prob, inputs))
        assert ok, why


def test_gate_and_up_rows_are_not_swapped() -> None:
    """Gate rows that read only 5 columns of K still match the reference (silu is not symmetric in
    gate and up, so swapped halves fail it); with the up rows and up bias zeroed D is exactly 0."""
    from autocutlass.kernels.hopper_gemm_swiglu import HopperGemmSwigluFamily
    from autocutlass.ops.gemm.evaluation import make_inputs, reference, verify

    prob = swiglu(256, 512, 256, bias=True)
    cfg = C(128, 128, 64)
    runner = HopperGemmSwigluFamily(cache_dir=None).compile(cfg, prob)
    inputs = make_inputs(prob, device="cuda", seed=3)
    w = inputs.b.transpose(0, 1)  # (2N, K) view of the packed weight
    w[:512, 5:].zero_()  # the gate: one column of K, so g = a[:, :5] @ w_g[:, :5]^T + b_g
    ok, why = verify(runner, prob, inputs, reference(prob, inputs))
    assert ok, why
    inputs.bias[512:].fill_(0.0)  # type: ignore[index]
    w[512:].zero_()  # no up: D must be exactly 0
    inputs.poison()
    inputs.run(runner)
    torch.cuda.synchronize()
    assert torch.equal(inputs.d, torch.zeros_like(inputs.d))


@pytest.fixture
def swiglu_on(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("AUTOCUTLASS_SWIGLU_KERNELS", "1")
    autocutlass.reset()
    yield
    autocutlass.reset()


@pytest.mark.parametrize("m", [1, 7, 129, 1000])
@pytest.mark.parametrize("with_bias", [False, True])
def test_linear_swiglu_is_served_by_the_kernel(swiglu_on: None, m: int, with_bias: bool) -> None:
    x = torch.randn(m, 2048, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(2 * 5632, 2048, device="cuda", dtype=torch.bfloat16) * 0.03
    b = torch.randn(2 * 5632, device="cuda", dtype=torch.bfloat16) if with_bias else None
    before = autocutlass.stats().fallbacks
    y = autocutlass.linear(x, w, b, activation="swiglu")
    torch.cuda.synchronize()
    assert autocutlass.stats().fallbacks == before, "fell back to torch"
    z = F.linear(x.float(), w.float(), None if b is None else b.float())
    ref = (F.silu(z[:, :5632]) * z[:, 5632:]).to(torch.bfloat16)
    from autocutlass.ops.compare import compare

    assert y.shape == (m, 5632)
    ok, why = compare(y, ref, 0.02, "bf16")
    assert ok, why


def test_swapped_gated_mlp_runs_the_packed_weight(swiglu_on: None) -> None:
    class MLP(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.gate_proj, self.up_proj = nn.Linear(1024, 2816, bias=False), nn.Linear(1024, 2816, bias=False)
            self.down_proj, self.act_fn = nn.Linear(2816, 1024, bias=False), nn.SiLU()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))

    model = nn.Sequential(MLP()).to("cuda", torch.bfloat16).eval()
    x = torch.randn(4, 37, 1024, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        want = model(x).float()
        autocutlass.swap_gated_mlp_(model)
        assert model[0]._packed_views() is not None
        got = model(x).float()
    from autocutlass.ops.compare import compare

    ok, why = compare(got, want, 0.03, "bf16")
    assert ok, why

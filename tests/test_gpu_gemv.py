"""The hopper_gemv family on the GPU: D = act(alpha * A @ B + beta * C + bias) for M <= 16 rows
against the float32 reference (random data, NaN-poisoned D) over both kernels (simt, mma) and every m_tile, rows,
warp split and unroll axis, M, N and K residues (a last CTA with missing rows, a last K step partly past K),
every epilogue and fp16 / fp32 outputs; then ``autocutlass.linear`` served by the kernel through
the database: a faster hopper_gemv record beats a hopper_gemm record of the same problem."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
import torch.nn.functional as F

import autocutlass
from autocutlass.kernels.hopper_gemv import GemvConfig as G
from autocutlass.ops.gemm.problem import Activation, DType, Epilogue, GemmProblem, Major

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("isolated_env")]

A = Activation


def decode(m: int, n: int, k: int, *, d: DType = DType.BF16, ab: DType = DType.BF16, c: bool = False,
           bias: bool = False, act: Activation = A.NONE) -> GemmProblem:  # fmt: skip
    return GemmProblem(m=m, n=n, k=k, a_dtype=ab, b_dtype=ab, d_dtype=d, c_dtype=d if c else None,
                       a_major=Major.ROW, b_major=Major.COL,
                       epilogue=Epilogue(with_c=c, bias=bias, activation=act))  # fmt: skip


CASES = [
    (G(1, 4, 4, 1, 2), decode(1, 4096, 4096)),
    (G(1, 2, 1, 4, 4), decode(1, 1000, 4104, bias=True)),  # N not a multiple of 2 rows; K tail of one chunk
    (G(2, 8, 2, 2, 1), decode(2, 333, 520, act=A.GELU)),
    (G(4, 1, 8, 1, 4), decode(3, 6144, 4096, c=True, bias=True)),
    (G(8, 2, 2, 4, 2), decode(5, 1032, 14336, act=A.SILU, bias=True)),
    (G(8, 4, 4, 2, 1), decode(8, 4096, 8, act=A.RELU)),  # K = 8: one chunk, most lanes idle
    (G(8, 4, 2, 1, 2), decode(8, 777, 2048, c=True)),
    (G(8, 1, 4, 2, 4), decode(6, 4096, 4096, d=DType.FP32, c=True, act=A.GELU_TANH)),
    (G(4, 2, 2, 2, 2), decode(4, 2048, 1000, ab=DType.FP16, d=DType.FP16, bias=True)),
    # the tensor-core kernel
    (G(8, 16, 1, 8, 2, kind="mma"), decode(8, 4096, 4096)),
    (G(8, 32, 2, 2, 1, kind="mma"), decode(3, 1000, 4104, bias=True)),  # N past the last block; K tail of one chunk
    (G(16, 16, 2, 4, 4, kind="mma"), decode(16, 777, 2056, c=True, act=A.GELU)),
    (G(16, 32, 1, 4, 1, kind="mma"), decode(11, 6144, 4096, d=DType.FP32, c=True, bias=True)),
    (G(8, 16, 4, 4, 2, kind="mma"), decode(1, 2048, 1000, ab=DType.FP16, d=DType.FP16, bias=True, act=A.SILU)),
    (G(8, 16, 1, 16, 4, kind="mma"), decode(5, 1024, 8)),  # K = 8: one chunk, most lanes idle
]


@pytest.mark.parametrize(("cfg", "prob"), CASES, ids=[f"{c.short()}|{p.describe()}" for c, p in CASES])
def test_gemv_kernel_matches_reference(cfg: G, prob: GemmProblem) -> None:
    from autocutlass.kernels.hopper_gemv import HopperGemvFamily
    from autocutlass.ops.gemm.evaluation import make_inputs, reference, verify

    fam = HopperGemvFamily(cache_dir=None)
    assert fam.check(cfg, prob) is None, fam.check(cfg, prob)
    runner = fam.compile(cfg, prob)
    for seed in (0, 1):
        inputs = make_inputs(prob, device="cuda", seed=seed)
        ok, why = verify(runner, prob, inputs, reference(prob, inputs))
        assert ok, why


@pytest.mark.parametrize(("m", "cfg"), [(7, G(8, 4, 2, 2, 2)), (13, G(16, 16, 2, 2, 2, kind="mma"))])
def test_every_row_and_column_is_its_own(m: int, cfg: G) -> None:
    """Row m of D is A's row m times B, column n is weight row n: a shifted, swapped or lost row or
    column shows (a one-hot A picks single weight columns out)."""
    from autocutlass.kernels.hopper_gemv import HopperGemvFamily

    n, k = 515, 1032
    prob = decode(m, n, k)
    runner = HopperGemvFamily(cache_dir=None).compile(cfg, prob)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    a = torch.zeros(m, k, device="cuda", dtype=torch.bfloat16)
    picks = [0, 5, 8, 255, 256, 1000, k - 1, 3, 17, 31, 32, 600, 1024][:m]
    for row, col in enumerate(picks):
        a[row, col] = 1.0
    d = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    runner(a, w.t(), d)
    torch.cuda.synchronize()
    assert torch.equal(d, w[:, picks].t().contiguous())


@pytest.fixture
def gemv_on(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("AUTOCUTLASS_GEMV_KERNELS", "1")
    monkeypatch.setenv("AUTOCUTLASS_POLICY", "cached")
    autocutlass.reset()
    yield
    autocutlass.reset()


@pytest.mark.parametrize(("m", "gemv_cfg"), [(1, G(1, 2, 2, 2, 2)), (4, G(4, 2, 2, 2, 2)),
                                             (8, G(8, 16, 1, 8, 2, kind="mma")), (16, G(16, 16, 2, 4, 2, kind="mma"))])
def test_linear_is_served_by_the_faster_gemv_record(gemv_on: None, m: int, gemv_cfg: G) -> None:
    from autocutlass.api import dispatcher
    from autocutlass.kernels import get_family

    x = torch.randn(m, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(6144, 4096, device="cuda", dtype=torch.bfloat16) * 0.02
    b = torch.randn(6144, device="cuda", dtype=torch.bfloat16)
    prob = decode(m, 6144, 4096, bias=True)
    d = dispatcher()
    store, _ = d._open_store()
    store = getattr(store, "user", store)  # the layered store's writable layer
    info = d._device_info(0)
    gemm_cfg = get_family("hopper_gemm").seeds(prob)[0]
    store.record_best(prob, info.hard_key(get_family("hopper_gemm").source_hash()), "hopper_gemm",
                      get_family("hopper_gemm").config_to_dict(gemm_cfg), 1.0, 1.0)  # fmt: skip
    store.record_best(prob, info.hard_key(get_family("hopper_gemv").source_hash()), "hopper_gemv",
                      gemv_cfg.as_dict(), 0.5, 2.0)  # fmt: skip
    before = autocutlass.stats().fallbacks
    y = autocutlass.linear(x, w, b)
    torch.cuda.synchronize()
    assert autocutlass.stats().fallbacks == before, "fell back to torch"
    assert any(key[0] == "hopper_gemv" for key in d._runners), list(d._runners)
    ref = F.linear(x.float(), w.float(), b.float()).to(torch.bfloat16)
    from autocutlass.ops.compare import compare

    ok, why = compare(y, ref, 0.02, "bf16")
    assert ok, why

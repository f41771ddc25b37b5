"""Workspace split-K beyond 16 splits: ``check`` accepts the counts the reduce kernel can sum in two
passes (``check.reduce_passes``) and refuses the others with a reason; ``HopperGemmRunner`` runs the
two passes over the right slabs. Checked on CPU with the real runner around stand-ins for the
compiled GEMM (it writes split s's fp32 partial of batch l to workspace slab s * L + l, as the kernel
does) and the reduce kernel (it sums its (S, L, M, n_pad) input over S in order, checks the shapes
TVM-FFI would and runs the epilogue's alpha and bias), on NaN-poisoned scratch: a wrong view mixes
batches, reads a slab twice or reads the poison, and the result is wrong."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from autocutlass.kernels.hopper_gemm import check
from autocutlass.kernels.hopper_gemm import runner as runner_mod
from autocutlass.kernels.hopper_gemm.check import REDUCE_PASS_MAX, WORKSPACE_SPLIT_MAX, reduce_passes
from autocutlass.kernels.hopper_gemm.config import HopperGemmConfig as C, SplitMode
from autocutlass.ops.gemm.problem import DType, Epilogue, GemmProblem, Major

W = SplitMode.WORKSPACE


def test_reduce_passes_factor_within_one_pass_each() -> None:
    for s in range(1, WORKSPACE_SPLIT_MAX + 1):
        passes = reduce_passes(s)
        if s <= REDUCE_PASS_MAX:
            assert passes == (s,)
        elif passes:
            g, h = passes
            assert g * h == s and g <= REDUCE_PASS_MAX and 2 <= h <= REDUCE_PASS_MAX
            assert not any(s % x == 0 and s // x <= REDUCE_PASS_MAX for x in range(2, h))  # fewest slabs left
        else:
            assert not any(s % x == 0 and x <= REDUCE_PASS_MAX and s // x <= REDUCE_PASS_MAX for x in range(2, s))
    assert reduce_passes(33) == (11, 3) and reduce_passes(66) == (11, 6) and reduce_passes(17) == ()


@pytest.mark.parametrize(
    "cfg,prob,needle",
    [
        (C(128, 128, 64, split_k=17, split_mode=W), GemmProblem(m=256, n=256, k=65536), "factors"),
        (C(128, 128, 64, split_k=33), GemmProblem(m=256, n=256, k=65536), "serial split-K chains at most 16"),
        (C(128, 128, 64, split_k=132, split_mode=W), GemmProblem(m=256, n=256, k=65536), "split_k"),
        (C(128, 128, 64, split_k=33, split_mode=W), GemmProblem(m=4096, n=4096, k=65536), "MiB"),
    ],
)
def test_wide_splits_refused_with_reason(cfg: C, prob: GemmProblem, needle: str) -> None:
    assert needle in (check(cfg, prob) or "")


def test_wide_workspace_splits_accepted() -> None:
    p = GemmProblem(m=256, n=256, k=65536)
    for s in (18, 33, 64, 66, 128):
        assert check(C(128, 128, 64, split_k=s, split_mode=W), p) is None
    assert check(C(128, 128, 64, split_k=16), p) is None  # serial up to 16, as before


class Gemm:
    """The compiled GEMM's workspace mode: split s of batch l's fp32 partial into slab s * L + l
    of the (S * L, M, n_pad) workspace, K split in ceil(K / S) runs (the last ones may be empty)."""

    def __init__(self, splits: int) -> None:
        self.splits = splits

    def __call__(self, a, b, d, c, bias, work, count, sa, sb, alpha, beta, clusters) -> None:  # noqa: ANN001
        assert count is None and c is None and bias is None or work is not None
        a3, b3 = (a, b) if a.dim() == 3 else (a[None], b[None])
        l, m, k = a3.shape
        n = b3.shape[-1]
        n_pad = -(-n // 4) * 4
        slabs = work[: self.splits * l * m * n_pad].view(self.splits * l, m, n_pad)
        per = -(-k // self.splits)
        for s in range(self.splits):
            ks = slice(min(k, s * per), min(k, (s + 1) * per))
            for i in range(l):
                slabs[s * l + i, :, :n] = a3[i][:, ks].float() @ b3[i][ks, :].float()


def fake_reduce(passes: list[int]) -> Any:
    def get(splits: int, d_dtype: DType, c_dtype: Any, bias: bool, activation: Any, rank: int, cache: Any) -> Any:
        passes.append(splits)

        def fn(ws: torch.Tensor, d: torch.Tensor, c: Any, b: Any, alpha: float, beta: float) -> None:
            d3 = d if d.dim() == 3 else d[None]
            assert d.dim() == rank and ws.dtype == torch.float32 and d.dtype == torch.float32  # fp32 D in these cases
            assert ws.shape[0] == splits and ws.shape[1:3] == d3.shape[:2] and ws.shape[3] >= d3.shape[2]
            assert ws.shape[3] % 4 == 0 and (b is not None) == bias
            assert ws.is_contiguous() and d3.is_contiguous()
            ws_end, d_end = ws.data_ptr() + 4 * ws.numel(), d3.data_ptr() + d3.element_size() * d3.numel()
            assert d_end <= ws.data_ptr() or ws_end <= d3.data_ptr(), "the pass writes over the slabs it reads"
            acc = ws[0].clone()
            for s in range(1, splits):
                acc += ws[s]
            y = alpha * acc[..., : d3.shape[2]]
            if b is not None:
                y = y + b.float()
            d3.copy_(y.to(d3.dtype))

        return fn

    return get


@pytest.mark.parametrize("splits,l", [(33, 3), (40, 1), (66, 2), (12, 3)])
def test_runner_sums_wide_splits_in_two_passes(monkeypatch: pytest.MonkeyPatch, splits: int, l: int) -> None:  # noqa: E741
    passes: list[int] = []
    monkeypatch.setattr(runner_mod, "get_reduce", fake_reduce(passes))
    monkeypatch.setitem(runner_mod._max_clusters, (0, 1), 132)
    monkeypatch.setattr(runner_mod.SplitKWorkspace, "get", lambda self, device, partials, turnstiles: (
        torch.full((partials,), float("nan")), None))  # CPU: no streams to ask; poisoned
    m, n, k = 24, 36, 1000  # n_pad 36; K not a multiple of the split count
    p = GemmProblem(m=m, n=n, k=k, l=l, b_major=Major.ROW, d_dtype=DType.FP32, epilogue=Epilogue(bias=True))
    cfg = C(128, 128, 64, split_k=splits, split_mode=W)
    r = runner_mod.HopperGemmRunner(cfg, p, None, compiler=lambda *args: Gemm(splits))
    assert passes == list(reduce_passes(splits))[::-1]  # the epilogue pass first, the first pass once
    g = torch.Generator().manual_seed(splits)
    shape = (l,) if l > 1 else ()
    a = torch.randn(*shape, m, k, generator=g)
    b = torch.randn(*shape, k, n, generator=g)
    bias = torch.randn(n, generator=g)
    d = torch.full((*shape, m, n), float("nan"))
    r(a, b, d, bias=bias, alpha=0.5)
    torch.testing.assert_close(d, 0.5 * (a @ b) + bias, rtol=1e-4, atol=1e-3)

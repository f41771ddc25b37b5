"""The hit path's direct launch (``ops.gemm.entries._direct_launch``): a tuned GEMM whose runner
offers ``direct_launch`` is launched with kernel views fixed when the memo entry is built (one
``as_strided`` per operand, transposed for ``swap_ab`` configs), skipping the runner's
``__call__``. Checked on CPU with the real ``HopperGemmRunner`` around a recording stand-in for
the compiled function, which computes what the kernel computes from the views it is handed: a
wrong view (a lost transpose, a wrong stride, a dropped C or bias) gives a wrong result."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F

from _dispatch_fakes import calls, make_rig
from autocutlass.kernels.hopper_gemm import runner as runner_mod
from autocutlass.kernels.hopper_gemm.config import HopperGemmConfig, SplitMode
from autocutlass.kernels.hopper_gemm.runner import HopperGemmRunner


class Kernel:
    """The compiled function's calling convention, computed with torch:
    D' = alpha * A' @ B' + beta * C' + bias (bias along D's columns: D' rows when swapped)."""

    def __init__(self, swap: bool) -> None:
        self.swap, self.launches = swap, 0

    def __call__(self, a, b, d, c, bias, work, count, scale_a, scale_b, alpha, beta, clusters) -> None:  # noqa: ANN001
        assert work is None and count is None and scale_a is None and scale_b is None and clusters == 132
        self.launches += 1
        y = alpha * (a.float() @ b.float())
        if c is not None:
            y = y + beta * c.float()
        if bias is not None:
            y = y + (bias.float()[:, None] if self.swap else bias.float())
        d.copy_(y.to(d.dtype))


@pytest.fixture
def rig(monkeypatch: pytest.MonkeyPatch) -> Any:
    rig = make_rig()
    monkeypatch.setitem(runner_mod._max_clusters, (0, 1), 132)
    built: list[tuple[HopperGemmRunner, Kernel]] = []
    rig.swap = False

    def compile_real_runner(config: Any, problem: Any) -> HopperGemmRunner:
        kernel = Kernel(rig.swap)
        cfg = HopperGemmConfig(swap_ab=rig.swap, split_k=1, split_mode=SplitMode.SERIAL)
        r = HopperGemmRunner(cfg, problem, None, compiler=lambda *args: kernel)
        calls_ = []
        orig = r.__call__
        r.general_calls = calls_  # type: ignore[attr-defined]

        class Counted(HopperGemmRunner):
            def __call__(self, *args: Any, **kw: Any) -> None:
                calls_.append(1)
                orig(*args, **kw)

        r.__class__ = Counted
        built.append((r, kernel))
        return r

    monkeypatch.setattr(rig.family, "compile", compile_real_runner)
    rig.built = built
    return rig


@pytest.mark.parametrize("swap", [False, True])
def test_linear_hits_launch_directly_with_the_right_views(rig: Any, swap: bool) -> None:
    rig.swap = swap
    d = calls(rig.dispatcher)
    x, w, bias = torch.randn(3, 5, 32).bfloat16(), torch.randn(48, 32).bfloat16(), torch.randn(48).bfloat16()
    ref = F.linear(x.float(), w.float(), bias.float())
    for _ in range(3):  # the miss's call, then memo hits (the weight's view cached)
        y = d.linear(x, w, bias)
        torch.testing.assert_close(y.float(), ref, atol=0.05, rtol=0.02)
        assert y.shape == (3, 5, 48) and y.is_contiguous()
    (runner, kernel), = rig.built
    assert kernel.launches == 3 and runner.general_calls == []
    # another weight of the same shape through the same entry: its own view, not the cached one
    w2 = torch.randn(48, 32).bfloat16()
    torch.testing.assert_close(d.linear(x, w2, bias).float(), F.linear(x.float(), w2.float(), bias.float()),
                               atol=0.05, rtol=0.02)  # fmt: skip


@pytest.mark.parametrize("swap", [False, True])
def test_matmul_and_gemm_with_c_through_the_direct_launch(rig: Any, swap: bool) -> None:
    rig.swap = swap
    d = calls(rig.dispatcher)
    a, b = torch.randn(40, 24).bfloat16(), torch.randn(16, 24).bfloat16().t()  # B column-major
    c = torch.randn(40, 16).bfloat16()
    torch.testing.assert_close(d.matmul(a, b).float(), a.float() @ b.float(), atol=0.05, rtol=0.02)
    got = d.gemm(a, b, c, 0.5, 2.0)
    torch.testing.assert_close(got.float(), 0.5 * (a.float() @ b.float()) + 2.0 * c.float(), atol=0.1, rtol=0.02)
    assert all(r.general_calls == [] for r, _ in rig.built)


def test_out_calls_and_runners_without_the_offer_take_the_runners_call(rig: Any) -> None:
    d = calls(rig.dispatcher)
    a, b = torch.randn(40, 24).bfloat16(), torch.randn(24, 16).bfloat16()
    out = torch.full((40, 16), float("nan")).bfloat16()
    d.matmul(a, b, out)
    torch.testing.assert_close(out.float(), a.float() @ b.float(), atol=0.05, rtol=0.02)
    (runner, _), = rig.built
    assert runner.general_calls == [1]


def test_split_k_workspace_runners_do_not_offer_a_direct_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    from autocutlass.ops.gemm.problem import DType, GemmProblem, Major

    monkeypatch.setitem(runner_mod._max_clusters, (0, 1), 132)
    p = GemmProblem(m=64, n=64, k=4096, a_dtype=DType.BF16, b_dtype=DType.BF16, d_dtype=DType.BF16,
                    a_major=Major.ROW, b_major=Major.COL)  # fmt: skip
    plain = HopperGemmRunner(HopperGemmConfig(), p, None, compiler=lambda *args: "fn")
    assert plain.direct_launch(2, 0) == ("fn", 132) and plain.swaps_operands is False
    split = HopperGemmRunner(HopperGemmConfig(split_k=4), p, None, compiler=lambda *args: "fn")
    assert split.direct_launch(2, 0) is None

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

    def __init__(self, swap: bool, split: int, c_mul: bool = False) -> None:
        self.swap, self.split, self.c_mul, self.launches = swap, split, c_mul, 0

    def __call__(self, a, b, d, c, bias, work, count, scale_a, scale_b, alpha, beta, clusters) -> None:  # noqa: ANN001
        assert scale_a is None and scale_b is None and clusters == 132
        assert (work is None and count is None) if self.split == 1 else (work.numel() > 0 and count.numel() > 0)
        self.launches += 1
        y = alpha * (a.float() @ b.float())
        if c is not None and not self.c_mul:
            y = y + beta * c.float()
        if bias is not None:
            y = y + (bias.float()[:, None] if self.swap else bias.float())
        if self.c_mul:  # the gated epilogue: act(acc + bias) * C, here with silu
            y = F.silu(y) * c.float()
        d.copy_(y.to(d.dtype))


@pytest.fixture
def rig(monkeypatch: pytest.MonkeyPatch) -> Any:
    rig = make_rig()
    monkeypatch.setitem(runner_mod._max_clusters, (0, 1), 132)
    monkeypatch.setattr(runner_mod.SplitKWorkspace, "get", lambda self, device, partials, turnstiles: (
        torch.empty(partials), torch.zeros(turnstiles, dtype=torch.int32)))  # CPU: no streams to ask
    built: list[tuple[HopperGemmRunner, Kernel]] = []
    rig.swap, rig.split = False, 1

    def compile_real_runner(config: Any, problem: Any) -> HopperGemmRunner:
        kernel = Kernel(rig.swap, rig.split, problem.epilogue.c_mul)
        cfg = HopperGemmConfig(swap_ab=rig.swap, split_k=rig.split, split_mode=SplitMode.SERIAL)
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


@pytest.mark.parametrize(("swap", "split"), [(False, 1), (True, 1), (False, 3), (True, 2)])
def test_linear_hits_launch_directly_with_the_right_views(rig: Any, swap: bool, split: int) -> None:
    rig.swap, rig.split = swap, split
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
def test_a_gated_linears_mul_is_the_epilogues_c(rig: Any, swap: bool) -> None:
    """linear(x, w, activation='silu', mul=m): m (not the absent residual) is the C the kernel
    reads, transposed with D for a swapped config."""
    rig.swap = swap
    d = calls(rig.dispatcher)
    for shape in ((6, 32), (2, 3, 32)):  # 2-D: C passed as it is (transposed when swapped); 3-D: viewed
        x, w, m = torch.randn(*shape).bfloat16(), torch.randn(48, 32).bfloat16(), torch.randn(*shape[:-1], 48).bfloat16()
        for _ in range(2):
            got = d.linear(x, w, None, "silu", None, m)
            torch.testing.assert_close(got.float(), F.silu(F.linear(x.float(), w.float())) * m.float(), atol=0.05,
                                       rtol=0.03)  # fmt: skip
    assert all(r.general_calls == [] for r, _ in rig.built)


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


def test_what_runners_offer_a_direct_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plain and serial split-K / stream-K configs do (the latter with their scratch, as many
    slots as ``__call__`` asks for); workspace split-K (a reduce kernel after the GEMM) does not."""
    from autocutlass.ops.gemm.problem import DType, GemmProblem, Major

    monkeypatch.setitem(runner_mod._max_clusters, (0, 1), 132)
    p = GemmProblem(m=300, n=200, k=4096, a_dtype=DType.BF16, b_dtype=DType.BF16, d_dtype=DType.BF16,
                    a_major=Major.ROW, b_major=Major.COL)  # fmt: skip
    plain = HopperGemmRunner(HopperGemmConfig(), p, None, compiler=lambda *args: "fn")
    assert plain.direct_launch(2, 0, 300, 200, 1) == ("fn", 132, None) and plain.swaps_operands is False
    slabs = HopperGemmRunner(HopperGemmConfig(split_k=4, split_mode=SplitMode.WORKSPACE), p, None,
                             compiler=lambda *args: "fn")  # fmt: skip
    assert slabs.direct_launch(2, 0, 300, 200, 1) is None
    for cfg in (HopperGemmConfig(split_k=4, split_mode=SplitMode.SERIAL), HopperGemmConfig(stream_k=True)):
        asked: list[tuple[int, int]] = []

        def get(device: Any, partials: int, turnstiles: int, asked: list[tuple[int, int]] = asked) -> Any:
            asked.append((partials, turnstiles))
            return torch.empty(partials), torch.zeros(turnstiles, dtype=torch.int32)

        launches: list[tuple[Any, ...]] = []
        r = HopperGemmRunner(cfg, p, None, compiler=lambda *args, launches=launches: lambda *a: launches.append(a))
        monkeypatch.setattr(r._workspace, "get", get)
        fn, clusters, scratch = r.direct_launch(2, 0, 300, 200, 1)
        work, count = scratch()
        a, b, d = torch.empty(300, 4096), torch.empty(200, 4096).t(), torch.empty(300, 200)
        r(a, b, d)  # the runner's own call asks for the same scratch
        assert asked[0] == asked[1] and asked[0][1] > 1 and clusters == 132
        assert launches[0][5].numel() == work.numel() and launches[0][6].numel() == count.numel()
        assert r.direct_launch(2, 0, 0, 200, 1) is None  # no tiles: the runner's call launches nothing

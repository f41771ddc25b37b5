"""What the runner is handed (the ``kernels.base`` calling convention, checked by the fake runner)
and what the caller gets back, for every entry point and layout, against torch on CPU."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from _dispatch_fakes import make_rig, calls
from autocutlass.settings import Policy

BF = torch.bfloat16


def t(*shape: int, dtype: torch.dtype = BF) -> torch.Tensor:
    return torch.randn(*shape).to(dtype)


def close(x: torch.Tensor, ref: torch.Tensor) -> None:
    assert x.shape == ref.shape and x.dtype == ref.dtype
    torch.testing.assert_close(x.float(), ref.float(), atol=6e-2, rtol=2e-2)


@pytest.fixture
def rig():  # noqa: ANN201
    return make_rig(Policy.HEURISTIC)


def _layout(shape: tuple[int, ...], transposed: bool) -> torch.Tensor:
    if not transposed:
        return t(*shape)
    return t(*shape[:-2], shape[-1], shape[-2]).transpose(-1, -2)


@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
@pytest.mark.parametrize("batch", [None, 3])
def test_matmul_layouts_served(rig, ta: bool, tb: bool, batch: int | None) -> None:  # noqa: ANN001
    lead = () if batch is None else (batch,)
    a, b = _layout((*lead, 40, 64), ta), _layout((*lead, 64, 24), tb)
    close(calls(rig.dispatcher).matmul(a, b), torch.matmul(a, b))
    assert len(rig.family.launches) == 1 and rig.dispatcher.stats().fallbacks == 0


@pytest.mark.parametrize("ta", [False, True])
def test_matmul_2d_b_broadcast_folds_or_falls_back(rig, ta: bool) -> None:  # noqa: ANN001
    a = t(3, 64, 40).transpose(1, 2) if ta else t(3, 40, 64)
    b = t(64, 24)
    close(calls(rig.dispatcher).matmul(a, b), torch.matmul(a, b))
    served = not ta  # a per-batch transposed A cannot fold
    assert len(rig.family.launches) == int(served)
    if served:
        launch = rig.family.launches[0]
        assert launch.problem.m == 120 and launch.a.data_ptr() == a.data_ptr()  # a view, not a copy
    b3 = t(3, 64, 24)
    a2 = t(40, 64)
    close(calls(rig.dispatcher).matmul(a2, b3), torch.matmul(a2, b3))  # 2-D A over 3-D B: torch


def test_matmul_out(rig) -> None:  # noqa: ANN001
    a, b = t(40, 64), t(64, 24)
    out = torch.full((40, 24), float("nan"), dtype=BF)
    r = calls(rig.dispatcher).matmul(a, b, out)
    assert r is out
    close(out, a @ b)
    assert rig.family.launches[-1].d.data_ptr() == out.data_ptr()
    nc = torch.empty(24, 40, dtype=BF).t()  # right shape, not row-major: torch writes it
    assert calls(rig.dispatcher).matmul(a, b, nc) is nc
    close(nc, a @ b)


def test_out_aliasing_an_input_is_still_right(rig) -> None:  # noqa: ANN001
    a = t(64, 64)
    b = t(64, 64)
    ref = a @ b
    calls(rig.dispatcher).matmul(t(64, 64), t(64, 64), t(64, 64))  # memoise the metadata first
    r = calls(rig.dispatcher).matmul(a, b, a)
    assert r is a
    close(a, ref)


def test_decode_shaped_m1(rig) -> None:  # noqa: ANN001
    x = t(64)[None, :]  # (1, 64)
    w = t(96, 64)
    close(calls(rig.dispatcher).linear(x, w), F.linear(x, w))
    assert len(rig.family.launches) == 1 and rig.family.launches[0].problem.m == 1


@pytest.mark.parametrize("act", [None, "relu", "gelu", "gelu_tanh", "silu"])
@pytest.mark.parametrize("with_bias", [False, True])
def test_linear_epilogues(rig, act: str | None, with_bias: bool) -> None:  # noqa: ANN001
    x, w = t(2, 20, 64), t(96, 64)
    bias = t(96) if with_bias else None
    ref = F.linear(x.float(), w.float(), None if bias is None else bias.float())
    ref = {None: lambda y: y, "relu": F.relu, "gelu": F.gelu, "silu": F.silu,
           "gelu_tanh": lambda y: F.gelu(y, approximate="tanh")}[act](ref).to(BF)  # fmt: skip
    y = calls(rig.dispatcher).linear(x, w, bias, act)
    close(y, ref)
    launch = rig.family.launches[-1]
    assert launch.a.data_ptr() == x.data_ptr() and launch.b.data_ptr() == w.data_ptr()  # views only
    assert launch.a.shape == (40, 64) and launch.b.shape == (64, 96)


@pytest.mark.parametrize("act", [None, "silu", "gelu_tanh"])
@pytest.mark.parametrize("with_bias", [False, True])
def test_linear_residual_is_the_epilogues_c_added_before_the_activation(rig, act: str | None,  # noqa: ANN001
                                                                         with_bias: bool) -> None:  # fmt: skip
    x, w, res = t(2, 20, 64), t(96, 64), t(2, 20, 96)
    bias = t(96) if with_bias else None
    z = F.linear(x.float(), w.float(), None if bias is None else bias.float()) + res.float()
    ref = {None: lambda y: y, "silu": F.silu, "gelu_tanh": lambda y: F.gelu(y, approximate="tanh")}[act](z).to(BF)
    close(calls(rig.dispatcher).linear(x, w, bias, act, res), ref)
    launch = rig.family.launches[-1]
    assert launch.problem.epilogue.with_c and launch.beta == 1.0 and launch.alpha == 1.0
    assert launch.c is not None and launch.c.data_ptr() == res.data_ptr() and launch.c.shape == (40, 96)  # a view
    # the same x and w without the residual: another memo entry and another problem, not the residual's
    close(calls(rig.dispatcher).linear(x, w, bias, act), (z - res.float()).to(BF) if act is None else
          {"silu": F.silu, "gelu_tanh": lambda y: F.gelu(y, approximate="tanh")}[act](z - res.float()).to(BF))
    assert not rig.family.launches[-1].problem.epilogue.with_c and rig.family.launches[-1].c is None


def test_linear_residual_torch_serves_what_the_kernel_cannot_read(rig) -> None:  # noqa: ANN001
    x, w = t(2, 20, 64), t(96, 64)
    for res in (t(96), t(20, 2, 96).transpose(0, 1), t(2, 96, 20).transpose(1, 2)):  # broadcast, unmergeable, N-strided
        before = len(rig.family.launches)
        close(calls(rig.dispatcher).linear(x, w, None, "relu", res), F.relu(F.linear(x.float(), w.float()) + res.float()).to(BF))
        assert len(rig.family.launches) == before
    with pytest.raises(RuntimeError, match="residual of shape"):
        calls(rig.dispatcher).linear(x, w, None, None, t(3, 96))
    with pytest.raises(RuntimeError, match="residual has dtype"):
        calls(rig.dispatcher).linear(x, w, None, None, t(2, 20, 96, dtype=torch.float32))


def test_linear_unmergeable_x_is_copied_and_right(rig) -> None:  # noqa: ANN001
    x = t(20, 2, 64).transpose(0, 1)
    w = t(96, 64)
    close(calls(rig.dispatcher).linear(x, w), F.linear(x, w))
    assert len(rig.family.launches) == 1


def test_linear_invalid_activation_raises(rig) -> None:  # noqa: ANN001
    with pytest.raises(ValueError, match="activation='tanh'"):
        calls(rig.dispatcher).linear(t(8, 64), t(96, 64), None, "tanh")


def test_gemm_alpha_beta_and_in_place_c(rig) -> None:  # noqa: ANN001
    a, b, c = t(40, 64), t(64, 24), t(40, 24)
    ref = torch.addmm(c.float(), a.float(), b.float(), beta=0.5, alpha=2.0).to(BF)
    close(calls(rig.dispatcher).gemm(a, b, c, 2.0, 0.5), ref)
    launch = rig.family.launches[-1]
    assert (launch.alpha, launch.beta) == (2.0, 0.5) and launch.c is not None
    r = calls(rig.dispatcher).gemm(a, b, c, 2.0, 0.5, c)  # out is c: the in-place update the kernel allows
    assert r is c and rig.family.launches[-1].d.data_ptr() == c.data_ptr()
    close(c, ref)


def test_gemm_beta_zero_ignores_nan_c(rig) -> None:  # noqa: ANN001
    a, b = t(40, 64), t(64, 24)
    c = torch.full((40, 24), float("nan"), dtype=BF)
    y = calls(rig.dispatcher).gemm(a, b, c, 1.5, 0.0)
    assert not torch.isnan(y).any()
    close(y, (1.5 * (a.float() @ b.float())).to(BF))
    assert rig.family.launches[-1].c is None


def test_gemm_broadcast_c_runs_in_torch(rig) -> None:  # noqa: ANN001
    a, b, c = t(40, 64), t(64, 24), t(24)
    close(calls(rig.dispatcher).gemm(a, b, c, 1.0, 1.0), torch.addmm(c, a, b))
    a3, b3, c3 = t(2, 40, 64), t(2, 64, 24), t(2, 1, 24)
    close(calls(rig.dispatcher).gemm(a3, b3, c3, 1.0, 2.0), torch.baddbmm(c3, a3, b3, beta=2.0))
    assert rig.family.launches == []


def test_batched_gemm_with_c(rig) -> None:  # noqa: ANN001
    a, b, c = t(2, 40, 64), t(2, 64, 24), t(2, 40, 24)
    close(calls(rig.dispatcher).gemm(a, b, c, 1.0, 1.0), torch.baddbmm(c, a, b))
    assert rig.family.launches[-1].problem.l == 2


def test_autograd_inputs_run_in_torch_and_keep_the_graph(rig) -> None:  # noqa: ANN001
    x = t(8, 64).requires_grad_()
    w = t(96, 64)
    y = calls(rig.dispatcher).linear(x, w)
    assert y.grad_fn is not None and rig.family.launches == []
    with torch.no_grad():
        calls(rig.dispatcher).linear(x, w)
    assert len(rig.family.launches) == 1


def test_empty_and_k0_run_in_torch(rig) -> None:  # noqa: ANN001
    assert calls(rig.dispatcher).matmul(t(0, 64), t(64, 24)).shape == (0, 24)
    z = calls(rig.dispatcher).gemm(t(8, 0), t(0, 24), t(8, 24), 1.0, 0.0)
    assert torch.equal(z, torch.zeros(8, 24, dtype=BF))
    assert rig.family.launches == [] and rig.dispatcher.stats().fallbacks == 2


def test_weight_view_cache_follows_new_storage() -> None:
    """Assigning new storage to the same weight object (param.data = ...) is seen by the next call."""
    from autocutlass.ops.gemm.entries import LINEAR
    from autocutlass.ops.gemm.problem import GemmProblem
    from autocutlass.ops.gemm.frontend import Call, KernelPlan, Op, View

    seen: list[int] = []

    def runner(a, b, d, *, c=None, bias=None, alpha=1.0, beta=0.0):  # noqa: ANN001, ANN202
        seen.append(b.data_ptr())

    w = torch.zeros(8, 16)
    plan = KernelPlan(problem=GemmProblem(m=4, n=8, k=16), a=None, b=View((16, 8), (1, 16)), c=None, d=None,
                      out_shape=(4, 8), out_dtype=torch.float32, device_index=-1, spans=(0, 0, 0, 0))
    entry = LINEAR.kernel_entry(plan, runner, Call(Op.LINEAR, torch.zeros(4, 16), w))
    x = torch.zeros(4, 16)
    entry(x, w, None, None)
    entry(x, w, None, None)
    w.data = torch.ones(8, 16)
    entry(x, w, None, None)
    assert seen[0] == seen[1] != seen[2] == w.data_ptr()

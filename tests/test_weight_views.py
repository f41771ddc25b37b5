"""The views of the last weight a launch kept (GEMM entries, the pointwise-conv adapter, the conv
dgrad runner's transformed filter) hold the weight weakly: a deleted model's weights are freed
although the memoised entries that ran them live on; while the weight lives its view is reused."""

from __future__ import annotations

import gc
import weakref

import pytest
import torch
from _dispatch_fakes import calls, make_rig

from autocutlass.settings import Policy

BF = torch.bfloat16
CL = torch.channels_last


def _freed(make: object) -> bool:
    gc.collect()
    return make() is None  # type: ignore[operator]


def test_a_deleted_weight_is_freed_though_its_entry_lives() -> None:
    rig = make_rig(Policy.HEURISTIC)
    d = calls(rig.dispatcher)
    x = torch.randn(4, 32).to(BF)
    w = torch.randn(48, 32).to(BF)
    d.linear(x, w)
    d.linear(x, w)
    views = {id(launch.b) for launch in rig.family.launches}
    assert len(views) == 1  # the same weight's view reused
    ref = weakref.ref(w)
    del w
    rig.family.launches.clear()  # the fake family's own record of the launches
    assert _freed(ref)
    w2 = torch.randn(48, 32).to(BF)
    y = d.linear(x, w2)  # the entry lives on and takes the new weight
    torch.testing.assert_close(y.float(), x.float() @ w2.float().t(), rtol=2e-2, atol=2e-2)


def test_the_pointwise_conv_adapter_lets_its_weight_go() -> None:
    rig = make_rig(Policy.HEURISTIC)
    d = calls(rig.dispatcher)
    x = torch.randn(2, 32, 4, 4).to(BF).contiguous(memory_format=CL)
    w = torch.randn(48, 32, 1, 1).to(BF).contiguous(memory_format=CL)
    d.conv2d(x, w)
    ref = weakref.ref(w)
    del w
    rig.family.launches.clear()
    assert _freed(ref)


def test_the_dgrad_runner_keeps_the_transformed_filter_while_the_weight_lives(monkeypatch: pytest.MonkeyPatch) -> None:
    from autocutlass.kernels.hopper_conv import runner as fprop_runner
    from autocutlass.kernels.hopper_conv.config import HopperConvConfig
    from autocutlass.kernels.hopper_conv_dgrad.runner import DgradRunner
    from autocutlass.ops.conv.problem import ConvDirection, ConvProblem

    monkeypatch.setattr(fprop_runner, "get_compiled", lambda *a: lambda *args: None)
    problem = ConvProblem(ConvDirection.DGRAD, n=2, h=8, w=8, c=32, k=48, r=3, s=3, pad_h=1, pad_w=1)
    run = DgradRunner(HopperConvConfig(tile_m=128, tile_n=128, tile_k=64), problem, None)
    w = torch.randn(48, 32, 3, 3).to(BF).contiguous(memory_format=CL)
    wt = run.weight(w)
    assert run.weight(w) is wt  # kept while the weight is the same
    with torch.no_grad():
        w.add_(1.0)  # its version moved
    assert run.weight(w) is not wt
    kept = weakref.ref(run.weight(w))
    ref = weakref.ref(w)
    del w, wt
    assert _freed(ref) and _freed(kept)

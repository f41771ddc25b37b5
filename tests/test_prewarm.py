"""``autocutlass.prewarm`` and ``TuningPool.warm``: the on-line tuning processes start before the
first miss (compile children only, unless asked for the benchmark child), a tuning right after
uses those same children, unused children close after the idle time, and nothing starts under
the policies that never tune, without a served GPU or the DSL, or with the pool closing after every
tuning; the model swaps call it when they swap a layer, unless AUTOCUTLASS_PREWARM=0. Pool
handlers are the fakes of ``_search_fakes`` (no GPU, no DSL)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from _search_fakes import HARD_KEY, FakeFamily, MemorySink
from torch import nn

import autocutlass
from autocutlass import warmup
from autocutlass.ops.gemm.problem import GemmProblem
from autocutlass.search import pool as pool_mod
from autocutlass.search.pool import PoolClosed, TuningPool
from autocutlass.search.tuner import tune_problem

FAKES = {"compile_handler": "_search_fakes:make_fake_compile_handler",
         "bench_handler": "_search_fakes:make_fake_bench_handler", "start_timeout_s": 60}  # fmt: skip


def fake_pool(**kw: Any) -> TuningPool:
    return TuningPool(**{"compile_workers": 2, "idle_s": 60, **FAKES, **kw})


def _wait_for(cond: Any, what: str, limit_s: float = 60) -> None:
    deadline = time.monotonic() + limit_s
    while not cond():
        if time.monotonic() > deadline:
            pytest.fail(f"waited {limit_s} s for {what}")
        time.sleep(0.05)


# ---- TuningPool.warm ---------------------------------------------------------------------------
def test_warm_starts_the_compile_children_and_a_tuning_uses_them() -> None:
    pool = fake_pool()
    try:
        assert pool.warm() is True
        warmed = pool.pids()
        assert len(warmed) == 2 and not pool._lanes  # compile children only: no CUDA context yet
        with pool.evaluator("fake", 0) as ev:
            r = tune_problem(GemmProblem(m=128, n=128, k=128), FakeFamily(tiles=(16, 32), stages=(1,), modes=("a",)),
                             MemorySink(), evaluator=ev, hard_key=HARD_KEY, exhaustive=True)  # fmt: skip
        assert r.best is not None
        after = pool.pids()
        assert set(warmed) < set(after) and len(after) == 3  # the same compile children, plus the bench child
    finally:
        pool.close()


def test_warm_with_a_device_starts_its_benchmark_child_too() -> None:
    pool = fake_pool()
    try:
        assert pool.warm(0) is True
        assert len(pool.pids()) == 3 and list(pool._lanes) == [0]
    finally:
        pool.close()


def test_warmed_children_no_tuning_uses_close_after_the_idle_time() -> None:
    pool = fake_pool(idle_s=0.5)
    try:
        pool.warm()
        assert pool.pids()
        _wait_for(lambda: pool.idle_closes == 1, "the idle timer to close the warmed children")
        assert not pool.pids() and not pool.closed
    finally:
        pool.close()


def test_warm_starts_nothing_when_the_pool_closes_after_every_tuning() -> None:
    pool = fake_pool(idle_s=0)
    try:
        assert pool.warm() is False and pool.pids() == []
    finally:
        pool.close()


def test_a_closed_pool_refuses_to_warm() -> None:
    pool = fake_pool()
    pool.close()
    with pytest.raises(PoolClosed):
        pool.warm()


# ---- autocutlass.prewarm -------------------------------------------------------------------
class _Recorder:
    def __init__(self) -> None:
        self.warms: list[int | None] = []
        self.idle: list[float] = []

    def shared(self, idle_s: float) -> Any:
        self.idle.append(idle_s)
        rec = self

        class Pool:
            def warm(self, device_index: int | None = None) -> bool:
                rec.warms.append(device_index)
                return True

        return Pool()


@pytest.fixture
def gpu(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Recorder]:
    """An sm_90 GPU and the DSL, as prewarm sees them; the shared pool replaced by a recorder."""
    for name in ("AUTOCUTLASS_POLICY", "AUTOCUTLASS_PREWARM", "AUTOCUTLASS_TUNE_POOL_IDLE_S"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index=None: (9, 0))
    monkeypatch.setattr(warmup.importlib.util, "find_spec", lambda name: object())
    rec = _Recorder()
    monkeypatch.setattr(pool_mod, "shared", rec.shared)
    yield rec


@pytest.mark.parametrize("policy", ["tune", "background"])
def test_prewarm_starts_the_compile_children_under_the_tuning_policies(gpu: _Recorder, policy: str,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.setenv("AUTOCUTLASS_POLICY", policy)
    monkeypatch.setenv("AUTOCUTLASS_TUNE_POOL_IDLE_S", "42")
    assert autocutlass.prewarm() is True
    assert autocutlass.prewarm(torch.device("cuda", 1), bench=True) is True
    assert gpu.warms == [None, 1] and gpu.idle == [42.0, 42.0]


@pytest.mark.parametrize("why", ["cached", "heuristic", "off", "override", "no gpu", "sm_80", "no dsl", "idle 0"])
def test_prewarm_starts_nothing_where_nothing_would_tune(gpu: _Recorder, why: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    if why in ("cached", "heuristic", "off"):
        monkeypatch.setenv("AUTOCUTLASS_POLICY", why)
    elif why == "no gpu":
        monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    elif why == "sm_80":
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index=None: (8, 0))
    elif why == "no dsl":
        monkeypatch.setattr(warmup.importlib.util, "find_spec", lambda name: None)
    elif why == "idle 0":
        monkeypatch.setenv("AUTOCUTLASS_TUNE_POOL_IDLE_S", "0")
    if why == "override":
        with autocutlass.policy("cached"):
            assert autocutlass.prewarm() is False
    else:
        assert autocutlass.prewarm() is False
    assert gpu.warms == []


def _model() -> nn.Module:
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8), nn.Conv2d(8, 16, 3))


def test_a_swap_that_swaps_prewarms(gpu: _Recorder) -> None:
    model = autocutlass.swap_linear_(_model())
    assert isinstance(model[0], autocutlass.nn.Linear) and gpu.warms == [None]
    autocutlass.swap_conv2d_(model)
    assert gpu.warms == [None, None]
    gated = nn.Module()
    gated.gate_proj, gated.up_proj, gated.down_proj = nn.Linear(8, 16), nn.Linear(8, 16), nn.Linear(16, 8)
    gated.act_fn = nn.SiLU()
    gated.forward = lambda x: gated.down_proj(gated.act_fn(gated.gate_proj(x)) * gated.up_proj(x))  # type: ignore[method-assign]
    assert isinstance(autocutlass.swap_gated_mlp_(gated), autocutlass.nn.GatedMLP)
    assert gpu.warms == [None, None, None]
    autocutlass.swap_linear_(nn.Sequential(nn.ReLU()))  # nothing to swap
    autocutlass.swap_linear_(_model(), filter_fn=lambda m, fqn: False)
    autocutlass.unswap_linear_(model)
    assert gpu.warms == [None, None, None]


def test_autocutlass_prewarm_0_keeps_the_swaps_from_prewarming(gpu: _Recorder, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOCUTLASS_PREWARM", "0")
    model = autocutlass.swap_linear_(_model())
    assert isinstance(model[2], autocutlass.nn.Linear) and gpu.warms == []
    assert autocutlass.prewarm() is True  # an explicit call still starts them


def test_a_swap_never_fails_for_its_prewarm(gpu: _Recorder, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(idle_s: float) -> Any:
        raise OSError("cannot spawn")

    monkeypatch.setattr(pool_mod, "shared", broken)
    model = autocutlass.swap_linear_(_model())
    assert isinstance(model[0], autocutlass.nn.Linear)
    with pytest.raises(OSError):
        autocutlass.prewarm()  # the explicit call reports it


@pytest.mark.parametrize("device", ["cpu", torch.device("cpu"), "not a device", 1.5, -1])
def test_prewarm_refuses_what_is_not_a_cuda_device(gpu: _Recorder, device: object) -> None:
    with pytest.raises(ValueError, match="is not a CUDA device"):
        autocutlass.prewarm(device, bench=True)  # type: ignore[arg-type]
    assert gpu.warms == []


def test_prewarm_takes_device_names(gpu: _Recorder) -> None:
    assert autocutlass.prewarm("cuda:2", bench=True) and autocutlass.prewarm(3, bench=True)
    assert autocutlass.prewarm("cuda", bench=True)  # the current device
    assert gpu.warms == [2, 3, 0]

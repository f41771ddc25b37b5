"""Priors from the database: the winners of the nearest tuned problems of the same op and kernel
class (this GPU's, then a sibling GPU's) are a tuning's first candidates, de-duplicated, and the
on-line budget shrinks to ``tune_trials_with_priors`` when there are any; under ``background``
the nearest one stands in while the problem is tuned. End to end over the real store, the real
dispatch tuning path and a pool of fake worker processes."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import _search_fakes as sf
import pytest
import torch
from _dispatch_fakes import (
    HARD_KEY,
    FakeConfig,
    FakeRunner,
    FakeStore,
    FakeTuner,
    Record,
    calls,
    device_info,
    make_rig,
)
from _dispatch_fakes import settings as fake_settings

from autocutlass.background import BackgroundTuner
from autocutlass.db import LayeredStore, TuningStore, export
from autocutlass.device import HardKey
from autocutlass.dispatch import Dispatcher, Layers, _real_layers, online_trials
from autocutlass.keys import config_key
from autocutlass.ops.gemm.problem import DType, GemmProblem, Major
from autocutlass.search import pool as pool_mod
from autocutlass.settings import Policy

BF = torch.bfloat16
H100 = HardKey("NVIDIA H100 80GB HBM3", "9.0", 132, "4.8.1", "k0", 1)
H200 = dataclasses.replace(H100, gpu_name="NVIDIA H200")


# ---- the store ---------------------------------------------------------------------------------
def test_class_winners_are_the_nearest_problems_of_the_same_kernel_class(tmp_path: Path) -> None:
    store = TuningStore(tmp_path / "t.sqlite")
    target = GemmProblem(m=1000, n=4096, k=4096, b_major=Major.COL)
    near = GemmProblem(m=1024, n=4096, k=4096, b_major=Major.COL)
    farther = GemmProblem(m=1024, n=8192, k=2048, b_major=Major.COL)
    far = GemmProblem(m=16, n=512, k=512, b_major=Major.COL)
    store.record_best(near, H100, "f", {"c": "near"}, 1.0, 1.0)
    store.record_best(farther, H100, "f", {"c": "farther"}, 1.0, 1.0)
    store.record_best(far, H100, "f", {"c": "near"}, 1.0, 1.0)  # the same config again: one prior
    store.record_best(farther, H200, "f", {"c": "sibling"}, 1.0, 1.0)
    store.record_best(far, H200, "f", {"c": "far sibling"}, 1.0, 1.0)
    store.record_best(GemmProblem(m=1024, n=4096, k=4096), H100, "f", {"c": "other layout"}, 1.0, 1.0)
    store.record_best(GemmProblem(m=1024, n=4096, k=4096, b_major=Major.COL, a_dtype=DType.FP16,
                                  b_dtype=DType.FP16, d_dtype=DType.FP16), H100, "f", {"c": "fp16"}, 1.0, 1.0)  # fmt: skip
    store.record_best(near, dataclasses.replace(H100, gpu_name="X", sm_count=114), "f", {"c": "not a sibling"}, 1.0, 1.0)
    got = store.class_winners(target, H100, limit=8)
    assert [r.config["c"] for r in got] == ["near", "farther", "sibling", "far sibling"]
    assert [r.sibling for r in got] == [False, False, True, True] and got[2].hard_key == H200
    assert [r.config["c"] for r in store.class_winners(target, H100, limit=2)] == ["near", "farther"]
    # an H200 sees the H100's records as a sibling's
    assert [r.config["c"] for r in store.class_winners(target, H200, limit=2)] == ["near", "sibling"]


def test_layered_class_winners_read_a_shipped_siblings_database(tmp_path: Path) -> None:
    work = TuningStore(tmp_path / "work.sqlite")
    work.record_best(GemmProblem(m=512, n=4096, k=4096), H200, "f", {"c": "shipped"}, 1.0, 1.0)
    export(work, tmp_path / "tuning_dbs" / "NVIDIA-H200.sqlite")
    user = TuningStore(tmp_path / "user.sqlite")
    user.record_best(GemmProblem(m=64, n=1024, k=4096), H100, "f", {"c": "user"}, 1.0, 1.0)
    layered = LayeredStore(user, tmp_path / "tuning_dbs")
    got = layered.class_winners(GemmProblem(m=600, n=4096, k=4096), H100, limit=4)
    assert [(r.config["c"], r.sibling) for r in got] == [("shipped", True), ("user", False)]


# ---- dispatch with fakes -----------------------------------------------------------------------
def test_priors_seed_the_tuning_after_the_nearest_and_sibling_records() -> None:
    store = FakeStore(fallback=Record("fake", {"tile": 64}, "nearest"),
                      sibling=Record("fake", {"tile": 64}, "exact", sibling=True),
                      class_records=[Record("fake", {"tile": 256}, "nearest"), Record("fake", {"tile": 96}, "nearest"),
                                     Record("other", {"tile": 128}, "nearest"), Record("fake", {"tile": 128}, "nearest")])  # fmt: skip
    rig = make_rig(Policy.TUNE, store=store)
    calls(rig.dispatcher).matmul(torch.randn(32, 64).to(BF), torch.randn(64, 48).to(BF))
    # tile 96 fails check, family 'other' is unknown: neither is a seed; repeats come once
    assert rig.tuner.seeds == [({"tile": 64}, {"tile": 256}, {"tile": 128})]


def test_cached_does_not_read_priors() -> None:
    rig = make_rig(Policy.CACHED, store=FakeStore(class_records=[Record("fake", {"tile": 256}, "nearest")]))
    calls(rig.dispatcher).matmul(torch.randn(32, 64).to(BF), torch.randn(64, 48).to(BF))
    assert rig.family.launches[-1].config == FakeConfig(128) and rig.dispatcher.stats().class_hits == 0


def test_the_nearest_class_winner_stands_in_while_tuning_in_the_background() -> None:
    bg = BackgroundTuner(name="test-priors")
    try:
        tuner = FakeTuner(result={})  # the tuning finds nothing: the stand-in stays
        rig = make_rig(Policy.BACKGROUND, tuner=tuner,
                       store=FakeStore(class_records=[Record("fake", {"tile": 256}, "nearest")]))  # fmt: skip
        rig.dispatcher._background = bg
        a, b = torch.randn(32, 64).to(BF), torch.randn(64, 48).to(BF)
        calls(rig.dispatcher).matmul(a, b)  # the class winner's kernel is not loaded yet: torch meanwhile
        assert rig.family.launches == [] and rig.dispatcher.stats().torch_standins == 1
        assert rig.dispatcher.wait_background(10)
        calls(rig.dispatcher).matmul(a, b)
        assert rig.family.launches[-1].config == FakeConfig(256) and tuner.seeds == [({"tile": 256},)]
        assert rig.dispatcher.stats().class_hits == 1
        calls(rig.dispatcher).matmul(torch.randn(48, 64).to(BF), b)  # another M: its kernel is loaded
        assert len(rig.family.launches) == 2 and rig.family.launches[-1].config == FakeConfig(256)
        assert rig.dispatcher.stats().class_hits == 2 and rig.dispatcher.stats().torch_standins == 1
    finally:
        bg.shutdown(10)


def test_online_trials() -> None:
    s = fake_settings()
    assert (s.tune_trials, s.tune_trials_with_priors) == (16, 8)
    assert online_trials(s, []) == 16 and online_trials(s, [{"tile": 1}]) == 8
    assert online_trials(dataclasses.replace(s, tune_trials=4), [{"tile": 1}]) == 4


# ---- end to end: real store, real dispatch tuning path, pooled fake workers ------------------------
class ServingFamily(sf.FakeFamily):
    """The search fakes' family (a space, a check) whose runner computes with torch."""

    def __init__(self) -> None:
        super().__init__(seeds=[])
        self.launches: list[Any] = []
        self.compiled: list[Any] = []

    def compile(self, config: sf.FakeConfig, problem: GemmProblem) -> Any:  # type: ignore[override]
        return FakeRunner(self, config, problem)  # type: ignore[arg-type]


@pytest.fixture
def fake_shared_pool(monkeypatch: pytest.MonkeyPatch) -> Any:
    p = pool_mod.TuningPool(compile_workers=2, idle_s=60, start_timeout_s=60,
                            compile_handler="_search_fakes:make_fake_compile_handler",
                            bench_handler="_search_fakes:make_fake_bench_handler")  # fmt: skip
    monkeypatch.setattr(pool_mod, "_SHARED", p)
    yield p
    p.close()


def test_a_second_shape_of_a_class_tunes_from_priors_in_the_same_processes(tmp_path: Path,
                                                                           fake_shared_pool: Any) -> None:  # fmt: skip
    fam = ServingFamily()
    real = _real_layers()
    layers = Layers(get_family=lambda n: fam, families_for=lambda p: [fam], open_store=real.open_store, tune=real.tune)
    db = tmp_path / "user.sqlite"
    s = dataclasses.replace(fake_settings(tmp_path, policy=Policy.TUNE), db_url=str(db))
    d = Dispatcher(s, layers=layers, device_info=lambda i: device_info(), on_gpu=lambda t: True)
    b1 = torch.randn(64, 48).to(BF)
    calls(d).matmul(torch.randn(32, 64).to(BF), b1)
    store = TuningStore(db)
    first = GemmProblem(m=32, n=48, k=64)
    trials1 = store.trials(first, HARD_KEY)
    assert len(trials1) == 16 and fam.launches[-1].config.tile == 16  # no priors: the full budget
    winner = store.lookup(first, HARD_KEY)
    assert winner is not None and winner.source == "exact"
    pids = fake_shared_pool.pids()
    assert len(pids) == 3

    a2, b2 = torch.randn(32, 64).to(BF), torch.randn(64, 80).to(BF)  # another N: the same kernel class
    torch.testing.assert_close(calls(d).matmul(a2, b2).float(), (a2 @ b2).float(), atol=5e-2, rtol=2e-2)
    trials2 = store.trials(GemmProblem(m=32, n=80, k=64), HARD_KEY)
    assert len(trials2) == 8  # priors: AUTOCUTLASS_TUNE_TRIALS_WITH_PRIORS
    # the prior goes out in the first wave; trials are recorded as they finish, so with three
    # workers it need not be the very first row
    assert config_key(winner.config) in [t.config_key for t in trials2[: len(pids)]]
    assert fake_shared_pool.pids() == pids and fake_shared_pool.tunings == 2  # no process started for it
    assert d.stats().tunes == 2

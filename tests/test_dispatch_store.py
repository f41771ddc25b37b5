"""Dispatch over the real tuning database (SQLite in a temp dir), kernel layer and tuner stubbed:
a tuned winner is found by a later dispatcher (another process, in effect) through its M bucket
without tuning again; misses are recorded for ``tune --pending``; a corrupt file never breaks a call."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from _dispatch_fakes import HARD_KEY, FakeConfig, FakeFamily, FakeTuner, device_info, settings, calls
from autocutlass.db import TuningStore
from autocutlass.dispatch import Dispatcher, Layers, _real_layers
from autocutlass.settings import Policy

BF = torch.bfloat16


class RecordingTuner(FakeTuner):
    """Records its winner into the sink, as ``search.tune_problem`` does."""

    def __call__(self, problem, family, sink, hard_key, device_index, settings, *, seeds=(), stop=None):  # noqa: ANN001
        best = super().__call__(problem, family, sink, hard_key, device_index, settings, seeds=seeds, stop=stop)
        sink.record_best(problem, hard_key, family.name, best, median_ms=0.01, tflops=100.0)
        return best


def first_problem(family: FakeFamily):  # noqa: ANN201
    return family.launches[0].problem


def dispatcher(tmp_path: Path, policy: Policy, family: FakeFamily, tuner: FakeTuner, db: Path) -> Dispatcher:
    real = _real_layers()
    layers = Layers(get_family=lambda n: family, families_for=lambda p: [family],
                    open_store=real.open_store, tune=tuner)  # fmt: skip
    s = dataclasses.replace(settings(tmp_path, policy=policy), db_url=str(db))
    return Dispatcher(s, layers=layers, device_info=lambda i: device_info(), on_gpu=lambda t: True)


def test_tuned_result_is_found_later_through_its_bucket(tmp_path: Path) -> None:
    db = tmp_path / "tuning.sqlite"
    fam1, tuner1 = FakeFamily(), RecordingTuner()
    first = dispatcher(tmp_path, Policy.TUNE, fam1, tuner1, db)
    w = torch.randn(96, 64).to(BF)
    calls(first).linear(torch.randn(100, 64).to(BF), w)
    assert [p.m for p in tuner1.calls] == [100]
    store = TuningStore(db)
    assert store.pending_misses(HARD_KEY) == []  # the miss was recorded, then tuned: nothing pending
    assert store.lookup(first_problem(fam1), HARD_KEY) is not None

    fam2, tuner2 = FakeFamily(), RecordingTuner()
    second = dispatcher(tmp_path, Policy.TUNE, fam2, tuner2, db)
    x = torch.randn(120, 64).to(BF)  # same bucket (128) as M=100
    torch.testing.assert_close(calls(second).linear(x, w).float(), (x @ w.t()).float(), atol=5e-2, rtol=2e-2)
    s = second.stats()
    assert tuner2.calls == [] and (s.tunes, s.db_lookups, s.db_hits, s.compiles) == (0, 2, 1, 1)  # + the vendor's
    assert fam2.launches[-1].config == FakeConfig(256)


def test_cached_misses_are_recorded_for_pending(tmp_path: Path) -> None:
    db = tmp_path / "tuning.sqlite"
    fam, tuner = FakeFamily(), RecordingTuner()
    d = dispatcher(tmp_path, Policy.CACHED, fam, tuner, db)
    calls(d).matmul(torch.randn(32, 64).to(BF), torch.randn(64, 48).to(BF))
    assert tuner.calls == [] and fam.launches[-1].config == FakeConfig(128)
    d.wait_for_miss_writes()  # written on a thread of its own: the call did not wait for it
    pending = TuningStore(db).pending_misses(HARD_KEY)
    assert [(p.m, p.n, p.k) for p in pending] == [(32, 48, 64)]


def test_corrupt_database_never_breaks_a_call(tmp_path: Path) -> None:
    db = tmp_path / "tuning.sqlite"
    db.write_bytes(b"this is not a sqlite database" * 100)
    for policy in (Policy.TUNE, Policy.CACHED):
        fam, tuner = FakeFamily(), RecordingTuner()
        d = dispatcher(tmp_path, policy, fam, tuner, db)
        a, b = torch.randn(32, 64).to(BF), torch.randn(64, 48).to(BF)
        torch.testing.assert_close(calls(d).matmul(a, b).float(), (a @ b).float(), atol=5e-2, rtol=2e-2)
        assert fam.launches[-1].config == FakeConfig(128)  # the default config served the call

"""Sibling GPUs: records measured on another GPU model of the same architecture and SM count (an
H200's on an H100) serve as seeds and as a marked stand-in after this GPU's own records, never as
this GPU's own: the store finds them only through ``lookup_sibling``, dispatch counts them as
``sibling_hits`` and never copies them into the user database, and ``db show`` marks them."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest
import torch
from _dispatch_fakes import (
    HARD_KEY,
    FakeConfig,
    FakeFamily,
    FakeStore,
    FakeTuner,
    Record,
    calls,
    device_info,
    make_rig,
    settings,
)

from autocutlass.cli import main
from autocutlass.db import LayeredStore, TuningStore, export, release
from autocutlass.device import HardKey
from autocutlass.dispatch import Dispatcher, Layers, _real_layers
from autocutlass.ops.gemm.problem import GemmProblem, Major
from autocutlass.ops.registry import problem_from_dict
from autocutlass.settings import Policy, default_shipped_dir

BF = torch.bfloat16


def hk(gpu: str, **kw: object) -> HardKey:
    return dataclasses.replace(HardKey(gpu, "9.0", 132, "4.8.1", "k0", 1), **kw)  # type: ignore[arg-type]


H100, H200 = hk("NVIDIA H100 80GB HBM3"), hk("NVIDIA H200")
P = GemmProblem(m=256, n=4096, k=4096)


# ---- the hard key ------------------------------------------------------------------------------
def test_a_sibling_differs_in_the_gpu_name_only() -> None:
    assert H100.is_sibling_of(H200) and H200.is_sibling_of(H100)
    assert not H100.is_sibling_of(H100)  # its own records are not a sibling's
    for other in (hk("NVIDIA H100 PCIe", sm_count=114), hk("X", cc="10.0"), hk("X", dsl_version="4.9"),
                  hk("X", kernel_hash="k1"), hk("X", protocol_version=2)):  # fmt: skip
        assert not H100.is_sibling_of(other), other


# ---- the store ---------------------------------------------------------------------------------
def test_store_finds_sibling_records_only_through_lookup_sibling(tmp_path: Path) -> None:
    store = TuningStore(tmp_path / "t.sqlite")
    store.record_best(P, H200, "f", {"from": "h200"}, 1.0, 1.0)
    store.record_best(P, hk("NVIDIA H100 PCIe", sm_count=114), "f", {"from": "pcie"}, 1.0, 1.0)
    store.record_best(P, hk("NVIDIA B200", cc="10.0", sm_count=148), "f", {"from": "b200"}, 1.0, 1.0)
    assert store.lookup(P, H100) is None  # the hard key stays exact
    rec = store.lookup_sibling(P, H100)
    assert rec is not None and rec.sibling and rec.source == "exact" and rec.config == {"from": "h200"}
    assert rec.hard_key == H200  # the GPU that measured it
    # bucket and nearest tiers, as for this GPU's own records
    rec = store.lookup_sibling(GemmProblem(m=200, n=4096, k=4096), H100)
    assert rec is not None and rec.source == "bucket" and rec.problem == P
    rec = store.lookup_sibling(GemmProblem(m=17, n=4096, k=4096), H100)
    assert rec is not None and rec.source == "nearest"
    assert store.lookup_sibling(GemmProblem(m=256, n=4096, k=4096, b_major=Major.COL), H100) is None
    # the H100's own record is never its own sibling's
    store.record_best(P, H100, "f", {"from": "h100"}, 1.0, 1.0)
    assert store.lookup(P, H100).config == {"from": "h100"}  # type: ignore[union-attr]
    assert store.lookup_sibling(P, H100).config == {"from": "h200"}  # type: ignore[union-attr]


def test_layered_store_asks_shipped_databases_of_siblings(tmp_path: Path) -> None:
    work = TuningStore(tmp_path / "work.sqlite")
    work.record_best(P, H200, "f", {"from": "shipped h200"}, 1.0, 1.0)
    shipped = tmp_path / "tuning_dbs"
    export(work, shipped / "NVIDIA-H200.sqlite")
    user = TuningStore(tmp_path / "user.sqlite")
    layered = LayeredStore(user, shipped)
    assert layered.lookup(P, H100) is None
    rec = layered.lookup_sibling(P, H100)
    assert rec is not None and rec.sibling and rec.hard_key.gpu_name == "NVIDIA H200"
    assert rec.origin == str(shipped / "NVIDIA-H200.sqlite")
    # a user record of the sibling, exact, wins over a shipped approximate one (as in lookup)
    user.record_best(GemmProblem(m=17, n=4096, k=4096), H200, "f", {"from": "user h200"}, 1.0, 1.0)
    rec = layered.lookup_sibling(GemmProblem(m=17, n=4096, k=4096), H100)
    assert rec is not None and rec.config == {"from": "user h200"} and rec.source == "exact"
    assert layered.lookup_sibling(P, hk("NVIDIA H100 PCIe", sm_count=114)) is None


def test_the_shipped_h200_database_serves_an_h100_as_a_sibling(tmp_path: Path) -> None:
    """The H200's shipped records serve an H100 as a sibling's where the H100 has none of its own
    (its own shipped database is left out here: it holds most of the same problems)."""
    shipped_dir = default_shipped_dir()
    assert shipped_dir is not None and (shipped_dir / "NVIDIA-H200.sqlite").is_file()
    path = shipped_dir / "NVIDIA-H200.sqlite"
    shipped = TuningStore(path, read_only=True, immutable=True)
    records = shipped.bests("NVIDIA H200")
    release(path)
    assert records
    only_h200 = tmp_path / "tuning_dbs"
    only_h200.mkdir()
    shutil.copyfile(path, only_h200 / path.name)
    layered = LayeredStore(TuningStore(tmp_path / "user.sqlite"), only_h200)
    for r in records:
        h100 = dataclasses.replace(r.hard_key, gpu_name="NVIDIA H100 80GB HBM3")
        assert layered.lookup(r.problem, h100) is None
        rec = layered.lookup_sibling(problem_from_dict(r.problem.as_dict()), h100)
        assert rec is not None and rec.sibling and rec.source == "exact" and rec.config == r.config


def test_the_shipped_h100_database_serves_an_h100_as_its_own(tmp_path: Path) -> None:
    """With the H100's own shipped database beside the H200's, an H100 gets its own records
    exactly (never a sibling's stand-in where it has one)."""
    shipped_dir = default_shipped_dir()
    assert shipped_dir is not None
    path = shipped_dir / "NVIDIA-H100-80GB-HBM3.sqlite"
    assert path.is_file()
    shipped = TuningStore(path, read_only=True, immutable=True)
    records = shipped.bests("NVIDIA H100 80GB HBM3")
    release(path)
    assert records
    layered = LayeredStore(TuningStore(tmp_path / "user.sqlite"), shipped_dir)
    for r in records:
        rec = layered.lookup(problem_from_dict(r.problem.as_dict()), r.hard_key)
        assert rec is not None and not rec.sibling and rec.source == "exact" and rec.config == r.config
        assert rec.origin == str(path)


# ---- dispatch with fakes -----------------------------------------------------------------------
SIB = Record("fake", {"tile": 64}, "exact", sibling=True, hard_key=dataclasses.replace(HARD_KEY, gpu_name="Fake H200"))


def test_cached_serves_a_sibling_record_after_its_own_tiers() -> None:
    rig = make_rig(Policy.CACHED, store=FakeStore(sibling=SIB))
    x, w = torch.randn(100, 64).to(BF), torch.randn(96, 64).to(BF)
    calls(rig.dispatcher).linear(x, w)
    s = rig.dispatcher.stats()
    assert rig.family.launches[-1].config == FakeConfig(64) and rig.tuner.calls == []
    assert (s.db_hits, s.sibling_hits, s.misses_recorded) == (0, 1, 1)  # still a miss of this GPU

    # this GPU's own nearest neighbour comes first
    rig = make_rig(Policy.CACHED, store=FakeStore(fallback=Record("fake", {"tile": 256}, "nearest"), sibling=SIB))
    calls(rig.dispatcher).linear(x, w)
    s = rig.dispatcher.stats()
    assert rig.family.launches[-1].config == FakeConfig(256) and (s.db_hits, s.sibling_hits) == (1, 0)
    assert rig.store.sibling_lookups == []


def test_tune_seeds_the_tuning_with_the_sibling_and_nearest_records() -> None:
    rig = make_rig(Policy.TUNE, store=FakeStore(fallback=Record("fake", {"tile": 128}, "nearest"), sibling=SIB))
    calls(rig.dispatcher).linear(torch.randn(100, 64).to(BF), torch.randn(96, 64).to(BF))
    assert len(rig.tuner.calls) == 1 and rig.tuner.seeds == [({"tile": 128}, {"tile": 64})]
    assert rig.family.launches[-1].config == FakeConfig(256)  # the winner tuned here runs
    assert rig.dispatcher.stats().sibling_hits == 0

    # the same seed twice is one seed
    rig = make_rig(Policy.TUNE, store=FakeStore(fallback=Record("fake", {"tile": 64}, "nearest"), sibling=SIB))
    calls(rig.dispatcher).linear(torch.randn(100, 64).to(BF), torch.randn(96, 64).to(BF))
    assert rig.tuner.seeds == [({"tile": 64},)]


def test_a_sibling_record_stands_in_when_tuning_finds_nothing() -> None:
    rig = make_rig(Policy.TUNE, store=FakeStore(sibling=SIB), tuner=FakeTuner(result={}))
    calls(rig.dispatcher).matmul(torch.randn(32, 64).to(BF), torch.randn(64, 48).to(BF))
    assert rig.family.launches[-1].config == FakeConfig(64) and rig.dispatcher.stats().sibling_hits == 1


def test_heuristic_and_a_stale_sibling_record() -> None:
    rig = make_rig(Policy.HEURISTIC, store=FakeStore(sibling=SIB))
    calls(rig.dispatcher).matmul(torch.randn(32, 64).to(BF), torch.randn(64, 48).to(BF))
    assert rig.store.sibling_lookups == [] and rig.family.launches[-1].config == FakeConfig(128)
    stale = dataclasses.replace(SIB, config={"tile": 96})  # fails check: the default instead
    rig = make_rig(Policy.CACHED, store=FakeStore(sibling=stale))
    calls(rig.dispatcher).matmul(torch.randn(32, 64).to(BF), torch.randn(64, 48).to(BF))
    assert rig.family.launches[-1].config == FakeConfig(128) and rig.dispatcher.stats().sibling_hits == 0


# ---- dispatch over real SQLite files: the record is never copied as this GPU's own ---------------
def test_a_sibling_served_miss_is_recorded_not_copied(tmp_path: Path) -> None:
    sibling_key = dataclasses.replace(HARD_KEY, gpu_name="Fake H200")
    work = TuningStore(tmp_path / "work.sqlite")
    problem = GemmProblem(m=32, n=48, k=64)
    work.record_best(problem, sibling_key, "fake", {"tile": 256}, 0.01, 1.0)
    shipped = tmp_path / "shipped"
    export(work, shipped / "Fake-H200.sqlite")
    db = tmp_path / "user.sqlite"
    fam = FakeFamily()
    real = _real_layers()
    layers = Layers(get_family=lambda n: fam, families_for=lambda p: [fam], open_store=real.open_store, tune=FakeTuner())
    s = dataclasses.replace(settings(tmp_path, policy=Policy.CACHED), db_url=str(db), shipped_dbs_dir=shipped)
    d = Dispatcher(s, layers=layers, device_info=lambda i: device_info(), on_gpu=lambda t: True)
    a, b = torch.randn(32, 64).to(BF), torch.randn(64, 48).to(BF)
    torch.testing.assert_close(calls(d).matmul(a, b).float(), (a @ b).float(), atol=5e-2, rtol=2e-2)
    assert fam.launches[-1].config == FakeConfig(256) and d.stats().sibling_hits == 1
    user = TuningStore(db)
    assert user.bests() == [] and user.lookup(problem, HARD_KEY) is None  # not this GPU's record
    assert user.pending_misses(HARD_KEY) == [problem]  # `tune --pending` tunes it here


# ---- db show -----------------------------------------------------------------------------------
def test_db_show_marks_sibling_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    from autocutlass.cli import db as cli_db

    user = tmp_path / "user.sqlite"
    store = TuningStore(user)
    store.record_best(P, H200, "hopper_gemm", {"tile_m": 128}, 0.5, 1.0)
    store.record_best(P, H100, "hopper_gemm", {"tile_m": 64}, 0.5, 1.0)
    store.record_best(P, hk("NVIDIA H100 PCIe", sm_count=114), "hopper_gemm", {"tile_m": 64}, 0.5, 1.0)
    release(user)
    monkeypatch.setenv("AUTOCUTLASS_DB", str(user))
    monkeypatch.setenv("AUTOCUTLASS_SHIPPED_DBS", "off")
    monkeypatch.setattr(cli_db, "_here", lambda: cli_db.Here("NVIDIA H100 80GB HBM3", "9.0", 132, "4.8.1"))
    assert main(["db", "show"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("gemm ")]
    marked = [r for r in rows if "sibling" in r]
    assert len(rows) == 3 and len(marked) == 1  # the H100's own and the PCIe (114 SMs) record are not marked
    assert "NVIDIA H200" in marked[0] and marked[0].endswith("user, sibling of this NVIDIA H100 80GB HBM3")


# ---- the tuner evaluates seeds first -----------------------------------------------------------
def test_tune_problem_evaluates_the_callers_seeds_first() -> None:
    import _search_fakes as sf

    from autocutlass.search.tuner import tune_problem

    fam = sf.FakeFamily(seeds=[sf.FakeConfig(32, 2, "a")])
    ev = sf.FakeEvaluator(lambda c: 1.0 + c["tile"] / 1000, capacity=1)
    prior = {"tile": 128, "stages": 1, "mode": "b"}
    seeds = [prior, dict(prior), {"tile": 128, "stages": 3, "mode": "a"},  # a repeat; infeasible (smem 192)
             {"no_such_field": 1}, {"tile": 32, "stages": 2, "mode": "a"}]  # unreadable; the family's own seed
    tune_problem(GemmProblem(m=64, n=64, k=64), fam, sf.MemorySink(), trials=4, evaluator=ev, hard_key=sf.HARD_KEY,
                 seeds=seeds)  # fmt: skip
    assert ev.submitted[:2] == [prior, {"tile": 32, "stages": 2, "mode": "a"}]
    assert len(ev.submitted) == 4 and len({tuple(sorted(c.items())) for c in ev.submitted}) == 4

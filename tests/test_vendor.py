"""Vendor verdicts (``autocutlass.vendor``): the tuner records torch's time beside our winner, and
dispatch serves a tuned problem with torch where that time beats ours by more than the margin;
never from a sibling's or a nearest record, never when turned off; a conv2d is judged against the
record of the cuDNN mode torch would run (benchmark mode, or PyTorch's default: ``heuristic``)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import torch
from _dispatch_fakes import HARD_KEY, FakeFamily, FakeTuner, Record, calls, device_info, make_rig, settings
from _search_fakes import HARD_KEY as SEARCH_KEY
from _search_fakes import FakeEvaluator, MemorySink
from _search_fakes import FakeFamily as SearchFamily

from autocutlass.db import TuningStore
from autocutlass.dispatch import Dispatcher, Layers, _real_layers, vendor_margin_of
from autocutlass.ops.conv.backward import ConvGradFrontEnd
from autocutlass.ops.conv.frontend import Conv2dFrontEnd
from autocutlass.ops.conv.problem import ConvDirection
from autocutlass.ops.gemm import frontend as validate
from autocutlass.ops.gemm.entries import MATMUL
from autocutlass.ops.gemm.problem import GemmProblem
from autocutlass.search.tuner import tune_problem
from autocutlass.settings import Policy, Settings
from autocutlass.vendor import (
    VENDOR_FAMILY,
    VENDOR_MARGIN,
    host_config,
    host_times,
    variant_of,
    vendor_faster,
    vendor_hard_key,
    vendor_hash,
)

BF = torch.bfloat16
INFO = device_info()
VENDOR_KEY = vendor_hard_key(HARD_KEY, INFO.torch_version, INFO.cuda_runtime_version)


def t(*shape: int) -> torch.Tensor:
    return torch.randn(*shape).to(BF)


def close(x: torch.Tensor, ref: torch.Tensor) -> None:
    torch.testing.assert_close(x.float(), ref.float(), atol=5e-2, rtol=2e-2)


# ---- the pure parts -------------------------------------------------------------------------------
def test_margin_and_keys() -> None:
    assert vendor_faster(1.0, 0.98) and not vendor_faster(1.0, 1.0 / (1 + VENDOR_MARGIN) + 1e-9)
    assert not vendor_faster(1.0, 1.0) and not vendor_faster(1.0, 1.2)
    assert vendor_hash("2.11", "13.0") != vendor_hash("2.12", "13.0") != vendor_hash("2.11", "12.8")
    key = vendor_hard_key(HARD_KEY, "2.11", "13.0")
    assert key.kernel_hash.startswith("torch-") and key == dataclasses.replace(HARD_KEY, kernel_hash=key.kernel_hash)
    # a variant of torch's path: a key of its own, on the same GPU and versions, its name readable
    heuristic = vendor_hard_key(HARD_KEY, "2.11", "13.0", "heuristic")
    assert heuristic != key and heuristic.kernel_hash.startswith("torch-heuristic-")
    assert dataclasses.replace(heuristic, kernel_hash="") == dataclasses.replace(key, kernel_hash="")
    assert (variant_of(key), variant_of(heuristic)) == ("", "heuristic")
    assert vendor_hash("2.11", "13.0", "heuristic") != vendor_hash("2.12", "13.0", "heuristic")
    for bad in ("Heuristic", "a-b", "x y"):
        with pytest.raises(ValueError, match="vendor variant"):
            vendor_hash("2.11", "13.0", bad)


# ---- the tuner records torch's time -----------------------------------------------------------------
def test_the_tuner_records_torchs_finals_time_under_the_vendor_key() -> None:
    sink = MemorySink()
    p = GemmProblem(m=512, n=512, k=512)
    ev = FakeEvaluator(lambda c: 1.0 + c["tile"] / 1000, torch_ms=0.9, finals_torch_ms=0.8)
    r = tune_problem(p, SearchFamily(), sink, exhaustive=True, evaluator=ev, hard_key=SEARCH_KEY)
    assert r.best is not None and p.key() in sink.best
    key, ms = sink.vendor[p.key()]
    assert ms == pytest.approx(0.8)  # the finals' torch time, not the search's
    assert key.kernel_hash == vendor_hash(torch.__version__, str(torch.version.cuda))
    assert dataclasses.replace(key, kernel_hash=SEARCH_KEY.kernel_hash) == SEARCH_KEY


def test_the_vendor_record_keeps_both_host_times_of_the_finals() -> None:
    """The finals' host times of torch's call and of our winner's go into the vendor record's
    config; a tuning that measured none (or only one) records an empty config."""
    p = GemmProblem(m=512, n=512, k=512)
    for host, torch_host, want in ((0.01, 0.05, {"host_ms": 0.05, "ours_host_ms": 0.01}), (None, 0.05, {}),
                                   (None, None, {})):  # fmt: skip
        sink = MemorySink()
        ev = FakeEvaluator(lambda c: 1.0 + c["tile"] / 1000, torch_ms=0.9, finals_torch_ms=0.8, host_ms=host,
                           torch_host_ms=torch_host)  # fmt: skip
        r = tune_problem(p, SearchFamily(), sink, exhaustive=True, evaluator=ev, hard_key=SEARCH_KEY)
        assert r.best is not None and sink.vendor_config[p.key()] == want


def test_host_times_enter_the_verdict() -> None:
    # GPU: torch 0.08 ms against our 0.1; host: torch's call 0.05 ms, ours 0.01: the totals 0.13 vs 0.11
    assert vendor_faster(0.1, 0.08) and not vendor_faster(0.1, 0.08, (0.01, 0.05))
    # a host difference in torch's favour makes a GPU tie torch's
    assert not vendor_faster(0.1, 0.1) and vendor_faster(0.1, 0.1, (0.03, 0.01))
    assert host_config(0.05, 0.01) == {"host_ms": 0.05, "ours_host_ms": 0.01}
    assert host_config(None, 0.01) == host_config(0.05, None) == {}
    assert host_times({"host_ms": 0.05, "ours_host_ms": 0.01}) == (0.01, 0.05)
    for bad in ({}, None, [], {"host_ms": 0.05}, {"host_ms": "x", "ours_host_ms": 0.01},
                {"host_ms": float("nan"), "ours_host_ms": 0.01}, {"host_ms": -1.0, "ours_host_ms": 0.01}):  # fmt: skip
        assert host_times(bad) is None, bad


def test_no_winner_no_vendor_record() -> None:
    sink = MemorySink()
    p = GemmProblem(m=512, n=512, k=512)
    ev = FakeEvaluator(lambda c: ("wrong_result", "bad"), torch_ms=0.9)
    r = tune_problem(p, SearchFamily(), sink, exhaustive=True, evaluator=ev, hard_key=SEARCH_KEY)
    assert r.best is None and sink.vendor == {} and sink.best == {}


# ---- dispatch (fake store) ----------------------------------------------------------------------
def _problem(a: torch.Tensor, b: torch.Tensor) -> GemmProblem:
    ctx = validate.Context(on_gpu=lambda x: True, device_info=lambda i: INFO, grad=False, tf32=True)
    return validate.plan(validate.Call(validate.Op.MATMUL, a, b), ctx).problem


@pytest.mark.parametrize("vendor_ms, served_by_torch", [(0.5, True), (0.995, False), (1.5, False)])
@pytest.mark.parametrize("pol", [Policy.TUNE, Policy.CACHED, Policy.BACKGROUND])
def test_an_exact_record_gives_way_to_a_faster_torch(pol: Policy, vendor_ms: float, served_by_torch: bool) -> None:
    rig = make_rig(pol)
    a, b = t(32, 64), t(64, 48)
    p = _problem(a, b)
    rig.store.records[p.key()] = Record("fake", {"tile": 64}, "exact", problem=p, median_ms=1.0)
    rig.store.vendor[p.key()] = Record(VENDOR_FAMILY, {}, "exact", hard_key=VENDOR_KEY, problem=p, median_ms=vendor_ms)
    close(calls(rig.dispatcher).matmul(a, b), a @ b)
    close(calls(rig.dispatcher).matmul(a, b), a @ b)  # memoised either way
    s = rig.dispatcher.stats()
    assert rig.store.vendor_lookups == [(p, VENDOR_KEY)]
    assert (s.vendor_hits, len(rig.family.launches), s.fallbacks) == ((1, 0, 0) if served_by_torch else (0, 2, 0))
    assert rig.tuner.calls == [] and s.memo_misses == 1


@pytest.mark.parametrize("vendor_host", [True, False])
def test_host_times_of_the_vendor_record_decide_with_the_setting(vendor_host: bool) -> None:
    """torch 0.08 ms on the GPU against our 0.1, but its call costs the host 0.05 ms against our
    0.01: our kernel serves; with ``AUTOCUTLASS_VENDOR_HOST=0`` (GPU time alone) torch does."""
    rig = make_rig(Policy.CACHED)
    rig.dispatcher.settings = dataclasses.replace(rig.dispatcher.settings, vendor_host=vendor_host)
    a, b = t(32, 64), t(64, 48)
    p = _problem(a, b)
    rig.store.records[p.key()] = Record("fake", {"tile": 64}, "exact", problem=p, median_ms=0.1)
    rig.store.vendor[p.key()] = Record(VENDOR_FAMILY, {"host_ms": 0.05, "ours_host_ms": 0.01}, "exact",
                                       hard_key=VENDOR_KEY, problem=p, median_ms=0.08)  # fmt: skip
    close(calls(rig.dispatcher).matmul(a, b), a @ b)
    s = rig.dispatcher.stats()
    assert (s.vendor_hits, len(rig.family.launches)) == ((0, 1) if vendor_host else (1, 0))


@pytest.mark.parametrize("vendor_host, margin", [(True, 0.1495 - 0.11), (False, 0.0995 - 0.1)])
def test_our_entry_keeps_its_margin_over_torch(vendor_host: bool, margin: float) -> None:
    """Our kernel serving beside a vendor record it beats within ``VENDOR_MARGIN`` (0.1 ms against
    torch's 0.0995 on the GPU, 0.01 ms against 0.05 of host time): its entry carries how much a call
    costs less than torch's, host times counted with ``vendor_host``; without a vendor record, or
    with verdicts off, it carries none."""
    rig = make_rig(Policy.CACHED)
    rig.dispatcher.settings = dataclasses.replace(rig.dispatcher.settings, vendor_host=vendor_host)
    a, b = t(32, 64), t(64, 48)
    p = _problem(a, b)
    rig.store.records[p.key()] = Record("fake", {"tile": 64}, "exact", problem=p, median_ms=0.1)
    rig.store.vendor[p.key()] = Record(VENDOR_FAMILY, {"host_ms": 0.05, "ours_host_ms": 0.01}, "exact",
                                       hard_key=VENDOR_KEY, problem=p, median_ms=0.0995)  # fmt: skip
    entry = rig.dispatcher.entry(MATMUL, a, b, None)
    assert rig.dispatcher.stats().vendor_hits == 0
    assert vendor_margin_of(entry) == pytest.approx(margin)
    del rig.store.vendor[p.key()]
    rig.dispatcher.clear()
    assert vendor_margin_of(rig.dispatcher.entry(MATMUL, a, b, None)) is None
    rig.store.vendor[p.key()] = Record(VENDOR_FAMILY, {}, "exact", hard_key=VENDOR_KEY, problem=p, median_ms=0.5)
    rig.dispatcher.settings = dataclasses.replace(rig.dispatcher.settings, vendor_verdicts=False)
    rig.dispatcher.clear()
    assert vendor_margin_of(rig.dispatcher.entry(MATMUL, a, b, None)) is None


def test_a_vendor_record_of_another_problem_of_the_bucket_is_not_compared() -> None:
    rig = make_rig(Policy.CACHED)
    a, b = t(100, 64), t(64, 48)
    p, other = _problem(a, b), _problem(t(120, 64), b)
    rig.store.fallback = Record("fake", {"tile": 64}, "bucket", problem=other, median_ms=1.0)
    rig.store.vendor[p.key()] = Record(VENDOR_FAMILY, {}, "exact", hard_key=VENDOR_KEY, problem=p, median_ms=0.1)
    calls(rig.dispatcher).matmul(a, b)
    assert rig.dispatcher.stats().vendor_hits == 0 and len(rig.family.launches) == 1
    rig.store.vendor[p.key()] = dataclasses.replace(rig.store.vendor[p.key()], problem=other)  # the bucket's own
    rig.dispatcher.clear()
    calls(rig.dispatcher).matmul(a, b)
    assert rig.dispatcher.stats().vendor_hits == 1 and len(rig.family.launches) == 1


def test_nearest_and_sibling_records_never_consult_verdicts() -> None:
    rig = make_rig(Policy.CACHED)
    a, b = t(100, 64), t(64, 48)
    p = _problem(a, b)
    rig.store.fallback = Record("fake", {"tile": 64}, "nearest", problem=_problem(t(150, 64), b), median_ms=1.0)
    rig.store.vendor[p.key()] = Record(VENDOR_FAMILY, {}, "exact", hard_key=VENDOR_KEY, problem=p, median_ms=0.1)
    calls(rig.dispatcher).matmul(a, b)
    assert rig.store.vendor_lookups == [] and len(rig.family.launches) == 1
    rig = make_rig(Policy.CACHED)
    sib_key = dataclasses.replace(HARD_KEY, gpu_name="Fake H200")
    rig.store.sibling = Record("fake", {"tile": 64}, "exact", sibling=True, hard_key=sib_key, problem=p, median_ms=1.0)
    rig.store.vendor[p.key()] = Record(VENDOR_FAMILY, {}, "exact", hard_key=VENDOR_KEY, problem=p, median_ms=0.1)
    calls(rig.dispatcher).matmul(a, b)
    assert rig.store.vendor_lookups == [] and len(rig.family.launches) == 1 and rig.dispatcher.stats().sibling_hits == 1


def test_verdicts_off_serve_our_kernel() -> None:
    rig = make_rig(Policy.CACHED)
    rig.dispatcher.settings = dataclasses.replace(rig.dispatcher.settings, vendor_verdicts=False)
    a, b = t(32, 64), t(64, 48)
    p = _problem(a, b)
    rig.store.records[p.key()] = Record("fake", {"tile": 64}, "exact", problem=p, median_ms=1.0)
    rig.store.vendor[p.key()] = Record(VENDOR_FAMILY, {}, "exact", hard_key=VENDOR_KEY, problem=p, median_ms=0.1)
    calls(rig.dispatcher).matmul(a, b)
    assert rig.store.vendor_lookups == [] and len(rig.family.launches) == 1
    assert Settings.from_env({"AUTOCUTLASS_VENDOR_VERDICTS": "0"}).vendor_verdicts is False
    assert Settings.from_env({}).vendor_verdicts is True


class _TunerThatRecords(FakeTuner):
    """Writes what ``search.tune_problem`` would: our winner and torch's time."""

    def __init__(self, store: Any, ours_ms: float, torch_ms: float) -> None:
        super().__init__({"tile": 128})
        self.store, self.ours_ms, self.torch_ms = store, ours_ms, torch_ms

    def __call__(self, problem, family, sink, hard_key, device_index, settings, *, seeds=(), stop=None):  # noqa: ANN001
        best = super().__call__(problem, family, sink, hard_key, device_index, settings, seeds=seeds, stop=stop)
        self.store.records[problem.key()] = Record("fake", best, "exact", problem=problem, median_ms=self.ours_ms)
        self.store.vendor[problem.key()] = Record(VENDOR_FAMILY, {}, "exact", hard_key=VENDOR_KEY, problem=problem,
                                                  median_ms=self.torch_ms)  # fmt: skip
        return best


@pytest.mark.parametrize("torch_ms, served_by_torch", [(0.5, True), (2.0, False)])
def test_a_tuning_that_finds_torch_faster_serves_torch_at_once(torch_ms: float, served_by_torch: bool) -> None:
    rig = make_rig(Policy.TUNE)
    tuner = _TunerThatRecords(rig.store, 1.0, torch_ms)
    rig.dispatcher._layers = dataclasses.replace(rig.dispatcher._layers, tune=tuner)
    a, b = t(32, 64), t(64, 48)
    close(calls(rig.dispatcher).matmul(a, b), a @ b)
    assert len(tuner.calls) == 1
    assert (rig.dispatcher.stats().vendor_hits, len(rig.family.launches)) == ((1, 0) if served_by_torch else (0, 1))


def test_conv_front_ends_judge_by_the_cudnn_mode_torch_would_run() -> None:
    """Benchmark mode: the main vendor record (timed in that mode); PyTorch's default: the
    ``heuristic`` variant's. The memo keys hold the mode, so an entry chosen in one mode is never
    served in the other."""
    for fe, args in ((Conv2dFrontEnd(), (t(1, 8, 4, 4), t(8, 8, 1, 1), None, 1, 0, 1, 1, None, None)),
                     (ConvGradFrontEnd(ConvDirection.DGRAD), (t(1, 8, 4, 4), t(8, 8, 1, 1), (1, 8, 4, 4), (1, 1),
                                                              (0, 0), (1, 1), 1))):  # fmt: skip
        with torch.backends.cudnn.flags(enabled=True, benchmark=True):
            assert fe.vendor_variant() == ""
            key = fe.memo_key(Policy.CACHED, *args)
        with torch.backends.cudnn.flags(enabled=True, benchmark=False):
            assert fe.vendor_variant() == "heuristic"
            assert fe.memo_key(Policy.CACHED, *args) != key


# ---- the real database -------------------------------------------------------------------------
class _RecordingTuner(FakeTuner):
    def __init__(self, ours_ms: float, torch_ms: float, vendor_config: dict[str, float] | None = None) -> None:
        super().__init__({"tile": 128})
        self.ours_ms, self.torch_ms = ours_ms, torch_ms
        self.vendor_config = vendor_config or {}

    def __call__(self, problem, family, sink, hard_key, device_index, settings, *, seeds=(), stop=None):  # noqa: ANN001
        best = super().__call__(problem, family, sink, hard_key, device_index, settings, seeds=seeds, stop=stop)
        sink.record_best(problem, hard_key, family.name, best, median_ms=self.ours_ms, tflops=1.0)
        sink.record_best(problem, vendor_hard_key(hard_key, INFO.torch_version, INFO.cuda_runtime_version),
                         VENDOR_FAMILY, self.vendor_config, median_ms=self.torch_ms, tflops=1.0)  # fmt: skip
        return best


def _dispatcher(tmp_path: Path, pol: Policy, family: FakeFamily, tuner: FakeTuner, db: Path) -> Dispatcher:
    layers = Layers(get_family=lambda n: family, families_for=lambda p: [family],
                    open_store=_real_layers().open_store, tune=tuner)  # fmt: skip
    s = dataclasses.replace(settings(tmp_path, policy=pol), db_url=str(db))
    return Dispatcher(s, layers=layers, device_info=lambda i: INFO, on_gpu=lambda t: True)


def test_verdicts_through_the_database(tmp_path: Path) -> None:
    db = tmp_path / "tuning.sqlite"
    fam, tuner = FakeFamily(), _RecordingTuner(ours_ms=1.0, torch_ms=0.5)
    a, b = t(32, 64), t(64, 48)
    close(calls(_dispatcher(tmp_path, Policy.TUNE, fam, tuner, db)).matmul(a, b), a @ b)
    assert len(tuner.calls) == 1 and fam.launches == []  # torch serves from the first call
    store = TuningStore(db)
    assert [r.family for r in store.bests()] == ["fake"]  # vendor records only when asked for
    assert sorted(r.family for r in store.bests(vendor=True)) == ["fake", VENDOR_FAMILY]
    later = _dispatcher(tmp_path, Policy.CACHED, fam2 := FakeFamily(), FakeTuner(), db)  # a new process
    close(calls(later).matmul(a, b), a @ b)
    assert later.stats().vendor_hits == 1 and fam2.launches == []
    slower = _RecordingTuner(ours_ms=1.0, torch_ms=1.5)
    db2 = tmp_path / "other.sqlite"
    close(calls(_dispatcher(tmp_path, Policy.TUNE, fam3 := FakeFamily(), slower, db2)).matmul(a, b), a @ b)
    assert len(fam3.launches) == 1


def test_host_aware_verdicts_through_the_database(tmp_path: Path) -> None:
    """torch 0.5 ms on the GPU against our 1.0, its call 0.7 ms of host time against our 0.05: the
    tuning's first call, and a later process reading the database, serve ours; with
    ``vendor_host`` off, torch."""
    db = tmp_path / "tuning.sqlite"
    host = {"host_ms": 0.7, "ours_host_ms": 0.05}
    fam, tuner = FakeFamily(), _RecordingTuner(ours_ms=1.0, torch_ms=0.5, vendor_config=host)
    a, b = t(32, 64), t(64, 48)
    close(calls(_dispatcher(tmp_path, Policy.TUNE, fam, tuner, db)).matmul(a, b), a @ b)
    assert len(tuner.calls) == 1 and len(fam.launches) == 1
    later = _dispatcher(tmp_path, Policy.CACHED, fam2 := FakeFamily(), FakeTuner(), db)
    close(calls(later).matmul(a, b), a @ b)
    assert later.stats().vendor_hits == 0 and len(fam2.launches) == 1
    gpu_only = _dispatcher(tmp_path, Policy.CACHED, fam3 := FakeFamily(), FakeTuner(), db)
    gpu_only.settings = dataclasses.replace(gpu_only.settings, vendor_host=False)
    close(calls(gpu_only).matmul(a, b), a @ b)
    assert gpu_only.stats().vendor_hits == 1 and fam3.launches == []


@pytest.mark.parametrize("variant, served_by_torch", [("", False), ("heuristic", True), (None, False)])
def test_the_front_ends_variant_picks_the_vendor_record_that_judges(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    variant: str | None, served_by_torch: bool) -> None:  # fmt: skip
    """One tuning recorded torch slower than ours on its main path (1.5 ms against 1.0: cuDNN in
    benchmark mode) and faster in its ``heuristic`` variant (0.5: PyTorch's default mode). A call
    whose front-end says torch would run the heuristic path is served by torch; one on the main
    path, or on a path no tuning timed (None), keeps our kernel."""
    db = tmp_path / "tuning.sqlite"
    a, b = t(32, 64), t(64, 48)
    p = _problem(a, b)
    store = TuningStore(db)
    versions = (INFO.torch_version, INFO.cuda_runtime_version)
    store.record_best(p, HARD_KEY, "fake", {"tile": 64}, 1.0, 1.0)
    store.record_best(p, vendor_hard_key(HARD_KEY, *versions), VENDOR_FAMILY, {}, 1.5, 1.0)
    store.record_best(p, vendor_hard_key(HARD_KEY, *versions, "heuristic"), VENDOR_FAMILY, {}, 0.5, 1.0)
    monkeypatch.setattr(type(MATMUL), "vendor_variant", staticmethod(lambda: variant), raising=False)
    d = _dispatcher(tmp_path, Policy.CACHED, fam := FakeFamily(), FakeTuner(), db)
    close(calls(d).matmul(a, b), a @ b)
    assert (d.stats().vendor_hits, len(fam.launches)) == ((1, 0) if served_by_torch else (0, 1))


def test_bench_counts_a_verdict_as_torch_serving() -> None:
    from autocutlass.cli.bench.report import FALLBACK_PATHS, VENDOR_PATH, first_call_path

    delta = {"memo_misses": 1, "db_lookups": 2, "db_hits": 1, "vendor_hits": 1}
    assert first_call_path(delta, "cached") == VENDOR_PATH and VENDOR_PATH in FALLBACK_PATHS
    assert first_call_path({**delta, "vendor_hits": 0}, "cached") == "db"


def test_counts_keep_torchs_times_apart(tmp_path: Path) -> None:
    store = TuningStore(tmp_path / "t.sqlite")
    p = GemmProblem(m=256, n=256, k=256)
    store.record_best(p, HARD_KEY, "fake", {"tile": 64}, 1.0, 1.0)
    store.record_best(p, VENDOR_KEY, VENDOR_FAMILY, {}, 0.5, 2.0)
    c = store.counts_per_gpu()[HARD_KEY.gpu_name]
    assert (c["problems"], c["bests"], c["torch_times"]) == (1, 1, 1)


def test_db_show_names_the_variant_of_torchs_time() -> None:
    from autocutlass.cli.db import _vendor_note
    from autocutlass.db.records import BestRecord

    p = GemmProblem(m=256, n=256, k=256)

    def rec(family: str, key: Any) -> BestRecord:
        return BestRecord(problem=p, family=family, config={}, median_ms=1.0, tflops=1.0, hard_key=key,
                          source="exact", origin="test")  # fmt: skip

    assert _vendor_note(rec("fake", HARD_KEY)) == ""
    assert _vendor_note(rec(VENDOR_FAMILY, VENDOR_KEY)) == ", torch's time"
    heuristic = vendor_hard_key(HARD_KEY, INFO.torch_version, INFO.cuda_runtime_version, "heuristic")
    assert _vendor_note(rec(VENDOR_FAMILY, heuristic)) == ", torch's time (heuristic)"

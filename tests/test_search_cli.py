"""``autocutlass tune``: argument parsing, the shapes-file format, and a run with a fake evaluator."""

from __future__ import annotations

import argparse
import contextlib
import functools
import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _search_fakes import DEVICE, FakeEvaluator

from autocutlass.cli.shapes import load_cases
from autocutlass.cli.common import UsageError
from autocutlass.cli.tune import add_tune_parser, run_tune
from autocutlass.db import TuningStore
from autocutlass.device import HardKey
from autocutlass.kernels import get_family
from autocutlass.ops.gemm.problem import DType, Major

SHAPES = {
    "about": "same format as shared/bench/shapes.json",
    "cases": [
        {"name": "square", "M": 256, "N": 256, "K": 256, "dtype": "bf16", "layout": "nn"},
        {"name": "linear", "M": 64, "N": 512, "K": 256, "dtype": "bf16", "layout": "nt"},
        {"name": "batched", "L": 4, "M": 128, "N": 128, "K": 64, "dtype": "fp16", "layout": "nn"},
        {"name": "tf32", "M": 256, "N": 256, "K": 256, "dtype": "fp32", "layout": "nn"},
        {"name": "fp8", "M": 256, "N": 256, "K": 256, "dtype": "e4m3", "layout": "nn"},
    ],
}


def hopper_key() -> HardKey:
    """The hard key tune records hopper_gemm's trials under on the fake evaluator's GPU."""
    return DEVICE.hard_key(get_family("hopper_gemm").source_hash())


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="autocutlass")
    add_tune_parser(p.add_subparsers(dest="command"))
    return p


@pytest.fixture
def shapes(tmp_path: Path) -> Path:
    f = tmp_path / "shapes.json"
    f.write_text(json.dumps(SHAPES))
    return f


def test_parse_shapes_options(shapes: Path) -> None:
    ns = parser().parse_args(["tune", "--shapes", str(shapes), "--trials", "8", "--timeout", "30", "--exhaustive"])
    assert ns.shapes == str(shapes) and ns.trials == 8 and ns.timeout == 30.0 and ns.exhaustive
    assert ns.resume and not ns.pending and callable(ns.func)


def test_parse_pending() -> None:
    ns = parser().parse_args(["tune", "--pending"])
    assert ns.pending and ns.shapes is None and ns.trials is None and ns.timeout is None and not ns.exhaustive


@pytest.mark.parametrize(
    "argv", [["tune"], ["tune", "--pending", "--shapes", "x.json"], ["tune", "--pending", "--trials", "0"]]
)
def test_bad_usage_exits(argv: list[str]) -> None:
    with pytest.raises(SystemExit):
        parser().parse_args(argv)


def test_load_cases_reads_the_suite_format(shapes: Path) -> None:
    cases = {c.name: c.problem for c in load_cases(shapes)}
    assert list(cases) == ["square", "linear", "batched", "tf32", "fp8"]
    assert cases["linear"].b_major is Major.COL and cases["linear"].a_major is Major.ROW
    assert cases["batched"].l == 4 and cases["batched"].a_dtype is DType.FP16
    assert cases["tf32"].a_dtype is DType.TF32 and cases["tf32"].d_dtype is DType.FP32
    assert [c.name for c in load_cases(shapes, only=["linear"])] == ["linear"]
    with pytest.raises(ValueError, match="no case named nope"):
        load_cases(shapes, only=["nope"])


def test_load_cases_reports_a_malformed_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"cases": [{"name": "x", "M": 1, "N": 1, "dtype": "bf16"}]}))
    with pytest.raises(ValueError, match="case 0"):
        load_cases(bad)
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="cannot read"):
        load_cases(bad)


def test_the_shipped_suite_parses() -> None:
    suite = Path(__file__).resolve().parents[1] / "benchmarks" / "shapes.json"
    cases = load_cases(suite)
    assert len(cases) >= 10


def hopper_score(params: dict[str, Any]) -> float:
    return 1.0 + abs(params["tile_n"] - 128) / 100 + params["cluster_m"] * 0.01


def test_run_tune_with_a_fake_evaluator(shapes: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = TuningStore(tmp_path / "t.sqlite")
    out_json = tmp_path / "out.json"
    ns = parser().parse_args(["tune", "--shapes", str(shapes), "--trials", "5", "--json", str(out_json)])
    made: list[FakeEvaluator] = []

    @contextlib.contextmanager
    def make(family: str, _ns: argparse.Namespace) -> Iterator[FakeEvaluator]:
        ev = FakeEvaluator(hopper_score, torch_ms=2.0)
        made.append(ev)
        yield ev

    assert run_tune(ns, make_evaluator=make, store=store) == 0
    assert len(made) == 1  # one evaluator serves every problem of a family
    out, err = capsys.readouterr()
    assert "square: 5/5 trials" in err and "tf32: 5/5 trials" in err and "fp8" not in err  # progress, off a terminal
    for name in ("square", "linear", "batched", "tf32", "fp8"):
        assert name in out
    assert "skipped" in out and "K-major" in out  # fp8 is served only 'nt' (K-major A and B): said why
    rows = {r["name"]: r for r in json.loads(out_json.read_text())}
    assert rows["square"]["trials"] == 5 and rows["square"]["vs_torch"] > 1
    # the finals: the four fastest of the five, head to head; the winner's time is theirs
    finals = rows["square"]["finals"]
    assert len(finals) == 4 and all(isinstance(f["config_label"], str) for f in finals)
    assert rows["square"]["median_ms"] in [f["median_ms"] for f in finals]
    assert rows["square"]["stop"].endswith("; finals: 4 configs x 5 rounds") and rows["fp8"]["finals"] == []
    assert rows["tf32"]["config"]["tile_k"] in (32, 64)  # tf32 is served, with 32-bit K tiles
    assert rows["fp8"]["config"] is None
    assert len(store.bests()) == 4
    # run again: resumes, evaluating only new configs
    assert run_tune(ns, make_evaluator=make, store=store) == 0
    for case in load_cases(shapes, only=["square", "linear", "batched"]):
        trials = store.trials(case.problem, hopper_key())
        assert len(trials) == 10 and len({t.config_key for t in trials}) == 10


def test_run_tune_pending_with_no_misses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = TuningStore(tmp_path / "t.sqlite")
    ns = parser().parse_args(["tune", "--pending"])

    @contextlib.contextmanager
    def make(family: str, _ns: argparse.Namespace) -> Iterator[FakeEvaluator]:
        yield FakeEvaluator(hopper_score)

    assert run_tune(ns, make_evaluator=make, store=store) == 0
    assert "no pending misses" in capsys.readouterr().out


def test_run_tune_pending_tunes_recorded_misses(tmp_path: Path) -> None:
    from autocutlass.ops.gemm.problem import GemmProblem

    store = TuningStore(tmp_path / "t.sqlite")
    missed = GemmProblem(m=100, n=256, k=256)
    store.record_miss(missed, hopper_key())
    ns = parser().parse_args(["tune", "--pending", "--trials", "3"])

    @contextlib.contextmanager
    def make(family: str, _ns: argparse.Namespace) -> Iterator[FakeEvaluator]:
        yield FakeEvaluator(hopper_score)

    assert run_tune(ns, make_evaluator=make, store=store) == 0
    assert store.lookup(missed, hopper_key()) is not None
    assert store.pending_misses(hopper_key()) == []


def test_family_all_tunes_a_decode_gemm_under_every_family_that_serves_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    from autocutlass.cli.common import UsageError

    f = tmp_path / "decode.json"
    f.write_text(json.dumps({"about": "", "cases": [
        {"name": "decode", "M": 2, "N": 512, "K": 256, "dtype": "bf16", "layout": "nt"},
        {"name": "square", "M": 256, "N": 256, "K": 256, "dtype": "bf16", "layout": "nn"},
    ]}))  # fmt: skip
    store = TuningStore(tmp_path / "t.sqlite")
    out_json = tmp_path / "out.json"
    ns = parser().parse_args(["tune", "--shapes", str(f), "--trials", "3", "--family", "all", "--json", str(out_json)])

    @contextlib.contextmanager
    def make(family: str, _ns: argparse.Namespace) -> Iterator[FakeEvaluator]:
        yield FakeEvaluator(lambda params: 1.0 + len(json.dumps(params, sort_keys=True)) / 1000, torch_ms=2.0)

    assert run_tune(ns, make_evaluator=make, store=store) == 0
    rows = [(r["name"], r["family"]) for r in json.loads(out_json.read_text())]
    # the decode GEMM under both GEMM families (the one that prefers it first), the square one under one
    assert rows == [("decode", "hopper_gemv"), ("decode", "hopper_gemm"), ("square", "hopper_gemm")]
    assert sorted(b.family for b in store.bests() if b.family != "torch") == ["hopper_gemm", "hopper_gemm", "hopper_gemv"]
    with pytest.raises(UsageError, match="here only"):
        run_tune(parser().parse_args(["tune", "--shapes", str(f), "--family", "all", "--enqueue"]), store=store)


# ---- tune --verdicts -------------------------------------------------------------------------------
def _vendor_records(store: TuningStore) -> dict[str, Any]:
    from autocutlass.vendor import VENDOR_FAMILY

    return {r.problem.key(): r for r in store.bests(vendor=True) if r.family == VENDOR_FAMILY}


def test_verdicts_retime_the_stored_winners_against_torch(shapes: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """A database tuned without host times (torch 2.0 ms): ``--verdicts`` re-runs each winner's
    finals against torch (now 0.9 ms, its calls dearer on the host) and records both times of that
    run: our best's time (config and trial kept), torch's with both host times; verdicts then
    weigh them. A record of other kernel sources is left alone; ``--only`` needs a file."""
    from autocutlass.vendor import host_times

    store = TuningStore(tmp_path / "t.sqlite")

    def maker(**kw: Any) -> Any:
        @contextlib.contextmanager
        def make(family: str, _ns: argparse.Namespace) -> Iterator[FakeEvaluator]:
            yield FakeEvaluator(hopper_score, **kw)

        return make

    tune = parser().parse_args(["tune", "--shapes", str(shapes), "--only", "square", "--only", "linear", "--trials", "3"])
    assert run_tune(tune, make_evaluator=maker(torch_ms=2.0), store=store) == 0
    before = {r.problem.key(): r for r in store.bests()}
    assert len(before) == 2 and all(host_times(v.config) is None for v in _vendor_records(store).values())
    stale = dataclasses.replace(hopper_key(), kernel_hash="old-sources")
    other = next(iter(before.values()))
    store.record_best(other.problem, stale, other.family, other.config, 5.0, 1.0)
    trials = {k: {t.id for t in store.trials(r.problem, r.hard_key) if t.config == r.config} for k, r in before.items()}
    capsys.readouterr()

    out_json = tmp_path / "v.json"
    ns = parser().parse_args(["tune", "--verdicts", "--json", str(out_json)])
    finals = lambda c: 0.5  # noqa: E731 - the winners re-time at 0.5 ms
    assert run_tune(ns, make_evaluator=maker(torch_ms=2.0, finals_score=finals, finals_torch_ms=0.45, host_ms=0.01,
                                             torch_host_ms=0.08), store=store) == 0  # fmt: skip
    out, err = capsys.readouterr()
    assert "2 of 2 re-timed; host time changes 2 verdict(s)" in out and "[2/2]" in err
    after = {r.problem.key(): r for r in store.bests() if r.hard_key == hopper_key()}
    vendor = _vendor_records(store)
    for key, rec in after.items():
        assert rec.config == before[key].config and rec.median_ms == pytest.approx(0.5)
        assert {t.id for t in store.trials(rec.problem, rec.hard_key) if t.config == rec.config} == trials[key]
        assert vendor[key].median_ms == pytest.approx(0.45) and host_times(vendor[key].config) == (0.01, 0.08)
    rows = json.loads(out_json.read_text())
    assert {(r["served_by_gpu_time"], r["served_by"]) for r in rows} == {("torch", "hopper_gemm")}
    assert store.lookup(other.problem, stale).median_ms == 5.0  # other sources: untouched

    # one case of a file; finals that do not finish keep the records
    ns = parser().parse_args(["tune", "--verdicts", str(shapes), "--only", "linear"])
    assert run_tune(ns, make_evaluator=maker(finals_fail=True), store=store) == 0
    out, _ = capsys.readouterr()
    assert "0 of 1 re-timed" in out and "the finals did not finish" in out
    assert {r.problem.key(): r.median_ms for r in store.bests() if r.hard_key == hopper_key()} == \
        {k: pytest.approx(0.5) for k in after}  # fmt: skip
    with pytest.raises(UsageError, match="--only goes with"):
        run_tune(parser().parse_args(["tune", "--verdicts", "--only", "linear"]), store=store)


def test_verdicts_record_torchs_variants_beside_its_main_time(shapes: Path, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """A database tuned before torch's variants were timed (conv2d's cuDNN outside benchmark mode):
    ``--verdicts`` records each variant's time of the finals as the vendor record of that variant,
    beside the main one, and the table and JSON say how each would serve."""
    from autocutlass.vendor import host_times, variant_of

    store = TuningStore(tmp_path / "t.sqlite")

    @contextlib.contextmanager
    def make(family: str, _ns: argparse.Namespace, **kw: Any) -> Iterator[FakeEvaluator]:
        yield FakeEvaluator(hopper_score, torch_ms=2.0, finals_score=lambda c: 0.5, finals_torch_ms=0.9,
                            host_ms=0.01, torch_host_ms=0.02, **kw)  # fmt: skip

    tune = parser().parse_args(["tune", "--shapes", str(shapes), "--only", "linear", "--trials", "3"])
    assert run_tune(tune, make_evaluator=make, store=store) == 0
    assert {variant_of(r.hard_key) for r in store.bests(vendor=True) if r.family == "torch"} == {""}
    out_json = tmp_path / "v.json"
    ns = parser().parse_args(["tune", "--verdicts", "--json", str(out_json)])
    retime = functools.partial(make, torch_variants={"heuristic": 0.3})
    assert run_tune(ns, make_evaluator=lambda f, n: retime(f, n), store=store) == 0
    out, _ = capsys.readouterr()
    assert "heuristic: 300.0, torch" in out
    torch_records = {variant_of(r.hard_key): r for r in store.bests(vendor=True) if r.family == "torch"}
    assert set(torch_records) == {"", "heuristic"}
    assert torch_records[""].median_ms == pytest.approx(0.9)
    assert torch_records["heuristic"].median_ms == pytest.approx(0.3)
    assert host_times(torch_records["heuristic"].config) == (0.01, 0.02)
    (row,) = json.loads(out_json.read_text())
    assert row["served_by"] == "hopper_gemm" and row["variants"]["heuristic"]["served_by"] == "torch"

"""``autocutlass tune`` starts each search from the databases' priors (a sibling GPU's record of
the problem in a shipped database, this GPU's nearest record), as an on-line tuning does;
``--no-priors`` starts from the family's own seeds."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _search_fakes import DEVICE, FakeEvaluator

from autocutlass.cli.shapes import load_cases
from autocutlass.cli.tune import add_tune_parser, run_tune
from autocutlass.db import TuningStore, export
from autocutlass.kernels import get_family

SHAPES = {"cases": [{"name": "c3x3", "N": 2, "H": 8, "W": 8, "C": 64, "K": 128, "R": 3, "S": 3, "pad": [1, 1],
                     "stride": [1, 1], "dilation": [1, 1], "dtype": "bf16"}]}  # fmt: skip


def _run(tmp_path: Path, shapes: Path, *extra: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    p = argparse.ArgumentParser(prog="autocutlass")
    add_tune_parser(p.add_subparsers(dest="command"))
    out_json = tmp_path / f"out{len(list(tmp_path.glob('out*.json')))}.json"
    ns = p.parse_args(["tune", "--shapes", str(shapes), "--trials", "3", "--json", str(out_json), *extra])
    evaluators: list[FakeEvaluator] = []

    @contextlib.contextmanager
    def make(family: str, _ns: argparse.Namespace) -> Iterator[FakeEvaluator]:
        evaluators.append(FakeEvaluator(lambda params: 1.0, torch_ms=2.0))
        yield evaluators[-1]

    store = TuningStore(tmp_path / f"tuned{len(evaluators)}-{len(extra)}.sqlite")
    assert run_tune(ns, make_evaluator=make, store=store) == 0
    (row,) = json.loads(out_json.read_text())
    return [cfg for ev in evaluators for cfg in ev.submitted], row


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, dict[str, Any], dict[str, Any]]:
    shapes = tmp_path / "conv.json"
    shapes.write_text(json.dumps(SHAPES))
    (case,) = load_cases(shapes)
    family = get_family("hopper_conv")
    own_first = family.config_to_dict(family.seeds(case.problem)[0])
    # a feasible config the family's seeds do not start with: the sibling GPU's winner
    sibling_cfg = next(family.config_to_dict(c) for c in family.space(case.problem)
                       if family.check(c, case.problem) is None and family.config_to_dict(c) != own_first)  # fmt: skip
    sibling = dataclasses.replace(DEVICE.hard_key(family.source_hash()), gpu_name="Fake GPU Sibling")
    work = TuningStore(tmp_path / "work.sqlite")
    work.record_best(case.problem, sibling, family.name, sibling_cfg, 0.5, 100.0)
    export(work, tmp_path / "shipped" / "sibling.sqlite")
    monkeypatch.setenv("AUTOCUTLASS_SHIPPED_DBS", str(tmp_path / "shipped"))
    return shapes, sibling_cfg, own_first


def test_tune_starts_from_a_sibling_gpus_record(tmp_path: Path, setup: tuple[Path, dict[str, Any], dict[str, Any]]) -> None:
    shapes, sibling_cfg, own_first = setup
    submitted, row = _run(tmp_path, shapes)
    assert submitted[0] == sibling_cfg and row["priors"] == 1
    assert own_first in submitted  # the family's own seeds follow the priors


def test_no_priors_starts_from_the_familys_seeds(tmp_path: Path, setup: tuple[Path, dict[str, Any], dict[str, Any]]) -> None:
    shapes, sibling_cfg, own_first = setup
    submitted, row = _run(tmp_path, shapes, "--no-priors")
    assert submitted[0] == own_first and row["priors"] == 0

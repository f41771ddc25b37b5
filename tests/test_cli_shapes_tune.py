"""``autocutlass tune --shapes`` on conv2d cases, with a fake evaluator: the shapes loader's
ConvProblems reach the op-generic tuner unchanged (3x3 layers under hopper_conv, their dgrad
under hopper_conv_dgrad, pointwise ones under hopper_gemm, the 3-channel stem under hopper_conv_unfold, a
37-channel 7x7 layer (too wide a row to unfold) skipped with the families' reasons) and are recorded as the
conv2d problems that ``autocutlass.conv2d`` looks up."""

from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _search_fakes import DEVICE, FakeEvaluator

from autocutlass.cli.shapes import load_cases
from autocutlass.cli.tune import add_tune_parser, run_tune
from autocutlass.db import TuningStore
from autocutlass.kernels import get_family

CASE = {"N": 2, "H": 8, "W": 8, "stride": [1, 1], "dilation": [1, 1], "dtype": "bf16"}
SHAPES = {"cases": [
    {"name": "c3x3", **CASE, "C": 64, "K": 128, "R": 3, "S": 3, "pad": [1, 1], "directions": ["fprop", "dgrad"]},
    {"name": "c1x1", **CASE, "C": 64, "K": 128, "R": 1, "S": 1, "pad": [0, 0]},
    {"name": "stem", **CASE, "C": 3, "K": 64, "R": 7, "S": 7, "pad": [3, 3], "stride": [2, 2]},
    {"name": "wide", **CASE, "C": 37, "K": 64, "R": 7, "S": 7, "pad": [3, 3], "stride": [2, 2]},
]}  # fmt: skip


def score(params: dict[str, Any]) -> float:
    return 1.0 + abs(params.get("tile_n", 128) - 128) / 100 + params.get("cluster_m", 1) * 0.01


@pytest.fixture
def shapes(tmp_path: Path) -> Path:
    f = tmp_path / "conv.json"
    f.write_text(json.dumps(SHAPES))
    return f


def test_tune_a_conv_shapes_file(shapes: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                 monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.setenv("AUTOCUTLASS_CONV_DGRAD", "1")  # the default, set against a caller environment
    p = argparse.ArgumentParser(prog="autocutlass")
    add_tune_parser(p.add_subparsers(dest="command"))
    out_json = tmp_path / "out.json"
    ns = p.parse_args(["tune", "--shapes", str(shapes), "--trials", "4", "--json", str(out_json)])
    store = TuningStore(tmp_path / "t.sqlite")
    families: list[str] = []

    @contextlib.contextmanager
    def make(family: str, _ns: argparse.Namespace) -> Iterator[FakeEvaluator]:
        families.append(family)
        yield FakeEvaluator(score, torch_ms=2.0)

    assert run_tune(ns, make_evaluator=make, store=store) == 0
    rows = {r["name"]: r for r in json.loads(out_json.read_text())}
    assert list(rows) == ["c3x3", "c3x3/dgrad", "c1x1", "stem", "wide"]
    assert rows["c3x3/dgrad"]["family"] == "hopper_conv_dgrad" and rows["c3x3/dgrad"]["trials"] == 4
    assert rows["c3x3"]["family"] == "hopper_conv" and rows["c3x3"]["trials"] == 4 and rows["c3x3"]["vs_torch"] > 1
    assert rows["c1x1"]["family"] == "hopper_gemm" and rows["c1x1"]["trials"] == 4  # pointwise: a GEMM
    assert rows["stem"]["family"] == "hopper_conv_unfold" and rows["stem"]["trials"] == 4  # through its unfolded rows
    assert rows["wide"]["config"] is None and "no kernel family serves it" in rows["wide"]["note"]
    assert rows["c3x3"]["problem"] == "conv2d fprop 2x8x8x64 k128 3x3 pad 1x1 bf16"
    assert set(families) == {"hopper_gemm", "hopper_conv", "hopper_conv_dgrad", "hopper_conv_unfold"}
    by = {c.name: c.problem for c in load_cases(shapes)}
    for name, family in (("c3x3", "hopper_conv"), ("c3x3/dgrad", "hopper_conv_dgrad"), ("c1x1", "hopper_gemm"),
                         ("stem", "hopper_conv_unfold")):  # fmt: skip
        best = store.lookup(by[name], DEVICE.hard_key(get_family(family).source_hash()))
        assert best is not None and best.family == family and best.config == rows[name]["config"]
    out = capsys.readouterr().out
    assert "wide: no kernel family serves it" in out

"""``autocutlass tune --enqueue / --worker / --status / --export-shipped``: a whole campaign through
the command line, with the real kernel registry and an in-process fake lane (no GPU)."""

from __future__ import annotations

import argparse
import json
import threading
from pathlib import Path
from typing import Any

import optuna
import pytest
from _search_fakes import DEVICE, FakeEvaluator
from test_search_cli import SHAPES, hopper_key, hopper_score

from autocutlass.campaign.gpus import Gpu, normalize_uuid, visible_gpus
from autocutlass.cli.common import UsageError
from autocutlass.cli.tune import add_tune_parser, run_tune
from autocutlass.db import TuningStore
from autocutlass.db.locks import FileLocks
from autocutlass.db.transfer import shipped_name


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="autocutlass")
    add_tune_parser(p.add_subparsers(dest="command"))
    return p


class FakeLane:
    def evaluator(self, family: str) -> FakeEvaluator:
        return FakeEvaluator(hopper_score, torch_ms=2.0)

    def reset(self) -> None:
        pass

    def close(self) -> None:
        pass


def tune(argv: list[str], tmp_path: Path, **seams: Any) -> int:
    ns = parser().parse_args(["tune", *argv])
    worker = {"make_lane": lambda gpu: FakeLane(), "gpus": [Gpu("0", "uuid-0")],
              "gpu_locks": FileLocks(tmp_path / "gpu-locks"), **seams}  # fmt: skip
    return run_tune(ns, worker_seams=worker)


@pytest.fixture
def shapes(tmp_path: Path) -> Path:
    f = tmp_path / "shapes.json"
    f.write_text(json.dumps(SHAPES))
    return f


def test_a_campaign_from_the_command_line(shapes: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    db = str(tmp_path / "fleet.sqlite")
    enqueue = ["--shapes", str(shapes), "--enqueue", "--db", db]
    assert tune([*enqueue, "--trials", "3", "--max-retries", "1"], tmp_path) == 0
    out = capsys.readouterr().out
    assert "4 problems enqueued, 0 already queued" in out and "3 trials, 1 retries" in out
    assert "fp8: not enqueued" in out and "K-major" in out  # no family serves it: said why, not queued
    assert "tune --worker --db" in out
    assert tune(enqueue, tmp_path) == 0
    assert "0 problems enqueued, 4 already queued" in capsys.readouterr().out  # idempotent

    assert tune(["--status", "--db", db], tmp_path) == 0
    assert "no worker has started: 4 queued" in capsys.readouterr().out

    codes: list[int] = []
    worker = threading.Thread(target=lambda: codes.append(tune(["--worker", "--db", db], tmp_path)))
    worker.start()  # and watch it work
    assert tune(["--status", "--db", db, "--watch", "0.05"], tmp_path) == 0
    worker.join(60)
    assert codes == [0]
    out, err = capsys.readouterr()
    assert "worker on 0 (uuid-0)" in out and "4 problems" in out
    for name in ("square", "linear", "batched", "tf32"):
        assert f"{name}: tuned" in err
    assert "campaign default: 4/4 problems finished, 0 failed, 0 running, 0 queued" in err
    assert "Fake GPU (cc 9.0, 132 SMs" in out and "done 4 (4 tuned), running 0, queued 0, failed 0" in out
    store = TuningStore(db)
    assert len(store.bests()) == 4 and len(store.trials()) == 4 * 3

    assert tune(["--worker", "--db", db], tmp_path) == 0  # nothing left
    assert "nothing to do" in capsys.readouterr().out

    shipped = tmp_path / "shipped"
    assert tune(["--export-shipped", str(shipped), "--db", db], tmp_path) == 0
    exported = TuningStore(shipped / shipped_name(DEVICE.gpu_name), read_only=True)
    keys = exported.hard_keys()  # our family's, and the vendor key of torch's times (vendor verdicts)
    assert len(exported.bests()) == 4 and [k for k in keys if not k.kernel_hash.startswith("torch-")] == [hopper_key()]
    assert len(keys) == 2 and len(exported.bests(vendor=True)) == 8
    assert shipped_name("NVIDIA H100 80GB HBM3") == "NVIDIA-H100-80GB-HBM3.sqlite"


def test_campaign_usage_errors(shapes: Path, tmp_path: Path) -> None:
    db = str(tmp_path / "t.sqlite")
    with pytest.raises(UsageError, match="--enqueue goes with"):
        tune(["--status", "--enqueue", "--db", db], tmp_path)
    with pytest.raises(UsageError, match="--watch goes with --status"):
        tune(["--shapes", str(shapes), "--watch", "--db", db], tmp_path)
    with pytest.raises(UsageError, match="no campaign 'nope'"):
        tune(["--status", "--campaign", "nope", "--db", db], tmp_path)
    with pytest.raises(UsageError, match="no campaign 'default'"):
        tune(["--worker", "--db", db], tmp_path)
    with pytest.raises(UsageError, match="no GPU to work on"):
        tune(["--worker", "--db", db], tmp_path, gpus=[])


def test_visible_gpus_follow_cuda_visible_devices() -> None:
    smi = "0, GPU-AAAA1111\n1, GPU-bbbb2222\n2, GPU-cccc3333\n"

    def run(cmd: object) -> str:
        return smi

    assert visible_gpus(env={}, run=run) == [Gpu("0", "aaaa1111"), Gpu("1", "bbbb2222"), Gpu("2", "cccc3333")]
    assert visible_gpus(env={"CUDA_VISIBLE_DEVICES": "2,0"}, run=run) == [Gpu("2", "cccc3333"), Gpu("0", "aaaa1111")]
    assert visible_gpus("GPU-bbbb", env={}, run=run) == [Gpu("GPU-bbbb", "bbbb2222")]
    assert visible_gpus(env={"CUDA_VISIBLE_DEVICES": ""}, run=run) == []
    assert visible_gpus(env={}, run=lambda cmd: None, count=lambda: 2) == [Gpu("0", None), Gpu("1", None)]
    assert normalize_uuid("GPU-6A0F1E2D-0000-1111") == normalize_uuid("6a0f1e2d-0000-1111") == "6a0f1e2d00001111"
    assert Gpu("1", None).lock_id().endswith(":1") and Gpu("1", "bbbb2222").lock_id() == "bbbb2222"

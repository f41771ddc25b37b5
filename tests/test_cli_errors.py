"""User errors are one line on stderr, exit code 2, no traceback: bad AUTOCUTLASS_* values,
``tune`` without a CUDA GPU (or on a GPU other than sm_90a), argparse errors."""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _search_fakes import FakeEvaluator

from autocutlass.cli import main
from autocutlass.cli.common import UsageError
from autocutlass.db import TuningStore
from autocutlass.device import gpu_available
from autocutlass.settings import Settings, SettingsError

REPO = Path(__file__).resolve().parents[1]
SHAPES = REPO / "benchmarks" / "shapes.json"


def run_cli(*argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("AUTOCUTLASS_")}
    full.update({"AUTOCUTLASS_SHIPPED_DBS": "off", **env})
    return subprocess.run([sys.executable, "-m", "autocutlass.cli", *argv], cwd=REPO, env=full,
                          check=False, capture_output=True, text=True, timeout=300)  # fmt: skip


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


# ---- settings ----------------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "value", "accepted"), [
    ("AUTOCUTLASS_POLICY", "fast", "one of tune, background, cached, heuristic, off"),
    ("AUTOCUTLASS_TUNE_TRIALS", "abc", "a positive integer"),
    ("AUTOCUTLASS_TUNE_TRIALS", "0", "a positive integer"),
    ("AUTOCUTLASS_TUNE_SECONDS", "1.5", "a positive integer"),
    ("AUTOCUTLASS_STRICT", "2", "1, true, yes or on; 0, false, no or off"),
    ("AUTOCUTLASS_LOG", "loud", "a logging level name"),
    ("AUTOCUTLASS_TUNE_TRIALS_WITH_PRIORS", "0", "a positive integer"),
    ("AUTOCUTLASS_TUNE_POOL_IDLE_S", "-1", "a number of seconds >= 0, 0 for closing them after every tuning"),
])  # fmt: skip
def test_a_bad_setting_names_the_variable_the_value_and_what_is_accepted(name: str, value: str, accepted: str) -> None:
    with pytest.raises(SettingsError) as info:
        Settings.from_env({name: value})
    assert isinstance(info.value, ValueError)  # what callers caught before SettingsError existed
    assert str(info.value).startswith(f"{name}={value!r} is not valid: expected ") and accepted in str(info.value)


def test_good_settings_still_parse() -> None:
    s = Settings.from_env({"AUTOCUTLASS_POLICY": " Cached ", "AUTOCUTLASS_STRICT": "On", "AUTOCUTLASS_LOG": "debug",
                           "AUTOCUTLASS_TUNE_TRIALS": "8", "AUTOCUTLASS_TUNE_SECONDS": ""})  # fmt: skip
    assert (s.policy.value, s.strict, s.log_level, s.tune_trials, s.tune_seconds) == ("cached", True, "DEBUG", 8, 60)
    assert not Settings.from_env({"AUTOCUTLASS_STRICT": "off"}).strict


@pytest.mark.parametrize(("name", "value"), [("AUTOCUTLASS_POLICY", "fast"), ("AUTOCUTLASS_TUNE_TRIALS", "abc")])
def test_a_bad_setting_is_one_line_and_exit_2(name: str, value: str) -> None:
    r = run_cli("info", **{name: value})
    assert r.returncode == 2
    with pytest.raises(SettingsError) as info:
        Settings.from_env({name: value})
    assert one_line(r.stderr) == f"autocutlass: error: {info.value}"


def test_a_bad_setting_in_process(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("AUTOCUTLASS_POLICY", "fast")
    assert main(["db", "show"]) == 2
    assert one_line(capsys.readouterr().err).startswith("autocutlass: error: AUTOCUTLASS_POLICY='fast'")


# ---- tune --------------------------------------------------------------------------------------
@pytest.mark.skipif(gpu_available(), reason="checks the message on a machine without CUDA")
def test_tune_without_a_gpu_is_one_line_and_exit_2(tmp_path: Path) -> None:
    r = run_cli("tune", "--shapes", str(SHAPES), "--only", "square-4k", AUTOCUTLASS_DB=str(tmp_path / "t.sqlite"))
    assert r.returncode == 2
    line = one_line(r.stderr)
    assert line.startswith("autocutlass: error: autocutlass tune needs a CUDA GPU (sm_90a") and "no CUDA GPU" in line
    assert r.stdout == "" and not (tmp_path / "t.sqlite").exists()


class _AmpereEvaluator(FakeEvaluator):
    def device(self) -> dict[str, Any]:
        reply = super().device()
        return {**reply, "device": {**reply["device"], "gpu_name": "NVIDIA A100", "cc_major": 8, "cc_minor": 0}}


def test_tune_on_a_gpu_other_than_sm90_is_a_user_error(tmp_path: Path) -> None:
    from autocutlass.cli.tune import add_tune_parser, run_tune

    p = argparse.ArgumentParser()
    add_tune_parser(p.add_subparsers())
    ns = p.parse_args(["tune", "--shapes", str(SHAPES), "--only", "square-4k"])
    closed: list[bool] = []

    @contextlib.contextmanager
    def make(family: str, _ns: argparse.Namespace) -> Iterator[FakeEvaluator]:
        yield _AmpereEvaluator(lambda params: 1.0)
        closed.append(True)

    store = TuningStore(tmp_path / "t.sqlite")
    with pytest.raises(UsageError, match=r"needs an sm_90a GPU .*NVIDIA A100 is compute capability 8.0"):
        run_tune(ns, make_evaluator=make, store=store)
    assert closed == [True] and store.hard_keys() == []


# ---- argparse ----------------------------------------------------------------------------------
def test_a_parse_error_is_one_line_and_exit_2() -> None:
    r = run_cli("kernels", "compile", "--layout", "xx")
    assert r.returncode == 2
    line = one_line(r.stderr)
    assert line.startswith("autocutlass kernels compile: error: argument --layout: invalid choice: 'xx'")
    assert line.endswith("(see autocutlass kernels compile --help)")

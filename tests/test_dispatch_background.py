"""The ``background`` policy: a miss is served at once by the best config available while its
problem is tuned on the background tuner's thread; the winner serves from the next call on (the
stand-in's memo entry is dropped when the tuning ends). Failures are logged and never reach a
call; nothing tunes while tracing or capturing; the tuner stops at exit (a real interpreter exit,
worker processes included) and is forgotten in a forked child."""

from __future__ import annotations

import dataclasses
import logging
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

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
)
from _dispatch_fakes import settings as fake_settings

from autocutlass.background import BackgroundTuner
from autocutlass.db import TuningStore
from autocutlass.dispatch import BACKGROUND_NOTE, Dispatcher, Layers, _real_layers
from autocutlass.settings import Policy

BF = torch.bfloat16
TESTS = Path(__file__).resolve().parent


def t(*shape: int) -> torch.Tensor:
    return torch.randn(*shape).to(BF)


class GatedTuner(FakeTuner):
    """A tuner that waits for ``gate`` (or the stop event) before answering."""

    def __init__(self, result: dict[str, Any] | None = None, error: Exception | None = None) -> None:
        super().__init__(result)
        self.gate = threading.Event()
        self.started = threading.Event()
        self.error = error
        self.threads: list[str] = []

    def __call__(self, problem, family, sink, hard_key, device_index, settings, *, seeds=(), stop=None):
        self.threads.append(threading.current_thread().name)
        self.started.set()
        while not self.gate.wait(0.01):
            if stop is not None and stop.is_set():
                return None
        if self.error is not None:
            raise self.error
        return super().__call__(problem, family, sink, hard_key, device_index, settings, seeds=seeds, stop=stop)


@pytest.fixture
def tuner() -> Any:
    bg = BackgroundTuner(name="test-background-tuner")
    yield bg
    assert bg.shutdown(10)


def rig(bg: BackgroundTuner, tuner: FakeTuner, store: FakeStore | None = None):
    r = make_rig(Policy.BACKGROUND, tuner=tuner, store=store)
    r.dispatcher._background = bg
    return r


def test_a_miss_is_served_at_once_and_the_winner_from_the_next_call_on(tuner: BackgroundTuner) -> None:
    gated = GatedTuner()
    r = rig(tuner, gated, FakeStore(fallback=Record("fake", {"tile": 64}, "nearest")))
    a, b = t(32, 64), t(64, 48)
    t0 = time.monotonic()
    torch.testing.assert_close(calls(r.dispatcher).matmul(a, b).float(), (a @ b).float(), atol=5e-2, rtol=2e-2)
    assert time.monotonic() - t0 < 5
    assert r.family.launches == [] and r.family.compiled == []  # no stand-in kernel loaded: torch, no compile
    assert gated.started.wait(10) and gated.threads == ["test-background-tuner"]
    calls(r.dispatcher).matmul(a, b)  # still tuning: the stand-in is memoised
    s = r.dispatcher.stats()
    assert (s.memo_misses, s.memo_hits, s.background_tunes, s.tunes, s.torch_standins) == (1, 1, 1, 1, 1)
    assert s.fallbacks == 0 and r.family.launches == []

    gated.gate.set()
    assert r.dispatcher.wait_background(10)
    calls(r.dispatcher).matmul(a, b)  # the stand-in's entry was dropped: this call finds the winner
    calls(r.dispatcher).matmul(a, b)
    s = r.dispatcher.stats()
    assert r.family.launches[-1].config == FakeConfig(256) and (s.memo_misses, s.memo_hits) == (2, 2)
    assert len(gated.calls) == 1 and s.background_tunes == 1  # tuned once
    assert gated.seeds == [({"tile": 64},)]  # the nearest record seeded the tuning


def test_a_loaded_stand_in_kernel_serves_instead_of_torch(tuner: BackgroundTuner) -> None:
    from autocutlass.dispatch import policy

    gated = GatedTuner()
    r = rig(tuner, gated, FakeStore(fallback=Record("fake", {"tile": 64}, "nearest")))
    w = t(96, 64)
    with policy("cached"):  # another M of the same kernel class: the tile-64 kernel is loaded now
        calls(r.dispatcher).linear(t(40, 64), w)
    x = t(1000, 64)
    torch.testing.assert_close(calls(r.dispatcher).linear(x, w).float(), (x @ w.t()).float(), atol=5e-2, rtol=2e-2)
    assert len(r.family.launches) == 2 and r.family.launches[-1].config == FakeConfig(64)  # the loaded kernel ran
    assert r.dispatcher.stats().torch_standins == 0 and len(r.family.compiled) == 1
    gated.gate.set()
    assert r.dispatcher.wait_background(10)
    calls(r.dispatcher).linear(x, w)
    assert r.family.launches[-1].config == FakeConfig(256)


def test_a_problem_is_queued_once_and_other_problems_wait_their_turn(tuner: BackgroundTuner) -> None:
    gated = GatedTuner()
    r = rig(tuner, gated)
    w = t(96, 64)
    for m in (32, 32, 64, 64, 640):  # three problems, two of them missed twice
        calls(r.dispatcher).linear(t(m, 64), w)
    assert gated.started.wait(10)
    assert r.dispatcher.stats().background_tunes == 3 and tuner.pending == 3
    assert len(gated.calls) <= 1  # one at a time
    gated.gate.set()
    assert r.dispatcher.wait_background(10)
    assert sorted(p.m for p in gated.calls) == [32, 64, 640]


def test_the_winner_is_found_in_the_database_by_the_next_call(tuner: BackgroundTuner, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    class Recording(GatedTuner):
        def __call__(self, problem, family, sink, hard_key, device_index, settings, **kw):
            best = super().__call__(problem, family, sink, hard_key, device_index, settings, **kw)
            trial = sink.record_trial(problem, hard_key, family.name, best, "ok", median_ms=0.01, tflops=1.0)
            sink.record_trial(problem, hard_key, family.name, {"tile": 64}, "wrong_result", "off by one")
            sink.record_best(problem, hard_key, family.name, best, median_ms=0.01, tflops=100.0, trial_id=trial)
            return best

    gated = Recording()
    gated.gate.set()
    fam = FakeFamily()
    real = _real_layers()
    layers = Layers(get_family=lambda n: fam, families_for=lambda p: [fam], open_store=real.open_store, tune=gated)
    db = tmp_path / "user.sqlite"
    s = dataclasses.replace(fake_settings(tmp_path, policy=Policy.BACKGROUND), db_url=str(db))
    d = Dispatcher(s, layers=layers, device_info=lambda i: device_info(), on_gpu=lambda t: True, background=tuner)
    a, b = t(32, 64), t(64, 48)
    calls(d).matmul(a, b)
    assert fam.launches == [] and d.stats().torch_standins == 1  # nothing stored, nothing loaded: torch
    assert d.wait_background(10)
    calls(d).matmul(a, b)
    assert fam.launches[-1].config == FakeConfig(256) and d.stats().db_hits == 1  # the stored winner
    trials = {tr.state.value: tr.reason for tr in TuningStore(db).trials(hard_key=HARD_KEY)}
    assert trials == {"ok": BACKGROUND_NOTE, "wrong_result": "off by one"}  # marked, failures keep their reason
    from autocutlass.cli import main

    monkeypatch.setenv("AUTOCUTLASS_SHIPPED_DBS", "off")
    monkeypatch.setattr("autocutlass.cli.db._here", lambda: None)
    assert main(["db", "show", "--db", str(db)]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("gemm ")]
    assert len(rows) == 1 and rows[0].endswith("user, tuned in the background")


def test_a_failing_background_tuning_is_logged_and_calls_go_on(tuner: BackgroundTuner,
                                                                caplog: pytest.LogCaptureFixture) -> None:  # fmt: skip
    gated = GatedTuner(error=RuntimeError("the tuner blew up"))
    gated.gate.set()
    r = rig(tuner, gated, FakeStore(sibling=Record("fake", {"tile": 64}, "exact", sibling=True)))
    a, b = t(32, 64), t(64, 48)
    with caplog.at_level(logging.WARNING, logger="autocutlass"):
        calls(r.dispatcher).matmul(a, b)
        assert r.dispatcher.wait_background(10)
        for _ in range(3):
            torch.testing.assert_close(calls(r.dispatcher).matmul(a, b).float(), (a @ b).float(), atol=5e-2, rtol=2e-2)
    assert r.family.launches[-1].config == FakeConfig(64)  # the sibling's record stands in for good
    assert len(gated.calls) == 0 and len(gated.threads) == 1  # tried once, not again and again
    assert sum("the tuner blew up" in rec.getMessage() for rec in caplog.records) == 1
    s = r.dispatcher.stats()
    assert (s.memo_misses, s.torch_standins, s.sibling_hits) == (2, 1, 1)  # torch while tuning, then the sibling


def test_nothing_is_queued_while_capturing_or_tracing(tuner: BackgroundTuner, monkeypatch: pytest.MonkeyPatch) -> None:
    from autocutlass import dispatch

    gated = GatedTuner()
    gated.gate.set()
    r = rig(tuner, gated)
    a, b = t(32, 64), t(64, 48)
    monkeypatch.setattr(dispatch, "_capturing", lambda index: True)
    calls(r.dispatcher).matmul(a, b)
    assert r.dispatcher.stats().background_tunes == 0 and tuner.pending == 0 and len(r.misses()) == 1
    monkeypatch.setattr(dispatch, "_capturing", lambda index: False)
    monkeypatch.setattr(dispatch, "_tracing", lambda: True)
    calls(r.dispatcher).matmul(a, b)
    assert r.dispatcher.stats().background_tunes == 0 and r.dispatcher.stats().memo_misses == 2  # not memoised
    monkeypatch.setattr(dispatch, "_tracing", lambda: False)
    calls(r.dispatcher).matmul(a, b)
    assert r.dispatcher.stats().background_tunes == 1 and r.dispatcher.wait_background(10)


def test_another_process_tuning_the_problem_is_looked_up_again_later(tuner: BackgroundTuner,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    from test_dispatch_policies import ClaimingStore

    from autocutlass import dispatch

    store = ClaimingStore(held=True)
    r = rig(tuner, FakeTuner(), store)
    a, b = t(32, 64), t(64, 48)
    calls(r.dispatcher).matmul(a, b)
    assert r.dispatcher.wait_background(10) and r.tuner.calls == []  # deferred: the other process tunes it
    calls(r.dispatcher).matmul(a, b)  # a stand-in memoised for RECHECK_S, not queued again at once
    calls(r.dispatcher).matmul(a, b)
    assert r.dispatcher.stats().background_tunes == 1 and r.dispatcher.stats().memo_misses == 2
    store.records[r.family.launches[-1].problem.key()] = Record("fake", {"tile": 64}, "exact")
    monkeypatch.setattr(dispatch, "RECHECK_S", 0.0)
    r.dispatcher.clear()
    for _ in range(3):
        calls(r.dispatcher).matmul(a, b)
    assert r.family.launches[-1].config == FakeConfig(64)


def test_shutdown_stops_the_running_tuning_and_refuses_new_ones(tuner: BackgroundTuner) -> None:
    gated = GatedTuner()  # never released: only the stop event ends it
    r = rig(tuner, gated)
    calls(r.dispatcher).matmul(t(32, 64), t(64, 48))
    assert gated.started.wait(10)
    t0 = time.monotonic()
    assert tuner.shutdown(10) and time.monotonic() - t0 < 5
    calls(r.dispatcher).matmul(t(48, 64), t(64, 48))  # queued nowhere: served by the default for good
    assert r.family.launches[-1].config == FakeConfig(128) and r.dispatcher.stats().background_tunes == 1


def test_a_forked_child_forgets_the_parents_background_tunings(tuner: BackgroundTuner) -> None:
    gated = GatedTuner()
    r = rig(tuner, gated)
    a, b = t(32, 64), t(64, 48)
    calls(r.dispatcher).matmul(a, b)
    assert gated.started.wait(10) and len(r.dispatcher._memo) == 1
    pid = os.fork()
    if pid == 0:  # the child: no thread of the parent's, no waiting stand-in, a thread of its own on demand
        code = 1
        try:
            ok = [r.dispatcher._memo == {}, r.dispatcher._bg_jobs == {}, tuner._thread is None, tuner.pending == 0]
            ran = threading.Event()
            tuner.submit("child job", lambda stop: ran.set(), lambda result, error: None)
            ok.append(ran.wait(10) and tuner.wait_idle(10))
            code = 0 if all(ok) else 10 + ok.index(False)
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert len(r.dispatcher._memo) == 1 and tuner.pending == 1  # the parent's state is untouched
    gated.gate.set()
    assert r.dispatcher.wait_background(10)


EXIT_SCRIPT = """
import os, sys, threading, time
sys.path.insert(0, {tests!r})
import torch
import _search_fakes as sf
from _dispatch_fakes import calls, make_rig
from autocutlass.ops.gemm.problem import GemmProblem
from autocutlass.search.tuner import tune_problem
from autocutlass.search.workers import CandidatePipeline
from autocutlass.settings import Policy

def tune(problem, family, sink, hard_key, device_index, s, *, seeds=(), stop=None):
    fam = sf.FakeFamily(modes=("hang_compile",), seeds=[sf.FakeConfig(16, 1, "hang_compile")])
    with CandidatePipeline("fake", compile_handler="_search_fakes:make_fake_compile_handler",
                           bench_handler="_search_fakes:make_fake_bench_handler", compile_workers=2,
                           cancel=stop) as pipe:
        pids = [w.pid for w in (*pipe._compilers, pipe._bench)]
        with open({pids!r}, "w") as f:
            f.write(" ".join(map(str, pids)))
        result = tune_problem(GemmProblem(m=64, n=64, k=64), fam, sf.MemorySink(), trials=8, evaluator=pipe,
                              hard_key=sf.HARD_KEY, stop=stop)
        if stop.is_set():
            pipe.kill()
    with open({done!r}, "w") as f:
        f.write(result.stop_reason)
    return None

r = make_rig(Policy.BACKGROUND, tuner=tune)
t0 = time.monotonic()
calls(r.dispatcher).matmul(torch.randn(32, 64).to(torch.bfloat16), torch.randn(64, 48).to(torch.bfloat16))
print("served in", round(time.monotonic() - t0, 3), flush=True)
while not os.path.exists({pids!r}):
    time.sleep(0.05)
time.sleep(2.0)  # the compile children are in the middle of their (hanging) requests
sys.exit(0)
"""


def test_interpreter_exit_stops_the_tuning_and_its_worker_processes(tmp_path: Path) -> None:
    pids_file, done_file = tmp_path / "pids", tmp_path / "done"
    script = EXIT_SCRIPT.format(tests=str(TESTS), pids=str(pids_file), done=str(done_file))
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True, timeout=120,
                          check=False)
    elapsed = time.monotonic() - t0
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "served in" in proc.stdout
    assert done_file.read_text() == "stopped"  # the tuning saw the stop event and returned
    pids = [int(p) for p in pids_file.read_text().split()]
    assert len(pids) == 3
    for pid in pids:  # killed by the stopped tuning, not left to finish their 60 s requests
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert elapsed < 60, elapsed


def test_a_module_remembering_during_the_swap_gets_the_winner(tuner: BackgroundTuner,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """The epoch moves after the stand-in is dropped, never before: a module's hit cache
    (``nn.hits``) filled on another thread in between would otherwise keep the stand-in for good.
    The other thread's call is made exactly there (inside the memo's pop)."""
    from autocutlass import api
    from autocutlass.nn import Linear

    gated = GatedTuner({"tile": 256})
    r = rig(tuner, gated)
    monkeypatch.setattr(api, "_default", r.dispatcher)
    lin = Linear.from_linear(torch.nn.Linear(64, 96).to(BF))
    x = t(32, 64)

    class Memo(dict):  # type: ignore[type-arg]
        hooked = False

        def pop(self, *a: Any) -> Any:
            if not Memo.hooked:
                Memo.hooked = True
                th = threading.Thread(target=lambda: (torch.set_grad_enabled(False), lin(x)))
                th.start()
                th.join()
            return super().pop(*a)

    r.dispatcher._memo = Memo(r.dispatcher._memo)
    with torch.no_grad():
        lin(x)  # the miss: the torch stand-in while tuning
        lin(x)  # remembered by the module
        gated.gate.set()
        assert r.dispatcher.wait_background(10) and Memo.hooked
        before = len(r.family.launches)
        for _ in range(3):
            lin(x)
    assert len(r.family.launches) == before + 3 and r.family.launches[-1].config.tile == 256

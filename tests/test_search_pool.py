"""``search.pool.TuningPool``: on-line tuning's worker processes outlive one tuning (same children
for the next problem), survive a crashed or killed child, close when idle, are killed at
interpreter exit without recording anything spurious, and are forgotten in a forked child. The
handlers are the fakes of ``_search_fakes`` (no GPU, no DSL)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _search_fakes import HARD_KEY, FakeFamily, MemorySink

from autocutlass.ops.gemm.problem import GemmProblem
from autocutlass.search import pool as pool_mod
from autocutlass.search.pool import PoolClosed, TuningPool, visible_device
from autocutlass.search.tuner import tune_problem

TESTS = Path(__file__).resolve().parent
FAKES = {"compile_handler": "_search_fakes:make_fake_compile_handler",
         "bench_handler": "_search_fakes:make_fake_bench_handler", "start_timeout_s": 60}  # fmt: skip
P1, P2 = GemmProblem(m=128, n=128, k=128), GemmProblem(m=512, n=256, k=128)


def fake_pool(**kw: object) -> TuningPool:
    return TuningPool(**{"compile_workers": 2, "idle_s": 60, **FAKES, **kw})  # type: ignore[arg-type]


@pytest.fixture
def pool() -> Iterator[TuningPool]:
    p = fake_pool()
    yield p
    p.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def tune(pool: TuningPool, problem: GemmProblem, family: FakeFamily, sink: MemorySink, **kw: object):
    with pool.evaluator("fake", 0) as ev:
        return tune_problem(problem, family, sink, evaluator=ev, hard_key=HARD_KEY, **kw)  # type: ignore[arg-type]


def test_the_children_outlive_one_tuning(pool: TuningPool) -> None:
    fam = FakeFamily(tiles=(16, 32, 64), stages=(1,), modes=("a", "b"))
    sink = MemorySink()
    r1 = tune(pool, P1, fam, sink, exhaustive=True)
    pids = pool.pids()
    assert len(pids) == 3 and r1.best is not None and r1.best.config["tile"] == 16
    r2 = tune(pool, P2, fam, sink, exhaustive=True)
    assert pool.pids() == pids and r2.evaluated == r1.evaluated == 7 and pool.tunings == 2  # no new process
    assert r2.best is not None and r2.best.config["tile"] == 16


def test_a_crashed_or_killed_child_is_started_again(pool: TuningPool) -> None:
    fam = FakeFamily(tiles=(16, 32), stages=(1,), modes=("a", "crash"), seeds=[])
    sink = MemorySink()
    r = tune(pool, P1, fam, sink, exhaustive=True)
    assert r.states == {"ok": 2, "crash": 2} and r.best is not None
    for pid in pool.pids():  # every child killed from outside between two tunings
        os.kill(pid, signal.SIGKILL)
    time.sleep(0.2)
    r = tune(pool, P2, FakeFamily(tiles=(16, 32), stages=(1,), modes=("a",), seeds=[]), sink, exhaustive=True)
    assert r.states == {"ok": 2} and len(pool.pids()) == 3


def test_a_stopped_tuning_leaves_nothing_in_flight_for_the_next(pool: TuningPool) -> None:
    stop = threading.Event()
    fam = FakeFamily(tiles=(16, 32, 64, 128), stages=(1, 2), modes=("hang",), smem=10_000, seeds=[])
    threading.Timer(1.5, stop.set).start()
    t0 = time.monotonic()
    with pool.evaluator("fake", 0, cancel=stop) as ev:
        r = tune_problem(P1, fam, MemorySink(), exhaustive=True, evaluator=ev, hard_key=HARD_KEY, stop=stop)
    assert r.stop_reason == "stopped" and time.monotonic() - t0 < 20
    r = tune(pool, P2, FakeFamily(tiles=(16,), stages=(1,), modes=("a",), seeds=[]), MemorySink(), exhaustive=True)
    assert r.states == {"ok": 1}  # nothing of the hanging tuning came back into this one


def test_idle_children_are_closed_and_started_again(tmp_path: Path) -> None:
    pool = fake_pool(idle_s=0.3)
    try:
        fam = FakeFamily(tiles=(16,), stages=(1,), modes=("a",), seeds=[])
        tune(pool, P1, fam, MemorySink(), exhaustive=True)
        first = pool.pids()
        deadline = time.monotonic() + 20
        while (pool.pids() or pool.idle_closes == 0) and time.monotonic() < deadline:  # counted once all are down
            time.sleep(0.1)
        assert pool.pids() == [] and pool.idle_closes == 1 and not any(_alive(p) for p in first)
        r = tune(pool, P2, fam, MemorySink(), exhaustive=True)
        assert r.states == {"ok": 1} and len(pool.pids()) == 3
    finally:
        pool.close()
    zero = fake_pool(idle_s=0)  # 0: closed after every tuning, as a pipeline per tuning was
    try:
        tune(zero, P1, FakeFamily(tiles=(16,), stages=(1,), modes=("a",), seeds=[]), MemorySink(), exhaustive=True)
        assert zero.pids() == []
    finally:
        zero.close()


def test_a_closed_pool_refuses_tunings(pool: TuningPool) -> None:
    pool.close()
    with pytest.raises(PoolClosed), pool.evaluator("fake", 0):
        pass


def test_a_forked_child_gets_a_pool_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    parent = fake_pool()
    monkeypatch.setattr(pool_mod, "_SHARED", parent)
    try:
        tune(parent, P1, FakeFamily(tiles=(16,), stages=(1,), modes=("a",), seeds=[]), MemorySink(), exhaustive=True)
        pids = parent.pids()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                mine = pool_mod.shared()
                code = 0 if (mine is not parent and parent.pids() == [] and not mine.closed) else 2
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert parent.pids() == pids and all(_alive(p) for p in pids)  # untouched by the fork
        r = tune(parent, P2, FakeFamily(tiles=(16,), stages=(1,), modes=("a",), seeds=[]), MemorySink(), exhaustive=True)
        assert r.states == {"ok": 1} and parent.pids() == pids
    finally:
        parent.close()


def test_visible_device_follows_cuda_visible_devices() -> None:
    assert visible_device(1, {}) == "1"
    assert visible_device(1, {"CUDA_VISIBLE_DEVICES": "3, 5"}) == "5"
    assert visible_device(0, {"CUDA_VISIBLE_DEVICES": "GPU-abc"}) == "GPU-abc"


EXIT_SCRIPT = """
import json, os, sys, threading, time
sys.path.insert(0, {tests!r})
from _search_fakes import HARD_KEY, FakeFamily, MemorySink
from autocutlass.ops.gemm.problem import GemmProblem
from autocutlass.search import pool as pool_mod
from autocutlass.search.tuner import tune_problem

class FileSink(MemorySink):
    def record_trial(self, *args, **kw):
        with open({trials!r}, "a") as f:
            f.write(str(args[4]) + "\\n")
        return super().record_trial(*args, **kw)

pool_mod._SHARED = pool_mod.TuningPool(compile_workers=2, idle_s=60, start_timeout_s=60,
                                       compile_handler="_search_fakes:make_fake_compile_handler",
                                       bench_handler="_search_fakes:make_fake_bench_handler")
fam = FakeFamily(tiles=(16, 32), stages=(1,), modes=("hang",), seeds=[])

def work():
    with pool_mod.shared().evaluator("fake", 0) as ev:
        tune_problem(GemmProblem(m=64, n=64, k=64), fam, FileSink(), exhaustive=True, evaluator=ev,
                     hard_key=HARD_KEY)

threading.Thread(target=work, daemon=True).start()
deadline = time.monotonic() + 60
while len(pool_mod.shared().pids()) < 3 and time.monotonic() < deadline:
    time.sleep(0.05)
time.sleep(2.0)  # the benchmark child is in the middle of a hanging candidate
with open({pids!r}, "w") as f:
    f.write(" ".join(map(str, pool_mod.shared().pids())))
sys.exit(0)
"""


def test_interpreter_exit_kills_the_pool_and_records_nothing_spurious(tmp_path: Path) -> None:
    pids_file, trials_file = tmp_path / "pids", tmp_path / "trials"
    script = EXIT_SCRIPT.format(tests=str(TESTS), pids=str(pids_file), trials=str(trials_file))
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True, timeout=120,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert time.monotonic() - t0 < 60
    pids = [int(p) for p in pids_file.read_text().split()]
    assert len(pids) == 3
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(p) for p in pids)
    assert not trials_file.exists() or trials_file.read_text() == ""  # the killed children's replies were not trials

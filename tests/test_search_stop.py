"""Stopping a tuning (interpreter exit, a background tuning cancelled): ``tune_problem(stop=...)``
records nothing after the event and no best; a blocking worker call ends when cancelled; a forked
child forgets the parent's worker processes without touching them."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from _search_fakes import HARD_KEY, FakeEvaluator, FakeFamily, MemorySink

from autocutlass.ops.gemm.problem import GemmProblem
from autocutlass.search.tuner import tune_problem
from autocutlass.search.workers import IsolatedWorker

P = GemmProblem(m=128, n=128, k=128)
ECHO = "_search_fakes:make_echo_handler"


def test_a_stopped_tuning_records_nothing_more_and_no_best() -> None:
    stop = threading.Event()
    seen: list[dict[str, Any]] = []

    def score(params: dict[str, Any]) -> float:
        seen.append(params)
        if len(seen) == 3:
            stop.set()  # e.g. the interpreter exits while the third candidate is timed
        return 1.0 + params["tile"] / 1000

    sink = MemorySink()
    r = tune_problem(P, FakeFamily(), sink, trials=10, evaluator=FakeEvaluator(score, capacity=1),
                     hard_key=HARD_KEY, stop=stop)  # fmt: skip
    assert r.stop_reason == "stopped" and r.best is None and r.evaluated == 2
    assert len(sink.records) == 2 and sink.best == {}  # the outcome that came after the stop is dropped

    already = threading.Event()
    already.set()
    ev = FakeEvaluator(score)
    r = tune_problem(P, FakeFamily(), MemorySink(), trials=10, evaluator=ev, hard_key=HARD_KEY, stop=already)
    assert r.stop_reason == "stopped" and ev.submitted == []


def test_a_cancelled_call_kills_the_child_and_returns() -> None:
    w = IsolatedWorker(ECHO, name="echo")
    try:
        assert w.call({"x": 1}, timeout_s=30).kind == "result"
        pid = w.pid
        cancel = threading.Event()
        threading.Timer(0.5, cancel.set).start()
        t0 = time.monotonic()
        reply = w.call({"action": "sleep", "seconds": 60}, timeout_s=60, cancel=cancel)
        assert reply.kind == "died" and "cancelled" in (reply.reason or "") and time.monotonic() - t0 < 5
        assert pid is not None and not _alive(pid)
        assert w.call({"x": 2}, timeout_s=30, cancel=threading.Event()).kind == "result"  # restarts
        assert w.call({"x": 3}, timeout_s=30, cancel=cancel).kind == "died"  # already cancelled: not sent
    finally:
        w.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_forked_child_forgets_the_parents_worker_processes() -> None:
    w = IsolatedWorker(ECHO, name="echo")
    try:
        first = w.call({"x": 1}, timeout_s=30).result["pid"]  # type: ignore[index]
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = 0 if (w.pid is None and not w.alive and w.waitable() is None) else 2
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        again = w.call({"x": 2}, timeout_s=30)  # the parent's child was not touched by the fork's
        assert again.kind == "result" and again.result["pid"] == first  # type: ignore[index]
    finally:
        w.close()

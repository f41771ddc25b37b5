"""A campaign on a fleet of fake workers: 4 worker processes share one database (SQLite, and
PostgreSQL when AUTOCUTLASS_TEST_PG_URL is set) and a queue of 40 problems; one is killed with
SIGKILL in the middle of a problem. Every problem ends done exactly once, nothing is lost, the dead
worker's problem is tuned again from where it stopped (no finished trial redone, the trial budget
kept), and a worker whose problems outlast the grace period keeps them by its heartbeats.

The workers use ``campaign.run_worker`` with in-process fake lanes (``_search_fakes``: no GPU, no
child processes): each outcome takes ``DELAY_S`` (``SLOW_S`` for the worker to kill, ``LONG_S``
for the one whose problems take longer than the grace period). Also: a problem whose tuning
raises (a worker child's handler bug, or one of ours) is failed with the error, not retried."""

from __future__ import annotations

import collections
import multiprocessing
import os
import signal
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import optuna
import pytest
from _search_fakes import HARD_KEY, FakeEvaluator, FakeFamily
from optuna.trial import TrialState
from test_queue_store import PG_ENV, reset_pg

from autocutlass.campaign.gpus import Gpu
from autocutlass.campaign.worker import WorkerOptions, run_worker
from autocutlass.db import TuningStore
from autocutlass.db.locks import FileLocks
from autocutlass.db.queue import Budget, TuningQueue
from autocutlass.ops.gemm.problem import GemmProblem
from autocutlass.search.workers import WorkerError

WORKERS = 4
PROBLEMS = 40
TRIALS = 6
DELAY_S = 0.01
SLOW_S = 0.5  # worker 0, killed in the middle of a problem (after 2 of 6 trials: 2 s before its winner is written)
LONG_S = 0.8  # worker 1: a problem takes ~6 s, longer than the grace period
HEARTBEAT_S, GRACE_S = 1, 3

FAMILY = FakeFamily(smem=10_000)


def score(params: dict[str, Any]) -> float:
    return 1.0 + abs(params["tile"] - 64) / 100 + params["stages"] * 0.01 + (params["mode"] == "b") * 0.001


class DelayedEvaluator(FakeEvaluator):
    def __init__(self, delay_s: float) -> None:
        super().__init__(score)
        self.delay_s = delay_s

    def poll(self, timeout_s: float) -> list[Any]:
        time.sleep(self.delay_s)
        return super().poll(timeout_s)


class FakeLane:
    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s

    def evaluator(self, family: str) -> DelayedEvaluator:
        return DelayedEvaluator(self.delay_s)

    def reset(self) -> None:
        pass

    def close(self) -> None:
        pass


class FakeFamilies:
    def hashes(self) -> dict[str, str]:
        return {"fake": "fake"}

    def default_name(self) -> str:
        return "fake"

    def for_problem(self, problem: Any) -> FakeFamily:
        return FAMILY


def campaign_problems() -> list[tuple[str, GemmProblem]]:
    return [(f"p{i:02d}", GemmProblem(m=16 * (i + 1), n=512, k=256)) for i in range(PROBLEMS)]


def _work(url: str, index: int, delay_s: float, gpu_lock_dir: str, results: Any) -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        queue = TuningQueue(url, heartbeat_s=HEARTBEAT_S, grace_s=GRACE_S)
        reports = run_worker(queue, TuningStore(url), [Gpu(str(index), f"fake-gpu-{index}")],
                             make_lane=lambda gpu: FakeLane(delay_s), families=FakeFamilies(),
                             options=WorkerOptions("fleet", idle_poll_s=0.3), gpu_locks=FileLocks(gpu_lock_dir),
                             say=lambda text: None)  # fmt: skip
        results.put((index, "ok", [(r.name, r.result, r.attempt) for r in reports]))
    except BaseException:  # noqa: BLE001 - the test reports whatever escaped
        results.put((index, traceback.format_exc(), []))


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield str(tmp_path / "fleet.sqlite")
        return
    pg = os.environ.get(PG_ENV)
    if not pg:
        pytest.skip(f"{PG_ENV} is not set")
    reset_pg(pg)
    yield pg
    reset_pg(pg)


def test_a_killed_worker_loses_nothing(url: str, tmp_path: Path) -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    queue = TuningQueue(url, heartbeat_s=HEARTBEAT_S, grace_s=GRACE_S)
    store = TuningStore(url)
    assert queue.enqueue("fleet", campaign_problems(), budget=Budget(trials=TRIALS), max_retries=2).added == PROBLEMS
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    delays = [SLOW_S, LONG_S] + [DELAY_S] * (WORKERS - 2)
    procs = [ctx.Process(target=_work, args=(url, i, delays[i], str(tmp_path / "gpu-locks"), results))
             for i in range(WORKERS)]  # fmt: skip
    t0 = time.monotonic()
    for p in procs:
        p.start()
    try:
        killed = _kill_worker_mid_problem(queue, store, procs[0], deadline=time.monotonic() + 90)
        reports = {}
        for _ in range(WORKERS - 1):
            index, status, done = results.get(timeout=120)
            reports[index] = (status, done)
        for p in procs:
            p.join(30)
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()
    wall = time.monotonic() - t0
    assert {i: s for i, (s, _) in reports.items()} == {i: "ok" for i in range(1, WORKERS)}, reports
    assert procs[0].exitcode == -signal.SIGKILL and [p.exitcode for p in procs[1:]] == [0] * (WORKERS - 1)

    # the queue: one item per problem done, exactly once; only the killed one was tried twice
    storage = queue._storage()
    (work,) = [s for s in storage.get_all_studies() if s.study_name.startswith("autocutlass/fleet/")]
    trials = storage.get_all_trials(storage.get_study_id_from_name(work.study_name))
    per_problem: dict[str, list[TrialState]] = collections.defaultdict(list)
    for t in trials:
        per_problem[t.user_attrs["name"]].append(t.state)
    assert len(per_problem) == PROBLEMS
    assert all(states.count(TrialState.COMPLETE) == 1 for states in per_problem.values())
    retried = {name for name, states in per_problem.items() if len(states) > 1}
    assert retried == {killed}, per_problem
    assert sorted(per_problem[killed]) == sorted([TrialState.FAIL, TrialState.COMPLETE])
    st = queue.status("fleet")
    assert st is not None and st.active == 0
    assert {i.state for i in st.toolchains[0].items} == {"done"}
    assert {(i.outcome or {}).get("result") for i in st.toolchains[0].items} == {"tuned"}

    # the survivors re-ran the killed problem, as its second attempt
    done = [d for _, ds in reports.values() for d in ds]
    assert (killed, "tuned", 2) in done
    assert len({name for name, _, _ in done}) == len(done)  # no problem twice among the survivors
    assert reports[1][1], "the worker with long problems finished some (its heartbeats kept them)"

    # the store: one best per problem, each problem's trials exactly the budget, none redone
    bests = store.bests()
    assert len(bests) == PROBLEMS and all(b.hard_key == HARD_KEY for b in bests)
    for name, problem in campaign_problems():
        keys = [t.config_key for t in store.trials(problem, HARD_KEY)]
        assert len(keys) == TRIALS and len(set(keys)) == TRIALS, (name, keys)
    print(f"\n{url.split('+')[0].split('/')[-1]}: {PROBLEMS} problems, {WORKERS} workers (one killed), "
          f"{wall:.1f} s wall")  # the fake campaign's wall time, for the report (pytest -s)


def _kill_worker_mid_problem(queue: TuningQueue, store: TuningStore, proc: Any, *, deadline: float) -> str:
    """SIGKILL ``proc`` once a problem it runs has at least two trials recorded; that problem's name."""
    while time.monotonic() < deadline:
        st = queue.status("fleet")
        for tc in st.toolchains if st else ():
            for item in tc.items:
                if item.state == "running" and (item.claimant or {}).get("pid") == proc.pid:
                    problem = dict(campaign_problems())[item.name]
                    if len(store.trials(problem, HARD_KEY)) >= 2:
                        os.kill(proc.pid, signal.SIGKILL)
                        return item.name
        time.sleep(0.05)
    raise AssertionError("worker 0 never got into a problem")


class FaultyLane(FakeLane):
    """Its evaluator raises ``error`` on problems with m == ``m``."""

    def __init__(self, m: int, error: BaseException) -> None:
        super().__init__(0.0)
        self.m, self.error, self.resets = m, error, 0

    def evaluator(self, family: str) -> DelayedEvaluator:
        lane = self

        class Faulty(DelayedEvaluator):
            def submit(self, problem: Any, key: str, params: dict[str, Any]) -> None:
                if problem.m == lane.m:
                    raise lane.error
                super().submit(problem, key, params)

        return Faulty(0.0)

    def reset(self) -> None:
        self.resets += 1


@pytest.mark.parametrize("error", [WorkerError("handler raised"), ZeroDivisionError("a bug")], ids=str)
def test_a_failing_problem_is_failed_not_retried(tmp_path: Path, error: BaseException) -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    url = str(tmp_path / "t.sqlite")
    queue = TuningQueue(url, heartbeat_s=HEARTBEAT_S, grace_s=GRACE_S)
    queue.enqueue("fleet", campaign_problems()[:4], budget=Budget(trials=2))
    lane = FaultyLane(32, error)  # p01

    def work() -> list[Any]:
        return run_worker(queue, TuningStore(url), [Gpu("0", "u0")], make_lane=lambda gpu: lane,
                          families=FakeFamilies(), options=WorkerOptions("fleet", idle_poll_s=0.1),
                          gpu_locks=FileLocks(tmp_path / "gl"), say=lambda text: None)  # fmt: skip

    if isinstance(error, WorkerError):  # a worker child's bug: that problem fails, the worker goes on
        reports = work()
        results = {r.name: r.result for r in reports}
        assert results == {"p00": "tuned", "p01": "failed", "p02": "tuned", "p03": "tuned"} and lane.resets == 1
        assert [r.name for r in reports] == ["p03", "p02", "p01", "p00"]  # largest first
    else:  # a bug of ours: the problem fails with it and the worker stops, raising it
        with pytest.raises(ZeroDivisionError):
            work()
    items = {i.name: i for i in queue.status("fleet").toolchains[0].items}  # type: ignore[union-attr]
    assert items["p01"].state == "failed" and items["p01"].attempts == 1 and str(error) in (items["p01"].reason or "")
    assert items["p02"].state == "done"  # claimed before p01 (largest first)


def test_a_hung_lock_holder_does_not_stall_the_lane(tmp_path: Path) -> None:
    """Another process holds p02's problem lock and hangs (alive, so the lock stays taken): the
    lane waits for it at most ``lock_wait_s``, gives p02 back uncounted, tunes p01 and p00, and
    takes p02 again once the lock is free, ending with all three tuned."""
    import threading

    from autocutlass.db.locks import problem_lock_name

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    url = str(tmp_path / "t.sqlite")
    queue = TuningQueue(url, heartbeat_s=HEARTBEAT_S, grace_s=GRACE_S)
    problems = campaign_problems()[:3]
    queue.enqueue("fleet", problems, budget=Budget(trials=2))
    hung = queue.locks.try_acquire(problem_lock_name(problems[2][1], HARD_KEY))
    assert hung is not None
    said: list[str] = []

    def free_when_the_others_are_done() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and sum("tuned in" in t for t in said) < 2:
            time.sleep(0.05)
        hung.release()

    freer = threading.Thread(target=free_when_the_others_are_done)
    freer.start()
    t0 = time.monotonic()
    reports = run_worker(queue, TuningStore(url), [Gpu("0", "u0")], make_lane=lambda gpu: FakeLane(0.0),
                         families=FakeFamilies(), options=WorkerOptions("fleet", idle_poll_s=0.05, lock_wait_s=0.3),
                         gpu_locks=FileLocks(tmp_path / "gl"), say=said.append)  # fmt: skip
    freer.join()
    assert [(r.name, r.result) for r in reports] == [("p01", "tuned"), ("p00", "tuned"), ("p02", "tuned")]
    assert any("p02: the lock of" in t and "given back" in t for t in said), said
    items = {i.name: i for i in queue.status("fleet").toolchains[0].items}  # type: ignore[union-attr]
    assert items["p02"].state == "done" and items["p02"].attempts == 1  # the give-back counted no retry
    assert time.monotonic() - t0 < 25

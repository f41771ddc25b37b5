"""Several GPUs in one process: one benchmark child per GPU, compile children shared by all.

``CandidatePipeline`` (``workers``) owns its compile children and one benchmark child. A host with
several GPUs tunes one problem per GPU at once, each in its own thread running ``tune_problem``;
they share one ``CompilePool`` (compiling is GPU-blind) and each has a ``GpuLane``: a benchmark
child whose ``CUDA_VISIBLE_DEVICES`` names one GPU (so it is device 0 there). ``lane.evaluator(
family)`` is the ``tuner.Evaluator`` of that lane for one kernel family; it speaks the request
kinds of ``workers`` and turns replies into states exactly as ``CandidatePipeline`` does.

Threads: a lane and its evaluators belong to one thread. The pool is shared: every access holds
its lock, and whichever thread polls collects every finished compile and files it under the lane
that asked (a handler bug found in another lane's job is re-raised in that lane's thread). Jobs
are served first come, first served.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import math
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

from autocutlass.ops.base import OpProblem
from autocutlass.search.workers import (
    BENCH_HANDLER,
    COMPILE_HANDLER,
    CRASH,
    DEFAULT_ARCH,
    DEFAULT_BASELINE_TIMEOUT_S,
    DEFAULT_BENCH_TIMEOUT_S,
    DEFAULT_COMPILE_TIMEOUT_S,
    DEFAULT_START_TIMEOUT_S,
    FINALS_TIMEOUT_PER_TIMING_S,
    FINALS_TIMEOUT_S,
    FINALS_TORCH_SIDES,
    OK,
    STATES,
    TIMEOUT,
    EvalOutcome,
    FinalsOutcome,
    IsolatedWorker,
    Reply,
    WorkerError,
    _bench_outcome,
    _finals_outcome,
    close_all,
)

log = logging.getLogger("autocutlass")

RELEASE_TIMEOUT_S = 30.0
"""How long a benchmark child may take to free its inputs (``GpuLane.release``)."""

SHARED_WAIT_S = 0.05
"""Longest wait on the pool's pipes while this lane has compiles in it: another thread may read
the reply first, and then this one learns of it only at its next look."""


@dataclass(frozen=True)
class _Job:
    lane: int
    family: str
    problem: dict[str, Any]
    key: str
    params: dict[str, Any]
    compile_s: float | None = None


class CompilePool:
    """Compile children shared by the ``GpuLane``s of one process (thread-safe)."""

    def __init__(
        self,
        workers: int,
        *,
        compile_handler: str = COMPILE_HANDLER,
        compile_timeout_s: float = DEFAULT_COMPILE_TIMEOUT_S,
        start_timeout_s: float = DEFAULT_START_TIMEOUT_S,
        arch: str = DEFAULT_ARCH,
        env: Mapping[str, str | None] | None = None,
    ) -> None:
        cenv: dict[str, str | None] = {"CUDA_VISIBLE_DEVICES": "", "CUTE_DSL_ARCH": arch}
        cenv.update(env or {})
        self._workers = [IsolatedWorker(compile_handler, name=f"compile{i}", env=cenv, start_timeout_s=start_timeout_s)
                         for i in range(max(1, workers))]  # fmt: skip
        self.compile_timeout_s = compile_timeout_s
        self._lock = threading.Lock()
        self._queue: collections.deque[_Job] = collections.deque()
        self._running: dict[int, tuple[_Job, float]] = {}
        self._done: dict[int, list[EvalOutcome | _Job | WorkerError]] = collections.defaultdict(list)
        self._forgotten: set[int] = set()  # worker indices whose running job nobody waits for
        self._lanes = 0

    @property
    def size(self) -> int:
        return len(self._workers)

    def _register(self) -> int:
        with self._lock:
            self._lanes += 1
            return self._lanes - 1

    def share(self) -> int:
        """Compile children per lane (at least one)."""
        return max(1, math.ceil(len(self._workers) / max(1, self._lanes)))

    def start(self) -> None:
        with self._lock:
            for w in self._workers:
                w.start()

    def close(self) -> None:
        with self._lock:
            close_all(self._workers)

    def submit(self, job: _Job) -> None:
        with self._lock:
            self._queue.append(job)
            self._dispatch()

    def pending(self, lane: int) -> int:
        """Jobs of ``lane`` queued, compiling, or finished and not taken yet."""
        with self._lock:
            running = sum(1 for i, (j, _) in self._running.items() if j.lane == lane and i not in self._forgotten)
            return sum(1 for j in self._queue if j.lane == lane) + running + len(self._done.get(lane, ()))

    def forget(self, lane: int) -> None:
        """Drop every job of ``lane``: queued ones now, running ones' results when they come."""
        with self._lock:
            self._queue = collections.deque(j for j in self._queue if j.lane != lane)
            self._forgotten.update(i for i, (j, _) in self._running.items() if j.lane == lane)
            self._done.pop(lane, None)

    def waitables(self) -> list[Connection]:
        with self._lock:
            return [c for c in (w.waitable() for w in self._workers) if c is not None]

    def seconds_left(self, now: float) -> float:
        with self._lock:
            return min([w.seconds_left(now) for w in self._workers if w.busy] or [math.inf])

    def take(self, lane: int, now: float) -> list[EvalOutcome | _Job]:
        """Collect every finished compile, dispatch queued ones, and hand ``lane`` its results:
        an ``EvalOutcome`` for a failed compile, the ``_Job`` (with ``compile_s``) for one to
        benchmark. Re-raises a ``WorkerError`` met in one of this lane's jobs."""
        with self._lock:
            self._collect(now)
            self._dispatch()
            done = self._done.pop(lane, [])
        out: list[EvalOutcome | _Job] = []
        for d in done:
            if isinstance(d, WorkerError):
                raise d
            out.append(d)
        return out

    def _dispatch(self) -> None:
        for i, w in enumerate(self._workers):
            if not self._queue:
                return
            if w.busy:
                continue
            job = self._queue.popleft()
            w.submit({"op": "compile", "family": job.family, "problem": job.problem, "config": job.params},
                     self.compile_timeout_s)  # fmt: skip
            self._running[i] = (job, time.monotonic())

    def _collect(self, now: float) -> None:
        for i, w in enumerate(self._workers):
            if i not in self._running:
                continue
            job = self._running[i][0]
            try:
                reply = w.collect(now)
            except WorkerError as e:
                del self._running[i]
                if i in self._forgotten:
                    self._forgotten.discard(i)
                else:
                    self._done[job.lane].append(e)
                continue
            if reply is None:
                continue
            _, t0 = self._running.pop(i)
            if i in self._forgotten:
                self._forgotten.discard(i)
                continue
            self._done[job.lane].append(_compile_result(job, reply, now - t0))


def _compile_result(job: _Job, reply: Reply, elapsed: float) -> EvalOutcome | _Job | WorkerError:
    if reply.kind == "timeout":
        return EvalOutcome(job.key, job.params, TIMEOUT, f"compile: {reply.reason}")
    if reply.kind == "died":
        return EvalOutcome(job.key, job.params, CRASH, f"compile: {reply.reason}")
    r = reply.result or {}
    state = str(r["state"])
    seconds = float(r.get("seconds", elapsed))
    if state == OK:
        return dataclasses.replace(job, compile_s=seconds)
    if state in STATES:
        return EvalOutcome(job.key, job.params, state, r.get("reason"), None, seconds)
    return WorkerError(f"compile worker returned unknown state {state!r}")


class GpuLane:
    """One benchmark child on one GPU, fed by a shared ``CompilePool``; see the module docstring.

    ``visible`` is the child's ``CUDA_VISIBLE_DEVICES`` (None: inherit this process's)."""

    def __init__(
        self,
        pool: CompilePool,
        visible: str | None,
        *,
        bench_handler: str = BENCH_HANDLER,
        bench_timeout_s: float = DEFAULT_BENCH_TIMEOUT_S,
        baseline_timeout_s: float = DEFAULT_BASELINE_TIMEOUT_S,
        start_timeout_s: float = DEFAULT_START_TIMEOUT_S,
        bench_env: Mapping[str, str | None] | None = None,
    ) -> None:
        self.pool = pool
        self.visible = visible
        self.lane = pool._register()
        env: dict[str, str | None] = {} if visible is None else {"CUDA_VISIBLE_DEVICES": visible}
        env.update(bench_env or {})
        self._bench = IsolatedWorker(bench_handler, name=f"bench{self.lane}", env=env, start_timeout_s=start_timeout_s)
        self.bench_timeout_s = bench_timeout_s
        self.baseline_timeout_s = baseline_timeout_s
        self._bench_queue: collections.deque[_Job] = collections.deque()
        self._benching: _Job | None = None
        self._done: list[EvalOutcome] = []
        self.cancel: threading.Event | None = None
        """Set, it ends this lane's blocking requests (device, baseline, finals) at once."""

    def start(self) -> None:
        self._bench.start()

    def close(self) -> None:
        self._bench.close()

    def reset(self) -> None:
        """Forget every job in flight (after a tuning was abandoned): the benchmark child is
        restarted; compiles still in the pool are dropped when they finish."""
        self._bench.kill()
        self._bench_queue.clear()
        self._benching = None
        self._done = []
        self.pool.forget(self.lane)

    def evaluator(self, family: str) -> LaneEvaluator:
        """The ``Evaluator`` of this lane for kernel family ``family``."""
        return LaneEvaluator(self, family)

    # ---- used by LaneEvaluator ---------------------------------------------------------------
    def _in_flight(self) -> int:
        return self.pool.pending(self.lane) + len(self._bench_queue) + (self._benching is not None) + len(self._done)

    def _call(self, request: dict[str, Any], timeout_s: float) -> Reply:
        if self._in_flight():
            raise RuntimeError("benchmark worker is busy; drain the lane first")
        return self._bench.call(request, timeout_s, self.cancel)

    def release(self) -> None:
        """Ask an idle, running benchmark child to free the problem's inputs (GPU memory it would
        otherwise keep until the next tuning); best effort, a failure is only logged."""
        if self._in_flight() or not self._bench.alive or self._bench.busy:
            return
        try:
            reply = self._bench.call({"op": "release", "device": 0}, RELEASE_TIMEOUT_S)
        except WorkerError as e:  # a handler without the request: it keeps its inputs, nothing else is wrong
            log.debug("autocutlass: benchmark child %s cannot release its inputs: %s", self._bench.name, e)
            return
        if reply.kind != "result":
            log.debug("autocutlass: benchmark child %s did not release its inputs: %s", self._bench.name, reply.reason)

    def _poll(self, timeout_s: float) -> list[EvalOutcome]:
        end = time.monotonic() + timeout_s
        while True:
            now = time.monotonic()
            for r in self.pool.take(self.lane, now):
                if isinstance(r, EvalOutcome):
                    self._done.append(r)
                else:
                    self._bench_queue.append(r)
            if self._benching is not None:
                reply = self._bench.collect(now)
                if reply is not None:
                    job, self._benching = self._benching, None
                    self._done.append(_bench_outcome(job.key, job.params, reply, job.compile_s))
            if self._benching is None and self._bench_queue:
                job = self._bench_queue.popleft()
                self._bench.submit({"op": "bench", "family": job.family, "problem": job.problem, "config": job.params,
                                    "device": 0}, self.bench_timeout_s)  # fmt: skip
                self._benching = job
            if self._done or now >= end:
                done, self._done = self._done, []
                return done
            compiling = self.pool.pending(self.lane)
            if not compiling and self._benching is None:
                return []
            conns = self.pool.waitables() if compiling else []
            bench = self._bench.waitable()
            if bench is not None:
                conns.append(bench)
            left = min(end - now, self._bench.seconds_left(now), self.pool.seconds_left(now), 1.0)
            wait(conns, timeout=max(0.0, min(left, SHARED_WAIT_S) if compiling else left))


class LaneEvaluator:
    """A ``GpuLane`` as the ``tuner.Evaluator`` of one kernel family."""

    def __init__(self, lane: GpuLane, family: str) -> None:
        self.lane = lane
        self.family_name = family

    @property
    def capacity(self) -> int:
        """This lane's share of the compile children plus the one benchmarking."""
        return self.lane.pool.share() + 1

    @property
    def in_flight(self) -> int:
        return self.lane._in_flight()

    def submit(self, problem: OpProblem, key: str, params: dict[str, Any]) -> None:
        self.lane.pool.submit(_Job(self.lane.lane, self.family_name, problem.as_dict(), key, dict(params)))

    def poll(self, timeout_s: float) -> list[EvalOutcome]:
        return self.lane._poll(timeout_s)

    def device(self) -> dict[str, Any]:
        reply = self.lane._call({"op": "device", "device": 0}, self.lane.baseline_timeout_s)
        if reply.kind != "result" or reply.result is None:
            raise WorkerError(f"benchmark worker could not report its device: {reply.reason}")
        return reply.result

    def baseline(self, problem: OpProblem) -> EvalOutcome:
        request = {"op": "bench", "family": self.family_name, "problem": problem.as_dict(), "config": None, "device": 0}
        return _bench_outcome("torch", {}, self.lane._call(request, self.lane.baseline_timeout_s), None)

    def finals(self, problem: OpProblem, configs: list[dict[str, Any]], rounds: int) -> FinalsOutcome | None:
        if rounds < 1:
            raise ValueError(f"finals need at least one round, got {rounds}")
        configs = [dict(c) for c in configs]
        request = {"op": "final", "family": self.family_name, "problem": problem.as_dict(), "configs": configs,
                   "rounds": rounds, "device": 0}  # fmt: skip
        timeout_s = FINALS_TIMEOUT_S + FINALS_TIMEOUT_PER_TIMING_S * (len(configs) + FINALS_TORCH_SIDES) * rounds
        return _finals_outcome(configs, rounds, self.lane._call(request, timeout_s))


__all__ = ["SHARED_WAIT_S", "CompilePool", "GpuLane", "LaneEvaluator"]

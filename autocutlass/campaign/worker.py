"""The fleet worker: take a campaign's problems from the queue until none is left, one GPU lane each.

``run_worker(queue, store, gpus, make_lane=..., families=...)`` runs one *lane* per GPU, each in
its own thread: it asks its lane's benchmark child for the GPU (``DeviceInfo``) and so its
``Toolchain``, then loops

1. ``queue.claim`` the oldest queued problem of its toolchain (None: when nothing is queued or
   running any more the lane ends; while others still run, it waits, since a dead one's problem
   comes back);
2. pick the kernel family (none serves the problem: DONE as *skipped*, with the reason);
3. ``SharedTuningSink.claim`` the problem under its hard key and the lane's GPU, waiting for
   both locks (problem first; another process tuning the same problem, on-line or in another
   campaign, is waited for), each at most ``WorkerOptions.lock_wait_s``: a lock still taken
   then (its holder may hang, alive) gives the item back as it was, and the lane claims other
   problems, coming back to it after ``lock_wait_s`` more. A problem that has its best record
   by then is DONE as *already tuned*, without timing anything;
4. ``tune_problem`` with the campaign's budget (the worker's ``WorkerOptions`` override it),
   starting from the databases' priors (``LayeredStore.seed_configs``: a sibling GPU's record of
   the problem, this GPU's nearest record, the nearest tuned problems' winners), resuming from
   recorded trials: a problem retried after its worker died evaluates only configs not recorded
   yet, and with a trial budget only what is left of it; the winner is arbitrated (``merge_best``),
   never last-writer-wins;
5. DONE as *tuned* (with the best time), or FAILED when no candidate passed or a worker child
   raised (a handler bug): those would fail again, so they are not retried.

The main thread sends every claimed item's heartbeat each ``queue.heartbeat_s`` seconds. Any
other exception in a lane stops the worker: its item is given back as a counted retry after a
``DatabaseError`` (with the error kept for ``status``), or failed with the error after any other
(a bug: it would fail again on every worker); the other lanes' items are given back as they were,
and the exception is raised. So is a ``KeyboardInterrupt`` (every item given back, uncounted). A worker killed
outright (SIGKILL, a lost host) leaves RUNNING items whose heartbeat goes stale: the next
worker's claim queues them again (``db.queue``).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from autocutlass.campaign.gpus import Gpu
from autocutlass.campaign.sink import ClaimTimeout, SharedTuningSink
from autocutlass.db import TuningStore
from autocutlass.db.layered import LayeredStore
from autocutlass.db.locks import LockSpace, host_gpu_locks
from autocutlass.db.queue import DEFAULT_CAMPAIGN, Budget, Claimant, Toolchain, TuningQueue, WorkItem
from autocutlass.device import DeviceInfo, HardKey
from autocutlass.errors import DatabaseError, UnsupportedProblem
from autocutlass.kernels.base import KernelFamily
from autocutlass.ops.base import OpProblem
from autocutlass.search.lanes import CompilePool, GpuLane
from autocutlass.search.tuner import Evaluator, TuneResult, tune_problem
from autocutlass.search.workers import WorkerError, default_compile_workers
from autocutlass.settings import current

log = logging.getLogger("autocutlass")

IDLE_POLL_S = 1.0
"""How often an idle lane looks again while other workers' problems still run (one cheap query;
at the end of a campaign a lane that ran out of problems waits at most this long after the
last running one finishes; at 5 s that was up to 5 s of a 70 s two-GPU run)."""
LOCK_WAIT_S = 300.0
"""How long a lane waits for a problem's (or its GPU's) lock before it gives the problem back and
works on others (module docstring, step 3): longer than most tunings another process may be
running on that problem, short enough that a hung holder costs a lane minutes, not the rest of
the campaign."""


class NoSuchCampaign(LookupError):
    """Nothing was ever enqueued in the campaign a worker was asked to work on."""


# ---- what a worker needs -----------------------------------------------------------------------
class Lane(Protocol):
    """One GPU's evaluation (``search.lanes.GpuLane``): an ``Evaluator`` per kernel family."""

    def evaluator(self, family: str) -> Evaluator: ...
    def reset(self) -> None:
        """Forget whatever is in flight (after a tuning was abandoned)."""
        ...

    def close(self) -> None: ...


class Families(Protocol):
    """The kernel families a worker tunes with (``RegistryFamilies``: the registry's)."""

    def hashes(self) -> dict[str, str]:
        """Every family's source hash, by name (part of the ``Toolchain``)."""
        ...

    def default_name(self) -> str:
        """The family whose evaluator answers the device query."""
        ...

    def for_problem(self, problem: OpProblem) -> KernelFamily[Any] | str:
        """The family to tune ``problem`` with, or why there is none."""
        ...


class RegistryFamilies:
    """The families of ``autocutlass.kernels`` (``only``: just that one)."""

    def __init__(self, only: str | None = None) -> None:
        from autocutlass import kernels

        self._kernels = kernels
        if only is not None and only not in kernels.family_names():
            raise KeyError(f"no kernel family {only!r}; known: {', '.join(kernels.family_names())}")
        self._only = only

    def hashes(self) -> dict[str, str]:
        return self._kernels.source_hashes()

    def default_name(self) -> str:
        return self._only or self._kernels.family_names()[0]

    def for_problem(self, problem: OpProblem) -> KernelFamily[Any] | str:
        if self._only is not None:
            fam = self._kernels.get_family(self._only)
            why = fam.supports(problem)
            return fam if why is None else f"{self._only}: {why}"
        families = self._kernels.families_for(problem)
        return families[0] if families else f"no kernel family serves it ({self._kernels.unsupported_reason(problem)})"


class PipelineLanes:
    """The real lanes: one ``CompilePool`` shared by a ``GpuLane`` per GPU (``CUDA_VISIBLE_DEVICES``
    of each benchmark child set to its GPU). A context manager: starts and closes the pool."""

    def __init__(self, n_lanes: int, *, compile_workers: int | None = None, **lane_options: Any) -> None:
        self.pool = CompilePool(compile_workers or default_lane_compile_workers(n_lanes))
        self._options = lane_options

    def __call__(self, gpu: Gpu) -> GpuLane:
        lane = GpuLane(self.pool, gpu.visible, **self._options)
        lane.start()
        return lane

    def __enter__(self) -> PipelineLanes:
        self.pool.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.pool.close()


def default_lane_compile_workers(n_lanes: int) -> int:
    """Compile children for ``n_lanes`` GPUs: 6 per GPU, within the cores left beside one
    benchmark child per GPU and this process (one GPU: ``workers.default_compile_workers``)."""
    if n_lanes <= 1:
        return default_compile_workers()
    return max(1, min(6 * n_lanes, (os.cpu_count() or 2) - n_lanes - 1))


@dataclass(frozen=True)
class WorkerOptions:
    """A worker's settings; budget fields left None take the campaign's."""

    campaign: str = DEFAULT_CAMPAIGN
    trials: int | None = None
    seconds: float | None = None
    exhaustive: bool | None = None
    resume: bool = True
    priors: bool = True
    """Start each search from the databases' priors (``LayeredStore.seed_configs``: this GPU's
    nearest record, a sibling GPU's record of the problem, the nearest tuned problems' winners;
    from the campaign's database and the shipped ones)."""
    idle_poll_s: float = IDLE_POLL_S
    lock_wait_s: float = LOCK_WAIT_S

    def budget(self, campaign: Budget) -> Budget:
        if self.trials is None and self.seconds is None and self.exhaustive is None:
            return campaign
        return Budget(self.trials, self.seconds, bool(self.exhaustive))


@dataclass(frozen=True)
class ProblemReport:
    """What a lane did with one claimed problem. ``result``: tuned, already tuned, skipped,
    failed, or lost (tuned, but a sweep had taken the item away: its retry finds it tuned)."""

    name: str
    problem: OpProblem
    gpu: str
    attempt: int
    result: str
    family: str | None = None
    tune: TuneResult | None = None
    note: str | None = None
    wall_s: float = 0.0


Say = Callable[[str], None]


# ---- the worker ----------------------------------------------------------------------------------
class _Stopped(Exception):
    """The worker was asked to stop while a lane waited for a lock."""


class _Worker:
    def __init__(self, queue: TuningQueue, store: TuningStore, *, make_lane: Callable[[Gpu], Lane],
                 families: Families, options: WorkerOptions, gpu_locks: LockSpace, say: Say) -> None:  # fmt: skip
        found = queue.campaign(options.campaign)
        if found is None:
            raise NoSuchCampaign(f"no campaign {options.campaign!r} in {queue.database}: enqueue problems first "
                                 f"(autocutlass tune --shapes FILE --enqueue --db ...)")  # fmt: skip
        self.queue = queue
        self.store = store
        self.make_lane = make_lane
        self.families = families
        self.options = options
        self.budget = options.budget(found.budget)
        self.sink = SharedTuningSink(store, problem_locks=queue.locks, gpu_locks=gpu_locks)
        self.priors = LayeredStore(store, current().shipped_dbs_dir) if options.priors else None
        self.say = say
        self.stop = threading.Event()
        self.reports: list[ProblemReport] = []
        self._held: dict[int, WorkItem] = {}
        self._lock = threading.Lock()
        self._recorded: set[str] = set()

    def hold(self, item: WorkItem | None) -> None:
        if item is not None:
            with self._lock:
                self._held[item.trial_id] = item

    def drop(self, item: WorkItem) -> None:
        with self._lock:
            self._held.pop(item.trial_id, None)

    def held(self) -> list[WorkItem]:
        with self._lock:
            return list(self._held.values())

    def record_device(self, hard_key: HardKey, device: DeviceInfo) -> None:
        with self._lock:
            if hard_key.key() in self._recorded:
                return
            self._recorded.add(hard_key.key())
        self.store.record_device(hard_key, device.as_dict())

    def heartbeat(self) -> None:
        for item in self.held():
            try:
                self.queue.heartbeat(item)
            except Exception as e:  # noqa: BLE001 - a missed beat is survivable (the locks keep the work single)
                log.warning("autocutlass: heartbeat of %s failed: %s", item.name, e)

    def give_back(self, *, error: str | None = None, only: WorkItem | None = None) -> int:
        items = [only] if only is not None else self.held()
        n = 0
        for item in items:
            try:
                self.queue.release(item, error=error)
                n += 1
            except Exception as e:  # noqa: BLE001 - it goes stale and comes back anyway
                log.warning("autocutlass: could not give %s back (%s); it returns when its heartbeat is stale",
                            item.name, e)  # fmt: skip
            self.drop(item)
        return n


class _LaneRunner:
    def __init__(self, worker: _Worker, gpu: Gpu) -> None:
        self.w = worker
        self.gpu = gpu
        self.error: BaseException | None = None
        self.lane: Lane | None = None

    def say(self, text: str) -> None:
        self.w.say(f"[GPU {self.gpu.label()}] {text}")

    def run(self) -> None:
        w = self.w
        try:
            self.lane = w.make_lane(self.gpu)
            device = DeviceInfo(**self.lane.evaluator(w.families.default_name()).device()["device"])
            toolchain = Toolchain.of(device, w.families.hashes())
            claimant = Claimant.here(self.gpu.visible, self.gpu.uuid)
            self.say(f"{device.gpu_name}: working on campaign {w.options.campaign!r} ({w.budget.describe()})")
            busy: dict[int, float] = {}  # items whose lock stayed taken -> when to try them again
            while not w.stop.is_set():
                now = time.monotonic()
                busy = {tid: until for tid, until in busy.items() if until > now}
                item = w.queue.claim(w.options.campaign, toolchain, claimant, skip=busy.keys())
                w.hold(item)
                if item is None:
                    if w.queue.active(w.options.campaign, toolchain) == 0:
                        return
                    w.stop.wait(w.options.idle_poll_s)
                    continue
                try:
                    report = self.process(item, device)
                except _Stopped:
                    return
                except ClaimTimeout as e:
                    w.give_back(only=item)  # queued again as it was: no retry counted
                    busy[item.trial_id] = time.monotonic() + w.options.lock_wait_s
                    self.say(f"{item.name}: {e}; given back, other problems first")
                    continue
                except BaseException as e:
                    if not w.stop.is_set():
                        self.abandon(item, e)
                    raise
                w.drop(item)
                with w._lock:
                    w.reports.append(report)
        except BaseException as e:  # noqa: BLE001 - handed to the main thread, which raises it
            self.error = e
            w.stop.set()
        finally:
            if self.lane is not None:
                self.lane.close()

    def abandon(self, item: WorkItem, e: BaseException) -> None:
        """``item`` after ``e`` stopped its tuning: a database failure gives it back as a counted
        retry (another worker may reach the database); a bug fails it with the error (it would
        fail again, on every worker it reached)."""
        w = self.w
        error = f"{type(e).__name__}: {e}"
        if isinstance(e, DatabaseError) or not isinstance(e, Exception):
            w.give_back(error=error if isinstance(e, Exception) else None, only=item)
            return
        try:
            w.queue.fail(item, f"{error} (a bug: the traceback is in the log of the worker on "
                               f"{socket.gethostname()}, pid {os.getpid()})")  # fmt: skip
        except DatabaseError as db:
            log.warning("autocutlass: could not mark %s failed (%s); it returns when its heartbeat is stale",
                        item.name, db)  # fmt: skip
        w.drop(item)

    def process(self, item: WorkItem, device: DeviceInfo) -> ProblemReport:
        w = self.w
        t0 = time.monotonic()
        attempt = f" (attempt {item.attempt})" if item.attempt > 1 else ""

        def report(result: str, **kw: Any) -> ProblemReport:
            return ProblemReport(item.name, item.problem, self.gpu.label(), item.attempt, result,
                                 wall_s=time.monotonic() - t0, **kw)  # fmt: skip

        family = w.families.for_problem(item.problem)
        if isinstance(family, str):
            w.queue.complete(item, "skipped", note=family)
            self.say(f"{item.name}: skipped: {family}")
            return report("skipped", note=family)
        hard_key = device.hard_key(family.source_hash())
        claim = w.sink.claim(item.problem, hard_key, gpu=self.gpu.lock_id(), wait=w.stop, wait_s=w.options.lock_wait_s)
        if claim is None:
            if w.stop.is_set():
                raise _Stopped
            rec = w.store.lookup(item.problem, hard_key)
            w.queue.complete(item, "already tuned", best_ms=rec.median_ms if rec else None,
                             note=rec.origin if rec else None)  # fmt: skip
            self.say(f"{item.name}: already tuned")
            return report("already tuned", family=family.name)
        with claim:
            w.record_device(hard_key, device)
            budget = w.budget
            trials = budget.trials
            if trials is not None and w.options.resume:
                trials = max(0, trials - len(w.store.finished_config_keys(item.problem, hard_key, family.name)))
            self.say(f"{item.name}: tuning {item.problem.describe()}{attempt}")
            seeds = w.priors.seed_configs(item.problem, hard_key, family.name) if w.priors else []
            assert self.lane is not None
            try:
                result = tune_problem(
                    item.problem, family, w.sink, trials=trials, seconds=budget.seconds, exhaustive=budget.exhaustive,
                    resume=w.options.resume, evaluator=self.lane.evaluator(family.name), hard_key=hard_key,
                    seeds=seeds,
                )  # fmt: skip
            except UnsupportedProblem as e:
                w.queue.complete(item, "skipped", note=str(e))
                return report("skipped", family=family.name, note=str(e))
            except WorkerError as e:
                self.lane.reset()
                reason = f"a worker child raised (a bug; not retried): {e}"
                w.queue.fail(item, reason[:4000])
                self.say(f"{item.name}: FAILED: {str(e).splitlines()[0]}")
                return report("failed", family=family.name, note=reason)
        if result.best is None or result.best.timing is None:
            states = ", ".join(f"{n} {s}" for s, n in sorted(result.states.items())) or "none evaluated"
            why = f"no candidate passed ({states})"
            w.queue.fail(item, why)
            self.say(f"{item.name}: FAILED: {why}")
            return report("failed", family=family.name, tune=result, note=why)
        best_ms = result.best.timing.median_ms
        kept = w.queue.complete(item, "tuned", best_ms=best_ms,
                                note=f"{result.evaluated} trials on {self.gpu.label()}")  # fmt: skip
        vs = f", x{result.vs_torch:.3f} torch" if result.vs_torch else ""
        self.say(f"{item.name}: tuned in {result.wall_s:.0f} s, {result.evaluated} trials, {best_ms:.4f} ms{vs}")
        lost = "the queue had given the item away (heartbeats were late); its retry finds it tuned"
        return report("tuned" if kept else "lost", family=family.name, tune=result, note=None if kept else lost)


def run_worker(
    queue: TuningQueue,
    store: TuningStore,
    gpus: Sequence[Gpu],
    *,
    make_lane: Callable[[Gpu], Lane],
    families: Families,
    options: WorkerOptions | None = None,
    gpu_locks: LockSpace | None = None,
    say: Say | None = None,
) -> list[ProblemReport]:
    """Work on ``options.campaign`` with one lane per GPU of ``gpus`` until nothing is queued or
    running for their toolchains (see the module docstring); the reports, in finishing order.

    Raises ``NoSuchCampaign``; a lane's exception (after giving the items back); KeyboardInterrupt
    (after giving every held item back uncounted)."""
    if not gpus:
        raise ValueError("a worker needs at least one GPU")
    worker = _Worker(queue, store, make_lane=make_lane, families=families, options=options or WorkerOptions(),
                     gpu_locks=gpu_locks if gpu_locks is not None else host_gpu_locks(),
                     say=say or (lambda text: log.info("autocutlass: %s", text)))  # fmt: skip
    runners = [_LaneRunner(worker, gpu) for gpu in gpus]
    threads = [threading.Thread(target=r.run, name=f"lane-{r.gpu.visible}", daemon=True) for r in runners]
    for t in threads:
        t.start()
    next_beat = time.monotonic() + queue.heartbeat_s
    try:
        while any(t.is_alive() for t in threads):
            for t in threads:
                t.join(timeout=0.1)
            if time.monotonic() >= next_beat:
                worker.heartbeat()
                next_beat = time.monotonic() + queue.heartbeat_s
            if worker.stop.is_set() and any(r.error is not None for r in runners):
                break
    except KeyboardInterrupt:
        worker.stop.set()
        n = worker.give_back()
        worker.say(f"interrupted: {n} problem{'s' if n != 1 else ''} given back to the queue")
        raise
    failed = next((r.error for r in runners if r.error is not None), None)
    if failed is not None:
        worker.stop.set()
        worker.give_back()
        raise failed
    return worker.reports


def tuned_count(reports: Sequence[ProblemReport]) -> int:
    return sum(1 for r in reports if r.result in ("tuned", "lost"))


__all__ = [
    "IDLE_POLL_S",
    "Families",
    "Lane",
    "NoSuchCampaign",
    "PipelineLanes",
    "ProblemReport",
    "RegistryFamilies",
    "WorkerOptions",
    "default_lane_compile_workers",
    "run_worker",
    "tuned_count",
]

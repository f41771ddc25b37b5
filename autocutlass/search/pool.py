"""``TuningPool``: the worker processes of on-line tuning, kept alive from one tuning to the next.

``tune_problem`` without an evaluator starts a ``CandidatePipeline`` (compile children and a
benchmark child, each importing torch and the DSL: seconds) and closes it when it returns. A
process that tunes on-line (dispatch's ``tune`` and ``background`` policies) tunes problem after
problem; it borrows the pool instead: one ``lanes.CompilePool`` and one ``lanes.GpuLane`` per
CUDA device index, started on first use and kept for the next tuning.

Contract:

* **One tuning at a time.** ``evaluator(family, device_index)`` is a context manager that holds
  the pool for one tuning (a second caller waits), so two tunings of this process never time on
  its GPUs at once. On the way out, work still in flight (a tuning that was stopped or raised) is
  dropped (``GpuLane.reset``: the benchmark child is restarted, compiles in flight are forgotten),
  and the benchmark child frees the problem's inputs (``GpuLane.release``).
* **Crashes.** A child that dies or times out is a result of that candidate
  (``workers.IsolatedWorker``) and is started again on the next request; a pool needs no repair.
* **Warm.** ``warm()`` starts the children before a tuning needs them (``autocutlass.prewarm``,
  called by the model swaps under the tuning policies): the tuning then skips their start-up.
* **Idle.** After ``idle_s`` seconds without a tuning (or a ``warm``) the children are closed (their memory, and
  the benchmark child's CUDA context on the GPU, given back); the next tuning starts them again.
  ``idle_s`` 0 closes them after every tuning (a pipeline per tuning, as before the pool).
* **Exit.** ``close()`` (at interpreter exit for the shared pool) marks the pool closed, then
  kills every child. A tuning using it meanwhile gets ``PoolClosed`` from its next evaluator call,
  and no outcome of a killed child reaches it (the flag is set before the kill and checked after
  every call), so nothing spurious is recorded.
* **Fork.** In a forked child ``shared()`` makes a new pool; the parent's children are forgotten,
  not touched (``workers`` closes this process's ends of their pipes).

The child's ``CUDA_VISIBLE_DEVICES`` names the GPU of device index ``i`` of this process (the
``i``-th entry of this process's ``CUDA_VISIBLE_DEVICES``, else ``i``), so it is device 0 there.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from autocutlass.ops.base import OpProblem
from autocutlass.search.lanes import CompilePool, GpuLane, LaneEvaluator
from autocutlass.search.workers import (
    BENCH_HANDLER,
    COMPILE_HANDLER,
    DEFAULT_ARCH,
    DEFAULT_START_TIMEOUT_S,
    EvalOutcome,
    FinalsOutcome,
    default_compile_workers,
)

log = logging.getLogger("autocutlass")

DEFAULT_IDLE_S = 300.0
"""Seconds without a tuning after which the shared pool closes its children
(``AUTOCUTLASS_TUNE_POOL_IDLE_S``)."""


class PoolClosed(RuntimeError):
    """The pool was closed (interpreter exit) while a tuning used it: the tuning ends, recording
    nothing more."""


def visible_device(index: int, env: Mapping[str, str] | None = None) -> str:
    """The ``CUDA_VISIBLE_DEVICES`` of a child that is to see this process's device ``index``."""
    spec = (os.environ if env is None else env).get("CUDA_VISIBLE_DEVICES")
    if spec is None:
        return str(index)
    entries = [e.strip() for e in spec.split(",") if e.strip()]
    return entries[index] if 0 <= index < len(entries) else str(index)


class _PoolEvaluator:
    """A lane's ``tuner.Evaluator`` that turns every call made after the pool closed into
    ``PoolClosed`` (checked after the call: an outcome of a child killed by ``close`` never
    reaches the tuner)."""

    def __init__(self, pool: TuningPool, inner: LaneEvaluator) -> None:
        self._pool = pool
        self._inner = inner

    def _guard(self, fn: Any, *args: Any) -> Any:
        self._pool.check_open()
        try:
            result = fn(*args)
        except Exception as e:
            if self._pool.closed:
                raise PoolClosed("the tuning pool was closed") from e
            raise
        self._pool.check_open()
        return result

    @property
    def capacity(self) -> int:
        return self._inner.capacity

    @property
    def in_flight(self) -> int:
        return 0 if self._pool.closed else self._inner.in_flight

    def submit(self, problem: OpProblem, key: str, params: dict[str, Any]) -> None:
        self._guard(self._inner.submit, problem, key, params)

    def poll(self, timeout_s: float) -> list[EvalOutcome]:
        return self._guard(self._inner.poll, timeout_s)  # type: ignore[no-any-return]

    def baseline(self, problem: OpProblem) -> EvalOutcome:
        return self._guard(self._inner.baseline, problem)  # type: ignore[no-any-return]

    def finals(self, problem: OpProblem, configs: list[dict[str, Any]], rounds: int) -> FinalsOutcome | None:
        return self._guard(self._inner.finals, problem, configs, rounds)  # type: ignore[no-any-return]

    def device(self) -> dict[str, Any]:
        return self._guard(self._inner.device)  # type: ignore[no-any-return]


class TuningPool:
    """Compile children and a benchmark child per device, shared by successive tunings; see the
    module docstring. Handlers, environments and timeouts are injectable (tests run fakes)."""

    def __init__(
        self,
        *,
        compile_workers: int | None = None,
        idle_s: float = DEFAULT_IDLE_S,
        compile_handler: str = COMPILE_HANDLER,
        bench_handler: str = BENCH_HANDLER,
        start_timeout_s: float = DEFAULT_START_TIMEOUT_S,
        arch: str = DEFAULT_ARCH,
        compile_env: Mapping[str, str | None] | None = None,
        bench_env: Mapping[str, str | None] | None = None,
        lane_options: Mapping[str, Any] | None = None,
        compile_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.compile_workers = default_compile_workers() if compile_workers is None else compile_workers
        self.idle_s = idle_s
        self._compile_handler = compile_handler
        self._bench_handler = bench_handler
        self._start_timeout_s = start_timeout_s
        self._arch = arch
        self._compile_env = dict(compile_env or {})
        self._bench_env = dict(bench_env or {})
        self._lane_options = dict(lane_options or {})
        self._compile_options = dict(compile_options or {})
        self._turn = threading.Lock()  # held for one tuning
        self._state = threading.Lock()  # guards the fields below; never held while waiting for a child
        self._compile: CompilePool | None = None
        self._lanes: dict[int, GpuLane] = {}
        self._timer: threading.Timer | None = None
        self.closed = False
        self.tunings = 0
        self.idle_closes = 0

    def __repr__(self) -> str:
        return f"TuningPool(compile_workers={self.compile_workers}, lanes={sorted(self._lanes)}, closed={self.closed})"

    def check_open(self) -> None:
        if self.closed:
            raise PoolClosed("the tuning pool was closed")

    # ---- one tuning --------------------------------------------------------------------------
    @contextmanager
    def evaluator(self, family: str, device_index: int = 0, cancel: threading.Event | None = None
                  ) -> Iterator[_PoolEvaluator]:  # fmt: skip
        """The pool's evaluator of ``family`` on CUDA device ``device_index`` for one tuning
        (exclusive: a second caller waits). ``cancel``: set, it ends the lane's blocking requests."""
        with self._turn:
            self._cancel_timer()
            try:
                lane = self._lane(device_index)
                lane.cancel = cancel
                try:
                    yield _PoolEvaluator(self, lane.evaluator(family))
                finally:
                    lane.cancel = None
                    if not self.closed:
                        if lane._in_flight():
                            lane.reset()  # stopped or raised: nothing of it may reach the next tuning
                        else:
                            lane.release()
            finally:
                self.tunings += 1
                self._arm_timer()

    # ---- before a tuning --------------------------------------------------------------------
    def warm(self, device_index: int | None = None) -> bool:
        """Start the compile children now, without waiting for them to load (each imports torch
        and the DSL: seconds), so that a tuning soon after finds them ready; with
        ``device_index`` also that device's benchmark child (which makes a CUDA context on that
        GPU). The idle timer runs from here: no tuning within ``idle_s`` closes them again. False
        (nothing started) when the pool closes its children after every tuning (``idle_s`` 0)."""
        if self.idle_s <= 0:
            return False
        with self._state:
            self.check_open()
            compile_pool = self._compile_pool()
        if device_index is None:
            compile_pool.start()
        else:
            self._lane(device_index)
        if self._turn.acquire(blocking=False):  # a tuning under way arms the timer when it ends
            try:
                self._cancel_timer()
                self._arm_timer()
            finally:
                self._turn.release()
        return True

    def _compile_pool(self) -> CompilePool:
        """The compile children's pool, made on first use (``_state`` held)."""
        if self._compile is None:
            self._compile = CompilePool(self.compile_workers, compile_handler=self._compile_handler,
                                        start_timeout_s=self._start_timeout_s, arch=self._arch,
                                        env=self._compile_env, **self._compile_options)  # fmt: skip
        return self._compile

    def _lane(self, device_index: int) -> GpuLane:
        with self._state:
            self.check_open()
            self._compile_pool()
            lane = self._lanes.get(device_index)
            if lane is None:
                lane = GpuLane(self._compile, visible_device(device_index), bench_handler=self._bench_handler,
                               start_timeout_s=self._start_timeout_s, bench_env=self._bench_env,
                               **self._lane_options)  # fmt: skip
                self._lanes[device_index] = lane
            compile_pool = self._compile_pool()
        compile_pool.start()  # no-ops for children still running: start-up overlaps
        lane.start()
        return lane

    def pids(self) -> list[int]:
        """The process ids of the children now running (tests, diagnostics)."""
        with self._state:
            workers = [*(self._compile._workers if self._compile else []), *(lane._bench for lane in self._lanes.values())]
        return [w.pid for w in workers if w.alive and w.pid is not None]

    # ---- idle and exit -----------------------------------------------------------------------
    def _arm_timer(self) -> None:
        """After a tuning: close the children now (``idle_s`` 0), or after ``idle_s`` seconds
        without another tuning."""
        if self.closed:
            return
        if self.idle_s <= 0:
            self._close_children()
            return
        timer = threading.Timer(self.idle_s, self._close_if_idle)
        timer.daemon = True
        timer.name = "autocutlass-tuning-pool-idle"
        with self._state:
            self._timer = timer
        timer.start()

    def _cancel_timer(self) -> None:
        with self._state:
            timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()

    def _close_if_idle(self) -> None:
        if self._turn.acquire(blocking=False):  # a tuning in progress keeps its children
            try:
                if not self.closed:
                    self._close_children()
                    self.idle_closes += 1
            finally:
                self._turn.release()

    def _close_children(self) -> None:
        """Close every child gracefully (the pool stays usable: the next tuning starts them)."""
        with self._state:
            lanes, compile_pool = list(self._lanes.values()), self._compile
        for lane in lanes:
            lane.close()
        if compile_pool is not None:
            compile_pool.close()

    def close(self) -> None:
        """Close the pool for good: mark it closed, then kill every child (a tuning using it gets
        ``PoolClosed``). Idempotent."""
        with self._state:
            self.closed = True
            timer, self._timer = self._timer, None
            lanes, compile_pool = list(self._lanes.values()), self._compile
        if timer is not None:
            timer.cancel()
        workers = [*(compile_pool._workers if compile_pool else []), *(lane._bench for lane in lanes)]
        for w in workers:
            try:
                w.kill()
            except OSError as e:  # a child another thread was reaping: it is gone either way
                log.debug("autocutlass: killing tuning worker %s: %s", w.name, e)


_SHARED: TuningPool | None = None
_SHARED_LOCK = threading.Lock()


def shared(idle_s: float = DEFAULT_IDLE_S) -> TuningPool:
    """The process's tuning pool (made on first use, with ``idle_s``; closed at exit; a forked
    child makes its own)."""
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is None or _SHARED.closed:
            _SHARED = TuningPool(idle_s=idle_s)
        return _SHARED


def _at_exit() -> None:
    pool = _SHARED
    if pool is not None:
        pool.close()


def _after_fork_in_child() -> None:
    global _SHARED, _SHARED_LOCK
    _SHARED, _SHARED_LOCK = None, threading.Lock()


atexit.register(_at_exit)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)

__all__ = ["DEFAULT_IDLE_S", "PoolClosed", "TuningPool", "shared", "visible_device"]

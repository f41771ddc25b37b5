"""``BackgroundTuner``: one daemon thread that runs queued jobs (tunings) one at a time.

Dispatch's ``background`` policy queues a tuning here and serves the miss at once with the best
config it has; the job's ``done`` callback then drops the stand-in's memo entries, so the next
call finds the winner. This module knows nothing of tuning: a job is ``run(stop) -> result`` and
``done(result, error)``, keyed so that a key queued or running is not queued twice.

Contract:

* **One at a time.** Jobs run in submission order on one thread, so one process never times two
  tunings' candidates on its GPUs at once (across processes, the tuning claim's host-wide GPU
  lock does that: ``campaign.SharedTuningSink``). ``shared()`` is the process's tuner; tests make
  their own.
* **Errors are results.** An exception raised by ``run`` is logged (once per message, with its
  traceback at debug level) and handed to ``done`` as ``error``; the thread goes on with the next
  job. An exception raised by ``done`` is logged too; nothing reaches the callers of ``submit``.
* **Exit.** At interpreter exit (``atexit``) every tuner sets its ``stop`` event (each job's
  ``run`` gets it and must return soon after it is set: ``search.tune_problem(stop=...)`` stops
  submitting, records nothing more and kills its worker processes) and waits up to
  ``EXIT_WAIT_S`` for its thread. The thread is a daemon: a job that ignores ``stop`` cannot hang
  the exit; its worker processes then see their request pipe close with this process and exit
  after their current request.
* **Fork.** In a forked child, every tuner forgets the parent's queue and thread (they are the
  parent's) and starts a thread of its own on its next ``submit``. ``done`` is not called for
  the parent's jobs in the child; the dispatcher drops its own waiting stand-ins (see
  ``dispatch``).
* ``submit`` never blocks on a running job and never raises for a job's sake.
"""

from __future__ import annotations

import atexit
import collections
import logging
import os
import threading
import weakref
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("autocutlass")

EXIT_WAIT_S = 10.0
"""How long interpreter exit waits for a tuner's thread after setting its stop event. A tuning
notices the event within about a second (its poll interval) and kills its worker processes."""

BACKGROUND_NOTE = "background: timed while the application ran"
"""The reason dispatch records with the ok trials of a background tuning (a mark, not a failure):
they were timed while the application's own kernels may have run on the same GPU. ``db show``
marks a best chosen from them; an off-line ``autocutlass tune`` of the problem re-times its
finalists in the finals."""

Run = Callable[[threading.Event], Any]
Done = Callable[[Any, BaseException | None], None]


@dataclass(frozen=True)
class _Job:
    key: Hashable
    run: Run
    done: Done


class BackgroundTuner:
    """Runs submitted jobs on one daemon thread, one at a time; see the module docstring."""

    def __init__(self, name: str = "autocutlass-background-tuner") -> None:
        self.name = name
        self._reset()
        _TUNERS.add(self)

    def _reset(self) -> None:
        """Fresh state: at construction, and in a forked child (the parent's jobs are not ours)."""
        self._cond = threading.Condition(threading.Lock())
        self._queue: collections.deque[_Job] = collections.deque()
        self._keys: set[Hashable] = set()
        self._running: Hashable | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._logged: set[str] = set()
        self.completed = 0

    # ---- callers ---------------------------------------------------------------------------
    def submit(self, key: Hashable, run: Run, done: Done) -> bool:
        """Queue ``run`` (then ``done``) unless ``key`` is queued or running; True when queued.
        After ``shutdown`` nothing is queued (False)."""
        with self._cond:
            if self._stop.is_set() or key in self._keys:
                return False
            self._keys.add(key)
            self._queue.append(_Job(key, run, done))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
                self._thread.start()
            self._cond.notify()
        return True

    def busy(self, key: Hashable) -> bool:
        """True while ``key`` is queued or running."""
        with self._cond:
            return key in self._keys

    @property
    def pending(self) -> int:
        """Jobs queued or running."""
        with self._cond:
            return len(self._keys)

    def wait_idle(self, timeout_s: float | None = None) -> bool:
        """Wait until no job is queued or running (tests, probes, ``autocutlass.wait_background``);
        False when ``timeout_s`` ran out first."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._keys, timeout=timeout_s)

    def shutdown(self, timeout_s: float = EXIT_WAIT_S) -> bool:
        """Set the stop event, drop queued jobs and wait up to ``timeout_s`` for the running one;
        True when the thread ended. Nothing is queued afterwards."""
        with self._cond:
            self._stop.set()
            dropped = list(self._queue)
            self._queue.clear()
            for job in dropped:
                self._keys.discard(job.key)
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s)
            if thread.is_alive():
                log.warning("autocutlass: a background tuning did not stop within %.0f s; leaving it", timeout_s)
                return False
        return True

    # ---- the thread ------------------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stop.is_set():
                    self._cond.wait()
                if self._stop.is_set():
                    return
                job = self._queue.popleft()
                self._running = job.key
            result, error = None, None
            try:
                result = job.run(self._stop)
            except Exception as e:
                error = e
                self._log_once(f"a background tuning failed: {type(e).__name__}: {e}")
                log.debug("autocutlass: background tuning traceback", exc_info=True)
            try:
                job.done(result, error)
            except Exception as e:
                self._log_once(f"a background tuning's completion failed: {type(e).__name__}: {e}")
                log.debug("autocutlass: background completion traceback", exc_info=True)
            with self._cond:
                self._running = None
                self._keys.discard(job.key)
                self.completed += 1
                self._cond.notify_all()

    def _log_once(self, message: str) -> None:
        if message not in self._logged:
            self._logged.add(message)
            log.warning("autocutlass: %s", message)


_TUNERS: weakref.WeakSet[BackgroundTuner] = weakref.WeakSet()
_SHARED: BackgroundTuner | None = None
_SHARED_LOCK = threading.Lock()


def shared() -> BackgroundTuner:
    """The process's background tuner (made on first use; a forked child keeps the object and
    starts its own thread on its first job)."""
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is None:
            _SHARED = BackgroundTuner()
        return _SHARED


def _at_exit() -> None:
    for tuner in list(_TUNERS):
        tuner.shutdown(EXIT_WAIT_S)


def _after_fork_in_child() -> None:
    global _SHARED_LOCK
    _SHARED_LOCK = threading.Lock()
    for tuner in list(_TUNERS):
        tuner._reset()


atexit.register(_at_exit)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)

__all__ = ["BACKGROUND_NOTE", "EXIT_WAIT_S", "BackgroundTuner", "shared"]

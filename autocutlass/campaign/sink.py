"""``SharedTuningSink``: a ``TrialSink`` for processes that share one tuning database.

Two rules that plain ``TuningStore`` recording does not keep:

* **One tunes, the others serve.** ``claim(problem, hard_key, ...)`` answers a ``TuningClaim``
  to exactly one process at a time per (problem, hard key), across every process and host using
  the database (``db.locks.problem_lock_name`` in ``db.locks.locks_for``), and only while no other
  process of the host times candidates on the same GPU (``db.locks.gpu_lock_name`` in the
  host-wide ``db.locks.host_gpu_locks``). It answers None when another process tunes the
  problem, when the GPU is busy, or when the problem got its best record meanwhile: the caller
  then serves the best config available (a bucket or neighbour record, else the family's default)
  and looks the problem up again later, when the other process's result is stored. The claim is
  released at the end of its ``with`` block, or by the operating system / database server when
  its process dies (locks, not rows: a crash leaves nothing to clean up).
* **Arbitrated winners.** ``record_best`` keeps the faster of the stored best and the new one
  (``TuningStore.merge_best``); both runs' trials stay recorded. Never last-writer-wins. Torch's
  time for the problem (its vendor record) goes with the winner kept: a verdict compares two
  times of one tuning.

Order: the problem's lock, then the GPU's. A process holding a GPU lock never waits for a problem
lock, so two processes cannot wait for each other.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from autocutlass.db.store import TuningStore
from autocutlass.db.locks import (
    HeldLock,
    LockSpace,
    acquire,
    gpu_lock_name,
    host_gpu_locks,
    locks_for,
    problem_lock_name,
)
from autocutlass.db.records import TrialRecord, TrialState
from autocutlass.device import HardKey
from autocutlass.vendor import VENDOR_FAMILY, verdict_pair
from autocutlass.ops.base import OpProblem

log = logging.getLogger("autocutlass")


class ClaimTimeout(Exception):
    """A bounded claim (``SharedTuningSink.claim(wait_s=...)``) found a lock still taken when its
    time ran out."""


class TuningClaim:
    """The right to tune ``problem`` under ``hard_key`` on GPU ``gpu`` now; a context manager
    that releases it (``release()`` is idempotent)."""

    def __init__(self, problem: OpProblem, hard_key: HardKey, gpu: str, locks: Sequence[HeldLock]) -> None:
        self.problem = problem
        self.hard_key = hard_key
        self.gpu = gpu
        self._locks = list(locks)

    def release(self) -> None:
        for lock in reversed(self._locks):
            lock.release()
        self._locks = []

    def __enter__(self) -> TuningClaim:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class SharedTuningSink:
    """See the module docstring. ``gpu_of(device_index)`` names a GPU for its lock (default: its
    UUID through torch, ``campaign.gpus.device_uuid``)."""

    def __init__(
        self,
        store: TuningStore,
        *,
        problem_locks: LockSpace | None = None,
        gpu_locks: LockSpace | None = None,
        gpu_of: Callable[[int], str] | None = None,
    ) -> None:
        self.store = store
        self.problem_locks = problem_locks if problem_locks is not None else locks_for(store.url)
        self.gpu_locks = gpu_locks if gpu_locks is not None else host_gpu_locks()
        self._gpu_of = gpu_of
        self._ours: dict[tuple[str, HardKey], bool] = {}
        """(problem, GPU) -> whether this sink's last record of ours for it was stored: where the
        tuner's vendor record (torch's time, recorded after ours) goes."""

    def __repr__(self) -> str:
        return f"SharedTuningSink({self.store.display!r})"

    # ---- the claim ---------------------------------------------------------------------------
    def claim(self, problem: OpProblem, hard_key: HardKey, *, device_index: int = 0, gpu: str | None = None,
              wait: threading.Event | None = None, wait_s: float | None = None) -> TuningClaim | None:  # fmt: skip
        """The right to tune ``problem`` under ``hard_key`` on this process's CUDA device
        ``device_index`` (or the GPU whose lock id is ``gpu``), or None (module docstring).

        Without ``wait`` nothing waits (a server's call must not). With ``wait`` (a worker), the
        locks are waited for until that event is set (then None), each for at most ``wait_s``
        seconds when given (then ``ClaimTimeout``: its holder may hang); None also when the
        problem has an exact best record under ``hard_key`` by the time its lock is held."""
        gpu_id = gpu if gpu is not None else self._gpu_id(device_index)
        name = problem_lock_name(problem, hard_key)
        held = self._take(self.problem_locks, name, wait, None, wait_s)
        if held is None and wait is not None and wait_s is not None and not wait.is_set():
            raise ClaimTimeout(f"the lock of {problem.describe()} stayed taken for {wait_s:g} s")
        if held is None:
            return None
        try:
            found = self.store.lookup(problem, hard_key)
            if found is not None and found.source == "exact":
                held.release()
                return None
            gpu_held = self._take(self.gpu_locks, gpu_lock_name(gpu_id), wait,
                                  f"waiting for GPU {gpu_id}: another process times candidates on it", wait_s)  # fmt: skip
        except BaseException:
            held.release()
            raise
        if gpu_held is None:
            held.release()
            if wait is not None and wait_s is not None and not wait.is_set():
                raise ClaimTimeout(f"GPU {gpu_id}'s lock stayed taken for {wait_s:g} s")
            return None
        return TuningClaim(problem, hard_key, gpu_id, [held, gpu_held])

    @staticmethod
    def _take(space: LockSpace, name: str, wait: threading.Event | None, note: str | None = None,
              wait_s: float | None = None) -> HeldLock | None:  # fmt: skip
        if wait is None:
            return space.try_acquire(name)
        return acquire(space, name, stop=wait, on_wait=(lambda: log.info("autocutlass: %s", note)) if note else None,
                       timeout_s=wait_s)  # fmt: skip

    def _gpu_id(self, device_index: int) -> str:
        if self._gpu_of is not None:
            return self._gpu_of(device_index)
        from autocutlass.campaign.gpus import device_uuid

        return device_uuid(device_index)

    # ---- TrialSink ---------------------------------------------------------------------------
    def record_trial(
        self,
        problem: OpProblem,
        hard_key: HardKey,
        family: str,
        config: Mapping[str, Any],
        state: TrialState | str,
        reason: str | None = None,
        median_ms: float | None = None,
        p20_ms: float | None = None,
        p80_ms: float | None = None,
        tflops: float | None = None,
    ) -> int:
        return self.store.record_trial(problem, hard_key, family, config, state, reason, median_ms=median_ms,
                                       p20_ms=p20_ms, p80_ms=p80_ms, tflops=tflops)  # fmt: skip

    def record_best(
        self,
        problem: OpProblem,
        hard_key: HardKey,
        family: str,
        config: Mapping[str, Any],
        median_ms: float,
        tflops: float,
        trial_id: int | None = None,
    ) -> None:
        """Keep the faster of the stored best and this one (``TuningStore.merge_best``); torch's time
        (a vendor record, which the tuner records after its winner) follows that winner: stored
        over the one there when this run's winner was, dropped when the stored winner was kept, so
        that a verdict compares the times of one tuning (faster-wins where this sink recorded no
        winner of the problem)."""
        at = verdict_pair(problem.key(), hard_key)
        if family == VENDOR_FAMILY and at in self._ours:  # each variant's record (``vendor``) follows alike
            if self._ours[at]:
                self.store.record_best(problem, hard_key, family, config, median_ms, tflops, trial_id=trial_id)
            return
        stored = self.store.merge_best(problem, hard_key, family, config, median_ms, tflops, trial_id=trial_id)
        if family != VENDOR_FAMILY:
            self._ours[at] = stored
        if not stored:
            log.info("autocutlass: %s: a faster best was already stored; kept it (this run's %.4f ms is recorded "
                     "as a trial)", problem.describe(), median_ms)  # fmt: skip

    def finished_config_keys(self, problem: OpProblem, hard_key: HardKey, family: str) -> set[str]:
        return self.store.finished_config_keys(problem, hard_key, family)

    def trials(self, problem: OpProblem | None = None, hard_key: HardKey | None = None) -> list[TrialRecord]:
        return self.store.trials(problem, hard_key)


__all__ = ["SharedTuningSink", "TuningClaim"]

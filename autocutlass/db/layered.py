"""``LayeredStore``: the user's database over the read-only databases shipped with autocutlass.

Lookup order: the user database, then each ``<shipped_dir>/*.sqlite`` in name order, opened
read-only and immutable. The first exact record wins; when no layer has an exact one, the best
approximate record does: a bucket match beats a nearest-neighbour match, then the nearer
problem (``problem.neighbour_distance``), then the earlier layer.
A shipped file holding no record of the caller's hard key is skipped without a query.
``lookup_sibling`` ranks the records of sibling GPUs (same architecture and SM count, another GPU
model: ``HardKey.is_sibling_of``) the same way, in every layer; dispatch asks it after ``lookup``
found nothing it may use, so the shipped H200 database serves an H100 as a marked sibling.

A database that cannot be used (corrupt user file, bad shipped file, server down or not
answering within ``settings.DbTimeouts``) is left alone for a while: after a failure it is
not asked again for ``BACKOFF_FIRST_S`` seconds, doubling after each further failure up to
``BACKOFF_MAX_S``, and a success ends the outage. Meanwhile ``lookup`` answers from the other
layers and ``record_miss`` does nothing, at once, so dispatch keeps serving from its memo, the
shipped databases and its heuristic. An outage is reported once through the ``autocutlass.db``
logger (warning; retries that fail again log at debug level, the recovery at info level).
lookup and record_miss never raise DatabaseError. Writes go to the user database only.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autocutlass.db.records import BestRecord, canonical_json, hard_key_from_json
from autocutlass.db.store import TuningStore, dims_distance
from autocutlass.device import HardKey
from autocutlass.errors import DatabaseError
from autocutlass.ops.base import OpProblem

logger = logging.getLogger("autocutlass.db")

_RANK = {"exact": 0, "bucket": 1, "nearest": 2}

BACKOFF_FIRST_S = 30.0
"""How long a database is left alone after it failed (an outage's first failure)."""

BACKOFF_MAX_S = 300.0
"""The longest wait between two tries of a database that keeps failing (doubling from the first)."""


def _parsed(keys: frozenset[str]) -> list[HardKey]:
    """The hard keys of a shipped database (``HardKey.key()`` texts), parsed."""
    return [hard_key_from_json(k) for k in keys]


def shipped_db_paths(shipped_dir: Path | None) -> list[Path]:
    """The ``*.sqlite`` files of ``shipped_dir`` in name order (none if it is None or missing)."""
    if shipped_dir is None or not shipped_dir.is_dir():
        return []
    return sorted(p for p in shipped_dir.glob("*.sqlite") if p.is_file())


@dataclass(frozen=True)
class _Outage:
    retry_at: float  # clock() value from which the database is tried again
    delay: float  # the wait that ``retry_at`` was set with


class LayeredStore:
    """The user's ``TuningStore`` over shipped read-only ones; see the module docstring.

    Keep one instance per process (dispatch holds it): it remembers which shipped files hold
    which hard keys, which databases are down and what it already reported. Safe to share
    between threads. ``clock`` (seconds, monotonic) is for tests.
    """

    def __init__(self, user: TuningStore, shipped_dir: Path | None, *, clock: Callable[[], float] = time.monotonic):
        self.user = user
        self.shipped_dir = shipped_dir
        self._clock = clock
        self._shipped: list[tuple[TuningStore, frozenset[str]]] | None = None
        self._reported: set[str] = set()
        self._outages: dict[str, _Outage] = {}
        self._lock = threading.Lock()

    def shipped_paths(self) -> list[Path]:
        """The shipped database files, in the order they are consulted."""
        return shipped_db_paths(self.shipped_dir)

    # ---- health of each layer ----------------------------------------------------------------
    def is_down(self, store: TuningStore) -> bool:
        """True while ``store`` is left alone after a failure (its backoff has not run out)."""
        outage = self._outages.get(store.display)
        return outage is not None and self._clock() < outage.retry_at

    def _failed(self, store: TuningStore, err: DatabaseError) -> None:
        with self._lock:
            before = self._outages.get(store.display)
            delay = BACKOFF_FIRST_S if before is None else min(before.delay * 2, BACKOFF_MAX_S)
            self._outages[store.display] = _Outage(self._clock() + delay, delay)
        if before is None:
            logger.warning(
                "autocutlass: tuning database %s is unusable; not using it for %.0f s (lookups fall "
                "back to the other databases): %s",
                store.display, delay, err,
            )  # fmt: skip
        else:
            logger.debug("autocutlass: tuning database %s still unusable; next try in %.0f s: %s",
                         store.display, delay, err)  # fmt: skip

    def _worked(self, store: TuningStore) -> None:
        if store.display in self._outages:
            with self._lock:
                ended = self._outages.pop(store.display, None)
            if ended is not None:
                logger.info("autocutlass: tuning database %s is usable again", store.display)

    def _call(self, store: TuningStore, fn: Callable[[], Any], default: Any) -> Any:
        """``fn()``, or ``default`` at once while ``store`` is down or when ``fn`` fails."""
        if self.is_down(store):
            return default
        try:
            result = fn()
        except DatabaseError as e:
            self._failed(store, e)
            return default
        self._worked(store)
        return result

    # ---- layers ------------------------------------------------------------------------------
    def _report(self, where: str, err: DatabaseError) -> None:
        if where not in self._reported:
            self._reported.add(where)
            logger.warning("autocutlass: skipping tuning database %s: %s", where, err)

    def _shipped_stores(self) -> list[tuple[TuningStore, frozenset[str]]]:
        if self._shipped is None:
            opened = []
            for path in self.shipped_paths():
                store = TuningStore(path, read_only=True, immutable=True)
                try:
                    keys = frozenset(hk.key() for hk in store.hard_keys())
                except DatabaseError as e:
                    self._report(str(path), e)
                    continue
                opened.append((store, keys))
            self._shipped = opened
        return self._shipped

    def lookup(self, problem: OpProblem, hard_key: HardKey) -> BestRecord | None:
        """The best record for ``problem`` under ``hard_key`` across all layers, or None.

        An exact record of the earliest layer that has one wins. Otherwise each layer's own
        answer competes, ranked by (bucket before nearest, ``problem.neighbour_distance`` of its
        problem, layer order). Never raises DatabaseError: a failing layer is left alone for a
        while (see the module docstring) and the others answer.
        """
        hk = hard_key.key()
        layers = [self.user] + [store for store, keys in self._shipped_stores() if hk in keys]
        return self._best_of(problem, layers, lambda s: s.lookup(problem, hard_key))

    def lookup_sibling(self, problem: OpProblem, hard_key: HardKey) -> BestRecord | None:
        """The best record for ``problem`` measured on a sibling of ``hard_key``'s GPU
        (``TuningStore.lookup_sibling``) across all layers, ranked as ``lookup`` ranks; or None.
        A shipped database is asked only when it holds a sibling's records (the H200 database
        serves an H100 this way). Never raises DatabaseError."""
        layers = [self.user] + [store for store, keys in self._shipped_stores()
                                if any(hard_key.is_sibling_of(k) for k in _parsed(keys))]  # fmt: skip
        return self._best_of(problem, layers, lambda s: s.lookup_sibling(problem, hard_key))

    def class_winners(self, problem: OpProblem, hard_key: HardKey, *, limit: int = 4) -> list[BestRecord]:
        """``TuningStore.class_winners`` over every layer that holds records of ``hard_key`` or of
        a sibling: nearest first (``dims_distance``), then this GPU's before a sibling's, then the
        earlier layer; one record per (family, config), at most ``limit``. Never raises
        DatabaseError."""
        layers = [self.user] + [store for store, keys in self._shipped_stores()
                                if hard_key.key() in keys or any(hard_key.is_sibling_of(k) for k in _parsed(keys))]  # fmt: skip
        ranked: list[tuple[tuple[float, bool, int, int], BestRecord]] = []
        for index, store in enumerate(layers):
            found: list[BestRecord] = self._call(store, lambda s=store: s.class_winners(problem, hard_key, limit=limit), [])
            for order, rec in enumerate(found):
                ranked.append(((dims_distance(problem, rec.problem), rec.sibling, index, order), rec))
        out: list[BestRecord] = []
        seen: set[tuple[str, str]] = set()
        for _, rec in sorted(ranked, key=lambda r: r[0]):
            ident = (rec.family, canonical_json(rec.config))
            if ident not in seen:
                seen.add(ident)
                out.append(rec)
        return out[:limit]

    def seed_configs(self, problem: OpProblem, hard_key: HardKey, family: str, *, limit: int = 4) -> list[dict[str, Any]]:
        """The configs of ``family`` a tuning of ``problem`` under ``hard_key`` should evaluate
        first, the priors dispatch gives an on-line tuning: this GPU's record (of the problem, its
        bucket or its nearest neighbour, ``lookup``), a sibling GPU's (``lookup_sibling``: the
        H100 file's winner when an H200 tunes), then the winners of the nearest tuned problems of
        the kernel class (``class_winners``, at most ``limit``), then each layer's newest retired
        winner of the problem on this GPU (``TuningStore.retired_configs``: a record of older kernel
        sources, so that a re-tuning after a kernel change starts from the old winner). Records of
        other families are left out; one entry per config, in that order. Never raises
        DatabaseError."""
        found = [self.lookup(problem, hard_key), self.lookup_sibling(problem, hard_key),
                 *self.class_winners(problem, hard_key, limit=limit)]  # fmt: skip
        configs = [dict(rec.config) for rec in found if rec is not None and rec.family == family]
        for store in [self.user] + [store for store, _ in self._shipped_stores()]:
            configs += self._call(store, lambda s=store: s.retired_configs(problem, hard_key, family), [])[:1]
        out: list[dict[str, Any]] = []
        seen: set[str] = set()
        for cfg in configs:
            ident = canonical_json(cfg)
            if ident not in seen:
                seen.add(ident)
                out.append(cfg)
        return out

    def _best_of(self, problem: OpProblem, layers: list[TuningStore],
                 ask: Callable[[TuningStore], BestRecord | None]) -> BestRecord | None:  # fmt: skip
        best: tuple[tuple[int, tuple[float, ...], int], BestRecord] | None = None
        for index, store in enumerate(layers):
            rec: BestRecord | None = self._call(store, lambda s=store: ask(s), None)
            if rec is None:
                continue
            if rec.source == "exact":
                return rec
            rank = (_RANK[rec.source], tuple(problem.neighbour_distance(rec.problem)), index)
            if best is None or rank < best[0]:
                best = (rank, rec)
        return None if best is None else best[1]

    def record_miss(self, problem: OpProblem, hard_key: HardKey) -> None:
        """Best-effort miss counting in the user database: nothing while it is down or read-only
        (a file this process cannot write: the store said so once); a failure starts its
        backoff and is reported once, never raised."""
        user = self.user
        if user.read_only or self.is_down(user):
            return
        try:
            user.record_miss(problem, hard_key)
        except DatabaseError as e:
            if not user.read_only:  # found read-only just now: not an outage, lookups still work
                self._failed(user, e)
            return
        self._worked(user)

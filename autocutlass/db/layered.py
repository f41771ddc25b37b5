"""``LayeredStore``: the user's database over the read-only databases shipped with autocutlass.

Lookup order: the user database, then each ``<shipped_dir>/*.sqlite`` in name order, opened
read-only and immutable. The first exact record wins; when no layer has an exact one, the best
approximate record does (a bucket match beats a nearest-M match, then the nearer M), earlier
layers winning ties.
A shipped file holding no record of the caller's hard key is skipped without a query.

A database that cannot be used (corrupt user file, bad shipped file, server down) is reported
once through the ``autocutlass.db`` logger and left out; lookup never raises DatabaseError, so
dispatch falls back instead of failing a matmul. Writes go to the user database only.
"""

from __future__ import annotations

import logging
from pathlib import Path

from autocutlass.db.records import BestRecord
from autocutlass.db.store import TuningStore, m_distance
from autocutlass.device import HardKey
from autocutlass.errors import DatabaseError
from autocutlass.ops.gemm.problem import GemmProblem

logger = logging.getLogger("autocutlass.db")

_RANK = {"exact": 0, "bucket": 1, "nearest_m": 2}


def shipped_db_paths(shipped_dir: Path | None) -> list[Path]:
    """The ``*.sqlite`` files of ``shipped_dir`` in name order (none if it is None or missing)."""
    if shipped_dir is None or not shipped_dir.is_dir():
        return []
    return sorted(p for p in shipped_dir.glob("*.sqlite") if p.is_file())


class LayeredStore:
    """The user's ``TuningStore`` over shipped read-only ones; see the module docstring.

    Keep one instance per process (dispatch holds it): it remembers which shipped files hold
    which hard keys and which problems it already reported.
    """

    def __init__(self, user: TuningStore, shipped_dir: Path | None):
        self.user = user
        self.shipped_dir = shipped_dir
        self._shipped: list[tuple[TuningStore, frozenset[str]]] | None = None
        self._reported: set[str] = set()

    def shipped_paths(self) -> list[Path]:
        """The shipped database files, in the order they are consulted."""
        return shipped_db_paths(self.shipped_dir)

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

    def lookup(self, problem: GemmProblem, hard_key: HardKey) -> BestRecord | None:
        """The best record for ``problem`` under ``hard_key`` across all layers, or None.

        An exact record of the earliest layer that has one wins. Otherwise each layer's own
        answer competes: a bucket match beats a nearest-M match, then the smaller log2 distance
        in M, then the larger M, then the earlier layer. Never raises DatabaseError (unusable
        layers are reported once and skipped).
        """
        hk = hard_key.key()
        layers = [self.user] + [store for store, keys in self._shipped_stores() if hk in keys]
        best: tuple[tuple[int, float, int, int], BestRecord] | None = None
        for index, store in enumerate(layers):
            try:
                rec = store.lookup(problem, hard_key)
            except DatabaseError as e:
                self._report(store.display, e)
                continue
            if rec is None:
                continue
            if rec.source == "exact":
                return rec
            rank = (_RANK[rec.source], m_distance(rec.problem.m, problem.m), -rec.problem.m, index)
            if best is None or rank < best[0]:
                best = (rank, rec)
        return None if best is None else best[1]

    def record_miss(self, problem: GemmProblem, hard_key: HardKey) -> None:
        """Best-effort miss counting in the user database: a DatabaseError is reported once, not raised."""
        try:
            self.user.record_miss(problem, hard_key)
        except DatabaseError as e:
            self._report(self.user.display, e)

"""``TuningStore``: lookup and recording of tuning results in one database (SQLite file or URL).

Contract:

* Problems of every op are stored (``OpProblem``: ``op``, ``key()``, ``bucket_key()``,
  ``neighbour_key()``, ``dims()``, ``as_dict()``) and rebuilt with ``ops.registry.problem_from_dict``.
* Only records whose device hard key equals the caller's ``HardKey`` are ever returned, except by
  ``lookup_sibling``, whose records (measured on a sibling GPU, ``HardKey.is_sibling_of``) come
  back marked ``sibling`` with their own hard key.
* Every public method is one transaction on its own session; results are frozen dataclasses.
* Every storage failure (unreachable, corrupt, not ours, locked beyond the retry budget) raises
  ``autocutlass.errors.DatabaseError`` (``SchemaMismatch`` for a version mismatch) whose message
  names the database and the fix. Constructing a store never touches the database: the first
  call opens it (the first write creates the tables of a new database) and validates its schema
  once per process.
* The lookups of a SQLite file (``lookup``, ``lookup_sibling``, ``class_winners``,
  ``hard_keys``) read it through the standard library (``db.sqlite_read``), never importing
  SQLAlchemy: a process that serves stored results pays no ORM import. A read-write store's file
  that does not exist yet, or has no tables, reads as one without records. Every other call (and
  every call on a database server) goes through SQLAlchemy, imported then.
* A read-only store (``read_only=True``) never creates or writes anything: a missing file raises
  DatabaseError, a database without tables reads as one without records, writes raise
  DatabaseError. A read-write store over a SQLite file this process cannot write (file or
  directory not writable, decided once per store when it is first used) opens it read-only
  instead and says so once (a warning on the ``autocutlass.db`` logger).
* Writes are safe from many processes at once (see ``engine``).
"""

# ruff: noqa: TC004 - the SQLAlchemy names are imported for type checking and bound lazily at run time

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from autocutlass.db.location import MAX_ATTEMPTS, resolve
from autocutlass.db.records import (
    BestRecord,
    LookupSource,
    TrialRecord,
    TrialState,
    from_db_time,
    hard_key_from_json,
    stored_problem,
    utc_now,
)
from autocutlass.db.sqlite_read import SqliteReader
from autocutlass.db.versions import EmptyDatabase
from autocutlass.device import HardKey
from autocutlass.errors import DatabaseError
from autocutlass.keys import canonical_json, config_key
from autocutlass.ops.base import OpProblem
from autocutlass.settings import DbTimeouts
from autocutlass.vendor import VENDOR_FAMILY

if TYPE_CHECKING:  # bound at run time by _import_sqlalchemy, on first use
    from sqlalchemy import Engine, Row, and_, distinct, func, or_, select
    from sqlalchemy.orm import Session

    from autocutlass.db import engine as eng
    from autocutlass.db.models import Best, Device, Miss, ProblemRow, Trial
    from autocutlass.db.rows import ensure_device, ensure_problem, upsert_best, upsert_miss
    from autocutlass.db.schema import ensure_schema


def _import_sqlalchemy() -> None:
    """Bind SQLAlchemy, the models and the engine layer to this module's names, on first use.

    A process that only looks records up in SQLite files never needs them (``db.sqlite_read``
    answers those reads), and importing them costs most of a cold process's first call; every
    method that builds a statement runs after ``TuningStore._engine``, which calls this first."""
    global Engine, Row, and_, distinct, func, or_, select, Session, eng, Best, Device, Miss, ProblemRow, Trial
    global ensure_device, ensure_problem, upsert_best, upsert_miss, ensure_schema
    from sqlalchemy import Engine, Row, and_, distinct, func, or_, select
    from sqlalchemy.orm import Session

    from autocutlass.db import engine as eng
    from autocutlass.db.models import Best, Device, Miss, ProblemRow, Trial
    from autocutlass.db.rows import ensure_device, ensure_problem, upsert_best, upsert_miss
    from autocutlass.db.schema import ensure_schema


T = TypeVar("T")

SQLITE_READS_ENV = "AUTOCUTLASS_DB_SQLITE_READS"
"""``0``: a store's lookups of a SQLite file go through SQLAlchemy too (read when the store is
made); by default they read the file through the standard library (``db.sqlite_read``)."""

logger = logging.getLogger("autocutlass.db")


@dataclass(frozen=True)
class _Candidate:
    """A stored best record that may answer a lookup (package-internal)."""

    key: str
    problem: OpProblem
    row: Row[Any]


def _device_match(hard_key: HardKey, sibling: bool) -> tuple[Any, ...]:
    """WHERE clauses of the devices a lookup reads: ``hard_key`` itself, or its siblings (every
    hard-key field equal but the GPU name, ``HardKey.is_sibling_of``)."""
    if not sibling:
        return (Device.hard_key == hard_key.key(),)
    return (
        Device.gpu_name != hard_key.gpu_name,
        Device.cc == hard_key.cc,
        Device.sm_count == hard_key.sm_count,
        Device.dsl_version == hard_key.dsl_version,
        Device.kernel_hash == hard_key.kernel_hash,
        Device.protocol_version == hard_key.protocol_version,
    )


def dims_distance(a: OpProblem, b: OpProblem) -> float:
    """How far apart two problems of one op are in size: the sum over their ``dims()`` of the
    distance of the log2 sizes (0 for equal sizes; 1 per doubling of one dimension)."""
    da, db = a.dims(), b.dims()
    return float(sum(abs(math.log2(max(da[k], 1)) - math.log2(max(db[k], 1))) for k in da if k in db))


class TuningStore:
    """One tuning database. See the module docstring for the contract."""

    def __init__(
        self,
        url_or_path: str | os.PathLike[str],
        *,
        read_only: bool = False,
        immutable: bool = False,
        timeouts: DbTimeouts | None = None,
    ):
        """``url_or_path``: a file path (becomes SQLite) or a SQLAlchemy URL. ``read_only`` never
        creates or writes anything (a SQLite file is opened ``mode=ro``, ``immutable=1`` where
        its directory is not writable); ``immutable`` (implies ``read_only``) also skips locking,
        for files nothing writes to (shipped databases). ``timeouts`` bound waits on a database
        server (default: ``DbTimeouts.from_env()``, read when the database is first opened)."""
        self._loc = resolve(url_or_path)
        self._read_only = read_only or immutable
        self._immutable = immutable
        fast = self._loc.sqlite_path is not None and os.environ.get(SQLITE_READS_ENV, "1").strip() != "0"
        self._attempts = MAX_ATTEMPTS if timeouts is None else timeouts.attempts
        self._reader = (SqliteReader(self._loc, immutable=immutable, busy_s=None if timeouts is None else timeouts.busy_s,
                                     attempts=self._attempts) if fast else None)  # fmt: skip
        self._timeouts = timeouts
        self._read_only_reason: str | None = "opened read-only" if self._read_only else None
        self._access_checked = self._read_only

    def __repr__(self) -> str:
        mode = ", read_only=True" if self._read_only else ""
        return f"TuningStore({self._loc.display!r}{mode})"

    @property
    def url(self) -> str:
        """The SQLAlchemy URL (may contain a password: do not print it; use ``display``)."""
        return self._loc.url

    @property
    def display(self) -> str:
        """The file path, or the URL with its password hidden."""
        return self._loc.display

    @property
    def read_only(self) -> bool:
        """True when asked for, or once the store found its SQLite file not writable."""
        return self._read_only

    # ---- plumbing --------------------------------------------------------------------------
    def _engine(self) -> Engine:
        _import_sqlalchemy()
        if not self._access_checked:
            # Once per store: a SQLite file this process cannot write is read, not failed on.
            path = self._loc.sqlite_path
            why = eng.sqlite_unwritable(path) if path is not None else None
            if why is not None:
                self._read_only, self._read_only_reason = True, why
                logger.warning(
                    "autocutlass: the tuning database %s cannot be written (%s); using it read-only: lookups "
                    "work, new tuning results and misses are not recorded there.",
                    self.display, why,
                )  # fmt: skip
            self._access_checked = True
        if self._timeouts is None and not self._loc.is_sqlite:
            self._timeouts = DbTimeouts.from_env()
        read_only = self._read_only
        return eng.cached_engine(
            self._loc,
            read_only=read_only,
            immutable=self._immutable,
            timeouts=self._timeouts,
            prepare=lambda e: ensure_schema(e, self._loc, read_only=read_only, attempts=self._attempts),
        )

    def _read(self, fn: Callable[[Session], T], empty: T) -> T:
        """Run ``fn`` in one read transaction (package-internal; ``fn`` must not leak ORM objects).
        ``empty`` is the answer of a read-only database that has no tables."""
        try:
            engine = self._engine()
        except EmptyDatabase:
            return empty

        def _tx() -> T:
            with eng.session(engine, write=False) as s:
                return fn(s)

        return eng.call(self._loc, _tx, self._attempts)

    def _write(self, fn: Callable[[Session], T]) -> T:
        """Run ``fn`` in one write transaction, retried as a whole on lock contention."""
        if not self._access_checked:
            self._engine()
        if self._read_only:
            raise DatabaseError(
                f"The tuning database {self.display} is open read-only ({self._read_only_reason}); it cannot "
                "be written. Make it writable, or point AUTOCUTLASS_DB at a writable file."
            )
        engine = self._engine()

        def _tx() -> T:
            with eng.session(engine, write=True) as s:
                return fn(s)

        return eng.call(self._loc, _tx, self._attempts)

    def _sqlite_reader(self) -> SqliteReader | None:
        """The standard-library reader that answers lookups of a SQLite file without SQLAlchemy
        (``db.sqlite_read``), or None for a database server. A read-only store of a file that
        does not exist raises DatabaseError, as its SQLAlchemy path does."""
        path = self._loc.sqlite_path
        if self._reader is not None and self._read_only and path is not None:
            try:
                missing = not path.is_file()
            except OSError as e:  # a directory this process cannot enter (EACCES)
                raise DatabaseError(f"Cannot read the tuning database {self.display}: {e}") from e
            if missing:
                raise DatabaseError(f"The tuning database {self.display} does not exist.")
        return self._reader

    def check(self) -> None:
        """Open the database now (a read-write store creates a new one) and validate it; raises
        DatabaseError. A read-only database without tables passes (it reads as empty)."""
        try:
            self._engine()
        except EmptyDatabase:
            pass

    # ---- lookup ----------------------------------------------------------------------------
    def lookup(self, problem: OpProblem, hard_key: HardKey) -> BestRecord | None:
        """The best record for ``problem`` measured under ``hard_key``, or None.

        Tries, among records of ``hard_key`` only: the exact problem (``key()``); else the
        tuned problem of the same bucket (``bucket_key()``) nearest by
        ``problem.neighbour_distance``; else the tuned problem of the same ``neighbour_key()``
        nearest by ``problem.neighbour_distance`` (equal distances: the smaller key text).
        ``BestRecord.source`` says which; ``BestRecord.problem`` is the tuned problem. A stored
        problem this autocutlass cannot read is skipped (logged), never returned.
        """
        return self._lookup(problem, hard_key, sibling=False)

    def lookup_sibling(self, problem: OpProblem, hard_key: HardKey) -> BestRecord | None:
        """The best record for ``problem`` measured on a *sibling* of ``hard_key``'s GPU
        (``HardKey.is_sibling_of``: another GPU name, everything else equal), or None.

        The same tiers as ``lookup`` (exact, bucket, nearest); among several sibling GPUs the
        nearer problem wins, then the smaller key text, then the GPU name. The record comes back
        with ``sibling`` True and the sibling's ``hard_key``: it was not measured here."""
        return self._lookup(problem, hard_key, sibling=True)

    def _lookup(self, problem: OpProblem, hard_key: HardKey, *, sibling: bool) -> BestRecord | None:
        key, bucket_key, neighbour_key = problem.key(), problem.bucket_key(), problem.neighbour_key()

        def _q(s: Session) -> list[Row[Any]]:
            stmt = (
                select(
                    ProblemRow.key, ProblemRow.op, ProblemRow.bucket_key, ProblemRow.problem,
                    Best.family, Best.config, Best.median_ms, Best.tflops, Device.hard_key.label("device_key"),
                )
                .join(Best, Best.problem_id == ProblemRow.id)
                .join(Device, Device.id == Best.device_id)
                .where(
                    or_(ProblemRow.key == key, ProblemRow.bucket_key == bucket_key,
                        ProblemRow.neighbour_key == neighbour_key),
                    *_device_match(hard_key, sibling),
                )
            )  # fmt: skip
            return list(s.execute(stmt).all())

        reader = self._sqlite_reader()
        rows = reader.lookup_rows(key, bucket_key, neighbour_key, hard_key, sibling=sibling) if reader else self._read(_q, [])
        exact: list[_Candidate] = []
        same_bucket: list[_Candidate] = []
        neighbours: list[_Candidate] = []
        for row in rows:
            if row.op != problem.op:
                continue
            if sibling and not hard_key.is_sibling_of(hard_key_from_json(row.device_key)):
                continue
            try:
                tuned = stored_problem(row.problem, self.display)
            except DatabaseError as e:
                logger.warning("autocutlass: skipping a stored record: %s", e)
                continue
            cand = _Candidate(row.key, tuned, row)
            # the bucket under today's rule, from the stored problem: a row written under an older
            # rule (GEMM M buckets were whole octaves until 2026-11-25) keeps a stale bucket_key
            (exact if row.key == key else same_bucket if tuned.bucket_key() == bucket_key else neighbours).append(cand)
        tiers: tuple[tuple[list[_Candidate], LookupSource], ...] = (
            (exact, "exact"), (same_bucket, "bucket"), (neighbours, "nearest"),
        )  # fmt: skip
        for found, source in tiers:
            if found:
                best = min(found, key=lambda c: (problem.neighbour_distance(c.problem), c.key, c.row.device_key))
                measured = hard_key_from_json(best.row.device_key) if sibling else hard_key
                return self._best_record(best, measured, source, sibling=sibling)
        return None

    def class_winners(self, problem: OpProblem, hard_key: HardKey, *, limit: int = 4) -> list[BestRecord]:
        """Winners of other tuned problems of ``problem``'s op and kernel class (equal
        ``kernel_class_key()``: the same dtypes, layouts, alignments and epilogue, any sizes),
        measured under ``hard_key`` or on a sibling GPU: priors for tuning ``problem`` (seeds,
        and a stand-in while it is tuned). Nearest first by ``dims_distance``, then this GPU's
        before a sibling's; one record per (family, config), at most ``limit``. ``source`` is
        "nearest"; ``sibling`` and ``hard_key`` say who measured each."""
        class_key = problem.kernel_class_key()

        def _q(s: Session) -> list[Row[Any]]:
            stmt = (
                select(
                    ProblemRow.key, ProblemRow.op, ProblemRow.bucket_key, ProblemRow.problem,
                    Best.family, Best.config, Best.median_ms, Best.tflops, Device.hard_key.label("device_key"),
                )
                .join(Best, Best.problem_id == ProblemRow.id)
                .join(Device, Device.id == Best.device_id)
                .where(ProblemRow.op == problem.op,
                       or_(Device.hard_key == hard_key.key(), and_(*_device_match(hard_key, sibling=True))))
            )  # fmt: skip
            return list(s.execute(stmt).all())

        reader = self._sqlite_reader()
        ranked: list[tuple[tuple[float, bool, str], _Candidate, HardKey]] = []
        for row in reader.class_rows(problem.op, hard_key) if reader else self._read(_q, []):
            measured = hard_key_from_json(row.device_key)
            sibling = measured != hard_key
            if sibling and not hard_key.is_sibling_of(measured):
                continue
            try:
                tuned = stored_problem(row.problem, self.display)
            except DatabaseError as e:
                logger.warning("autocutlass: skipping a stored record: %s", e)
                continue
            if tuned.kernel_class_key() != class_key:
                continue
            ranked.append(((dims_distance(problem, tuned), sibling, row.key), _Candidate(row.key, tuned, row), measured))
        out: list[BestRecord] = []
        seen: set[tuple[str, str]] = set()
        for (_, sibling, _), cand, measured in sorted(ranked, key=lambda r: r[0]):
            ident = (cand.row.family, cand.row.config)
            if ident in seen:
                continue
            seen.add(ident)
            out.append(self._best_record(cand, measured, "nearest", sibling=sibling))
            if len(out) >= limit:
                break
        return out

    def retired_configs(self, problem: OpProblem, hard_key: HardKey, family: str) -> list[dict[str, Any]]:
        """The configs ``family`` won ``problem`` with on this GPU under other kernel sources or
        DSL versions (records a source change retired: same GPU name, compute capability and SM
        count, another ``kernel_hash`` or ``dsl_version``), newest first. Priors of
        a re-tuning after a kernel change: the old winner is usually still among the best. Never
        served (dispatch reads records of ``hard_key`` only)."""
        key = problem.key()

        def _q(s: Session) -> list[Row[Any]]:
            stmt = (
                select(Best.config, Best.updated_at)
                .join(ProblemRow, Best.problem_id == ProblemRow.id)
                .join(Device, Device.id == Best.device_id)
                .where(ProblemRow.key == key, Best.family == family, Device.gpu_name == hard_key.gpu_name,
                       Device.cc == hard_key.cc, Device.sm_count == hard_key.sm_count,
                       Device.hard_key != hard_key.key())
                .order_by(Best.updated_at.desc())
            )  # fmt: skip
            return list(s.execute(stmt).all())

        return [row.config if isinstance(row.config, dict) else json.loads(row.config) for row in self._read(_q, [])]

    def _best_record(self, cand: _Candidate, hard_key: HardKey, source: LookupSource, *,
                     sibling: bool = False) -> BestRecord:  # fmt: skip
        row = cand.row
        return BestRecord(
            problem=cand.problem,
            family=row.family,
            config=json.loads(row.config),
            median_ms=float(row.median_ms),
            tflops=float(row.tflops),
            hard_key=hard_key,
            source=source,
            origin=self.display,
            sibling=sibling,
        )

    # ---- recording -------------------------------------------------------------------------
    def record_device(self, hard_key: HardKey, info: Mapping[str, Any]) -> None:
        """Store informative device data (``DeviceInfo.as_dict()``) for ``hard_key``; never matched on."""
        self._write(lambda s: ensure_device(s, hard_key, info))

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
        """Append one evaluated candidate (any state, failures included); returns the trial id.

        ``config`` must be JSON-able plain data; it is stored as canonical JSON text.
        ``state`` may be a TrialState or its string value (ValueError otherwise).
        """
        st = TrialState(state)
        text = canonical_json(dict(config))
        ckey = config_key(dict(config))
        now = utc_now()

        def _tx(s: Session) -> int:
            trial = Trial(
                device_id=ensure_device(s, hard_key),
                problem_id=ensure_problem(s, problem),
                family=family,
                config=text,
                config_key=ckey,
                state=st.value,
                reason=reason,
                median_ms=median_ms,
                p20_ms=p20_ms,
                p80_ms=p80_ms,
                tflops=tflops,
                created_at=now,
            )
            s.add(trial)
            s.flush()
            return int(trial.id)

        return self._write(_tx)

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
        """Set the best of (problem, hard key), replacing any previous one: the tuner's verdict.

        Use ``merge_best`` to keep whichever is faster instead.
        """
        self._upsert_best(problem, hard_key, family, config, median_ms, tflops, trial_id, keep_faster=False)

    def merge_best(
        self,
        problem: OpProblem,
        hard_key: HardKey,
        family: str,
        config: Mapping[str, Any],
        median_ms: float,
        tflops: float,
        trial_id: int | None = None,
    ) -> bool:
        """Offer a best: stored only if there is none or it is strictly faster (lower median_ms).
        Returns True when it was stored."""
        return self._upsert_best(problem, hard_key, family, config, median_ms, tflops, trial_id, keep_faster=True)

    def _upsert_best(
        self,
        problem: OpProblem,
        hard_key: HardKey,
        family: str,
        config: Mapping[str, Any],
        median_ms: float,
        tflops: float,
        trial_id: int | None,
        *,
        keep_faster: bool,
    ) -> bool:
        text = canonical_json(dict(config))
        now = utc_now()

        def _tx(s: Session) -> bool:
            return upsert_best(
                s,
                problem_id=ensure_problem(s, problem),
                device_id=ensure_device(s, hard_key),
                family=family,
                config_text=text,
                median_ms=float(median_ms),
                tflops=float(tflops),
                trial_id=trial_id,
                updated_at=now,
                keep_faster=keep_faster,
            )

        stored = self._write(_tx)
        self._checkpoint()
        return stored

    def _checkpoint(self) -> None:
        """After a tuning's verdict: move a SQLite file's write-ahead log into the file itself
        (``wal_checkpoint(PASSIVE)``: it waits for nobody, and does what readers allow), so that a
        copy of the file alone (``cp`` of a live database, or of one whose writer was killed) holds
        the finished tunings. Best effort: a failure changes nothing recorded."""
        if not self._loc.is_sqlite or self._read_only:
            return
        try:
            with self._engine().connect() as conn:
                conn.exec_driver_sql("PRAGMA wal_checkpoint(PASSIVE)")
        except Exception as e:  # noqa: BLE001 - the records are committed; the log stays as SQLite keeps it
            logger.debug("autocutlass: WAL checkpoint of %s skipped: %s", self.display, e)

    def record_miss(self, problem: OpProblem, hard_key: HardKey) -> None:
        """Count one lookup miss of ``problem`` on ``hard_key`` (for ``autocutlass tune --pending``)."""
        now = utc_now()

        def _tx(s: Session) -> None:
            upsert_miss(
                s,
                problem_id=ensure_problem(s, problem),
                device_id=ensure_device(s, hard_key),
                count=1,
                first_seen=now,
                last_seen=now,
                mode="add",
            )

        self._write(_tx)

    # ---- queries ---------------------------------------------------------------------------
    def finished_config_keys(self, problem: OpProblem, hard_key: HardKey, family: str) -> set[str]:
        """``config_key``s of every trial already recorded (any state) for this problem, hard key
        and family: the candidates a resumed tuning run can skip."""

        def _q(s: Session) -> set[str]:
            stmt = (
                select(Trial.config_key)
                .join(ProblemRow, ProblemRow.id == Trial.problem_id)
                .join(Device, Device.id == Trial.device_id)
                .where(ProblemRow.key == problem.key(), Device.hard_key == hard_key.key(), Trial.family == family)
            )
            return set(s.execute(stmt).scalars())

        return self._read(_q, set())

    def trials(self, problem: OpProblem | None = None, hard_key: HardKey | None = None) -> list[TrialRecord]:
        """Recorded trials, oldest first, optionally only those of ``problem`` and/or ``hard_key``."""

        def _q(s: Session) -> list[TrialRecord]:
            stmt = (
                select(Trial, ProblemRow.problem, Device.hard_key)
                .join(ProblemRow, ProblemRow.id == Trial.problem_id)
                .join(Device, Device.id == Trial.device_id)
                .order_by(Trial.id)
            )
            if problem is not None:
                stmt = stmt.where(ProblemRow.key == problem.key())
            if hard_key is not None:
                stmt = stmt.where(Device.hard_key == hard_key.key())
            out = []
            for t, pdict, hk_text in s.execute(stmt):
                out.append(
                    TrialRecord(
                        id=t.id,
                        problem=stored_problem(pdict, self.display),
                        hard_key=hard_key_from_json(hk_text),
                        family=t.family,
                        config=json.loads(t.config),
                        config_key=t.config_key,
                        state=TrialState(t.state),
                        reason=t.reason,
                        median_ms=t.median_ms,
                        p20_ms=t.p20_ms,
                        p80_ms=t.p80_ms,
                        tflops=t.tflops,
                        created_at=from_db_time(t.created_at),
                    )
                )
            return out

        return self._read(_q, [])

    def bests(self, gpu: str | None = None, *, vendor: bool = False) -> list[BestRecord]:
        """Every best record (``source="exact"``, ``note`` the reason of its winning trial if any),
        optionally only those of GPU name ``gpu``; ordered by GPU name, op, neighbour key, problem
        key, then hard key. Torch's recorded times (``autocutlass.vendor``: family
        ``VENDOR_FAMILY``) only with ``vendor``."""

        def _q(s: Session) -> list[BestRecord]:
            stmt = (
                select(ProblemRow.problem, Best.family, Best.config, Best.median_ms, Best.tflops, Device.hard_key,
                       Trial.reason)
                .join(ProblemRow, ProblemRow.id == Best.problem_id)
                .join(Device, Device.id == Best.device_id)
                .outerjoin(Trial, Trial.id == Best.trial_id)
                .order_by(Device.gpu_name, ProblemRow.op, ProblemRow.neighbour_key, ProblemRow.key, Device.hard_key)
            )
            if gpu is not None:
                stmt = stmt.where(Device.gpu_name == gpu)
            if not vendor:
                stmt = stmt.where(Best.family != VENDOR_FAMILY)
            return [
                BestRecord(
                    problem=stored_problem(pdict, self.display),
                    family=family,
                    config=json.loads(cfg),
                    median_ms=float(med),
                    tflops=float(tf),
                    hard_key=hard_key_from_json(hk),
                    source="exact",
                    origin=self.display,
                    note=note,
                )
                for pdict, family, cfg, med, tf, hk, note in s.execute(stmt)
            ]

        return self._read(_q, [])

    def pending_misses(self, hard_key: HardKey | None = None) -> list[OpProblem]:
        """Problems that missed (on ``hard_key``, or on any device) and still have no best of
        their own there; most-missed first, each problem once."""

        def _q(s: Session) -> list[OpProblem]:
            stmt = (
                select(ProblemRow.key, ProblemRow.problem)
                .select_from(Miss)
                .join(ProblemRow, ProblemRow.id == Miss.problem_id)
                .join(Device, Device.id == Miss.device_id)
                .outerjoin(Best, (Best.problem_id == Miss.problem_id) & (Best.device_id == Miss.device_id))
                .where(Best.id.is_(None))
                .order_by(Miss.count.desc(), Miss.last_seen.desc(), Miss.id)
            )
            if hard_key is not None:
                stmt = stmt.where(Device.hard_key == hard_key.key())
            seen: set[str] = set()
            out = []
            for key, pdict in s.execute(stmt):
                if key not in seen:
                    seen.add(key)
                    out.append(stored_problem(pdict, self.display))
            return out

        return self._read(_q, [])

    def hard_keys(self) -> list[HardKey]:
        """Every hard key that has a device row here."""
        reader = self._sqlite_reader()
        if reader is not None:
            return [hard_key_from_json(t) for t in reader.hard_key_texts()]
        return self._read(lambda s: [hard_key_from_json(t) for t in s.execute(select(Device.hard_key)).scalars()], [])

    def counts_per_gpu(self) -> dict[str, dict[str, int]]:
        """Record counts per GPU name, for ``autocutlass info``: ``{gpu_name: {"hard_keys": ..,
        "problems": .. (problems with a best of ours), "trials": .., "bests": .. (ours), "torch_times":
        .. (torch's recorded times, ``autocutlass.vendor``)}}``."""

        def _q(s: Session) -> dict[str, dict[str, int]]:
            def per_gpu(*cols: Any, join: Any = None, on: Any = None, where: Any = None) -> dict[str, int]:
                stmt = select(Device.gpu_name, *cols).group_by(Device.gpu_name)
                if join is not None:
                    stmt = stmt.select_from(Device).join(join, on)
                if where is not None:
                    stmt = stmt.where(where)
                return {name: int(n) for name, n in s.execute(stmt)}

            keys = per_gpu(func.count(Device.id))
            trials = per_gpu(func.count(Trial.id), join=Trial, on=Trial.device_id == Device.id)
            ours, theirs = Best.family != VENDOR_FAMILY, Best.family == VENDOR_FAMILY
            bests = per_gpu(func.count(Best.id), join=Best, on=Best.device_id == Device.id, where=ours)
            torch_times = per_gpu(func.count(Best.id), join=Best, on=Best.device_id == Device.id, where=theirs)
            problems = per_gpu(func.count(distinct(Best.problem_id)), join=Best, on=Best.device_id == Device.id,
                               where=ours)  # fmt: skip
            return {
                gpu: {
                    "hard_keys": keys[gpu],
                    "problems": problems.get(gpu, 0),
                    "trials": trials.get(gpu, 0),
                    "bests": bests.get(gpu, 0),
                    "torch_times": torch_times.get(gpu, 0),
                }
                for gpu in sorted(keys)
            }

        return self._read(_q, {})

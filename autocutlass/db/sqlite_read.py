"""The lookup reads of a SQLite tuning database through the standard library's ``sqlite3``.

Why: a process that only serves stored results (an inference server restarting, a notebook, a
test process) looks records up and never writes; importing SQLAlchemy for that cost most of its
first call (0.8-1.2 s of a 1.0-1.3 s first call on an H200 machine, 2026-11-23). ``TuningStore``
answers ``lookup``, ``lookup_sibling``, ``class_winners`` and ``hard_keys`` of a SQLite file
through ``SqliteReader``; everything else (writes, PostgreSQL, ``bests``, ``trials``, ...) and
the creation of a new database go through SQLAlchemy, imported then.

The reader keeps the store's contract:

* It never creates or writes anything: the file is opened ``mode=ro`` (``immutable=1`` for
  shipped files, or where ``location.sqlite_read_only_uri`` says a file must be). A file that does
  not exist, or has no tables yet, reads as a database without records.
* It checks the schema version once per connection, with the SQLAlchemy path's errors and
  messages (``db.versions``): another database's tables, no version, another version.
* SQLite failures become ``DatabaseError`` with the engine layer's messages
  (``location.sqlite_failure``); lock contention is retried as ``engine.call`` retries it.
* The rows are the SQLAlchemy query's columns, in a ``LookupRow``; ``TuningStore`` ranks them with
  the same code whichever path read them.
* One connection per reader and process (a connection inherited through ``fork`` is never used:
  the child opens its own), used under a lock: safe to share between threads. Except where the
  file had to be opened ``immutable=1`` without being shipped (its directory is not writable
  here): another process may still write it, and an immutable connection would go on reading
  what it first saw, so each read opens its own connection and sees the file as it is then.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, TypeVar

from autocutlass.db.location import (
    MAX_ATTEMPTS,
    SQLITE_BUSY,
    SQLITE_BUSY_TIMEOUT_MS,
    SQLITE_LOCKED,
    DbLocation,
    retry_pause,
    sqlite_failure,
    sqlite_read_only_uri,
)
from autocutlass.db.versions import META_TABLE, SCHEMA_VERSION, VERSION_KEY, mismatch, not_ours, parse_version
from autocutlass.device import HardKey
from autocutlass.errors import DatabaseError

T = TypeVar("T")


class LookupRow(NamedTuple):
    """One stored best record with its problem and device, as both read paths return it."""

    key: str
    op: str
    bucket_key: str
    problem: dict[str, Any]
    family: str
    config: str
    median_ms: float
    tflops: float
    device_key: str


_COLUMNS = (
    'SELECT p."key", p.op, p.bucket_key, p.problem, b.family, b.config, b.median_ms, b.tflops, d.hard_key '
    "FROM problems AS p JOIN best AS b ON b.problem_id = p.id JOIN devices AS d ON d.id = b.device_id "
)
_SIBLING = (
    "d.gpu_name != ? AND d.cc = ? AND d.sm_count = ? AND d.dsl_version = ? AND d.kernel_hash = ? "
    "AND d.protocol_version = ?"
)


def _sibling_args(hard_key: HardKey) -> tuple[Any, ...]:
    """The parameters of ``_SIBLING``: every hard-key field but the GPU name equal
    (``HardKey.is_sibling_of``; the caller re-checks each row with it)."""
    return (hard_key.gpu_name, hard_key.cc, hard_key.sm_count, hard_key.dsl_version, hard_key.kernel_hash,
            hard_key.protocol_version)  # fmt: skip


def _json_or_text(text: Any) -> Any:
    """A stored JSON value, or the text itself when it is not JSON: ``records.stored_problem`` then
    reports the row as unreadable and the store skips it, as it skips one SQLAlchemy cannot decode."""
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return text


class SqliteReader:
    """Read-only lookups in the SQLite tuning database at ``loc`` (module docstring).
    ``immutable``: the file never changes while it is open (shipped databases): no locking."""

    def __init__(self, loc: DbLocation, *, immutable: bool = False, busy_s: float | None = None,
                 attempts: int = MAX_ATTEMPTS) -> None:  # fmt: skip
        if loc.sqlite_path is None:
            raise ValueError(f"{loc.display} is not a SQLite file")
        self.loc = loc
        self._busy_s = SQLITE_BUSY_TIMEOUT_MS / 1000 if busy_s is None else busy_s
        self._attempts = attempts
        self._path = loc.sqlite_path
        self._immutable = immutable
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = 0
        self._one_read = False

    # ---- plumbing --------------------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection | None:
        """This process's checked connection, or None while the file does not exist or has no
        tables (nothing is created; asked again on the next read)."""
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        self._conn = None  # inherited through fork: the parent's, never closed or used here
        try:
            if not self._path.exists():  # not yet created (a directory there fails to open, as it should)
                return None
        except OSError as e:  # a directory this process cannot enter (EACCES): not a crash of the call
            raise DatabaseError(f"Cannot read the tuning database {self.loc.display}: {e}") from e
        uri, immutable = sqlite_read_only_uri(self._path, immutable=self._immutable)
        # immutable without being asked (a directory this process cannot write): the file may still
        # change under another process that can, and an immutable connection never notices, so
        # this one serves a single read (``_read`` drops it after)
        self._one_read = immutable and not self._immutable
        conn = sqlite3.connect(uri, uri=True, timeout=self._busy_s, check_same_thread=False,
                               isolation_level=None)  # fmt: skip
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if not tables:
                conn.close()
                return None
            if META_TABLE not in tables:
                raise not_ours(self.loc, f"it has tables {sorted(tables)[:5]} but no 'meta' table")
            row = conn.execute(f'SELECT value FROM {META_TABLE} WHERE "key" = ?', (VERSION_KEY,)).fetchone()
            found = parse_version(None if row is None else str(row[0]), self.loc)
            if found != SCHEMA_VERSION:
                raise mismatch(self.loc, found)
        except BaseException:
            conn.close()
            raise
        self._conn, self._pid = conn, os.getpid()
        return conn

    def _read(self, fn: Callable[[sqlite3.Connection], T], empty: T) -> T:
        """``fn(connection)`` in one read transaction, retried on lock contention; ``empty`` for a
        database without tables. SQLite failures raise DatabaseError."""
        attempt = 0
        while True:
            try:
                with self._lock:
                    conn = self._connect()
                    if conn is None:
                        return empty
                    conn.execute("BEGIN")
                    try:
                        return fn(conn)
                    finally:
                        conn.execute("COMMIT")
                        if self._one_read:
                            self._drop()
            except sqlite3.Error as e:
                code = getattr(e, "sqlite_errorcode", None)
                primary = code & 0xFF if isinstance(code, int) else None
                with self._lock:
                    self._drop()
                if primary in (SQLITE_BUSY, SQLITE_LOCKED) and attempt + 1 < self._attempts:
                    time.sleep(retry_pause(attempt))
                    attempt += 1
                    continue
                raise sqlite_failure(self.loc, primary, str(e)) from e

    def _drop(self) -> None:
        if self._conn is not None and self._pid == os.getpid():
            try:
                self._conn.close()
            except sqlite3.Error:
                pass
        self._conn = None

    def close(self) -> None:
        """Close this process's connection (the next read opens a new one)."""
        with self._lock:
            self._drop()

    @staticmethod
    def _rows(conn: sqlite3.Connection, sql: str, args: Sequence[Any]) -> list[LookupRow]:
        return [
            LookupRow(key, op, bucket, _json_or_text(problem), family, config, float(med), float(tf), device)
            for key, op, bucket, problem, family, config, med, tf, device in conn.execute(sql, tuple(args))
        ]

    # ---- reads -----------------------------------------------------------------------------
    def lookup_rows(self, key: str, bucket_key: str, neighbour_key: str, hard_key: HardKey, *,
                    sibling: bool) -> list[LookupRow]:  # fmt: skip
        """Best records of the problem ``key``, of its bucket or of its neighbour key, measured
        under ``hard_key`` (``sibling``: on a GPU whose hard key differs in the GPU name only)."""
        where = "(p.\"key\" = ? OR p.bucket_key = ? OR p.neighbour_key = ?) AND "
        device, args = (_SIBLING, _sibling_args(hard_key)) if sibling else ("d.hard_key = ?", (hard_key.key(),))
        sql = _COLUMNS + "WHERE " + where + device
        return self._read(lambda c: self._rows(c, sql, (key, bucket_key, neighbour_key, *args)), [])

    def class_rows(self, op: str, hard_key: HardKey) -> list[LookupRow]:
        """Best records of every problem of ``op`` measured under ``hard_key`` or on a sibling GPU."""
        sql = _COLUMNS + "WHERE p.op = ? AND (d.hard_key = ? OR (" + _SIBLING + "))"
        return self._read(lambda c: self._rows(c, sql, (op, hard_key.key(), *_sibling_args(hard_key))), [])

    def hard_key_texts(self) -> list[str]:
        """``HardKey.key()`` of every device row."""
        return self._read(lambda c: [str(r[0]) for r in c.execute("SELECT hard_key FROM devices")], [])

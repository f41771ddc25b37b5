"""Where a tuning database lives and how we talk to it: URLs, engines, sessions, errors, retries.

* ``resolve(url_or_path)``: a filesystem path becomes ``sqlite:///<absolute path>``; anything
  with ``://`` is taken as a SQLAlchemy URL (``postgresql+psycopg://...``).
* ``cached_engine``: one engine per (URL, mode, timeouts) per process. An engine inherited through
  ``fork`` is never used by the child: entries are keyed by pid and the child makes its own.
* SQLite connections get ``busy_timeout``, ``foreign_keys=ON`` and (read-write files) WAL
  journaling from a connect listener. We emit ``BEGIN`` ourselves: ``BEGIN IMMEDIATE`` for
  write transactions, so a writer takes the write lock up front, waits for it in the busy
  handler and never has to upgrade a read lock (the classic source of "database is locked").
* A SQLite file this process cannot write (``sqlite_unwritable``: the file, or its directory,
  where SQLite keeps its ``-wal``/``-shm``/``-journal`` side files) can still be read:
  ``mode=ro``, plus ``immutable=1`` when the directory is not writable and no ``-wal`` file
  holds pages (a WAL database needs a ``-shm`` file that could not be created there).
* PostgreSQL engines get libpq ``connect_timeout`` and ``statement_timeout`` (``DbTimeouts``),
  so no call waits on an unresponsive server longer than that; read-only engines run read-only
  transactions. (A server that hangs after a connection was established is bounded by
  ``statement_timeout`` only while it still runs its own timers.)
* ``call(location, fn)``: runs one transaction, retries a bounded number of times when SQLite
  reports SQLITE_BUSY/SQLITE_LOCKED (read from the driver exception's ``sqlite_errorcode``,
  never from its message) or PostgreSQL a serialization failure/deadlock, and turns every
  storage failure into ``autocutlass.errors.DatabaseError`` naming the database and the fix.
  Integrity and programming errors are bugs and propagate unchanged.
"""

from __future__ import annotations

import math
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from sqlalchemy import Engine, create_engine, event
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.orm import Session
from sqlalchemy.pool import NullPool, QueuePool

from autocutlass.db.location import (  # noqa: F401 - sqlite_unwritable is re-exported
    MAX_ATTEMPTS,
    SQLITE_BUSY,
    SQLITE_BUSY_TIMEOUT_MS,
    SQLITE_LOCKED,
    DbLocation,
    resolve,
    retry_pause,
    sqlite_failure,
    sqlite_read_only_uri,
    sqlite_unwritable,
)
from autocutlass.errors import DatabaseError
from autocutlass.settings import DbTimeouts

T = TypeVar("T")


_WRITE_OPTION = "autocutlass_write"

# PostgreSQL SQLSTATEs worth retrying: serialization_failure, deadlock_detected.
_PG_RETRY_STATES = frozenset({"40001", "40P01"})


# ---- engines -------------------------------------------------------------------------------


def _install_sqlite_listeners(engine: Engine, *, read_only: bool, busy_ms: int | None = None) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: sqlite3.Connection, _record: Any) -> None:
        # Take transaction control away from the sqlite3 module; "begin" below emits BEGIN.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        try:
            cur.execute(f"PRAGMA busy_timeout = {int(SQLITE_BUSY_TIMEOUT_MS if busy_ms is None else busy_ms)}")
            cur.execute("PRAGMA foreign_keys = ON")
            if not read_only:
                mode = cur.execute("PRAGMA journal_mode").fetchone()
                if mode is None or str(mode[0]).lower() not in {"wal", "memory"}:
                    cur.execute("PRAGMA journal_mode = WAL")
                # FULL: a committed trial or best survives a power loss or an OS crash too (WAL
                # with NORMAL may roll the last commits back); one fsync per commit
                cur.execute("PRAGMA synchronous = FULL")
        finally:
            cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        write = bool(conn.get_execution_options().get(_WRITE_OPTION))
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def _pg_connect_args(url: str, *, read_only: bool, timeouts: DbTimeouts) -> dict[str, Any]:
    """libpq parameters for the timeouts (and read-only transactions); what the URL sets itself wins."""
    query = make_url(url).query
    args: dict[str, Any] = {}
    if timeouts.connect_s > 0 and "connect_timeout" not in query:
        args["connect_timeout"] = max(1, math.ceil(timeouts.connect_s))  # libpq takes whole seconds
    options = []
    if timeouts.statement_s > 0:
        options.append(f"-c statement_timeout={max(1, round(timeouts.statement_s * 1000))}")
    if read_only:
        options.append("-c default_transaction_read_only=on")
    # a server that stops answering mid-connection: statement_timeout is the server's, so the
    # client detects the silence itself (keepalives; unacknowledged data after tcp_user_timeout)
    bound = timeouts.statement_s + timeouts.connect_s
    if bound > 0:
        for name, value in (("keepalives", 1), ("keepalives_idle", max(1, math.ceil(timeouts.statement_s or 1))),
                            ("keepalives_interval", 1), ("keepalives_count", 3),
                            ("tcp_user_timeout", max(1000, round(bound * 1000)))):  # fmt: skip
            if name not in query:
                args[name] = value
    if options:
        given = query.get("options")
        args["options"] = " ".join([*options, *([given] if isinstance(given, str) else list(given or ()))])
    return args


def make_engine(
    loc: DbLocation, *, read_only: bool = False, immutable: bool = False, timeouts: DbTimeouts | None = None
) -> Engine:
    """A new (uncached) engine for ``loc``. Raises DatabaseError for a bad URL or a missing driver.

    ``read_only`` opens a SQLite file with ``mode=ro`` (it must exist; ``sqlite_read_only_uri``
    says when ``immutable=1`` is added); ``immutable`` forces ``immutable=1`` (no locking at all:
    for shipped files that never change). Nothing is ever created by a read-only engine. A
    read-write SQLite file gets its parent directories created. ``timeouts`` (default
    ``DbTimeouts.from_env()``) bound every wait on a PostgreSQL server.
    """
    try:
        if loc.sqlite_path is not None and read_only:
            if not loc.sqlite_path.is_file():
                raise DatabaseError(f"The tuning database {loc.display} does not exist.")
            path = loc.sqlite_path
            _, forced = sqlite_read_only_uri(path, immutable=immutable)

            def _connect() -> sqlite3.Connection:
                uri, _ = sqlite_read_only_uri(path, immutable=immutable)  # as the file's side files are now
                return sqlite3.connect(uri, uri=True, check_same_thread=False)

            # immutable=1 without being asked (an unwritable directory): another process may still
            # write the file, which an immutable connection never notices, so none is kept
            pool = NullPool if forced and not immutable else QueuePool
            engine = create_engine("sqlite://", creator=_connect, poolclass=pool)
        elif loc.sqlite_path is not None:
            try:
                loc.sqlite_path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise DatabaseError(
                    f"Cannot create the directory of the tuning database {loc.display}: {e}. "
                    "Point AUTOCUTLASS_DB at a writable location."
                ) from e
            engine = create_engine(loc.url)
        elif make_url(loc.url).get_backend_name() == "postgresql":
            args = _pg_connect_args(loc.url, read_only=read_only, timeouts=timeouts or DbTimeouts.from_env())
            engine = create_engine(loc.url, pool_pre_ping=True, connect_args=args)
        else:
            engine = create_engine(loc.url, pool_pre_ping=True)
    except (sa_exc.ArgumentError, sa_exc.NoSuchModuleError) as e:
        raise DatabaseError(
            f"Cannot open the tuning database {loc.display}: {e}. AUTOCUTLASS_DB must be a file path "
            "or a SQLAlchemy URL whose driver is installed (e.g. postgresql+psycopg://user@host/db)."
        ) from e
    except ImportError as e:
        raise DatabaseError(
            f"Cannot open the tuning database {loc.display}: its database driver is not installed ({e})."
        ) from e
    if engine.dialect.name == "sqlite":
        busy_ms = None if timeouts is None else max(1, round(timeouts.busy_s * 1000))
        _install_sqlite_listeners(engine, read_only=read_only, busy_ms=busy_ms)
    elif engine.dialect.name != "postgresql":
        engine.dispose()
        raise DatabaseError(
            f"The tuning database {loc.display} uses the {engine.dialect.name!r} backend; "
            "autocutlass supports SQLite and PostgreSQL."
        )
    return engine


_ENGINES: dict[tuple[str, bool, bool, DbTimeouts | None], tuple[int, Engine]] = {}
_ENGINES_LOCK = threading.Lock()


def cached_engine(
    loc: DbLocation,
    *,
    read_only: bool = False,
    immutable: bool = False,
    timeouts: DbTimeouts | None = None,
    prepare: Callable[[Engine], None],
) -> Engine:
    """This process's engine for ``loc``; ``prepare(engine)`` (the schema check) runs once when
    the engine is made, and an engine whose ``prepare`` raised is disposed and not cached."""
    key = (loc.url, read_only, immutable, timeouts)
    pid = os.getpid()
    with _ENGINES_LOCK:
        hit = _ENGINES.get(key)
        if hit is not None:
            if hit[0] == pid:
                return hit[1]
            # Inherited through fork: drop it without closing the parent's connections.
            hit[1].dispose(close=False)
            del _ENGINES[key]
    engine = make_engine(loc, read_only=read_only, immutable=immutable, timeouts=timeouts)
    try:
        prepare(engine)
    except BaseException:
        engine.dispose()
        raise
    with _ENGINES_LOCK:
        hit = _ENGINES.get(key)
        if hit is not None and hit[0] == pid:
            engine.dispose()
            return hit[1]
        _ENGINES[key] = (pid, engine)
    return engine


def release(url_or_path: str | os.PathLike[str]) -> None:
    """Dispose and forget every cached engine of this database (before moving or deleting it)."""
    url = resolve(url_or_path).url
    with _ENGINES_LOCK:
        keys = [k for k in _ENGINES if k[0] == url]
        entries = [_ENGINES.pop(k) for k in keys]
    pid = os.getpid()
    for owner, engine in entries:
        engine.dispose(close=owner == pid)


# ---- sessions ------------------------------------------------------------------------------


@contextmanager
def session(engine: Engine, *, write: bool) -> Iterator[Session]:
    """One transaction: ``with session(engine, write=True) as s:`` commits on success.

    On SQLite a write transaction starts with ``BEGIN IMMEDIATE``.
    """
    bind = engine.execution_options(**{_WRITE_OPTION: True}) if write else engine
    with Session(bind) as s, s.begin():
        yield s


@contextmanager
def write_connection(engine: Engine) -> Iterator[Connection]:
    """A Core connection inside one write transaction (``BEGIN IMMEDIATE`` on SQLite)."""
    with engine.execution_options(**{_WRITE_OPTION: True}).begin() as conn:
        yield conn


# ---- errors and retries --------------------------------------------------------------------


def _sqlite_code(e: sa_exc.DBAPIError) -> int | None:
    orig = e.orig
    if isinstance(orig, sqlite3.Error):
        code = getattr(orig, "sqlite_errorcode", None)
        if isinstance(code, int):
            return code & 0xFF  # primary result code
    return None


def is_transient(e: sa_exc.DBAPIError) -> bool:
    """True for lock contention worth retrying: SQLITE_BUSY/LOCKED, or a PG serialization failure."""
    code = _sqlite_code(e)
    if code is not None:
        return code in (SQLITE_BUSY, SQLITE_LOCKED)
    orig = e.orig
    state = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    return isinstance(state, str) and state in _PG_RETRY_STATES


def _is_storage_failure(e: sa_exc.DBAPIError) -> bool:
    """Errors of the store itself (unreachable, corrupt, locked, read-only: a read-only role's
    ``permission denied`` is a ProgrammingError, a hot standby's ``read-only transaction`` an
    InternalError), as opposed to a constraint our writes rely on (IntegrityError): every other
    driver error is the database's, and a user's call goes on without it."""
    return not isinstance(e, sa_exc.IntegrityError)


def storage_error(loc: DbLocation, e: sa_exc.DBAPIError) -> DatabaseError:
    """The DatabaseError to raise for a storage failure: what is wrong with which database, and
    what to do."""
    detail = str(e.orig) if e.orig is not None else str(e)
    if loc.is_sqlite:
        return sqlite_failure(loc, _sqlite_code(e), detail)
    return DatabaseError(
        f"Cannot use the tuning database {loc.display} ({type(e.orig).__name__}: {detail}). Check that "
        "the server is reachable and the URL and credentials are right, or point AUTOCUTLASS_DB at a file."
    )


def call(loc: DbLocation, fn: Callable[[], T], attempts: int = MAX_ATTEMPTS) -> T:
    """Run ``fn`` (one whole transaction, safe to repeat) with at most ``attempts`` tries on
    transient lock errors; storage failures become DatabaseError, other database errors propagate."""
    attempt = 0
    while True:
        try:
            return fn()
        except sa_exc.DBAPIError as e:
            if is_transient(e) and attempt + 1 < attempts:
                time.sleep(retry_pause(attempt))
                attempt += 1
                continue
            if _is_storage_failure(e):
                raise storage_error(loc, e) from e
            raise

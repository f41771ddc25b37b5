"""Schema version checks, creation of new databases, and ``upgrade`` through ``MIGRATIONS``.

A database records its layout version in ``meta.schema_version``. Opening one:

* with no tables at all (a new or empty file): the tables are created at ``SCHEMA_VERSION``
  (read-write opens only; a read-only open creates nothing and raises ``EmptyDatabase``, which
  ``TuningStore`` reads as a database without records);
* with tables but no version: DatabaseError, it is some other database;
* at another version: SchemaMismatch. An older one names the command that upgrades it,
  ``autocutlass db upgrade --db <url>``; a newer one says to upgrade autocutlass instead.

``upgrade`` runs ``MIGRATIONS[v]`` for v = found, found+1, ... up to ``SCHEMA_VERSION`` inside
one transaction, then stores the new version. Each step takes a Core connection already in the
transaction and moves the tables from version v to v + 1. Steps use their own frozen DDL, never
the models (which describe only the newest version). On SQLite the steps run with foreign-key
enforcement off, as SQLite's documented table rebuild requires (dropping a referenced table
would otherwise cascade into its referencing rows), and ``PRAGMA foreign_key_check`` must find
nothing before the transaction commits. Before migrating a SQLite file, ``upgrade`` copies it to
``<file>.v<found>.bak`` (a consistent copy through SQLite's backup API, written to a temporary
file and moved into place). A database already at ``SCHEMA_VERSION`` is only read, so upgrading
a current file that cannot be written (read-only file or directory) succeeds without writing.
"""

from __future__ import annotations

import dataclasses
import os
import sqlite3
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sqlalchemy import Connection, Engine, event, inspect, select, text
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from autocutlass.db.engine import (
    MAX_ATTEMPTS,
    SQLITE_BUSY_TIMEOUT_MS,
    DbLocation,
    call,
    make_engine,
    release,
    resolve,
    sqlite_unwritable,
    write_connection,
)
from autocutlass.db.models import Base, Meta
from autocutlass.db.versions import (
    SCHEMA_VERSION,
    VERSION_KEY,
    EmptyDatabase,
    parse_version,
)
from autocutlass.db.versions import mismatch as _mismatch
from autocutlass.db.versions import not_ours as _not_ours
from autocutlass.errors import DatabaseError, SchemaMismatch
from autocutlass.settings import DbTimeouts

Migration = Callable[[Connection], None]


_PG_SCHEMA_LOCK = 0x6175746F  # pg_advisory_xact_lock id serialising table creation ("auto")


# ---- migrations ----------------------------------------------------------------------------

# dims of a v1 (GEMM) row as canonical JSON: keys sorted, no whitespace, like keys.canonical_json.
_V1_DIMS_SQL = (
    """'{"k":' || CAST(k AS TEXT) || ',"l":' || CAST(l AS TEXT) || ',"m":' || CAST(m AS TEXT)"""
    """ || ',"n":' || CAST(n AS TEXT) || '}'"""
)

_V2_PROBLEMS_SQLITE = """
CREATE TABLE problems_v2 (
	id INTEGER NOT NULL,
	"key" TEXT NOT NULL,
	op VARCHAR(32) NOT NULL,
	bucket_key TEXT NOT NULL,
	neighbour_key TEXT NOT NULL,
	dims TEXT NOT NULL,
	problem JSON NOT NULL,
	PRIMARY KEY (id),
	UNIQUE ("key")
)"""
_V2_INDEXES = (
    "CREATE INDEX ix_problems_op ON problems (op)",
    "CREATE INDEX ix_problems_bucket_key ON problems (bucket_key)",
    "CREATE INDEX ix_problems_neighbour_key ON problems (neighbour_key)",
)


def _v1_to_v2(conn: Connection) -> None:
    """Schema 1 -> 2: ``problems`` serves every op. Adds ``op`` (indexed; 'gemm' for every v1
    row) and ``dims`` (canonical JSON of m, n, k, l), renames ``family_key`` to
    ``neighbour_key`` (same values: a GEMM's neighbour key is its old family key) and drops the
    GEMM-only ``m, n, k, l``. Row ids are kept, so trials, best records and misses are untouched.

    PostgreSQL alters the table in place; SQLite rebuilds it (create, copy, drop, rename: the
    procedure of https://sqlite.org/lang_altertable.html, which needs foreign keys off)."""
    if conn.dialect.name == "postgresql":
        for stmt in (
            "ALTER TABLE problems ADD COLUMN op VARCHAR(32)",
            "ALTER TABLE problems ADD COLUMN dims TEXT",
            f"UPDATE problems SET op = 'gemm', dims = {_V1_DIMS_SQL}",
            "ALTER TABLE problems ALTER COLUMN op SET NOT NULL, ALTER COLUMN dims SET NOT NULL",
            "ALTER TABLE problems RENAME COLUMN family_key TO neighbour_key",
            "ALTER INDEX ix_problems_family_key RENAME TO ix_problems_neighbour_key",
            "CREATE INDEX ix_problems_op ON problems (op)",
            "ALTER TABLE problems DROP COLUMN m, DROP COLUMN n, DROP COLUMN k, DROP COLUMN l",
        ):
            conn.exec_driver_sql(stmt)
        return
    if conn.exec_driver_sql("PRAGMA foreign_keys").scalar():
        # DROP TABLE problems would cascade-delete every trial, best record and miss.
        raise RuntimeError("the SQLite v1 -> v2 migration must run with PRAGMA foreign_keys=OFF (use db.upgrade)")
    conn.exec_driver_sql(_V2_PROBLEMS_SQLITE)
    conn.exec_driver_sql(
        'INSERT INTO problems_v2 (id, "key", op, bucket_key, neighbour_key, dims, problem) '
        f"SELECT id, \"key\", 'gemm', bucket_key, family_key, {_V1_DIMS_SQL}, problem FROM problems"
    )
    conn.exec_driver_sql("DROP TABLE problems")  # its indexes go with it
    conn.exec_driver_sql("ALTER TABLE problems_v2 RENAME TO problems")
    for stmt in _V2_INDEXES:
        conn.exec_driver_sql(stmt)


MIGRATIONS: dict[int, Migration] = {1: _v1_to_v2}
"""from_version -> step that upgrades a database at from_version to from_version + 1."""


def read_version(conn: Connection, loc: DbLocation) -> int | None:
    """The stored schema version, or None when the database has no tables at all.

    Raises DatabaseError when there are tables but no readable version.
    """
    tables = set(inspect(conn).get_table_names())
    if not tables:
        return None
    if Meta.__tablename__ not in tables:
        raise _not_ours(loc, f"it has tables {sorted(tables)[:5]} but no 'meta' table")
    raw = conn.execute(select(Meta.value).where(Meta.key == VERSION_KEY)).scalar_one_or_none()
    return parse_version(raw, loc)


def _set_version(conn: Connection, version: int) -> None:
    insert = pg_insert if conn.dialect.name == "postgresql" else sqlite_insert
    stmt = insert(Meta).values(key=VERSION_KEY, value=str(version))
    conn.execute(stmt.on_conflict_do_update(index_elements=["key"], set_={"value": str(version)}))


def _lock_for_ddl(conn: Connection) -> None:
    # SQLite is already serialised by BEGIN IMMEDIATE; PostgreSQL needs a lock of its own.
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_SCHEMA_LOCK})


def ensure_schema(engine: Engine, loc: DbLocation, *, read_only: bool, attempts: int = MAX_ATTEMPTS) -> None:
    """Check the version of the database behind ``engine``; create the tables if it is empty.

    Raises SchemaMismatch or DatabaseError as described in the module docstring (EmptyDatabase
    for a read-only open of a database without tables).
    """

    def _check_read_only() -> None:
        with engine.connect() as conn:
            found = read_version(conn, loc)
        if found is None:
            raise EmptyDatabase(f"The tuning database {loc.display} has no tables yet (no records).")
        if found != SCHEMA_VERSION:
            raise _mismatch(loc, found)

    def _check_or_create() -> None:
        with write_connection(engine) as conn:
            _lock_for_ddl(conn)
            found = read_version(conn, loc)
            if found is None:
                Base.metadata.create_all(conn)
                _set_version(conn, SCHEMA_VERSION)
            elif found != SCHEMA_VERSION:
                raise _mismatch(loc, found)

    call(loc, _check_read_only if read_only else _check_or_create, attempts)


def backup_path(path: Path, version: int) -> Path:
    """Where ``upgrade`` copies the SQLite file ``path`` at schema ``version`` before migrating it."""
    return path.with_name(f"{path.name}.v{version}.bak")


def copy_sqlite(src: Path, dest: Path) -> None:
    """A consistent copy of the SQLite file ``src`` (committed content, WAL included) at
    ``dest``, through SQLite's backup API into a temporary file beside ``dest`` that is then
    moved into place; rollback journal, so the copy is one self-contained file. ``src`` is only
    read. Raises OSError or sqlite3.Error."""
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        source = sqlite3.connect(f"file:{quote(str(src))}?mode=ro", uri=True, timeout=SQLITE_BUSY_TIMEOUT_MS / 1000)
        try:
            copy = sqlite3.connect(tmp, isolation_level=None)
            try:
                source.backup(copy)
                copy.execute("PRAGMA journal_mode = DELETE")
            finally:
                copy.close()
        finally:
            source.close()
        os.replace(tmp, dest)
    finally:
        for leftover in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm"), Path(f"{tmp}-journal")):
            leftover.unlink(missing_ok=True)


def _backup_sqlite(path: Path, version: int, loc: DbLocation) -> Path:
    """``copy_sqlite(path, backup_path(path, version))``; DatabaseError when it cannot."""
    dest = backup_path(path, version)
    try:
        copy_sqlite(path, dest)
    except (OSError, sqlite3.Error) as e:
        raise DatabaseError(
            f"Cannot copy the tuning database {loc.display} to {dest} before upgrading it ({type(e).__name__}: "
            f"{e}); nothing was changed. Free some space or make the directory writable, then retry."
        ) from e
    return dest


def peek_version(loc: DbLocation) -> int | None:
    """The schema version of the existing SQLite file at ``loc`` (None: no tables), read
    without writing anything; DatabaseError when it cannot be read."""
    engine = make_engine(loc, read_only=True)
    try:

        def _read() -> int | None:
            with engine.connect() as conn:
                return read_version(conn, loc)

        return call(loc, _read)
    finally:
        engine.dispose()


def _foreign_keys_off(dbapi_conn: Any, _record: Any) -> None:
    # Runs after engine._install_sqlite_listeners' connect hook, so this setting wins.
    cur = dbapi_conn.cursor()
    try:
        cur.execute("PRAGMA foreign_keys = OFF")
    finally:
        cur.close()


def upgrade(url_or_path: str | os.PathLike[str]) -> tuple[int, int]:
    """Upgrade a database in place to ``SCHEMA_VERSION``; returns (version before, version after).

    An empty database is created at the current version; one already current is only read (a
    read-only current file succeeds). A SQLite file is first copied to ``backup_path(file,
    version)``. A newer database raises SchemaMismatch (upgrade autocutlass instead); a version
    with no migration path raises SchemaMismatch too. Every step runs in one transaction: a
    failing step leaves the database as it was.
    """
    loc = resolve(url_or_path)
    release(loc.url)
    path = loc.sqlite_path
    if path is not None and path.is_file():
        found = peek_version(loc)
        if found is not None and found >= SCHEMA_VERSION:
            if found > SCHEMA_VERSION:
                raise _mismatch(loc, found)
            return found, found
        why = sqlite_unwritable(path)
        if why is not None:
            raise DatabaseError(
                f"Cannot upgrade the tuning database {loc.display}: {why}. Make it writable, or copy it "
                f"to a writable place and run: autocutlass db upgrade --db <the copy>"
            )
    # An explicit admin command: its DDL may wait for other sessions' locks as long as it takes.
    timeouts = None if loc.is_sqlite else dataclasses.replace(DbTimeouts.from_env(), statement_s=0.0)
    engine = make_engine(loc, timeouts=timeouts)
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _foreign_keys_off)

    def _run() -> tuple[int, int]:
        with write_connection(engine) as conn:
            _lock_for_ddl(conn)
            found = read_version(conn, loc)
            if found is None:
                Base.metadata.create_all(conn)
                _set_version(conn, SCHEMA_VERSION)
                return SCHEMA_VERSION, SCHEMA_VERSION
            if found > SCHEMA_VERSION:
                raise _mismatch(loc, found)
            steps: list[Migration] = []
            for v in range(found, SCHEMA_VERSION):
                step = MIGRATIONS.get(v)
                if step is None:
                    raise SchemaMismatch(
                        f"The tuning database {loc.display} has schema version {found} and this "
                        f"autocutlass has no migration from version {v} to {v + 1}. "
                        "Re-tune into a new database, or use an autocutlass release that can migrate it."
                    )
                steps.append(step)
            if steps and path is not None:
                _backup_sqlite(path, found, loc)
            sqlite = conn.dialect.name == "sqlite"
            broken_before = len(conn.exec_driver_sql("PRAGMA foreign_key_check").all()) if sqlite else 0
            for step in steps:
                step(conn)
            version = found + len(steps)
            if sqlite:
                broken = conn.exec_driver_sql("PRAGMA foreign_key_check").all()
                if len(broken) > broken_before:
                    raise DatabaseError(
                        f"Upgrading {loc.display} would leave {len(broken) - broken_before} more rows pointing at "
                        f"missing rows (e.g. {tuple(broken[0])}); the database was left as it was."
                    )
            _set_version(conn, version)
            return found, version

    try:
        return call(loc, _run)
    finally:
        engine.dispose()

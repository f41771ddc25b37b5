"""Schema version checks, creation of new databases, and ``upgrade`` through ``MIGRATIONS``.

A database records its layout version in ``meta.schema_version``. Opening one:

* with no tables at all (a new or empty file): the tables are created at ``SCHEMA_VERSION``
  (read-write opens only; a read-only open reports it is not a tuning database);
* with tables but no version: DatabaseError, it is some other database;
* at another version: SchemaMismatch. An older one names the command that upgrades it,
  ``autocutlass db upgrade --db <url>``; a newer one says to upgrade autocutlass instead.

``upgrade`` runs ``MIGRATIONS[v]`` for v = found, found+1, ... up to ``SCHEMA_VERSION`` inside
one transaction, then stores the new version. Each step takes a Core connection already in the
transaction and moves the tables from version v to v + 1.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from sqlalchemy import Connection, Engine, inspect, select, text
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from autocutlass.db.engine import DbLocation, call, make_engine, release, resolve, write_connection
from autocutlass.db.models import SCHEMA_VERSION, Base, Meta
from autocutlass.errors import DatabaseError, SchemaMismatch

VERSION_KEY = "schema_version"

Migration = Callable[[Connection], None]

MIGRATIONS: dict[int, Migration] = {}
"""from_version -> step that upgrades a database at from_version to from_version + 1."""

_PG_SCHEMA_LOCK = 0x6175746F  # pg_advisory_xact_lock id serialising table creation ("auto")


def upgrade_command(loc: DbLocation) -> str:
    """The exact shell command that upgrades the database at ``loc``."""
    return f"autocutlass db upgrade --db {loc.display}"


def _not_ours(loc: DbLocation, why: str) -> DatabaseError:
    return DatabaseError(
        f"{loc.display} is not an autocutlass tuning database ({why}). Point AUTOCUTLASS_DB at "
        "another file, or move this one aside so that autocutlass can create a new database there."
    )


def _mismatch(loc: DbLocation, found: int) -> SchemaMismatch:
    if found < SCHEMA_VERSION:
        return SchemaMismatch(
            f"The tuning database {loc.display} has schema version {found}; this autocutlass uses "
            f"version {SCHEMA_VERSION}. Upgrade the database with: {upgrade_command(loc)}"
        )
    return SchemaMismatch(
        f"The tuning database {loc.display} has schema version {found}, newer than the version "
        f"{SCHEMA_VERSION} this autocutlass uses: it was written by a newer autocutlass. Upgrade "
        "autocutlass (pip install -U autocutlass); `autocutlass db upgrade --db "
        f"{loc.display}` cannot downgrade a database. Or point AUTOCUTLASS_DB at another file."
    )


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
    if raw is None:
        raise _not_ours(loc, "its meta table has no schema_version")
    try:
        return int(raw)
    except ValueError:
        raise _not_ours(loc, f"its schema_version is {raw!r}") from None


def _set_version(conn: Connection, version: int) -> None:
    insert = pg_insert if conn.dialect.name == "postgresql" else sqlite_insert
    stmt = insert(Meta).values(key=VERSION_KEY, value=str(version))
    conn.execute(stmt.on_conflict_do_update(index_elements=["key"], set_={"value": str(version)}))


def _lock_for_ddl(conn: Connection) -> None:
    # SQLite is already serialised by BEGIN IMMEDIATE; PostgreSQL needs a lock of its own.
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_SCHEMA_LOCK})


def ensure_schema(engine: Engine, loc: DbLocation, *, read_only: bool) -> None:
    """Check the version of the database behind ``engine``; create the tables if it is empty.

    Raises SchemaMismatch or DatabaseError as described in the module docstring.
    """

    def _check_read_only() -> None:
        with engine.connect() as conn:
            found = read_version(conn, loc)
        if found is None:
            raise _not_ours(loc, "it has no tables")
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

    call(loc, _check_read_only if read_only else _check_or_create)


def upgrade(url_or_path: str | os.PathLike[str]) -> tuple[int, int]:
    """Upgrade a database in place to ``SCHEMA_VERSION``; returns (version before, version after).

    An empty database is created at the current version. A newer database raises SchemaMismatch
    (upgrade autocutlass instead); a version with no migration path raises SchemaMismatch too.
    Every step runs in one transaction: a failing step leaves the database as it was.
    """
    loc = resolve(url_or_path)
    release(loc.url)
    engine = make_engine(loc)

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
            version = found
            while version < SCHEMA_VERSION:
                step = MIGRATIONS.get(version)
                if step is None:
                    raise SchemaMismatch(
                        f"The tuning database {loc.display} has schema version {found} and this "
                        f"autocutlass has no migration from version {version} to {version + 1}. "
                        "Re-tune into a new database, or use an autocutlass release that can migrate it."
                    )
                step(conn)
                version += 1
            _set_version(conn, version)
            return found, version

    try:
        return call(loc, _run)
    finally:
        engine.dispose()

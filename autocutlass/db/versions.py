"""The schema version of a tuning database and what is said when a database has another one.

Standard library only: the store's SQLAlchemy path (``db.schema``) and its SQLite lookup path
(``db.sqlite_read``) check the same version and raise the same errors with the same messages.
"""

from __future__ import annotations

from autocutlass.db.location import DbLocation
from autocutlass.errors import DatabaseError, SchemaMismatch

SCHEMA_VERSION = 2
"""Version of the table layout of ``db.models``; stored in ``meta`` as ``schema_version``.

1: GEMM only (``problems`` had ``family_key`` and the columns ``m, n, k, l``).
2: any op (``problems`` has ``op``, ``neighbour_key`` and ``dims``)."""

META_TABLE = "meta"
VERSION_KEY = "schema_version"


class EmptyDatabase(DatabaseError):
    """A database with no tables at all, opened read-only: nothing was created (package-internal;
    ``TuningStore`` answers its reads as a database without records)."""


def upgrade_command(loc: DbLocation) -> str:
    """The exact shell command that upgrades the database at ``loc``."""
    return f"autocutlass db upgrade --db {loc.display}"


def not_ours(loc: DbLocation, why: str) -> DatabaseError:
    """The error for a database that is not a tuning database (``why``: what gave it away)."""
    return DatabaseError(
        f"{loc.display} is not an autocutlass tuning database ({why}). Point AUTOCUTLASS_DB at "
        "another file, or move this one aside so that autocutlass can create a new database there."
    )


def mismatch(loc: DbLocation, found: int) -> SchemaMismatch:
    """The error for a database at schema version ``found`` (not ``SCHEMA_VERSION``): how to upgrade
    the database, or autocutlass."""
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


def parse_version(raw: str | None, loc: DbLocation) -> int:
    """The stored ``schema_version`` text as a number; DatabaseError when missing or not a number."""
    if raw is None:
        raise not_ours(loc, "its meta table has no schema_version")
    try:
        return int(raw)
    except ValueError:
        raise not_ours(loc, f"its schema_version is {raw!r}") from None

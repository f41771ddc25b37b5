"""Where a tuning database lives, decided without SQLAlchemy: the resolved address, and whether
this process can write a SQLite file or must read it ``mode=ro`` / ``immutable=1``.

Standard library only (SQLAlchemy is imported to parse a URL, never for a plain file path): the
lookup path of a SQLite database (``db.sqlite_read``) and the store's constructor use these, so
that a process serving stored results never imports SQLAlchemy. ``db.engine`` re-exports them.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from autocutlass.errors import DatabaseError

SQLITE_BUSY_TIMEOUT_MS = 30_000
SERVING_BUSY_S = 0.25
"""How long one SQLite statement of a user's call (lookups, misses) waits for another process's
lock (``settings.DbTimeouts.serving``)."""
"""How long one SQLite statement waits for another process's lock before reporting busy."""

MAX_ATTEMPTS = 8
"""Attempts of one transaction that keeps failing with a transient lock error."""

# SQLite primary result codes (https://sqlite.org/rescode.html).
SQLITE_BUSY = 5
SQLITE_LOCKED = 6
SQLITE_CORRUPT = 11
SQLITE_NOTADB = 26

@dataclass(frozen=True)
class DbLocation:
    """A resolved database address.

    ``url`` is what SQLAlchemy gets; ``display`` is what messages show (the file path for a
    SQLite file, else the URL with its password hidden); ``sqlite_path`` is the file of a
    file-backed SQLite database, else None.
    """

    url: str
    display: str
    sqlite_path: Path | None

    @property
    def is_sqlite(self) -> bool:
        return self.url.startswith("sqlite")


_SQLITE_FILE_URL = "sqlite:///"


def resolve(url_or_path: str | os.PathLike[str]) -> DbLocation:
    """Resolve a path or SQLAlchemy URL. Never raises: a malformed URL fails when opened."""
    raw = os.fspath(url_or_path)
    if "://" not in raw:
        path = Path(raw).expanduser().resolve()
        return DbLocation(url=f"sqlite:///{path}", display=str(path), sqlite_path=path)
    file = raw[len(_SQLITE_FILE_URL) :] if raw.startswith(_SQLITE_FILE_URL) else ""
    if file and "?" not in file and "%" not in file and file != ":memory:" and not file.startswith("file:"):
        # sqlite:///<path>, as resolve writes it (and as SQLAlchemy reads it): no URL parser needed
        path = Path(file).expanduser().resolve()
        return DbLocation(url=f"sqlite:///{path}", display=str(path), sqlite_path=path)
    # any other URL (a server, or SQLite with options): SQLAlchemy parses it
    from sqlalchemy import exc as sa_exc
    from sqlalchemy.engine import make_url

    try:
        url = make_url(raw)
    except sa_exc.ArgumentError:
        return DbLocation(url=raw, display=raw, sqlite_path=None)
    if url.get_backend_name() == "sqlite":
        db = url.database
        if db and db != ":memory:" and not db.startswith("file:"):
            path = Path(db).expanduser().resolve()
            return DbLocation(url=f"sqlite:///{path}", display=str(path), sqlite_path=path)
        return DbLocation(url=raw, display=raw, sqlite_path=None)
    return DbLocation(url=raw, display=url.render_as_string(hide_password=True), sqlite_path=None)


def sqlite_unwritable(path: Path) -> str | None:
    """Why this process cannot write the existing SQLite file ``path``, or None when it can (or
    the file does not exist). Decided by ``os.access``: permissions, read-only mounts and
    immutable attributes, as they apply to this process (root included)."""
    try:
        if not path.is_file():
            return None
    except OSError as e:  # a directory this process cannot enter (EACCES)
        raise DatabaseError(f"Cannot read the tuning database {path}: {e}") from e
    if not os.access(path, os.W_OK):
        return "the file is not writable"
    if not os.access(path.parent, os.W_OK | os.X_OK):
        return "its directory is not writable (SQLite creates its -wal, -shm and -journal files there)"
    return None


def sqlite_read_only_uri(path: Path, *, immutable: bool = False) -> tuple[str, bool]:
    """The ``file:`` URI that opens ``path`` read-only, and whether it is immutable.

    ``immutable`` is forced when the directory is not writable and no non-empty ``-wal`` file
    exists: a WAL-mode file then cannot be opened ``mode=ro`` (SQLite could not create its
    ``-shm`` file), and without a ``-wal`` file nobody is writing it in WAL mode right now.
    """
    if not immutable and not os.access(path.parent, os.W_OK | os.X_OK):
        wal = Path(f"{path}-wal")
        try:
            immutable = not (wal.is_file() and wal.stat().st_size > 0)
        except OSError:  # cannot look: not immutable (opening it then fails with a DatabaseError)
            immutable = False
    return f"file:{quote(str(path))}?mode=ro" + ("&immutable=1" if immutable else ""), immutable


def retry_pause(attempt: int) -> float:
    """Seconds to wait before retrying a transaction after its ``attempt``-th transient failure
    (exponential from 20 ms, at most 2 s, jittered)."""
    return min(2.0, 0.02 * 2.0**attempt) * (0.5 + random.random())


def sqlite_failure(loc: DbLocation, code: int | None, detail: str) -> DatabaseError:
    """The DatabaseError for a failure of the SQLite database ``loc`` (``code``: SQLite's primary
    result code, when known): what is wrong with which file, and what to do."""
    if code in (SQLITE_CORRUPT, SQLITE_NOTADB):
        where = loc.sqlite_path or loc.display
        return DatabaseError(
            f"The tuning database {where} is corrupt or not a SQLite database (sqlite: {detail}). "
            f"Move it aside (mv '{where}' '{where}.bad') or delete it, and autocutlass starts a new "
            "one there; or point AUTOCUTLASS_DB at another file."
        )
    if code in (SQLITE_BUSY, SQLITE_LOCKED):
        return DatabaseError(
            f"The tuning database {loc.display} stayed locked by another process through every attempt "
            f"(a user's call waits {SERVING_BUSY_S} s, the tuner and the CLI {SQLITE_BUSY_TIMEOUT_MS // 1000} s, "
            f"{MAX_ATTEMPTS} times; sqlite: {detail}). "
            "Check for a stuck autocutlass process, or point AUTOCUTLASS_DB at another file."
        )
    return DatabaseError(
        f"Cannot use the tuning database {loc.display} (sqlite: {detail}). Check that the file and "
        "its directory are readable and writable, or point AUTOCUTLASS_DB at another file."
    )

"""Named exclusive locks shared by every process that uses one tuning database, and host-wide GPU locks.

A ``LockSpace`` hands out locks by name. ``try_acquire(name)`` takes one at once or answers None;
``acquire(name, stop=...)`` polls until it gets it (or ``stop`` is set). A ``HeldLock`` is released
by ``release()`` or at the end of its ``with`` block, and **always when its process dies**:

* ``FileLocks(directory)``: ``flock`` on ``<directory>/<sha256 of name>.lock``. The kernel drops
  the lock when the holder's file description closes, so a killed holder leaves nothing behind.
  Two opens of the same file exclude each other even inside one process (threads are holders of
  their own). For SQLite databases (``<db>.locks/`` beside the file: every process that can use a
  SQLite file runs on its host) and for GPUs (``host_gpu_locks()``: a GPU belongs to one host).
* ``AdvisoryLocks(url)``: a PostgreSQL session-level advisory lock (``pg_try_advisory_lock`` on a
  64-bit key derived from the name) on a connection of its own, held open while the lock is held.
  The server drops the lock when that connection ends; the connection asks the server to probe
  the client (TCP keepalives every ``KEEPALIVE_S`` seconds), so a host that vanished without
  closing its sockets loses its locks within about a minute.

``locks_for(url_or_path)`` picks the space for a tuning database. Lock names are free text;
``problem_lock_name`` and ``gpu_lock_name`` are the names the tuning campaign and on-line tuning
agree on. Waiting never holds a statement open (polling with ``try``), so a statement timeout
never cuts a wait short and a waiting process can be stopped.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # imported where PostgreSQL locks are used: file locks need no SQLAlchemy
    from sqlalchemy.engine import Connection, Engine

from autocutlass.db.location import resolve
from autocutlass.device import HardKey
from autocutlass.errors import DatabaseError
from autocutlass.ops.base import OpProblem
from autocutlass.settings import DbTimeouts

POLL_S = 0.5
"""Seconds between two tries of a lock that ``acquire`` waits for."""
KEEPALIVE_S = 15
"""TCP keepalive idle/interval of an advisory-lock connection (the server side probes the client)."""
GPU_LOCK_DIR = "autocutlass-gpu-locks"
"""Directory (under the system temporary directory) of the host-wide GPU locks."""


class HeldLock:
    """A lock this process holds; ``release()`` (idempotent) or the end of a ``with`` block frees it."""

    def __init__(self, name: str, release: Callable[[], None]) -> None:
        self.name = name
        self._release: Callable[[], None] | None = release

    @property
    def held(self) -> bool:
        return self._release is not None

    def release(self) -> None:
        fn, self._release = self._release, None
        if fn is not None:
            fn()

    def __enter__(self) -> HeldLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class LockSpace(Protocol):
    """Named exclusive locks (see the module docstring)."""

    def try_acquire(self, name: str) -> HeldLock | None:
        """The lock ``name`` if it is free now, else None. Never waits."""
        ...


def acquire(space: LockSpace, name: str, *, stop: threading.Event | None = None, poll_s: float = POLL_S,
            on_wait: Callable[[], None] | None = None, timeout_s: float | None = None) -> HeldLock | None:  # fmt: skip
    """Wait for the lock ``name`` of ``space``; None when ``stop`` was set first, or when
    ``timeout_s`` seconds passed without it (a holder that hangs, alive, keeps its lock: a
    bounded wait lets the waiter do other work). ``on_wait`` is called once, when the lock is
    found taken (to say so)."""
    told = False
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        held = space.try_acquire(name)
        if held is not None:
            return held
        if not told and on_wait is not None:
            on_wait()
            told = True
        pause = poll_s
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            pause = min(pause, left)
        if stop is not None:
            if stop.wait(pause):
                return None
        else:
            time.sleep(pause)


def _digest(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()


class FileLocks:
    """``flock`` locks on files of one directory (created on first use, mode 1777 for a shared one)."""

    def __init__(self, directory: str | os.PathLike[str], *, shared: bool = False) -> None:
        self.directory = Path(directory)
        self._shared = shared

    def __repr__(self) -> str:
        return f"FileLocks({str(self.directory)!r})"

    def _ensure_dir(self) -> None:
        if self.directory.is_dir():
            return
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            if self._shared:
                os.chmod(self.directory, 0o1777)  # every user of the host locks its GPUs here
        except OSError as e:
            raise DatabaseError(f"Cannot create the lock directory {self.directory}: {e}") from e

    def path_of(self, name: str) -> Path:
        return self.directory / f"{_digest(name)[:32]}.lock"

    def try_acquire(self, name: str) -> HeldLock | None:
        self._ensure_dir()
        path = self.path_of(name)
        try:
            # O_RDONLY is enough for flock, so another user's lock file serves too.
            fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o666)
        except OSError as e:
            raise DatabaseError(f"Cannot open the lock file {path} ({name}): {e}") from e
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        except OSError as e:
            os.close(fd)
            raise DatabaseError(f"Cannot lock {path} ({name}): {e}") from e
        return HeldLock(name, lambda: os.close(fd))  # closing the descriptor drops the flock


def advisory_key(name: str) -> int:
    """The signed 64-bit PostgreSQL advisory-lock key of ``name``."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


class AdvisoryLocks:
    """PostgreSQL session-level advisory locks, one connection per held lock."""

    def __init__(self, url: str, *, timeouts: DbTimeouts | None = None) -> None:
        self._loc = resolve(url)
        self._timeouts = timeouts
        self._engine: Engine | None = None
        self._engine_pid = -1
        self._engine_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"AdvisoryLocks({self._loc.display!r})"

    def _get_engine(self) -> Engine:
        from sqlalchemy import create_engine
        from sqlalchemy import exc as sa_exc
        from sqlalchemy.pool import NullPool

        from autocutlass.db import engine as eng

        with self._engine_lock:
            if self._engine is None or self._engine_pid != os.getpid():
                timeouts = self._timeouts or DbTimeouts.from_env()
                args = eng._pg_connect_args(self._loc.url, read_only=False, timeouts=timeouts)
                args.update(keepalives=1, keepalives_idle=KEEPALIVE_S, keepalives_interval=KEEPALIVE_S,
                            keepalives_count=3)  # fmt: skip
                ka = (f"-c tcp_keepalives_idle={KEEPALIVE_S} -c tcp_keepalives_interval={KEEPALIVE_S} "
                      "-c tcp_keepalives_count=3")  # fmt: skip
                args["options"] = f"{args.get('options', '')} {ka}".strip()
                try:
                    self._engine = create_engine(self._loc.url, poolclass=NullPool, connect_args=args)
                except (sa_exc.ArgumentError, sa_exc.NoSuchModuleError, ImportError) as e:
                    raise DatabaseError(f"Cannot open the tuning database {self._loc.display} for locks: {e}") from e
                self._engine_pid = os.getpid()
            return self._engine

    def try_acquire(self, name: str) -> HeldLock | None:
        from sqlalchemy import exc as sa_exc
        from sqlalchemy import text

        from autocutlass.db import engine as eng

        key = advisory_key(name)
        conn: Connection | None = None
        try:
            conn = self._get_engine().connect()
            got = bool(conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": key}).scalar())
            conn.commit()  # end the transaction: the session-level lock stays, the connection idles
        except sa_exc.DBAPIError as e:
            if conn is not None:
                conn.invalidate()
                conn.close()
            raise eng.storage_error(self._loc, e) from e
        if not got:
            conn.close()
            return None
        held_conn = conn

        def _release() -> None:
            try:
                held_conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": key})
                held_conn.commit()
            except sa_exc.DBAPIError:
                held_conn.invalidate()  # the server drops the lock with the connection anyway
            finally:
                held_conn.close()

        return HeldLock(name, _release)


def locks_for(url_or_path: str | os.PathLike[str], *, timeouts: DbTimeouts | None = None) -> LockSpace:
    """The lock space of a tuning database: advisory locks on PostgreSQL, files in
    ``<db>.locks/`` beside a SQLite file (a SQLite database without a file, in memory, gets a
    directory of its own under the system temporary directory)."""
    loc = resolve(url_or_path)
    if loc.sqlite_path is not None:
        return FileLocks(loc.sqlite_path.with_name(loc.sqlite_path.name + ".locks"))
    if loc.is_sqlite:
        return FileLocks(Path(tempfile.gettempdir()) / f"autocutlass-locks-{_digest(loc.url)[:16]}")
    return AdvisoryLocks(loc.url, timeouts=timeouts)


def host_gpu_locks(directory: str | os.PathLike[str] | None = None) -> FileLocks:
    """The host-wide GPU locks: every process of this host that times candidates on a GPU takes
    ``gpu_lock_name(gpu)`` here first, whatever database it records into."""
    return FileLocks(directory or Path(tempfile.gettempdir()) / GPU_LOCK_DIR, shared=directory is None)


def problem_lock_name(problem: OpProblem, hard_key: HardKey) -> str:
    """The lock of tuning ``problem`` under ``hard_key``: its holder is the one process tuning it."""
    return f"autocutlass:tune:{hard_key.digest()}:{problem.key()}"


def gpu_lock_name(gpu: str) -> str:
    """The lock of timing candidates on GPU ``gpu`` (its UUID, see ``campaign.gpus``)."""
    return f"autocutlass:gpu:{gpu}"


__all__ = [
    "GPU_LOCK_DIR",
    "KEEPALIVE_S",
    "POLL_S",
    "AdvisoryLocks",
    "FileLocks",
    "HeldLock",
    "LockSpace",
    "acquire",
    "advisory_key",
    "gpu_lock_name",
    "host_gpu_locks",
    "locks_for",
    "problem_lock_name",
]

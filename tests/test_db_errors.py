"""Unusable databases: corrupt files, foreign files, schema mismatches and upgrade, lock contention."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import Connection, text

from autocutlass.db import MIGRATIONS, SCHEMA_VERSION, TuningStore, release, upgrade
from autocutlass.db import engine as eng
from autocutlass.device import HardKey
from autocutlass.errors import DatabaseError, SchemaMismatch
from autocutlass.ops.gemm.problem import GemmProblem
from autocutlass.settings import DbTimeouts

HK = HardKey("NVIDIA H100 80GB HBM3", cc="9.0", sm_count=132, dsl_version="4.8.1", kernel_hash="k0", protocol_version=1)
P = GemmProblem(m=256, n=4096, k=4096)


def _good_db(path: Path, rows: int = 200) -> bytes:
    store = TuningStore(path)
    for i in range(rows):
        store.record_trial(GemmProblem(m=i + 1, n=4096, k=4096), HK, "f", {"pad": "x" * 200, "i": i}, "ok", median_ms=1.0)
    store.record_best(P, HK, "f", {"i": 0}, 1.0, 1.0)
    release(path)
    for side in ("-wal", "-shm"):
        assert not Path(f"{path}{side}").exists()
    return path.read_bytes()


def _corrupt(kind: str, path: Path, tmp_path: Path) -> None:
    if kind == "text":
        path.write_text("these are my notes, not a database\n" * 50)
    elif kind == "random":
        path.write_bytes(os.urandom(16384))
    elif kind == "truncated_half":
        data = _good_db(tmp_path / "good.sqlite")
        path.write_bytes(data[: len(data) // 2])
    elif kind == "truncated_header":
        data = _good_db(tmp_path / "good.sqlite")
        path.write_bytes(data[:60])
    else:
        raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["text", "random", "truncated_half", "truncated_header"])
def test_corrupt_file_raises_database_error_naming_the_file(kind: str, tmp_path: Path) -> None:
    path = tmp_path / "tuning.sqlite"
    _corrupt(kind, path, tmp_path)
    before = path.read_bytes()
    store = TuningStore(path)  # constructing never touches the file
    calls: list[Callable[[], object]] = [
        lambda: store.lookup(P, HK),
        lambda: store.record_trial(P, HK, "f", {}, "ok", median_ms=1.0),
        lambda: store.record_best(P, HK, "f", {}, 1.0, 1.0),
        store.check,
        store.counts_per_gpu,
        store.bests,
    ]
    for call in calls:
        with pytest.raises(DatabaseError) as info:
            call()
        msg = str(info.value)
        assert str(path) in msg
        assert "AUTOCUTLASS_DB" in msg and ("Move it aside" in msg or "delete" in msg)
        assert type(info.value) is DatabaseError
    assert path.read_bytes() == before  # never "repaired" into an empty database


def test_foreign_sqlite_database_is_not_taken_over(tmp_path: Path) -> None:
    path = tmp_path / "other.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE notes (x TEXT)")
    with pytest.raises(DatabaseError, match="not an autocutlass tuning database") as info:
        TuningStore(path).lookup(P, HK)
    assert str(path) in str(info.value)


@pytest.mark.parametrize(
    "url",
    ["postgresql+psycopg://user:secret@127.0.0.1:1/nodb", "mysql://user:secret@host/db", "nosuchdialect://x", "://"],
)
def test_unreachable_or_unsupported_urls(url: str) -> None:
    store = TuningStore(url)  # never raises
    with pytest.raises(DatabaseError) as info:
        store.lookup(P, HK)
    assert "secret" not in str(info.value)
    assert "AUTOCUTLASS_DB" in str(info.value) or "driver" in str(info.value)


def _set_version(path: Path, version: int) -> None:
    release(path)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(version),))


def test_older_schema_names_the_upgrade_command(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    TuningStore(path).record_best(P, HK, "f", {}, 1.0, 1.0)
    _set_version(path, 0)
    with pytest.raises(SchemaMismatch) as info:
        TuningStore(path).lookup(P, HK)
    msg = str(info.value)
    assert f"autocutlass db upgrade --db {path}" in msg
    assert "version 0" in msg and f"version {SCHEMA_VERSION}" in msg


def test_upgrade_runs_the_migration_steps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "old.sqlite"
    TuningStore(path).record_best(P, HK, "f", {"v": 1}, 1.0, 1.0)
    _set_version(path, SCHEMA_VERSION - 1)
    monkeypatch.delitem(MIGRATIONS, SCHEMA_VERSION - 1)
    with pytest.raises(SchemaMismatch, match="no migration"):
        upgrade(path)
    assert not list(tmp_path.glob("*.bak"))  # nothing to migrate with: no copy made

    ran: list[int] = []

    def step(conn: Connection) -> None:
        ran.append(SCHEMA_VERSION - 1)
        conn.execute(text("UPDATE best SET tflops = 2.0"))

    monkeypatch.setitem(MIGRATIONS, SCHEMA_VERSION - 1, step)
    assert upgrade(path) == (SCHEMA_VERSION - 1, SCHEMA_VERSION)
    assert ran == [SCHEMA_VERSION - 1]
    rec = TuningStore(path).lookup(P, HK)
    assert rec is not None and rec.tflops == 2.0 and rec.config == {"v": 1}
    assert upgrade(path) == (SCHEMA_VERSION, SCHEMA_VERSION)  # nothing left to do


def test_failed_migration_leaves_the_database_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "old.sqlite"
    TuningStore(path).record_best(P, HK, "f", {"v": 1}, 1.0, 1.0)
    _set_version(path, SCHEMA_VERSION - 1)

    def bad_step(conn: Connection) -> None:
        conn.execute(text("UPDATE best SET tflops = 3.0"))
        raise RuntimeError("bug in a migration")

    monkeypatch.setitem(MIGRATIONS, SCHEMA_VERSION - 1, bad_step)
    with pytest.raises(RuntimeError):
        upgrade(path)
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT value FROM meta").fetchone() == (str(SCHEMA_VERSION - 1),)
        assert conn.execute("SELECT tflops FROM best").fetchone() == (1.0,)


def test_newer_schema_says_to_upgrade_autocutlass(tmp_path: Path) -> None:
    path = tmp_path / "new.sqlite"
    TuningStore(path).check()
    _set_version(path, SCHEMA_VERSION + 1)
    with pytest.raises(SchemaMismatch) as info:
        TuningStore(path).lookup(P, HK)
    msg = str(info.value)
    assert str(path) in msg and "Upgrade autocutlass" in msg and "pip install -U autocutlass" in msg
    assert f"version {SCHEMA_VERSION + 1}" in msg and f"version {SCHEMA_VERSION}" in msg
    with pytest.raises(SchemaMismatch, match="Upgrade autocutlass"):
        upgrade(path)


def _hold_write_lock(path: Path, seconds: float, locked: threading.Event) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    locked.set()
    time.sleep(seconds)
    conn.execute("COMMIT")
    conn.close()


def test_busy_database_is_retried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "busy.sqlite"
    TuningStore(path).check()
    release(path)
    monkeypatch.setattr(eng, "SQLITE_BUSY_TIMEOUT_MS", 20)  # make sqlite give up quickly, so we retry
    locked = threading.Event()
    holder = threading.Thread(target=_hold_write_lock, args=(path, 0.4, locked))
    holder.start()
    locked.wait(10)
    try:
        TuningStore(path).record_trial(P, HK, "f", {}, "ok", median_ms=1.0)
    finally:
        holder.join()
    assert len(TuningStore(path).trials()) == 1


def test_lock_held_beyond_retries_is_a_database_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "busy.sqlite"
    TuningStore(path).check()
    release(path)
    locked = threading.Event()
    holder = threading.Thread(target=_hold_write_lock, args=(path, 1.0, locked))
    holder.start()
    locked.wait(10)
    try:
        with pytest.raises(DatabaseError, match="locked") as info:
            TuningStore(path, timeouts=DbTimeouts(busy_s=0.01, attempts=2)).record_trial(P, HK, "f", {}, "ok", median_ms=1.0)
    finally:
        holder.join()
    assert str(path) in str(info.value)


def test_path_that_is_a_directory(tmp_path: Path) -> None:
    with pytest.raises(DatabaseError) as info:
        TuningStore(tmp_path).lookup(P, HK)
    assert str(tmp_path) in str(info.value) and "AUTOCUTLASS_DB" in str(info.value)


def test_read_only_store_refuses_writes(tmp_path: Path) -> None:
    path = tmp_path / "t.sqlite"
    TuningStore(path).record_best(P, HK, "f", {}, 1.0, 1.0)
    ro = TuningStore(path, read_only=True)
    assert ro.lookup(P, HK) is not None
    with pytest.raises(DatabaseError, match="read-only"):
        ro.record_miss(P, HK)
    with pytest.raises(DatabaseError, match="does not exist"):
        TuningStore(tmp_path / "missing.sqlite", read_only=True).lookup(P, HK)


def test_unreadable_stored_problem_is_skipped_by_lookup_and_named_elsewhere(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "t.sqlite"
    store = TuningStore(path)
    store.record_best(P, HK, "f", {"v": 1}, 1.0, 1.0)
    near = GemmProblem(m=300, n=4096, k=4096)
    store.record_best(near, HK, "f", {"v": 2}, 1.0, 1.0)
    release(path)
    with sqlite3.connect(path) as conn:  # a malformed row (written by something else)
        conn.execute("UPDATE problems SET problem = ? WHERE key = ?", ('{"op": "gemm", "m": "x"}', near.key()))
    conn.close()
    store = TuningStore(path)
    rec = store.lookup(GemmProblem(m=400, n=4096, k=4096), HK)  # bucket 512 holds only the bad row
    assert rec is not None and rec.source == "nearest" and rec.problem == P
    assert any("skipping a stored record" in r.getMessage() for r in caplog.records)
    with pytest.raises(DatabaseError, match="cannot read") as info:
        store.bests()
    assert str(path) in str(info.value)


def test_a_serving_store_gives_a_held_lock_a_quarter_second(tmp_path: Path) -> None:
    """The store a user's call reads and records misses through (``DbTimeouts.serving``) waits
    about a quarter second for another process's write lock and retries once, then reports the
    database unusable (dispatch then goes on without it): not 30 s a statement, 8 times."""
    path = tmp_path / "busy.sqlite"
    TuningStore(path).check()
    release(path)
    locked = threading.Event()
    holder = threading.Thread(target=_hold_write_lock, args=(path, 5.0, locked))
    holder.start()
    locked.wait(10)
    try:
        serving = TuningStore(path, timeouts=DbTimeouts().serving())
        with pytest.raises(DatabaseError, match="locked"):  # given up while the holder still holds it
            serving.record_miss(P, HK)
    finally:
        holder.join()
    with serving._engine().connect() as conn:
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 250
    assert DbTimeouts().serving().busy_s == 0.25 and DbTimeouts().busy_s == 30.0


def test_every_driver_error_but_a_constraint_is_the_databases() -> None:
    """A read-only PostgreSQL role's ``permission denied`` (ProgrammingError) or a hot standby's
    ``read-only transaction`` (InternalError) is a storage failure: a DatabaseError the user's call
    survives, not an exception escaping into it; a violated constraint is ours to handle."""
    from sqlalchemy import exc as sa_exc

    for cls in (sa_exc.ProgrammingError, sa_exc.InternalError, sa_exc.OperationalError, sa_exc.NotSupportedError):
        assert eng._is_storage_failure(cls("SELECT 1", {}, Exception("denied")))
    assert not eng._is_storage_failure(sa_exc.IntegrityError("INSERT", {}, Exception("duplicate key")))

"""Databases this process cannot write, and inspection that never writes.

* A WAL-mode SQLite file in a directory this process cannot write (SQLite cannot create its
  ``-shm`` file there) or a file it cannot write is opened read-only: lookups, ``bests``,
  counts, export and ``upgrade`` of a current file work, writes raise DatabaseError, dispatch's
  ``LayeredStore`` keeps looking up in it.
* ``TuningStore(path, read_only=True)`` never creates or writes anything: an empty file reads as
  a database without records, a missing one raises DatabaseError.

The unwritable cases are genuine: ``chmod`` for a normal user; as root, whom permissions do not
stop, the immutable attribute (``chattr +i``, which stops root too). A test skips when neither
makes the path unwritable here (checked by trying to create a file).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from autocutlass.db import LayeredStore, TuningStore, export, release, upgrade
from autocutlass.db import engine as eng
from autocutlass.db.schema import backup_path
from autocutlass.device import HardKey
from autocutlass.errors import DatabaseError, SchemaMismatch
from autocutlass.ops.gemm.problem import GemmProblem

HK = HardKey("NVIDIA H100 80GB HBM3", cc="9.0", sm_count=132, dsl_version="4.8.1", kernel_hash="k0", protocol_version=1)
P, Q = GemmProblem(m=256, n=4096, k=4096), GemmProblem(m=64, n=1024, k=1024)


@contextmanager
def unwritable(*paths: Path) -> Iterator[None]:
    """``paths`` (files and directories) genuinely unwritable for this process inside the block."""
    undo: list[tuple[Path, int | None]] = []  # (path, mode to restore | None: chattr -i)
    chattr = shutil.which("chattr")
    try:
        for p in paths:
            if os.geteuid() != 0:
                undo.append((p, p.stat().st_mode))
                p.chmod(0o555 if p.is_dir() else 0o444)
            else:
                if chattr is None:
                    pytest.skip("running as root without chattr: cannot make a path unwritable")
                done = subprocess.run([chattr, "+i", str(p)], capture_output=True, text=True, check=False)
                if done.returncode != 0:
                    pytest.skip(f"running as root and chattr +i failed here: {done.stderr.strip()}")
                undo.append((p, None))
        for p in paths:
            probe = p / ".probe" if p.is_dir() else p
            try:
                with open(probe, "a"):
                    pass
            except OSError:
                continue
            if p.is_dir():
                probe.unlink()
            pytest.skip(f"{p} stays writable for this process")
        yield
    finally:
        for p, mode in reversed(undo):
            if mode is None:
                subprocess.run([str(chattr), "-i", str(p)], check=True)
            else:
                p.chmod(mode)


def wal_db(path: Path) -> bytes:
    """A WAL-mode database with one best and one trial, closed (no -wal/-shm left); its bytes."""
    store = TuningStore(path)
    tid = store.record_trial(P, HK, "f", {"tile": 128}, "ok", median_ms=1.0, tflops=100.0)
    store.record_best(P, HK, "f", {"tile": 128}, 1.0, 100.0, trial_id=tid)
    release(path)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    conn.close()
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]
    return path.read_bytes()


def check_reads(store: TuningStore) -> None:
    rec = store.lookup(P, HK)
    assert rec is not None and rec.config == {"tile": 128} and rec.source == "exact"
    assert store.lookup(GemmProblem(m=200, n=4096, k=4096), HK).source == "bucket"  # type: ignore[union-attr]
    assert [b.config for b in store.bests()] == [{"tile": 128}]
    assert store.counts_per_gpu() == {HK.gpu_name: {"hard_keys": 1, "problems": 1, "trials": 1, "bests": 1, "torch_times": 0}}
    assert len(store.trials()) == 1 and store.hard_keys() == [HK]


def test_wal_file_in_unwritable_directory_is_read(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "ro"
    d.mkdir()
    path = d / "tuning.sqlite"
    before = wal_db(path)
    out = tmp_path / "out"
    out.mkdir()
    with unwritable(d), caplog.at_level(logging.WARNING, logger="autocutlass.db"):
        assert eng.sqlite_unwritable(path) is not None
        assert eng.sqlite_read_only_uri(path) == (f"file:{path}?mode=ro&immutable=1", True)

        user = TuningStore(path)  # what dispatch and `autocutlass info` open
        check_reads(user)
        assert user.read_only
        with pytest.raises(DatabaseError, match="read-only") as info:
            user.record_trial(Q, HK, "f", {}, "ok", median_ms=1.0)
        assert str(path) in str(info.value)
        check_reads(TuningStore(path, read_only=True))
        assert json.loads(export(TuningStore(path), out / "all.json").read_text())["best"][0]["config"] == {"tile": 128}
        export(TuningStore(path, read_only=True), out / "all.sqlite")
        assert upgrade(path) == (2, 2)  # already current: nothing to write, success

        caplog.clear()
        layered = LayeredStore(TuningStore(path), None)  # what dispatch holds
        for _ in range(3):
            assert layered.lookup(P, HK).config == {"tile": 128}  # type: ignore[union-attr]
            layered.record_miss(Q, HK)  # a read-only user database: nothing recorded, nothing raised
        assert not layered.is_down(layered.user)
    warnings = [r for r in caplog.records if str(path) in r.getMessage()]
    assert len(warnings) == 1 and "read-only" in warnings[0].getMessage()  # said once
    assert path.read_bytes() == before
    assert sorted(p.name for p in d.iterdir()) == ["tuning.sqlite"]
    check_reads(TuningStore(out / "all.sqlite"))


def test_unwritable_file_in_writable_directory_is_read(tmp_path: Path) -> None:
    path = tmp_path / "tuning.sqlite"
    before = wal_db(path)
    with unwritable(path):
        assert eng.sqlite_unwritable(path) == "the file is not writable"
        assert eng.sqlite_read_only_uri(path) == (f"file:{path}?mode=ro", False)  # SQLite may make its -shm
        user = TuningStore(path)
        check_reads(user)
        with pytest.raises(DatabaseError, match="read-only"):
            user.record_miss(Q, HK)
        assert upgrade(path) == (2, 2)
        export(TuningStore(path, read_only=True), tmp_path / "all.json")
        release(path)
    assert path.read_bytes() == before


def test_unwritable_directory_with_a_live_wal_is_read_with_it(tmp_path: Path) -> None:
    """A -wal still holding commits (its writer has the file open) is read, not ignored: no immutable."""
    d = tmp_path / "ro"
    d.mkdir()
    path = d / "tuning.sqlite"
    wal_db(path)
    writer = sqlite3.connect(path, isolation_level=None)
    try:
        writer.execute("PRAGMA wal_autocheckpoint = 0")
        writer.execute("UPDATE best SET tflops = 555.0")
        assert Path(f"{path}-wal").stat().st_size > 0
        with unwritable(d):
            assert eng.sqlite_read_only_uri(path) == (f"file:{path}?mode=ro", False)
            rec = TuningStore(path, read_only=True).lookup(P, HK)
            assert rec is not None and rec.tflops == 555.0
            release(path)
    finally:
        writer.close()


def test_upgrade_of_an_older_unwritable_file_says_why(tmp_path: Path) -> None:
    d = tmp_path / "ro"
    d.mkdir()
    path = d / "tuning.sqlite"
    wal_db(path)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    conn.close()
    with unwritable(d):
        with pytest.raises(SchemaMismatch, match="autocutlass db upgrade"):
            TuningStore(path).lookup(P, HK)
        with pytest.raises(DatabaseError, match="not writable") as info:
            upgrade(path)
        assert str(path) in str(info.value)
        assert not backup_path(path, 1).exists()


# ---- inspection never writes ---------------------------------------------------------------------
def test_read_only_store_of_an_empty_file_reads_as_empty_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "empty.sqlite"
    path.touch()
    store = TuningStore(path, read_only=True)
    store.check()
    assert store.lookup(P, HK) is None
    assert store.bests() == [] and store.trials() == [] and store.pending_misses() == []
    assert store.counts_per_gpu() == {} and store.hard_keys() == []
    assert store.finished_config_keys(P, HK, "f") == set()
    doc = json.loads(export(store, tmp_path / "out.json").read_text())
    assert (doc["trials"], doc["best"], doc["misses"], doc["devices"]) == ([], [], [], [])
    with pytest.raises(DatabaseError, match="read-only"):
        store.record_best(P, HK, "f", {}, 1.0, 1.0)
    release(path)
    assert path.stat().st_size == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.sqlite", "out.json"]
    TuningStore(path).check()  # a read-write store does create the tables
    assert path.stat().st_size > 0


def test_read_only_store_of_a_missing_file_creates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "missing.sqlite"
    store = TuningStore(path, read_only=True)
    for call in (store.check, store.bests, store.counts_per_gpu, lambda: export(store, tmp_path / "o.json")):
        with pytest.raises(DatabaseError, match="does not exist"):
            call()
    assert not path.parent.exists() and not (tmp_path / "o.json").exists()


def test_read_only_store_leaves_a_rollback_journal_file_as_it_is(tmp_path: Path) -> None:
    path = export(TuningStore(tmp_path / "src.sqlite"), tmp_path / "export.sqlite")  # journal_mode=delete
    TuningStore(tmp_path / "src.sqlite").record_best(P, HK, "f", {"tile": 128}, 1.0, 100.0)
    path = export(TuningStore(tmp_path / "src.sqlite"), tmp_path / "export.sqlite")
    before = path.read_bytes()
    store = TuningStore(path, read_only=True)
    assert store.lookup(P, HK) is not None and store.counts_per_gpu()
    release(path)
    assert path.read_bytes() == before
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    conn.close()


@pytest.mark.parametrize("fast_reads", ["1", "0"])
def test_a_file_in_an_unwritable_directory_is_read_as_it_is_now(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                fast_reads: str) -> None:  # fmt: skip
    """A team's database in a directory this process cannot write is opened immutable=1 (no -shm
    can be made there), but whoever can write it may still add records: each later lookup reads
    the file as it is then, not what the first connection saw (both read paths)."""
    monkeypatch.setenv("AUTOCUTLASS_DB_SQLITE_READS", fast_reads)
    d = tmp_path / "shared"
    d.mkdir()
    path = d / "tuning.sqlite"
    writer = TuningStore(path)
    writer.record_best(P, HK, "f", {"tile": 128}, 1.0, 100.0)
    release(path)
    real, locked = os.access, [True]

    def access(p: object, mode: int, *a: object, **k: object) -> bool:  # this process may not write d
        if locked[0] and Path(str(p)) == d and mode & os.W_OK:
            return False
        return real(p, mode, *a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(eng.os, "access", access)
    from autocutlass.db import location

    monkeypatch.setattr(location.os, "access", access)
    assert location.sqlite_read_only_uri(path)[1]  # immutable, forced
    reader = TuningStore(path)
    assert reader.lookup(P, HK).config == {"tile": 128}  # type: ignore[union-attr]
    assert reader.lookup(Q, HK) is None
    locked[0] = False  # the owner tunes two more problems into it
    writer = TuningStore(path)
    writer.record_best(Q, HK, "f", {"tile": 64}, 1.0, 100.0)
    writer.record_best(P, HK, "f", {"tile": 256}, 0.5, 200.0)
    release(path)
    locked[0] = True
    assert sorted(x.name for x in d.iterdir()) == ["tuning.sqlite"]
    got = reader.lookup(Q, HK)
    assert got is not None and got.source == "exact" and got.config == {"tile": 64}
    assert reader.lookup(P, HK).config == {"tile": 256}  # type: ignore[union-attr]
    if fast_reads == "0":  # the SQLAlchemy engine keeps no connection of such a file
        assert type(reader._engine().pool).__name__ == "NullPool"

"""Export, import and merge of tuning databases.

* ``export(store, path)``: a self-contained SQLite file of the same schema (rollback journal, no
  ``-wal`` side file), or a JSON document when ``path`` ends with ``.json``.
* ``import_(store, path)``: merge a file (SQLite or JSON export, detected from its content) into
  ``store``. Files of an older schema are read too (a SQLite file through an upgraded temporary
  copy, never written itself).
* ``merge(a, b, out)``: merge two files into a new one.

Merge rules, identical for all three: records of different hard keys stay apart (the device is
part of every identity); per (problem, hard key) the faster best wins (lower ``median_ms``; a
tie keeps the record already there), except torch's times (vendor records, ``autocutlass.vendor``):
each goes with the records of ours of its problem and GPU in the same file, so that a verdict
compares two times of one tuning: where the file's record of ours wins, its vendor record
replaces the one there (faster or not); where the record of ours already there is kept, so is
its vendor record; with no record of ours of that problem in the file, the faster one wins as
above. No trial is ever lost: trials are united, and identical
trials (same problem, hard key, family, config, ``created_at`` and ``median_ms``) are stored
once, so importing the same file twice changes nothing. Miss counts merge by maximum.

Output files are written to a temporary file in the same directory and moved into place with
``os.replace``, so a reader never sees a half-written file.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from autocutlass.db import engine as eng
from autocutlass.db import schema
from autocutlass.db.models import SCHEMA_VERSION, Best, Device, Miss, ProblemRow, Trial
from autocutlass.db.records import (
    TrialState,
    from_db_time,
    hard_key_from_json,
    stored_problem,
    to_db_time,
)
from autocutlass.db.rows import ensure_device, ensure_problem, upsert_best, upsert_miss
from autocutlass.db.store import TuningStore
from autocutlass.device import HardKey
from autocutlass.errors import DatabaseError, SchemaMismatch
from autocutlass.keys import canonical_json, config_key
from autocutlass.ops.base import OpProblem
from autocutlass.vendor import VENDOR_FAMILY, verdict_pair
from autocutlass.ops.registry import problem_from_dict

JSON_FORMAT = "autocutlass-tuning-db"
"""The ``format`` field of a JSON export."""

JSON_READABLE_VERSIONS = frozenset({1, SCHEMA_VERSION})
"""``schema_version``s of JSON exports ``import_`` reads. The JSON form did not change from 1 to
2 (each problem is its ``as_dict()``, ``op`` included; a problem without ``op`` is a GEMM)."""

_SQLITE_MAGIC = b"SQLite format 3\x00"


# ---- a database's content as plain data ----------------------------------------------------


@dataclass(frozen=True)
class _Device:
    hard_key: HardKey
    info: dict[str, Any]


@dataclass(frozen=True)
class _Trial:
    problem: OpProblem
    hard_key: HardKey
    family: str
    config: dict[str, Any]
    state: TrialState
    reason: str | None
    median_ms: float | None
    p20_ms: float | None
    p80_ms: float | None
    tflops: float | None
    created_at: datetime  # naive UTC

    def identity(self) -> tuple[str, str, str, str, datetime, float | None]:
        return (
            self.problem.key(),
            self.hard_key.key(),
            self.family,
            config_key(self.config),
            self.created_at,
            self.median_ms,
        )


@dataclass(frozen=True)
class _Best:
    problem: OpProblem
    hard_key: HardKey
    family: str
    config: dict[str, Any]
    median_ms: float
    tflops: float
    updated_at: datetime  # naive UTC
    trial: int | None  # index into Snapshot.trials


@dataclass(frozen=True)
class _Miss:
    problem: OpProblem
    hard_key: HardKey
    count: int
    first_seen: datetime
    last_seen: datetime


@dataclass(frozen=True)
class Snapshot:
    """Everything in one database, as plain data."""

    devices: tuple[_Device, ...]
    trials: tuple[_Trial, ...]
    bests: tuple[_Best, ...]
    misses: tuple[_Miss, ...]


@dataclass(frozen=True)
class TransferStats:
    """What an import or merge did."""

    trials_added: int
    trials_present: int  # identical trials already there, not stored twice
    bests_written: int
    bests_kept: int  # the record already there was as fast or faster

    def describe(self) -> str:
        return (
            f"{self.trials_added} trials added ({self.trials_present} already present), "
            f"{self.bests_written} best records written ({self.bests_kept} kept: already as fast)"
        )


def snapshot(store: TuningStore) -> Snapshot:
    """Read every record of ``store`` in one transaction."""

    def _q(s: Session) -> Snapshot:
        problems: dict[int, OpProblem] = {
            pid: stored_problem(p, store.display) for pid, p in s.execute(select(ProblemRow.id, ProblemRow.problem))
        }
        devices: dict[int, _Device] = {
            did: _Device(hard_key_from_json(hk), dict(info or {}))
            for did, hk, info in s.execute(select(Device.id, Device.hard_key, Device.info))
        }
        trials: list[_Trial] = []
        index_of: dict[int, int] = {}
        for t in s.execute(select(Trial).order_by(Trial.id)).scalars():
            index_of[t.id] = len(trials)
            trials.append(
                _Trial(
                    problem=problems[t.problem_id],
                    hard_key=devices[t.device_id].hard_key,
                    family=t.family,
                    config=json.loads(t.config),
                    state=TrialState(t.state),
                    reason=t.reason,
                    median_ms=t.median_ms,
                    p20_ms=t.p20_ms,
                    p80_ms=t.p80_ms,
                    tflops=t.tflops,
                    created_at=t.created_at,
                )
            )
        bests = [
            _Best(
                problem=problems[b.problem_id],
                hard_key=devices[b.device_id].hard_key,
                family=b.family,
                config=json.loads(b.config),
                median_ms=b.median_ms,
                tflops=b.tflops,
                updated_at=b.updated_at,
                trial=index_of.get(b.trial_id) if b.trial_id is not None else None,
            )
            for b in s.execute(select(Best).order_by(Best.id)).scalars()
        ]
        misses = [
            _Miss(problems[m.problem_id], devices[m.device_id].hard_key, m.count, m.first_seen, m.last_seen)
            for m in s.execute(select(Miss).order_by(Miss.id)).scalars()
        ]
        return Snapshot(tuple(devices.values()), tuple(trials), tuple(bests), tuple(misses))

    return store._read(_q, Snapshot((), (), (), ()))


def load(store: TuningStore, snap: Snapshot, *, replace: bool = False) -> TransferStats:
    """Merge ``snap`` into ``store`` in one write transaction (rules in the module docstring);
    ``replace``: ``snap``'s best records replace the stored ones whatever their times (a re-timing
    of the same records: ``autocutlass tune --verdicts``), torch's times following them."""

    def _tx(s: Session) -> TransferStats:
        device_ids = {d.hard_key: ensure_device(s, d.hard_key) for d in snap.devices}
        for d in snap.devices:
            if d.info:
                stored = s.execute(select(Device.info).where(Device.id == device_ids[d.hard_key])).scalar_one()
                if not stored:
                    s.execute(update(Device).where(Device.id == device_ids[d.hard_key]).values(info=d.info))
        problem_ids: dict[str, int] = {}

        def did(hk: HardKey) -> int:
            if hk not in device_ids:
                device_ids[hk] = ensure_device(s, hk)
            return device_ids[hk]

        def pid(p: OpProblem) -> int:
            key = p.key()
            if key not in problem_ids:
                problem_ids[key] = ensure_problem(s, p)
            return problem_ids[key]

        existing: dict[tuple[str, str, str, str, datetime, float | None], int] = {}
        stmt = (
            select(ProblemRow.key, Device.hard_key, Trial.family, Trial.config_key, Trial.created_at,
                   Trial.median_ms, Trial.id)
            .join(ProblemRow, ProblemRow.id == Trial.problem_id)
            .join(Device, Device.id == Trial.device_id)
        )  # fmt: skip
        for pk, hk, fam, ck, created, med, tid in s.execute(stmt):
            existing[(pk, hk, fam, ck, created, med)] = tid

        trial_ids: list[int] = []
        added = present = 0
        for t in snap.trials:
            ident = t.identity()
            if ident in existing:
                present += 1
                trial_ids.append(existing[ident])
                continue
            row = Trial(
                device_id=did(t.hard_key),
                problem_id=pid(t.problem),
                family=t.family,
                config=canonical_json(t.config),
                config_key=config_key(t.config),
                state=t.state.value,
                reason=t.reason,
                median_ms=t.median_ms,
                p20_ms=t.p20_ms,
                p80_ms=t.p80_ms,
                tflops=t.tflops,
                created_at=t.created_at,
            )
            s.add(row)
            s.flush()
            existing[ident] = row.id
            trial_ids.append(row.id)
            added += 1

        written = kept = 0
        ours_won: set[tuple[str, HardKey]] = set()  # (problem, GPU): a record of ours from the file was written
        ours_kept: set[tuple[str, HardKey]] = set()  # ... one already there was kept
        # ours first, then torch's times (vendor records), which follow the records they were timed with
        for b in sorted(snap.bests, key=lambda b: b.family == VENDOR_FAMILY):
            at = verdict_pair(b.problem.key(), b.hard_key)
            keep_faster = not replace
            if b.family == VENDOR_FAMILY and at in ours_won:
                keep_faster = False
            elif b.family == VENDOR_FAMILY and at in ours_kept:
                kept += 1
                continue
            stored = upsert_best(
                s,
                problem_id=pid(b.problem),
                device_id=did(b.hard_key),
                family=b.family,
                config_text=canonical_json(b.config),
                median_ms=b.median_ms,
                tflops=b.tflops,
                trial_id=trial_ids[b.trial] if b.trial is not None else None,
                updated_at=b.updated_at,
                keep_faster=keep_faster,
            )
            if b.family != VENDOR_FAMILY:
                (ours_won if stored else ours_kept).add(at)
            if stored:
                written += 1
            else:
                kept += 1

        for m in snap.misses:
            upsert_miss(
                s,
                problem_id=pid(m.problem),
                device_id=did(m.hard_key),
                count=m.count,
                first_seen=m.first_seen,
                last_seen=m.last_seen,
                mode="max",
            )
        return TransferStats(trials_added=added, trials_present=present, bests_written=written, bests_kept=kept)

    return store._write(_tx)


# ---- JSON form -----------------------------------------------------------------------------


def _time(t: datetime) -> str:
    return from_db_time(t).isoformat()


def _hk(hk: HardKey) -> dict[str, Any]:
    return dataclasses.asdict(hk)


def snapshot_to_json(snap: Snapshot) -> dict[str, Any]:
    """The JSON document of a snapshot (``format``, ``schema_version`` and one list per table)."""
    return {
        "format": JSON_FORMAT,
        "schema_version": SCHEMA_VERSION,
        "devices": [{"hard_key": _hk(d.hard_key), "info": d.info} for d in snap.devices],
        "trials": [
            {
                "problem": t.problem.as_dict(),
                "hard_key": _hk(t.hard_key),
                "family": t.family,
                "config": t.config,
                "state": t.state.value,
                "reason": t.reason,
                "median_ms": t.median_ms,
                "p20_ms": t.p20_ms,
                "p80_ms": t.p80_ms,
                "tflops": t.tflops,
                "created_at": _time(t.created_at),
            }
            for t in snap.trials
        ],
        "best": [
            {
                "problem": b.problem.as_dict(),
                "hard_key": _hk(b.hard_key),
                "family": b.family,
                "config": b.config,
                "median_ms": b.median_ms,
                "tflops": b.tflops,
                "updated_at": _time(b.updated_at),
                "trial": b.trial,
            }
            for b in snap.bests
        ],
        "misses": [
            {
                "problem": m.problem.as_dict(),
                "hard_key": _hk(m.hard_key),
                "count": m.count,
                "first_seen": _time(m.first_seen),
                "last_seen": _time(m.last_seen),
            }
            for m in snap.misses
        ],
    }


def _problem(d: Any) -> OpProblem:
    """A problem of a JSON export (any op); TypeError/KeyError/ValueError when it is not one."""
    if not isinstance(d, dict):
        raise TypeError(f"a problem must be a JSON object, got {type(d).__name__}")
    return problem_from_dict(d)


def _opt_float(v: Any) -> float | None:
    return None if v is None else float(v)


def snapshot_from_json(doc: Any, origin: str) -> Snapshot:
    """Parse a JSON export; raises DatabaseError (SchemaMismatch for another version) naming ``origin``."""
    if not isinstance(doc, dict) or doc.get("format") != JSON_FORMAT:
        raise DatabaseError(f"{origin} is not an autocutlass tuning-database export (no format {JSON_FORMAT!r}).")
    if doc.get("schema_version") not in JSON_READABLE_VERSIONS:
        raise SchemaMismatch(
            f"{origin} is an export of schema version {doc.get('schema_version')!r}; this autocutlass "
            f"reads versions {sorted(JSON_READABLE_VERSIONS)}. Export it again with a matching autocutlass."
        )

    def hk(d: dict[str, Any]) -> HardKey:
        return hard_key_from_json(json.dumps(d))

    def when(text: str) -> datetime:
        return to_db_time(datetime.fromisoformat(text))

    try:
        trials = tuple(
            _Trial(
                problem=_problem(t["problem"]),
                hard_key=hk(t["hard_key"]),
                family=str(t["family"]),
                config=dict(t["config"]),
                state=TrialState(t["state"]),
                reason=t.get("reason"),
                median_ms=_opt_float(t.get("median_ms")),
                p20_ms=_opt_float(t.get("p20_ms")),
                p80_ms=_opt_float(t.get("p80_ms")),
                tflops=_opt_float(t.get("tflops")),
                created_at=when(t["created_at"]),
            )
            for t in doc.get("trials", [])
        )
        bests = []
        for b in doc.get("best", []):
            trial = b.get("trial")
            if trial is not None and not (isinstance(trial, int) and 0 <= trial < len(trials)):
                raise ValueError(f"best record refers to trial {trial!r}, not in the file")
            bests.append(
                _Best(
                    problem=_problem(b["problem"]),
                    hard_key=hk(b["hard_key"]),
                    family=str(b["family"]),
                    config=dict(b["config"]),
                    median_ms=float(b["median_ms"]),
                    tflops=float(b["tflops"]),
                    updated_at=when(b["updated_at"]),
                    trial=trial,
                )
            )
        misses = tuple(
            _Miss(
                problem=_problem(m["problem"]),
                hard_key=hk(m["hard_key"]),
                count=int(m["count"]),
                first_seen=when(m["first_seen"]),
                last_seen=when(m["last_seen"]),
            )
            for m in doc.get("misses", [])
        )
        devices = tuple(_Device(hk(d["hard_key"]), dict(d.get("info") or {})) for d in doc.get("devices", []))
    except (KeyError, TypeError, ValueError) as e:
        raise DatabaseError(f"{origin} is a malformed autocutlass export ({type(e).__name__}: {e}).") from e
    return Snapshot(devices, trials, tuple(bests), misses)


# ---- files ---------------------------------------------------------------------------------


def read_file(path: str | os.PathLike[str]) -> Snapshot:
    """The content of a SQLite database or JSON export file (told apart by the file's first bytes).
    A SQLite file of an older schema is read through an upgraded temporary copy; the file
    itself is never written."""
    p = Path(path).expanduser().resolve()
    try:
        with p.open("rb") as f:
            head = f.read(len(_SQLITE_MAGIC))
    except OSError as e:
        raise DatabaseError(f"Cannot read {p}: {e.strerror or e}.") from e
    if head == _SQLITE_MAGIC:
        try:
            return snapshot(TuningStore(p, read_only=True))
        except SchemaMismatch:
            found = schema.peek_version(eng.resolve(p))
            if found is None or found >= SCHEMA_VERSION:
                raise
            return _snapshot_of_older(p, found)
        finally:
            eng.release(p)  # the file is not ours: hold no connection to it
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DatabaseError(
            f"{p} is neither a SQLite tuning database nor a JSON export of one ({type(e).__name__}: {e})."
        ) from e
    return snapshot_from_json(doc, str(p))


def _snapshot_of_older(path: Path, version: int) -> Snapshot:
    """The content of a SQLite file of an older schema ``version``, read from an upgraded copy
    in a temporary directory (the file itself is only read)."""
    with tempfile.TemporaryDirectory(prefix="autocutlass-import-") as d:
        copy = Path(d) / path.name
        try:
            schema.copy_sqlite(path, copy)
        except (OSError, sqlite3.Error) as e:
            raise DatabaseError(f"Cannot read {path} (schema version {version}) to upgrade a copy: {e}.") from e
        try:
            schema.upgrade(copy)
            return snapshot(TuningStore(copy, read_only=True))
        finally:
            eng.release(copy)


@contextmanager
def _atomic_path(path: Path) -> Iterator[Path]:
    """A temporary path beside ``path``, moved onto ``path`` when the block succeeds."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        for leftover in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm"), Path(f"{tmp}-journal")):
            leftover.unlink(missing_ok=True)


def _write_sqlite(snap: Snapshot, tmp: Path) -> None:
    out = TuningStore(tmp)
    try:
        load(out, snap)
    finally:
        eng.release(tmp)
    # A self-contained file: the last close folded the WAL back in; switch to a rollback
    # journal so the file can be copied or opened immutable without side files.
    conn = sqlite3.connect(tmp, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = DELETE")
    finally:
        conn.close()


def _write_snapshot(snap: Snapshot, path: Path) -> None:
    with _atomic_path(path) as tmp:
        if path.suffix.lower() == ".json":
            tmp.write_text(json.dumps(snapshot_to_json(snap), indent=1, sort_keys=True) + "\n", encoding="utf-8")
        else:
            tmp.unlink()  # let SQLite create the file itself
            _write_sqlite(snap, tmp)


def export(store: TuningStore, path: str | os.PathLike[str]) -> Path:
    """Write all of ``store`` to ``path`` (JSON if it ends with .json, else SQLite); returns the path."""
    p = Path(path).expanduser().resolve()
    _write_snapshot(snapshot(store), p)
    return p


def only_gpu(snap: Snapshot, gpu_name: str) -> Snapshot:
    """The records of ``snap`` measured on GPU model ``gpu_name`` (devices, trials, bests; no
    misses: they are a user's history, not a tuning result)."""
    trials: list[_Trial] = []
    new_index: dict[int, int] = {}
    for i, t in enumerate(snap.trials):
        if t.hard_key.gpu_name == gpu_name:
            new_index[i] = len(trials)
            trials.append(t)
    bests = tuple(
        dataclasses.replace(b, trial=new_index.get(b.trial) if b.trial is not None else None)
        for b in snap.bests
        if b.hard_key.gpu_name == gpu_name
    )
    devices = tuple(d for d in snap.devices if d.hard_key.gpu_name == gpu_name)
    return Snapshot(devices, tuple(trials), bests, ())


def rekeyed(snap: Snapshot, picks: dict[int, str]) -> Snapshot:
    """Copies of the best records ``picks`` names (index into ``snap.bests`` -> a kernel-source
    hash), each with its trial, under its hard key with that kernel hash, and the devices of the
    new keys (their informative data copied): ``autocutlass db rekey``'s records of a config whose
    generated code the new sources leave as it was. Nothing else of ``snap``."""
    info = {d.hard_key: d.info for d in snap.devices}
    devices: dict[HardKey, _Device] = {}
    trials: list[_Trial] = []
    bests: list[_Best] = []
    for i, kernel_hash in sorted(picks.items()):
        b = snap.bests[i]
        hk = dataclasses.replace(b.hard_key, kernel_hash=kernel_hash)
        devices.setdefault(hk, _Device(hk, info.get(b.hard_key, {})))
        trial = None
        if b.trial is not None:
            trials.append(dataclasses.replace(snap.trials[b.trial], hard_key=hk))
            trial = len(trials) - 1
        bests.append(dataclasses.replace(b, hard_key=hk, trial=trial))
    return Snapshot(tuple(devices.values()), tuple(trials), tuple(bests), ())


def pruned(snap: Snapshot, installed: dict[str, str]) -> tuple[Snapshot, int, int]:
    """``snap`` without the best records that a record of the installed kernel sources replaces:
    a best of family ``f`` whose kernel hash is not ``installed[f]`` goes where a best of the same
    problem and family exists under the same hard key with ``installed[f]`` (``db rekey`` carried it,
    or a tuning measured it again). A best with no such replacement stays (it is the problem's last
    record of ours: retired, but the history of what won), as do vendor verdicts and the bests of
    families not in ``installed``. Trials go with their hard key once it holds no best; devices
    with them; misses stay. Returns (snapshot, bests dropped, trials dropped)."""

    def current_key(b: _Best) -> tuple[str, str, HardKey]:
        return b.problem.key(), b.family, dataclasses.replace(b.hard_key, kernel_hash=installed[b.family])

    replaced = {current_key(b) for b in snap.bests if b.family in installed and b.hard_key.kernel_hash == installed[b.family]}
    drop = {i for i, b in enumerate(snap.bests)
            if b.family in installed and b.hard_key.kernel_hash != installed[b.family] and current_key(b) in replaced}  # fmt: skip
    kept_bests = [b for i, b in enumerate(snap.bests) if i not in drop]
    live = {b.hard_key for b in kept_bests}
    trials: list[_Trial] = []
    new_index: dict[int, int] = {}
    for i, t in enumerate(snap.trials):
        if t.hard_key in live:
            new_index[i] = len(trials)
            trials.append(t)
    bests = tuple(dataclasses.replace(b, trial=new_index.get(b.trial) if b.trial is not None else None) for b in kept_bests)
    devices = tuple(d for d in snap.devices if d.hard_key in live)
    return Snapshot(devices, tuple(trials), bests, snap.misses), len(drop), len(snap.trials) - len(trials)


def write_snapshot(snap: Snapshot, path: str | os.PathLike[str]) -> Path:
    """Write ``snap`` to a new file ``path`` (JSON if it ends with .json, else SQLite), atomically."""
    out = Path(path).expanduser().resolve()
    _write_snapshot(snap, out)
    return out


def shipped_name(gpu_name: str) -> str:
    """The file name of a shipped database of GPU model ``gpu_name`` (``NVIDIA H200`` ->
    ``NVIDIA-H200.sqlite``)."""
    return "".join(c if c.isalnum() or c in "._" else "-" for c in gpu_name.strip()) + ".sqlite"


def export_per_gpu(store: TuningStore, directory: str | os.PathLike[str]) -> dict[str, Path]:
    """Write one SQLite file per GPU model that has best records in ``store`` into ``directory``
    (``shipped_name``; an existing file is replaced atomically): the shipped-database layout.
    Returns {GPU name: path}."""
    snap = snapshot(store)
    out = Path(directory).expanduser().resolve()
    written: dict[str, Path] = {}
    for gpu in sorted({b.hard_key.gpu_name for b in snap.bests}):
        out.mkdir(parents=True, exist_ok=True)
        path = out / shipped_name(gpu)
        _write_snapshot(only_gpu(snap, gpu), path)
        written[gpu] = path
    return written


def import_(store: TuningStore, path: str | os.PathLike[str]) -> TransferStats:
    """Merge the SQLite database or JSON export at ``path`` into ``store``."""
    return load(store, read_file(path))


def merge(
    a_path: str | os.PathLike[str], b_path: str | os.PathLike[str], out_path: str | os.PathLike[str], *,
    replace: bool = False,
) -> TransferStats:
    """Merge files ``a`` and ``b`` into a new file ``out`` (JSON if it ends with .json, else SQLite);
    ``replace``: ``b``'s best records replace ``a``'s (``load``).

    The stats describe merging ``b`` into ``a``'s content.
    """
    return merge_snapshots(read_file(a_path), read_file(b_path), out_path, replace=replace)


def merge_snapshots(a: Snapshot, b: Snapshot, out_path: str | os.PathLike[str], *, replace: bool = False) -> TransferStats:
    """``merge`` of two snapshots (``read_file``, ``rekeyed``) into a new file ``out``."""
    out = Path(out_path).expanduser().resolve()
    with tempfile.TemporaryDirectory(prefix=".merge-", dir=out.parent if out.parent.is_dir() else None) as d:
        work = TuningStore(Path(d) / "merge.sqlite")
        try:
            load(work, a)
            stats = load(work, b, replace=replace)
            merged = snapshot(work)
        finally:
            eng.release(work.url)
    _write_snapshot(merged, out)
    return stats

"""Schema 1 -> 2 (``MIGRATIONS[1]``): a v1 database, built with the v1 DDL, upgraded in place.

Every row is kept (same ids), ``problems`` gains ``op`` and ``dims`` and renames ``family_key``
to ``neighbour_key``, the layout equals a new v2 database's, and every lookup answers as on a
database written by the new code. SQLite files are copied to ``<file>.v1.bak`` first. Runs on
PostgreSQL too when AUTOCUTLASS_TEST_PG_URL is set (see test_db_store.py).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import (
    JSON,
    CheckConstraint,
    Column,
    DateTime,
    Engine,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    create_engine,
    event,
    insert,
    inspect,
    select,
    text,
)

from autocutlass.db import MIGRATIONS, SCHEMA_VERSION, TuningStore, release, upgrade
from autocutlass.db.models import Base
from autocutlass.db.schema import backup_path
from autocutlass.device import HardKey
from autocutlass.errors import SchemaMismatch
from autocutlass.keys import canonical_json
from autocutlass.ops.gemm.problem import DType, Epilogue, GemmProblem, Major
from autocutlass.ops.types import Activation

PG_ENV = "AUTOCUTLASS_TEST_PG_URL"
TABLES = ("meta", "devices", "problems", "trials", "best", "misses")

# ---- the v1 layout, as released ---------------------------------------------------------------
RELEASED_V1_SQLITE_DDL = (
    'CREATE TABLE meta (\n\t"key" VARCHAR(64) NOT NULL, \n\tvalue TEXT NOT NULL, \n\tPRIMARY KEY ("key")\n)',
    'CREATE TABLE devices (\n\tid INTEGER NOT NULL, \n\thard_key TEXT NOT NULL, \n\tgpu_name VARCHAR(128) NOT NULL, \n\tcc VARCHAR(16) NOT NULL, \n\tsm_count INTEGER NOT NULL, \n\tdsl_version VARCHAR(64) NOT NULL, \n\tkernel_hash VARCHAR(64) NOT NULL, \n\tprotocol_version INTEGER NOT NULL, \n\tinfo JSON NOT NULL, \n\tPRIMARY KEY (id), \n\tUNIQUE (hard_key)\n)',
    'CREATE INDEX ix_devices_gpu_name ON devices (gpu_name)',
    'CREATE TABLE problems (\n\tid INTEGER NOT NULL, \n\t"key" TEXT NOT NULL, \n\tbucket_key TEXT NOT NULL, \n\tfamily_key TEXT NOT NULL, \n\tm INTEGER NOT NULL, \n\tn INTEGER NOT NULL, \n\tk INTEGER NOT NULL, \n\tl INTEGER NOT NULL, \n\tproblem JSON NOT NULL, \n\tPRIMARY KEY (id), \n\tUNIQUE ("key")\n)',
    'CREATE INDEX ix_problems_family_key ON problems (family_key)',
    'CREATE INDEX ix_problems_bucket_key ON problems (bucket_key)',
    "CREATE TABLE trials (\n\tid INTEGER NOT NULL, \n\tdevice_id INTEGER NOT NULL, \n\tproblem_id INTEGER NOT NULL, \n\tfamily VARCHAR(64) NOT NULL, \n\tconfig TEXT NOT NULL, \n\tconfig_key VARCHAR(64) NOT NULL, \n\tstate VARCHAR(32) NOT NULL, \n\treason TEXT, \n\tmedian_ms FLOAT, \n\tp20_ms FLOAT, \n\tp80_ms FLOAT, \n\ttflops FLOAT, \n\tcreated_at DATETIME NOT NULL, \n\tPRIMARY KEY (id), \n\tCONSTRAINT ck_trials_state CHECK (state IN ('ok', 'cant_implement', 'compile_error', 'wrong_result', 'timeout', 'crash')), \n\tFOREIGN KEY(device_id) REFERENCES devices (id) ON DELETE CASCADE, \n\tFOREIGN KEY(problem_id) REFERENCES problems (id) ON DELETE CASCADE\n)",
    'CREATE INDEX ix_trials_problem_device_family ON trials (problem_id, device_id, family)',
    'CREATE INDEX ix_trials_device_id ON trials (device_id)',
    'CREATE TABLE misses (\n\tid INTEGER NOT NULL, \n\tproblem_id INTEGER NOT NULL, \n\tdevice_id INTEGER NOT NULL, \n\tcount INTEGER NOT NULL, \n\tfirst_seen DATETIME NOT NULL, \n\tlast_seen DATETIME NOT NULL, \n\tPRIMARY KEY (id), \n\tCONSTRAINT uq_misses_problem_device UNIQUE (problem_id, device_id), \n\tFOREIGN KEY(problem_id) REFERENCES problems (id) ON DELETE CASCADE, \n\tFOREIGN KEY(device_id) REFERENCES devices (id) ON DELETE CASCADE\n)',
    'CREATE INDEX ix_misses_device_id ON misses (device_id)',
    'CREATE TABLE best (\n\tid INTEGER NOT NULL, \n\tproblem_id INTEGER NOT NULL, \n\tdevice_id INTEGER NOT NULL, \n\tfamily VARCHAR(64) NOT NULL, \n\tconfig TEXT NOT NULL, \n\tmedian_ms FLOAT NOT NULL, \n\ttflops FLOAT NOT NULL, \n\ttrial_id INTEGER, \n\tupdated_at DATETIME NOT NULL, \n\tPRIMARY KEY (id), \n\tCONSTRAINT uq_best_problem_device UNIQUE (problem_id, device_id), \n\tFOREIGN KEY(problem_id) REFERENCES problems (id) ON DELETE CASCADE, \n\tFOREIGN KEY(device_id) REFERENCES devices (id) ON DELETE CASCADE, \n\tFOREIGN KEY(trial_id) REFERENCES trials (id) ON DELETE SET NULL\n)',
    'CREATE INDEX ix_best_device_id ON best (device_id)',
)
"""The v1 tables and indexes exactly as ``sqlite_master`` of the released v1 ``tuning_dbs/NVIDIA-H200.sqlite`` holds them."""

V1 = MetaData()
"""The same tables as SQLAlchemy Core (for PostgreSQL); ``test_v1_tables_render_the_released_ddl``."""
Table("meta", V1, Column("key", String(64), primary_key=True), Column("value", Text, nullable=False))
Table(
    "devices", V1,
    Column("id", Integer, primary_key=True),
    Column("hard_key", Text, nullable=False, unique=True),
    Column("gpu_name", String(128), nullable=False, index=True),
    Column("cc", String(16), nullable=False),
    Column("sm_count", Integer, nullable=False),
    Column("dsl_version", String(64), nullable=False),
    Column("kernel_hash", String(64), nullable=False),
    Column("protocol_version", Integer, nullable=False),
    Column("info", JSON, nullable=False),
)  # fmt: skip
Table(
    "problems", V1,
    Column("id", Integer, primary_key=True),
    Column("key", Text, nullable=False, unique=True),
    Column("bucket_key", Text, nullable=False, index=True),
    Column("family_key", Text, nullable=False, index=True),
    Column("m", Integer, nullable=False),
    Column("n", Integer, nullable=False),
    Column("k", Integer, nullable=False),
    Column("l", Integer, nullable=False),
    Column("problem", JSON, nullable=False),
)  # fmt: skip
Table(
    "trials", V1,
    Column("id", Integer, primary_key=True),
    Column("device_id", ForeignKey("devices.id", ondelete="CASCADE"), nullable=False, index=True),
    Column("problem_id", ForeignKey("problems.id", ondelete="CASCADE"), nullable=False),
    Column("family", String(64), nullable=False),
    Column("config", Text, nullable=False),
    Column("config_key", String(64), nullable=False),
    Column("state", String(32), nullable=False),
    Column("reason", Text),
    Column("median_ms", Float),
    Column("p20_ms", Float),
    Column("p80_ms", Float),
    Column("tflops", Float),
    Column("created_at", DateTime, nullable=False),
    CheckConstraint(
        "state IN ('ok', 'cant_implement', 'compile_error', 'wrong_result', 'timeout', 'crash')", name="ck_trials_state"
    ),
    Index("ix_trials_problem_device_family", "problem_id", "device_id", "family"),
)  # fmt: skip
Table(
    "best", V1,
    Column("id", Integer, primary_key=True),
    Column("problem_id", ForeignKey("problems.id", ondelete="CASCADE"), nullable=False),
    Column("device_id", ForeignKey("devices.id", ondelete="CASCADE"), nullable=False, index=True),
    Column("family", String(64), nullable=False),
    Column("config", Text, nullable=False),
    Column("median_ms", Float, nullable=False),
    Column("tflops", Float, nullable=False),
    Column("trial_id", ForeignKey("trials.id", ondelete="SET NULL")),
    Column("updated_at", DateTime, nullable=False),
    UniqueConstraint("problem_id", "device_id", name="uq_best_problem_device"),
)  # fmt: skip
Table(
    "misses", V1,
    Column("id", Integer, primary_key=True),
    Column("problem_id", ForeignKey("problems.id", ondelete="CASCADE"), nullable=False),
    Column("device_id", ForeignKey("devices.id", ondelete="CASCADE"), nullable=False, index=True),
    Column("count", Integer, nullable=False),
    Column("first_seen", DateTime, nullable=False),
    Column("last_seen", DateTime, nullable=False),
    UniqueConstraint("problem_id", "device_id", name="uq_misses_problem_device"),
)  # fmt: skip

H100 = HardKey("NVIDIA H100 80GB HBM3", cc="9.0", sm_count=132, dsl_version="4.8.1", kernel_hash="k0", protocol_version=1)
H200 = HardKey("NVIDIA H200", cc="9.0", sm_count=132, dsl_version="4.8.1", kernel_hash="k1", protocol_version=1)


def problems() -> list[GemmProblem]:
    """GEMMs of several neighbourhoods: plain, batched, fp8, tf32 column-major, with an epilogue."""
    out = [GemmProblem(m=m, n=4096, k=4096) for m in (1, 16, 100, 1024, 4096, 8192)]
    out += [GemmProblem(m=m, n=512, k=128, l=32) for m in (64, 512)]
    out += [GemmProblem(m=m, n=6144, k=4096, a_dtype=DType.E4M3, b_dtype=DType.E4M3, b_major=Major.COL)
            for m in (16, 128, 8192)]  # fmt: skip
    out += [GemmProblem(m=2000, n=3000, k=1000, a_dtype=DType.TF32, b_dtype=DType.TF32, d_dtype=DType.FP32,
                        a_major=Major.COL)]  # fmt: skip
    out += [GemmProblem(m=300, n=4096, k=4096, c_dtype=DType.BF16,
                        epilogue=Epilogue(with_c=True, bias=True, activation=Activation.SILU))]  # fmt: skip
    return out


def queries() -> list[GemmProblem]:
    """Every stored problem (exact), and problems that fall into buckets, neighbours or nothing."""
    base = problems()
    near = [GemmProblem(m=m, n=4096, k=4096) for m in (2, 17, 64, 120, 300, 1000, 1600, 5000, 1 << 20)]
    near += [GemmProblem(m=m, n=512, k=128, l=32) for m in (1, 300, 4096)]
    near += [GemmProblem(m=m, n=6144, k=4096, a_dtype=DType.E4M3, b_dtype=DType.E4M3, b_major=Major.COL)
             for m in (1, 64, 1000)]  # fmt: skip
    near += [GemmProblem(m=100, n=4096, k=8192), GemmProblem(m=100, n=4096, k=4096, b_major=Major.COL)]
    return base + near


def fill(store: TuningStore) -> None:
    """Records of every kind: trials of every state, bests (linked and not), misses, device info."""
    store.record_device(H100, {"l2_bytes": 50 << 20, "driver": "580.1"})
    for i, p in enumerate(problems()):
        for hk in (H100, H200) if i % 3 == 0 else (H100,):
            ok = store.record_trial(p, hk, "sm90_ws", {"tile": 128, "i": i}, "ok", median_ms=1.0 + i, p20_ms=0.9 + i,
                                    p80_ms=1.1 + i, tflops=100.0 - i)  # fmt: skip
            store.record_trial(p, hk, "sm90_ws", {"tile": 208, "i": i}, "cant_implement", reason="tile_n=208 not /16")
            store.record_trial(p, hk, "sm90_pp", {"tile": 64, "i": i}, "crash", reason="signal 11")
            store.record_best(p, hk, "sm90_ws", {"tile": 128, "i": i}, 1.0 + i, 100.0 - i, trial_id=ok if i % 2 else None)
    for m in (3, 5, 7):
        for _ in range(m):
            store.record_miss(GemmProblem(m=m, n=1024, k=1024), H100)
    store.record_miss(GemmProblem(m=3, n=1024, k=1024), H200)


def rows(engine: Engine, table: str, metadata: MetaData = Base.metadata) -> list[dict[str, Any]]:
    """Every row of ``table`` as typed values (``metadata``: the layout of the database, v2 or V1)."""
    t = metadata.tables[table]
    with engine.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(select(t).order_by(*t.primary_key.columns))]


def as_v1(reference: Engine, target: Engine) -> None:
    """Write the content of the v2 database ``reference`` into a new v1 database ``target``
    (SQLite: made with the released DDL text; PostgreSQL: with the v1 Core tables)."""
    if target.dialect.name == "sqlite":
        with target.begin() as conn:
            for stmt in RELEASED_V1_SQLITE_DDL:
                conn.exec_driver_sql(stmt)
    else:
        V1.create_all(target)
    with target.begin() as conn:
        for table in TABLES:
            for row in rows(reference, table):  # typed by the v2 models
                if table == "problems":
                    dims = json.loads(row.pop("dims"))
                    assert row.pop("op") == "gemm"
                    row["family_key"] = row.pop("neighbour_key")
                    row.update(m=dims["m"], n=dims["n"], k=dims["k"], l=dims["l"])
                if table == "meta":
                    row["value"] = "1"
                conn.execute(insert(V1.tables[table]).values(**row))
        if conn.dialect.name == "postgresql":
            for table in TABLES[1:]:  # ids were given explicitly: move the sequences past them
                conn.execute(text(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT max(id) FROM {table}))"))


def layout(engine: Engine) -> dict[str, Any]:
    """Columns (name, type, nullability, default), indexes, unique and foreign keys of every table."""
    insp = inspect(engine)
    out = {}
    for table in TABLES:
        out[table] = {
            "columns": sorted((c["name"], str(c["type"]), c["nullable"], c.get("default")) for c in insp.get_columns(table)),
            "indexes": sorted((i["name"], tuple(i["column_names"]), bool(i["unique"])) for i in insp.get_indexes(table)),
            "unique": sorted(tuple(u["column_names"]) for u in insp.get_unique_constraints(table)),
            "fks": sorted((tuple(f["constrained_columns"]), f["referred_table"], tuple(f["referred_columns"]),
                           (f.get("options") or {}).get("ondelete")) for f in insp.get_foreign_keys(table)),
            "pk": tuple(insp.get_pk_constraint(table)["constrained_columns"]),
        }  # fmt: skip
    return out


def answers(store: TuningStore) -> list[Any]:
    out = []
    for hk in (H100, H200):
        for q in queries():
            rec = store.lookup(q, hk)
            out.append(None if rec is None else (rec.source, rec.problem, rec.family, rec.config, rec.median_ms))
    return out


def content(store: TuningStore) -> tuple[Any, ...]:
    trials = [(t.id, t.problem, t.hard_key, t.family, t.config, t.state, t.reason, t.median_ms, t.created_at)
              for t in store.trials()]  # fmt: skip
    bests = [dataclasses.replace(b, origin="") for b in store.bests()]
    return trials, bests, store.pending_misses(), store.counts_per_gpu(), sorted(store.hard_keys(), key=str)


def reset_pg(url: str) -> None:
    release(url)
    engine = create_engine(url)
    try:
        V1.drop_all(engine)
        Base.metadata.drop_all(engine)
    finally:
        engine.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def v1_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The URL of a v1 database, empty: the test fills it."""
    if request.param == "sqlite":
        yield str(tmp_path / "old" / "tuning.sqlite")
        return
    url = os.environ.get(PG_ENV)
    if not url:
        pytest.skip(f"{PG_ENV} is not set")
    reset_pg(url)
    yield url
    reset_pg(url)


def test_v1_database_is_upgraded_keeping_every_record(v1_url: str, tmp_path: Path) -> None:
    reference = TuningStore(tmp_path / "reference.sqlite")
    fill(reference)
    ref_engine = create_engine(reference.url)
    old = TuningStore(v1_url)
    path = Path(v1_url) if "://" not in v1_url else None
    if path is not None:
        path.parent.mkdir(parents=True)
    engine = create_engine(old.url)
    try:
        as_v1(ref_engine, engine)
        before = {t: rows(engine, t, V1) for t in TABLES}
        assert len(before["trials"]) == 3 * (len(problems()) + 5) and len(before["misses"]) == 4

        with pytest.raises(SchemaMismatch) as info:  # the new code will not use it as it is
            old.lookup(problems()[0], H100)
        assert f"autocutlass db upgrade --db {old.display}" in str(info.value)

        assert upgrade(v1_url) == (1, SCHEMA_VERSION)

        after = {t: rows(engine, t) for t in TABLES}
        for table in ("devices", "trials", "best", "misses"):
            assert after[table] == before[table], table
        assert after["meta"] == [{"key": "schema_version", "value": str(SCHEMA_VERSION)}]
        for new, v1 in zip(after["problems"], before["problems"], strict=True):
            assert new["id"] == v1["id"] and new["key"] == v1["key"] and new["problem"] == v1["problem"]
            assert (new["op"], new["bucket_key"], new["neighbour_key"]) == ("gemm", v1["bucket_key"], v1["family_key"])
            assert new["dims"] == canonical_json({"m": v1["m"], "n": v1["n"], "k": v1["k"], "l": v1["l"]})
        # ... and exactly what the new code itself writes: rows, layout, every answer.
        assert after["problems"] == rows(ref_engine, "problems")
        if path is not None:  # PostgreSQL: test_pg_layout_after_upgrade_equals_a_new_database
            assert layout(engine) == layout(ref_engine)
        upgraded = TuningStore(v1_url)
        assert content(upgraded)[1:] == content(reference)[1:]
        assert [t[1:] for t in content(upgraded)[0]] == [t[1:] for t in content(reference)[0]]
        assert answers(upgraded) == answers(reference)
        assert sum(a is not None and a[0] == "nearest" for a in answers(reference)) >= 5  # the test covers it

        release(v1_url)
        assert upgrade(v1_url) == (SCHEMA_VERSION, SCHEMA_VERSION)  # nothing left to do
    finally:
        engine.dispose()
        ref_engine.dispose()
        release(v1_url)

    if path is not None:  # the copy made before migrating: the v1 file as it was, one file
        bak = backup_path(path, 1)
        assert bak == path.with_name("tuning.sqlite.v1.bak")
        assert sorted(p.name for p in path.parent.iterdir() if not p.name.startswith("tuning.sqlite-")) == [
            "tuning.sqlite", "tuning.sqlite.v1.bak",
        ]  # fmt: skip
        bak_engine = create_engine(f"sqlite:///{bak}")
        try:
            assert {t: rows(bak_engine, t, V1) for t in TABLES} == before
        finally:
            bak_engine.dispose()
        with sqlite3.connect(bak) as conn:
            assert conn.execute("PRAGMA journal_mode").fetchone() == ("delete",)


def test_pg_layout_after_upgrade_equals_a_new_database(tmp_path: Path) -> None:
    """PostgreSQL adds the columns at the end; everything else matches a database made by the models."""
    url = os.environ.get(PG_ENV)
    if not url:
        pytest.skip(f"{PG_ENV} is not set")
    reset_pg(url)
    engine = create_engine(url)
    try:
        Base.metadata.create_all(engine)
        new = layout(engine)
        reset_pg(url)
        V1.create_all(engine)
        with engine.begin() as conn:
            conn.execute(insert(V1.tables["meta"]).values(key="schema_version", value="1"))
        assert upgrade(url) == (1, SCHEMA_VERSION)
        assert layout(engine) == new
    finally:
        engine.dispose()
        reset_pg(url)


def test_backup_holds_what_is_still_in_the_wal(tmp_path: Path) -> None:
    """A v1 file whose last commit is still in its -wal (another connection keeps it open)."""
    path = tmp_path / "t.sqlite"
    engine = create_engine(f"sqlite:///{path}")
    V1.create_all(engine)
    engine.dispose()
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("PRAGMA journal_mode = WAL")
        holder.execute("PRAGMA wal_autocheckpoint = 0")
        holder.execute("INSERT INTO meta VALUES ('schema_version', '1')")
        holder.execute("INSERT INTO meta VALUES ('note', 'only in the wal')")
        assert Path(f"{path}-wal").stat().st_size > 0
        assert upgrade(path) == (1, SCHEMA_VERSION)
    finally:
        holder.close()
    with sqlite3.connect(backup_path(path, 1)) as conn:
        assert dict(conn.execute("SELECT key, value FROM meta")) == {"schema_version": "1", "note": "only in the wal"}
    with sqlite3.connect(path) as conn:
        assert dict(conn.execute("SELECT key, value FROM meta"))["note"] == "only in the wal"


def test_sqlite_step_refuses_to_run_with_foreign_keys_on(tmp_path: Path) -> None:
    """Dropping the v1 problems table with foreign keys on would cascade into every trial."""
    reference = TuningStore(tmp_path / "reference.sqlite")
    fill(reference)
    ref_engine = create_engine(reference.url)
    engine = create_engine(f"sqlite:///{tmp_path / 'old.sqlite'}")
    try:
        as_v1(ref_engine, engine)
        n_trials = len(rows(engine, "trials", V1))
        engine.dispose()
        event.listen(engine, "connect", lambda dbapi_conn, _: dbapi_conn.execute("PRAGMA foreign_keys = ON"))
        with pytest.raises(RuntimeError, match="foreign_keys"), engine.begin() as conn:
            MIGRATIONS[1](conn)
        assert len(rows(engine, "trials", V1)) == n_trials
        assert "family_key" in {c["name"] for c in inspect(engine).get_columns("problems")}
    finally:
        engine.dispose()
        ref_engine.dispose()


def test_older_sqlite_files_are_imported_through_an_upgraded_copy(tmp_path: Path) -> None:
    from autocutlass.db import import_, merge

    reference = TuningStore(tmp_path / "reference.sqlite")
    fill(reference)
    ref_engine = create_engine(reference.url)
    old_path = tmp_path / "old.sqlite"
    engine = create_engine(f"sqlite:///{old_path}")
    try:
        as_v1(ref_engine, engine)
    finally:
        engine.dispose()
        ref_engine.dispose()
    before = old_path.read_bytes()
    dst = TuningStore(tmp_path / "dst.sqlite")
    stats = import_(dst, old_path)
    assert stats.trials_added == len(reference.trials())
    assert answers(dst) == answers(reference)
    merge(old_path, tmp_path / "reference.sqlite", tmp_path / "merged.sqlite")
    assert answers(TuningStore(tmp_path / "merged.sqlite")) == answers(reference)
    assert old_path.read_bytes() == before  # read, never written: no upgrade, no copy beside it
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("old") or p.name.startswith(".")) == [
        "old.sqlite"
    ]


def test_json_exports_of_schema_1_are_read(tmp_path: Path) -> None:
    from autocutlass.db import export, import_

    reference = TuningStore(tmp_path / "reference.sqlite")
    fill(reference)
    out = export(reference, tmp_path / "v2.json")
    doc = json.loads(out.read_text())
    assert doc["schema_version"] == SCHEMA_VERSION
    doc["schema_version"] = 1  # a v1 export: the same document
    v1 = tmp_path / "v1.json"
    v1.write_text(json.dumps(doc))
    dst = TuningStore(tmp_path / "dst.sqlite")
    import_(dst, v1)
    assert answers(dst) == answers(reference)


def test_v1_tables_render_the_released_ddl() -> None:
    from sqlalchemy.dialects import sqlite
    from sqlalchemy.schema import CreateIndex, CreateTable

    dialect = sqlite.dialect()
    rendered = set()
    for table in V1.sorted_tables:
        rendered.add(str(CreateTable(table).compile(dialect=dialect)).strip())
        rendered |= {str(CreateIndex(i).compile(dialect=dialect)).strip() for i in table.indexes}
    assert rendered == set(RELEASED_V1_SQLITE_DDL)

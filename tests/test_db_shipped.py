"""The databases shipped in ``tuning_dbs/``: current schema, one self-contained file each, keys
that this autocutlass derives itself, and every stored problem found again by lookup."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from autocutlass.db import SCHEMA_VERSION, TuningStore, release, shipped_db_paths
from autocutlass.keys import canonical_json
from autocutlass.ops.registry import problem_from_dict

SHIPPED_DIR = Path(__file__).resolve().parent.parent / "tuning_dbs"
SHIPPED = shipped_db_paths(SHIPPED_DIR)


def test_there_are_shipped_databases() -> None:
    assert SHIPPED, f"no *.sqlite in {SHIPPED_DIR}"
    assert not [p.name for p in SHIPPED_DIR.iterdir() if p.name.endswith((".bak", "-wal", "-shm", "-journal"))]


@pytest.mark.parametrize("path", SHIPPED, ids=[p.name for p in SHIPPED])
def test_shipped_database(path: Path) -> None:
    conn = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(SCHEMA_VERSION),)
        # A rollback-journal file reads in a read-only directory without immutable=1 (a WAL file would not).
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("delete",)
        rows = conn.execute("SELECT key, op, bucket_key, neighbour_key, dims, problem FROM problems").fetchall()
    finally:
        conn.close()
    assert rows
    for key, op, bucket_key, neighbour_key, dims, stored in rows:
        problem = problem_from_dict(json.loads(stored))
        assert (key, op, bucket_key, neighbour_key, dims) == (
            problem.key(), problem.op, problem.bucket_key(), problem.neighbour_key(), canonical_json(problem.dims()),
        )  # fmt: skip

    store = TuningStore(path, read_only=True, immutable=True)
    try:
        bests = store.bests()
        # every problem has a best; a problem tuned under two families (a decode GEMM: hopper_gemm
        # and hopper_gemv) has one per family's hard key, never two under one
        assert {b.problem.key() for b in bests} == {key for key, *_ in rows}
        assert len({(b.problem.key(), b.hard_key) for b in bests}) == len(bests)
        for best in bests:
            rec = store.lookup(best.problem, best.hard_key)
            assert rec is not None and rec.source == "exact"
            assert (rec.problem, rec.family, rec.config, rec.median_ms) == (
                best.problem, best.family, best.config, best.median_ms,
            )  # fmt: skip
    finally:
        release(path)

"""Several processes recording into one database at once lose nothing and raise nothing.

The processes start together on a file that does not exist yet, so they also race on creating
the tables. Runs on PostgreSQL too when AUTOCUTLASS_TEST_PG_URL is set (see test_db_store.py).
"""

from __future__ import annotations

import multiprocessing
import os
import traceback
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, select

from autocutlass.db import TuningStore, release
from autocutlass.db.models import Base, Miss
from autocutlass.device import HardKey
from autocutlass.ops.gemm.problem import GemmProblem

PG_ENV = "AUTOCUTLASS_TEST_PG_URL"
WORKERS = 4
TRIALS_EACH = 50

HK = HardKey("NVIDIA H100 80GB HBM3", cc="9.0", sm_count=132, dsl_version="4.8.1", kernel_hash="k0", protocol_version=1)
SHARED = GemmProblem(m=512, n=4096, k=4096)


def _worker(url: str, worker: int, start: Any, results: Any) -> None:
    """Record TRIALS_EACH trials, misses and best offers; report 'ok' or the traceback."""
    try:
        store = TuningStore(url)
        start.wait(60)
        for i in range(TRIALS_EACH):
            own = GemmProblem(m=16 * (1 + i % 5), n=1024 * (1 + worker), k=4096)
            ms = 1.0 + worker + i / 100
            tid = store.record_trial(SHARED, HK, "f", {"worker": worker, "i": i}, "ok", median_ms=ms)
            store.record_trial(own, HK, "f", {"i": i}, "cant_implement", reason="r")
            store.record_miss(SHARED, HK)
            store.merge_best(SHARED, HK, "f", {"worker": worker, "i": i}, ms, 1.0, trial_id=tid)
            if i % 10 == 0:
                store.lookup(SHARED, HK)
        results.put((worker, "ok"))
    except BaseException:  # noqa: BLE001 - the test reports whatever escaped, bugs included
        results.put((worker, traceback.format_exc()))


def _reset_pg(url: str) -> None:
    release(url)
    engine = create_engine(url)
    try:
        Base.metadata.drop_all(engine)
    finally:
        engine.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "sqlite":
        yield str(tmp_path / "shared.sqlite")
        return
    pg = os.environ.get(PG_ENV)
    if not pg:
        pytest.skip(f"{PG_ENV} is not set")
    _reset_pg(pg)
    yield pg
    _reset_pg(pg)


def test_concurrent_writers_lose_nothing(url: str) -> None:
    ctx = multiprocessing.get_context("spawn")
    start, results = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(url, w, start, results)) for w in range(WORKERS)]
    for p in procs:
        p.start()
    start.set()
    reports = dict(results.get(timeout=240) for _ in procs)
    for p in procs:
        p.join(60)
    assert reports == {w: "ok" for w in range(WORKERS)}, "\n".join(str(r) for r in reports.values())
    assert [p.exitcode for p in procs] == [0] * WORKERS

    store = TuningStore(url)
    shared = store.trials(problem=SHARED)
    assert len(shared) == WORKERS * TRIALS_EACH
    assert {(t.config["worker"], t.config["i"]) for t in shared} == {
        (w, i) for w in range(WORKERS) for i in range(TRIALS_EACH)
    }
    assert len(store.trials()) == 2 * WORKERS * TRIALS_EACH
    best = store.lookup(SHARED, HK)
    assert best is not None and best.config == {"worker": 0, "i": 0} and best.median_ms == 1.0
    assert store.counts_per_gpu()[HK.gpu_name] == {
        "hard_keys": 1,
        "problems": 1,
        "trials": 2 * WORKERS * TRIALS_EACH,
        "bests": 1,
        "torch_times": 0,
    }
    engine = create_engine(store.url)
    try:
        with engine.connect() as conn:
            assert conn.execute(select(Miss.count)).scalars().all() == [WORKERS * TRIALS_EACH]
    finally:
        engine.dispose()

"""The tuning queue (``db.queue``) and the locks (``db.locks``) on SQLite and, when
AUTOCUTLASS_TEST_PG_URL names a throwaway database, on PostgreSQL: idempotent enqueue, one claim
per item, items per toolchain, stale items queued again up to the retry limit, then failed with a
reason; locks exclusive across processes and dropped when their holder dies. (Heartbeats keeping
an item alive longer than the grace period: test_queue_fleet.py.)"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import optuna
import pytest
from _search_fakes import DEVICE
from sqlalchemy import create_engine

from autocutlass.db import release
from autocutlass.db.locks import AdvisoryLocks, FileLocks, acquire, locks_for
from autocutlass.db.models import Base
from autocutlass.db.queue import QUEUE_SCHEMA, Budget, Claimant, Toolchain, TuningQueue, problem_id, queue_url
from autocutlass.ops.gemm.problem import GemmProblem

PG_ENV = "AUTOCUTLASS_TEST_PG_URL"
TOOLCHAIN = Toolchain.of(DEVICE, {"fake": "fake"})
OTHER = Toolchain.of(replace(DEVICE, gpu_name="Other GPU"), {"fake": "fake"})
ME = Claimant("host-a", 1, "0", "uuid-a")


def problems(n: int, start: int = 0) -> list[tuple[str, GemmProblem]]:
    return [(f"p{i}", GemmProblem(m=16 * (i + 1), n=256, k=256)) for i in range(start, start + n)]


def reset_pg(url: str) -> None:
    """Drop the tuning tables and the queue's schema of the throwaway PostgreSQL database."""
    release(url)
    engine = create_engine(url)
    try:
        Base.metadata.drop_all(engine)
        with engine.begin() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA IF EXISTS {QUEUE_SCHEMA} CASCADE")
    finally:
        engine.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield str(tmp_path / "tuning.sqlite")
        return
    pg = os.environ.get(PG_ENV)
    if not pg:
        pytest.skip(f"{PG_ENV} is not set")
    reset_pg(pg)
    yield pg
    reset_pg(pg)


@pytest.fixture(autouse=True)
def _quiet_optuna() -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)


def test_queue_lives_apart_from_the_tuning_tables(tmp_path: Path) -> None:
    assert queue_url(tmp_path / "t.sqlite") == f"sqlite:///{tmp_path / 't.sqlite.queue'}"
    pg = "postgresql+psycopg://u@h/db"
    assert queue_url(pg) == pg  # same database; its own schema (search_path) when opened


def test_enqueue_is_idempotent_and_keeps_settings(url: str) -> None:
    q = TuningQueue(url, heartbeat_s=1, grace_s=3)
    assert q.campaign("c") is None and q.status("c") is None and q.campaigns() == []
    if url.endswith(".sqlite"):
        assert not Path(url + ".queue").exists()  # looking never creates a queue
    with pytest.raises(ValueError, match="campaign name"):
        q.enqueue("a/b", problems(1))
    s = q.enqueue("c", problems(5), budget=Budget(trials=8), max_retries=1)
    assert (s.added, s.already_queued) == (5, 0)
    s = q.enqueue("c", problems(7))  # two new ones; no settings given: kept
    assert (s.added, s.already_queued) == (2, 5)
    c = q.campaign("c")
    assert c is not None and c.budget == Budget(trials=8) and c.max_retries == 1
    assert [p.name for p in c.problems] == [f"p{i}" for i in range(7)]
    assert q.campaigns() == ["c"]
    st = q.status("c")
    assert st is not None and st.problems == 7 and st.toolchains == ()  # no worker yet


def test_claims_are_exclusive_and_kept_per_toolchain(url: str) -> None:
    q = TuningQueue(url, heartbeat_s=1, grace_s=3)
    q.enqueue("c", problems(3))  # p0 < p1 < p2 in FLOPs
    got = [q.claim("c", TOOLCHAIN, ME) for _ in range(4)]
    assert [g.name for g in got if g] == ["p2", "p1", "p0"] and got[3] is None  # largest first
    assert q.active("c", TOOLCHAIN) == 3 and q.active("c", OTHER) == 3  # the other GPU model has its own
    other = q.claim("c", OTHER, ME)
    assert other is not None and other.name == "p2"
    assert q.complete(got[0], "tuned", best_ms=1.0) and q.complete(got[1], "skipped", note="no family")
    assert q.fail(got[2], "no candidate passed")
    assert not q.complete(got[0], "tuned")  # ended already: not this claim's any more
    assert q.active("c", TOOLCHAIN) == 0
    q.enqueue("c", problems(1, start=3))  # a late problem joins the started toolchains
    late = q.claim("c", TOOLCHAIN, ME)
    assert late is not None and late.name == "p3"
    st = q.status("c")
    assert st is not None
    by_gpu = {t.toolchain.gpu_name: {i.name: i for i in t.items} for t in st.toolchains if t.toolchain}
    mine = by_gpu["Fake GPU"]
    assert mine["p2"].state == "done" and mine["p2"].outcome["result"] == "tuned"
    assert mine["p1"].outcome["note"] == "no family" and mine["p0"].state == "failed"
    assert mine["p0"].reason == "no candidate passed" and mine["p3"].state == "running"
    assert mine["p3"].claimant["host"] == "host-a" and mine["p3"].since
    assert by_gpu["Other GPU"]["p2"].state == "running" and by_gpu["Other GPU"]["p1"].state == "queued"


def test_claims_go_largest_first_and_enqueue_order_breaks_ties(url: str) -> None:
    q = TuningQueue(url, heartbeat_s=1, grace_s=3)
    small, big = GemmProblem(m=64, n=256, k=256), GemmProblem(m=4096, n=4096, k=4096)
    same_a, same_b = GemmProblem(m=512, n=512, k=512), GemmProblem(m=512, n=512, k=512, b_major="col")
    q.enqueue("c", [("small", small), ("tie-a", same_a), ("big", big), ("tie-b", same_b)])
    order = []
    while (item := q.claim("c", TOOLCHAIN, ME)) is not None:
        order.append(item.name)
    assert order == ["big", "tie-a", "tie-b", "small"]


def test_a_stale_item_is_retried_then_failed_with_the_reason(url: str) -> None:
    q = TuningQueue(url, heartbeat_s=1, grace_s=2)
    q.enqueue("c", problems(1), max_retries=1)
    first = q.claim("c", TOOLCHAIN, ME)
    assert first is not None and first.attempt == 1
    time.sleep(3.2)  # no heartbeat: stale
    second = q.claim("c", TOOLCHAIN, replace(ME, host="host-b"))
    assert second is not None and second.name == "p0" and second.attempt == 2
    assert not q.complete(first, "tuned")  # the first claimer lost it
    time.sleep(3.2)
    assert q.claim("c", TOOLCHAIN, ME) is None  # stale again, but its one retry is spent
    st = q.status("c")
    assert st is not None
    (item,) = st.toolchains[0].items
    assert item.state == "failed" and item.attempts == 2
    assert "stopped" in item.reason and "host-b" in item.reason
    assert q.active("c", TOOLCHAIN) == 0


def test_release_gives_back_counted_or_not(url: str) -> None:
    q = TuningQueue(url, heartbeat_s=1, grace_s=3)
    q.enqueue("c", problems(1), max_retries=1)
    a = q.claim("c", TOOLCHAIN, ME)
    assert a is not None
    q.release(a)  # a worker stopping on request: as it was
    b = q.claim("c", TOOLCHAIN, ME)
    assert b is not None and b.attempt == 1
    q.release(b, error="TypeError: a bug")  # counts as a retry
    c = q.claim("c", TOOLCHAIN, ME)
    assert c is not None and c.attempt == 2
    q.release(c, error="TypeError: a bug")
    assert q.claim("c", TOOLCHAIN, ME) is None
    (item,) = q.status("c").toolchains[0].items  # type: ignore[union-attr]
    assert item.state == "failed" and "TypeError: a bug" in item.reason


# ---- locks ---------------------------------------------------------------------------------------
def _hold(kind: str, where: str, name: str, ready: Any) -> None:
    space = FileLocks(where) if kind == "file" else AdvisoryLocks(where)
    held = space.try_acquire(name)
    ready.put(held is not None)
    time.sleep(120)


def _spaces(url: str, tmp_path: Path) -> list[tuple[str, str]]:
    out = [("file", str(tmp_path / "locks"))]
    if not url.endswith(".sqlite"):
        out.append(("advisory", url))
    return out


def test_locks_are_exclusive_and_die_with_their_holder(url: str, tmp_path: Path) -> None:
    for kind, where in _spaces(url, tmp_path):
        space = FileLocks(where) if kind == "file" else AdvisoryLocks(where)
        ctx = multiprocessing.get_context("spawn")
        ready = ctx.Queue()
        proc = ctx.Process(target=_hold, args=(kind, where, "lock-x", ready))
        proc.start()
        try:
            assert ready.get(timeout=60) is True
            assert space.try_acquire("lock-x") is None  # held by the other process
            with space.try_acquire("lock-y") as other:  # type: ignore[union-attr]
                assert other.held
                assert space.try_acquire("lock-y") is None  # exclusive inside one process too
            os.kill(proc.pid, signal.SIGKILL)
            proc.join(30)
            got = acquire(space, "lock-x", poll_s=0.1)  # the dead holder's lock comes free
            assert got is not None
            got.release()
            got.release()  # idempotent
        finally:
            if proc.is_alive():
                proc.kill()
                proc.join()


def test_locks_for_picks_the_backend(tmp_path: Path) -> None:
    space = locks_for(tmp_path / "t.sqlite")
    assert isinstance(space, FileLocks) and space.directory == tmp_path / "t.sqlite.locks"
    assert isinstance(locks_for("postgresql+psycopg://u@h/db"), AdvisoryLocks)
    assert problem_id(GemmProblem(m=16, n=256, k=256)) != problem_id(GemmProblem(m=32, n=256, k=256))

"""TuningStore: round trips, lookup order, hard-key isolation, misses, counts.

Every test here runs on SQLite and, when AUTOCUTLASS_TEST_PG_URL names a throwaway PostgreSQL
database (e.g. postgresql+psycopg://postgres@127.0.0.1:5432/actest), on PostgreSQL too: its
autocutlass tables are dropped before and after each test.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine

from autocutlass.db import SCHEMA_VERSION, BestRecord, TrialState, TuningStore, config_key, release
from autocutlass.db.models import Base
from autocutlass.device import HardKey
from autocutlass.ops.gemm.problem import DType, GemmProblem, Major

PG_ENV = "AUTOCUTLASS_TEST_PG_URL"


def hk(gpu: str = "NVIDIA H100 80GB HBM3", kernel_hash: str = "k0") -> HardKey:
    return HardKey(gpu, cc="9.0", sm_count=132, dsl_version="4.8.1", kernel_hash=kernel_hash, protocol_version=1)


def prob(m: int, n: int = 4096, k: int = 4096) -> GemmProblem:
    return GemmProblem(m=m, n=n, k=k)


def reset_pg(url: str) -> None:
    release(url)
    engine = create_engine(url)
    try:
        Base.metadata.drop_all(engine)
    finally:
        engine.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TuningStore]:
    if request.param == "sqlite":
        yield TuningStore(tmp_path / "nested" / "dir" / "tuning.sqlite")
        return
    url = os.environ.get(PG_ENV)
    if not url:
        pytest.skip(f"{PG_ENV} is not set")
    reset_pg(url)
    yield TuningStore(url)
    reset_pg(url)


def test_new_sqlite_file_is_created_with_parent_dirs(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "t.sqlite"
    store = TuningStore(path)
    assert not path.exists()  # constructing touches nothing
    store.check()
    assert path.is_file()
    assert store.url == f"sqlite:///{path.resolve()}"
    assert TuningStore(f"sqlite:///{path}").display == str(path.resolve())


def test_round_trip(store: TuningStore) -> None:
    p, key = prob(512), hk()
    t_ok = store.record_trial(
        p, key, "sm90_ws", {"tile_n": 128, "tile_m": 128}, TrialState.OK,
        median_ms=0.25, p20_ms=0.24, p80_ms=0.27, tflops=550.0,
    )  # fmt: skip
    store.record_trial(p, key, "sm90_ws", {"tile_m": 256, "tile_n": 208}, "cant_implement", reason="tile_n=208 not /16")
    store.record_trial(p, key, "sm90_ws", {"tile_m": 64, "tile_n": 64}, TrialState.CRASH, reason="signal 11")
    store.record_best(p, key, "sm90_ws", {"tile_m": 128, "tile_n": 128}, 0.25, 550.0, trial_id=t_ok)

    trials = store.trials()
    assert [t.state for t in trials] == [TrialState.OK, TrialState.CANT_IMPLEMENT, TrialState.CRASH]
    first = trials[0]
    assert first.id == t_ok and first.problem == p and first.hard_key == key and first.family == "sm90_ws"
    assert first.config == {"tile_m": 128, "tile_n": 128}
    assert (first.median_ms, first.p20_ms, first.p80_ms, first.tflops) == (0.25, 0.24, 0.27, 550.0)
    assert first.created_at.tzinfo is not None
    assert trials[1].reason == "tile_n=208 not /16" and trials[1].median_ms is None
    assert store.trials(problem=prob(1024)) == [] and store.trials(hard_key=hk(kernel_hash="other")) == []
    assert len(store.trials(problem=p, hard_key=key)) == 3

    # Config identity is canonical: key order does not matter.
    assert config_key({"tile_n": 128, "tile_m": 128}) == config_key({"tile_m": 128, "tile_n": 128})
    assert store.finished_config_keys(p, key, "sm90_ws") == {
        config_key({"tile_m": 128, "tile_n": 128}),
        config_key({"tile_m": 256, "tile_n": 208}),
        config_key({"tile_m": 64, "tile_n": 64}),
    }
    assert store.finished_config_keys(p, key, "other_family") == set()
    assert store.finished_config_keys(p, hk(kernel_hash="other"), "sm90_ws") == set()

    (best,) = store.bests()
    assert best == BestRecord(p, "sm90_ws", {"tile_m": 128, "tile_n": 128}, 0.25, 550.0, key, "exact", store.display)
    with pytest.raises(dataclasses.FrozenInstanceError):
        best.median_ms = 0.0  # type: ignore[misc]
    assert store.lookup(p, key) == best


def test_record_trial_rejects_unknown_state(store: TuningStore) -> None:
    with pytest.raises(ValueError):
        store.record_trial(prob(16), hk(), "f", {}, "exploded")
    assert store.trials() == []


def test_record_best_overwrites_and_merge_best_keeps_faster(store: TuningStore) -> None:
    p, key = prob(256), hk()
    store.record_best(p, key, "f", {"v": 1}, 1.0, 100.0)
    store.record_best(p, key, "f", {"v": 2}, 2.0, 50.0)  # the tuner's verdict, even if slower
    assert store.lookup(p, key).config == {"v": 2}  # type: ignore[union-attr]
    assert store.merge_best(p, key, "f", {"v": 3}, 3.0, 30.0) is False
    assert store.merge_best(p, key, "f", {"v": 4}, 2.0, 50.0) is False  # a tie keeps the stored one
    assert store.lookup(p, key).config == {"v": 2}  # type: ignore[union-attr]
    assert store.merge_best(p, key, "g", {"v": 5}, 0.5, 400.0) is True
    rec = store.lookup(p, key)
    assert rec is not None and (rec.family, rec.config, rec.median_ms) == ("g", {"v": 5}, 0.5)
    assert store.merge_best(prob(512), key, "f", {"v": 6}, 9.0, 1.0) is True  # none stored yet


def test_lookup_order_exact_bucket_nearest_none(store: TuningStore) -> None:
    key = hk()
    for m, cfg in ((100, "m100"), (1024, "m1024"), (4096, "m4096")):
        store.record_best(prob(m), key, "f", {"cfg": cfg}, 1.0, 1.0)

    def found(m: int, n: int = 4096) -> tuple[str, int] | None:
        rec = store.lookup(prob(m, n=n), key)
        return None if rec is None else (rec.source, rec.problem.m)

    assert found(100) == ("exact", 100)
    assert found(120) == ("bucket", 100)  # bucket 128 holds M=100
    assert found(1000) == ("bucket", 1024)
    assert found(300) == ("nearest", 100)  # bucket 512 untuned; |log2 300 - log2 100| < |.. - log2 1024|
    assert found(1600) == ("nearest", 1024)  # bucket 2048 untuned
    assert found(1 << 20) == ("nearest", 4096)
    assert found(1) == ("nearest", 100)
    assert found(100, n=8192) is None  # another family
    assert store.lookup(GemmProblem(m=100, n=4096, k=4096, b_major=Major.COL), key) is None
    assert store.lookup(GemmProblem(m=100, n=4096, k=4096, a_dtype=DType.FP16, b_dtype=DType.FP16), key) is None


def test_lookup_nearest_ties_go_to_larger_m(store: TuningStore) -> None:
    key = hk()
    store.record_best(prob(32), key, "f", {"m": 32}, 1.0, 1.0)
    store.record_best(prob(128), key, "f", {"m": 128}, 1.0, 1.0)
    rec = store.lookup(prob(64), key)  # bucket 64 untuned; log2 distance 1 to both
    assert rec is not None and rec.source == "nearest" and rec.problem.m == 128


def test_lookup_bucket_picks_nearest_in_bucket(store: TuningStore) -> None:
    key = hk()
    store.record_best(prob(65), key, "f", {"m": 65}, 1.0, 1.0)
    store.record_best(prob(127), key, "f", {"m": 127}, 1.0, 1.0)
    rec = store.lookup(prob(100), key)
    assert rec is not None and rec.source == "bucket" and rec.config == {"m": 127}


def test_a_large_m_just_past_an_octave_is_not_the_octaves_bucket(store: TuningStore) -> None:
    """4097 rows is not served as a bucket hit by a record tuned at 8192 (its last wave of M tiles
    would be nearly empty): quarter-octave buckets above 256 rows."""
    key = hk()
    store.record_best(prob(8192), key, "f", {"m": 8192}, 1.0, 1.0)
    assert store.lookup(prob(4097), key).source == "nearest"  # type: ignore[union-attr]
    assert store.lookup(prob(7169), key).source == "bucket"  # type: ignore[union-attr]


def test_a_row_written_under_the_octave_rule_is_bucketed_by_todays_rule(tmp_path: Path) -> None:
    """Rows stored before the quarter-octave buckets keep their old bucket_key; the lookup buckets
    each stored problem by today's rule, so a stale key neither makes nor hides a bucket hit."""
    import sqlite3

    key, path = hk(), tmp_path / "old.sqlite"
    TuningStore(path).record_best(prob(5000), key, "f", {"m": 5000}, 1.0, 1.0)
    with sqlite3.connect(path) as c:  # the octave rule's bucket of M = 5000: M = 8192
        assert c.execute("UPDATE problems SET bucket_key = ?", (prob(8192).bucket_key(),)).rowcount == 1
    store = TuningStore(path)
    assert store.lookup(prob(6000), key).source == "nearest"  # type: ignore[union-attr]
    assert store.lookup(prob(5100), key).source == "bucket"  # type: ignore[union-attr]
    assert store.lookup(prob(8000), key).source == "nearest"  # type: ignore[union-attr]


def test_hard_key_isolation(store: TuningStore) -> None:
    mine, other_toolchain, other_gpu = hk(), hk(kernel_hash="k1"), hk(gpu="NVIDIA H200")
    store.record_best(prob(100), other_toolchain, "f", {"who": "k1"}, 1.0, 1.0)
    store.record_best(prob(4096), other_gpu, "f", {"who": "h200"}, 1.0, 1.0)
    for m in (100, 120, 300, 4096):
        assert store.lookup(prob(m), mine) is None
    store.record_best(prob(2048), mine, "f", {"who": "me"}, 1.0, 1.0)
    for m in (100, 120, 300, 4096):
        rec = store.lookup(prob(m), mine)
        assert rec is not None and rec.config == {"who": "me"} and rec.hard_key == mine
    assert store.lookup(prob(100), other_toolchain).config == {"who": "k1"}  # type: ignore[union-attr]
    assert [b.config for b in store.bests(gpu="NVIDIA H200")] == [{"who": "h200"}]
    assert sorted(k.kernel_hash for k in store.hard_keys()) == ["k0", "k0", "k1"]


def test_misses_and_pending(store: TuningStore) -> None:
    a, b, c = hk(), hk(kernel_hash="k1"), hk(gpu="NVIDIA H200")
    for _ in range(3):
        store.record_miss(prob(16), a)
    store.record_miss(prob(32), a)
    store.record_miss(prob(48), b)
    store.record_miss(prob(16), c)
    assert store.pending_misses(a) == [prob(16), prob(32)]
    assert store.pending_misses(c) == [prob(16)]
    assert store.pending_misses() == [prob(16), prob(48), prob(32)]  # most missed, then latest; once each
    store.record_best(prob(16), a, "f", {}, 1.0, 1.0)
    assert store.pending_misses(a) == [prob(32)]
    assert store.pending_misses(c) == [prob(16)]  # tuned on another device only


def test_counts_per_gpu(store: TuningStore) -> None:
    assert store.counts_per_gpu() == {}
    a, a2, b = hk(), hk(kernel_hash="k1"), hk(gpu="NVIDIA H200")
    for i in range(3):
        store.record_trial(prob(64), a, "f", {"i": i}, "ok", median_ms=1.0, tflops=1.0)
    store.record_best(prob(64), a, "f", {"i": 0}, 1.0, 1.0)
    store.record_best(prob(64), a2, "f", {"i": 0}, 1.0, 1.0)
    store.record_best(prob(128), a2, "f", {"i": 0}, 1.0, 1.0)
    store.record_trial(prob(64), b, "f", {"i": 0}, "timeout")
    assert store.counts_per_gpu() == {
        "NVIDIA H100 80GB HBM3": {"hard_keys": 2, "problems": 2, "trials": 3, "bests": 3, "torch_times": 0},
        "NVIDIA H200": {"hard_keys": 1, "problems": 0, "trials": 1, "bests": 0, "torch_times": 0},
    }


def test_record_device_info_is_informative_only(store: TuningStore) -> None:
    store.record_device(hk(), {"l2_bytes": 52428800, "driver_version": "575.1"})
    store.record_best(prob(64), hk(), "f", {}, 1.0, 1.0)
    assert store.lookup(prob(64), hk()) is not None
    assert store.counts_per_gpu()["NVIDIA H100 80GB HBM3"]["hard_keys"] == 1


def test_schema_version_is_stored(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "t.sqlite"
    TuningStore(path).check()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == (str(SCHEMA_VERSION),)
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def _child_records(path: str) -> None:
    TuningStore(path).record_trial(prob(64), hk(), "f", {"child": os.getpid()}, "ok", median_ms=1.0)


def test_engine_is_not_shared_across_fork(tmp_path: Path) -> None:
    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("no fork on this platform")
    path = str(tmp_path / "t.sqlite")
    store = TuningStore(path)
    store.record_trial(prob(64), hk(), "f", {"parent": 1}, "ok", median_ms=1.0)
    proc = multiprocessing.get_context("fork").Process(target=_child_records, args=(path,))
    proc.start()
    proc.join(60)
    assert proc.exitcode == 0
    store.record_trial(prob(64), hk(), "f", {"parent": 2}, "ok", median_ms=1.0)
    assert len(store.trials()) == 3


def test_problems_of_every_op_are_stored_and_looked_up_by_their_own_rules(store: TuningStore) -> None:
    from autocutlass.ops.conv.problem import ConvProblem
    from autocutlass.ops.grouped.problem import GroupedGemmProblem

    def conv(n: int, hw: int = 14) -> ConvProblem:
        return ConvProblem(direction="fprop", n=n, h=hw, w=hw, c=256, k=512, r=1, s=1)

    def moe(t: int) -> GroupedGemmProblem:
        return GroupedGemmProblem(experts=8, t=t, n=1024, k=2048)

    key = hk()
    for p in (conv(3), conv(16), moe(100), moe(5000), prob(100)):
        t = store.record_trial(p, key, "f", {"p": p.describe()}, "ok", median_ms=1.0, tflops=1.0)
        store.record_best(p, key, "f", {"p": p.describe()}, 1.0, 1.0, trial_id=t)
    store.record_miss(conv(7, hw=7), key)

    def found(p: object) -> tuple[str, object] | None:
        rec = store.lookup(p, key)  # type: ignore[arg-type]
        return None if rec is None else (rec.source, rec.problem)

    assert found(conv(3)) == ("exact", conv(3))
    assert found(conv(4)) == ("bucket", conv(3))  # N rounds up to 4
    assert found(conv(12)) == ("bucket", conv(16))
    assert found(conv(64)) == ("nearest", conv(16))  # nearest GEMM rows N*P*Q
    assert found(conv(1, hw=28)) == ("nearest", conv(3))  # 784 rows: 588 is nearer than 3136
    assert found(ConvProblem(direction="dgrad", n=3, h=14, w=14, c=256, k=512, r=1, s=1)) is None
    assert found(moe(100)) == ("exact", moe(100))
    assert found(moe(120)) == ("bucket", moe(100))  # T rounds up to 128
    assert found(moe(1 << 20)) == ("nearest", moe(5000))
    assert found(GroupedGemmProblem(experts=16, t=100, n=1024, k=2048)) is None
    assert found(prob(120)) == ("bucket", prob(100))

    assert {type(t.problem).__name__ for t in store.trials()} == {"ConvProblem", "GroupedGemmProblem", "GemmProblem"}
    assert [b.problem.op for b in store.bests()] == ["conv2d", "conv2d", "gemm", "grouped_mm", "grouped_mm"]
    assert store.pending_misses(key) == [conv(7, hw=7)]
    engine = create_engine(store.url)
    try:
        with engine.connect() as conn:
            rows = conn.exec_driver_sql("SELECT op, dims FROM problems ORDER BY id").all()
    finally:
        engine.dispose()
    assert [tuple(r) for r in rows][:3] == [
        ("conv2d", '{"c":256,"h":14,"k":512,"n":3,"r":1,"s":1,"w":14}'),
        ("conv2d", '{"c":256,"h":14,"k":512,"n":16,"r":1,"s":1,"w":14}'),
        ("grouped_mm", '{"experts":8,"k":2048,"n":1024,"t":100}'),
    ]


def test_a_copy_of_the_file_alone_holds_the_recorded_bests(tmp_path: Path) -> None:
    """After a best is recorded, the write-ahead log is checkpointed into the file: copying the
    file alone (while the writer is still open, as a ``cp`` of a live database does) keeps it."""
    import shutil

    from autocutlass.device import HardKey
    from autocutlass.ops.gemm.problem import GemmProblem

    hk = HardKey("NVIDIA H100 80GB HBM3", cc="9.0", sm_count=132, dsl_version="4.8.1", kernel_hash="k0",
                 protocol_version=1)  # fmt: skip
    p = GemmProblem(m=256, n=512, k=512)
    path = tmp_path / "live.sqlite"
    store = TuningStore(path)
    store.record_trial(p, hk, "f", {"tile": 1}, "ok", median_ms=1.0)
    store.record_best(p, hk, "f", {"tile": 1}, 1.0, 100.0)
    copy = tmp_path / "copy.sqlite"
    shutil.copyfile(path, copy)  # the file alone, no -wal
    got = TuningStore(copy, read_only=True).lookup(p, hk)
    assert got is not None and got.config == {"tile": 1}

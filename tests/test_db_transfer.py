"""export / import_ / merge: round trips, faster best wins, no trial lost, hard keys stay apart."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from autocutlass.db import TuningStore, export, import_, merge
from autocutlass.device import HardKey
from autocutlass.errors import DatabaseError, SchemaMismatch
from autocutlass.ops.gemm.problem import GemmProblem


def hk(kernel_hash: str = "k0", gpu: str = "NVIDIA H100 80GB HBM3") -> HardKey:
    return HardKey(gpu, cc="9.0", sm_count=132, dsl_version="4.8.1", kernel_hash=kernel_hash, protocol_version=1)


A_KEY, B_KEY = hk(), hk("k1")
P1, P2 = GemmProblem(m=128, n=4096, k=4096), GemmProblem(m=8192, n=1024, k=512)


def _content(store: TuningStore) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Everything but ids and the origin: trials and bests as comparable tuples."""
    trials = sorted(
        (t.problem.key(), t.hard_key.key(), t.family, t.config_key, t.state.value, t.reason, t.median_ms,
         t.p20_ms, t.p80_ms, t.tflops, t.created_at.isoformat())
        for t in store.trials()
    )  # fmt: skip
    bests = sorted(
        (b.problem.key(), b.hard_key.key(), b.family, json.dumps(b.config, sort_keys=True), b.median_ms, b.tflops)
        for b in store.bests()
    )
    return trials, bests


def _populated(path: Path) -> TuningStore:
    store = TuningStore(path)
    t = store.record_trial(P1, A_KEY, "f", {"tile": 128}, "ok", median_ms=1.5, p20_ms=1.4, p80_ms=1.6, tflops=90.0)
    store.record_trial(P1, A_KEY, "f", {"tile": 256}, "compile_error", reason="ptxas: too many registers")
    store.record_trial(P2, B_KEY, "g", {"tile": 64}, "ok", median_ms=0.2, tflops=40.0)
    store.record_best(P1, A_KEY, "f", {"tile": 128}, 1.5, 90.0, trial_id=t)
    store.record_best(P2, B_KEY, "g", {"tile": 64}, 0.2, 40.0)
    store.record_miss(GemmProblem(m=3, n=4096, k=4096), A_KEY)
    store.record_device(A_KEY, {"l2_bytes": 50 << 20})
    return store


@pytest.mark.parametrize("suffix", [".sqlite", ".json"])
def test_export_import_round_trip(tmp_path: Path, suffix: str) -> None:
    src = _populated(tmp_path / "src.sqlite")
    out = export(src, tmp_path / "out" / f"export{suffix}")
    assert out.is_file()
    assert sorted(p.name for p in out.parent.iterdir()) == [out.name]  # no temp or side files
    if suffix == ".sqlite":
        with sqlite3.connect(out) as conn:
            assert conn.execute("PRAGMA journal_mode").fetchone() == ("delete",)
        assert _content(TuningStore(out)) == _content(src)
    else:
        doc = json.loads(out.read_text())
        assert doc["format"] == "autocutlass-tuning-db" and len(doc["trials"]) == 3

    dst = TuningStore(tmp_path / "dst.sqlite")
    stats = import_(dst, out)
    assert (stats.trials_added, stats.trials_present, stats.bests_written) == (3, 0, 2)
    assert _content(dst) == _content(src)
    assert dst.pending_misses(A_KEY) == [GemmProblem(m=3, n=4096, k=4096)]
    again = import_(dst, out)  # idempotent
    assert (again.trials_added, again.trials_present, again.bests_written) == (0, 3, 0)
    assert _content(dst) == _content(src)


def test_merge_keeps_faster_best_and_every_trial(tmp_path: Path) -> None:
    base = _populated(tmp_path / "base.sqlite")
    base_file = export(base, tmp_path / "base-export.sqlite")
    a, b = TuningStore(tmp_path / "a.sqlite"), TuningStore(tmp_path / "b.sqlite")
    import_(a, base_file)
    import_(b, base_file)  # a and b share the base trials: they must be stored once

    ta = a.record_trial(P1, A_KEY, "f", {"tile": "a"}, "ok", median_ms=1.0, tflops=100.0)
    a.record_best(P1, A_KEY, "f", {"tile": "a"}, 1.0, 100.0, trial_id=ta)  # a is faster on P1
    tb = b.record_trial(P1, A_KEY, "f", {"tile": "b"}, "ok", median_ms=1.2, tflops=95.0)
    b.record_best(P1, A_KEY, "f", {"tile": "b"}, 1.2, 95.0, trial_id=tb)
    b.record_trial(P2, B_KEY, "g", {"tile": "b2"}, "ok", median_ms=0.1, tflops=80.0)
    b.record_best(P2, B_KEY, "g", {"tile": "b2"}, 0.1, 80.0)  # b is faster on P2 under B_KEY
    b.record_best(P2, A_KEY, "g", {"tile": "other-key"}, 0.01, 800.0)  # another hard key: stays apart
    b.record_trial(P2, A_KEY, "g", {"tile": "timeout"}, "timeout", reason="10 s")

    for out_name in ("merged.sqlite", "merged.json"):
        out = tmp_path / "merged" / out_name
        merge(tmp_path / "a.sqlite", tmp_path / "b.sqlite", out)
        merged = TuningStore(tmp_path / f"check-{out_name}.sqlite")
        import_(merged, out)

        trials = merged.trials()
        assert len(trials) == 3 + 1 + 2 + 1  # base once, a's one, b's two + timeout
        assert {(t.hard_key.kernel_hash, t.config["tile"]) for t in trials} >= {("k0", "a"), ("k0", "b"), ("k1", "b2")}
        assert merged.lookup(P1, A_KEY).config == {"tile": "a"}  # type: ignore[union-attr]
        assert merged.lookup(P2, B_KEY).config == {"tile": "b2"}  # type: ignore[union-attr]
        assert merged.lookup(P2, A_KEY).config == {"tile": "other-key"}  # type: ignore[union-attr]
        assert merged.lookup(P2, hk("k2")) is None
        assert len(merged.bests()) == 3
        assert not [p.name for p in out.parent.iterdir() if p.name.startswith(".")]  # no temp files left

    # Merging in the other order gives the same winners.
    merge(tmp_path / "b.sqlite", tmp_path / "a.sqlite", tmp_path / "ba.sqlite")
    ab = TuningStore(tmp_path / "merged" / "merged.sqlite")
    assert _content(TuningStore(tmp_path / "ba.sqlite"))[1] == _content(ab)[1]


def test_merge_replace_takes_bs_re_timed_records_and_their_verdicts(tmp_path: Path) -> None:
    """B re-timed A's record slower (a drift) with torch's time and host times beside it
    (``tune --verdicts``): a plain merge keeps A's faster best and A's verdict; ``replace`` takes
    B's best and B's vendor record, and keeps A's records B has none of."""
    from autocutlass.vendor import VENDOR_FAMILY, host_times, vendor_hard_key

    a, b = TuningStore(tmp_path / "a.sqlite"), TuningStore(tmp_path / "b.sqlite")
    vk = vendor_hard_key(A_KEY, "2.11", "13.0")
    for st, ms, torch_ms, cfg in ((a, 1.0, 1.2, {}), (b, 1.1, 1.0, {"host_ms": 0.2, "ours_host_ms": 0.01})):
        st.record_best(P1, A_KEY, "f", {"tile": "a"}, ms, 100.0)
        st.record_best(P1, vk, VENDOR_FAMILY, cfg, torch_ms, 100.0)
    a.record_best(P2, A_KEY, "f", {"tile": "p2"}, 0.5, 50.0)

    def records(path: Path) -> tuple[float, float, Any]:
        st = TuningStore(path)
        vendor = next(r for r in st.bests(vendor=True) if r.family == VENDOR_FAMILY)
        assert st.lookup(P2, A_KEY) is not None  # A's other record either way
        return st.lookup(P1, A_KEY).median_ms, vendor.median_ms, host_times(vendor.config)  # type: ignore[union-attr]

    merge(tmp_path / "a.sqlite", tmp_path / "b.sqlite", tmp_path / "plain.sqlite")
    assert records(tmp_path / "plain.sqlite") == (1.0, 1.2, None)
    merge(tmp_path / "a.sqlite", tmp_path / "b.sqlite", tmp_path / "replaced.sqlite", replace=True)
    assert records(tmp_path / "replaced.sqlite") == (1.1, 1.0, (0.01, 0.2))


def test_merge_output_is_replaced_atomically(tmp_path: Path) -> None:
    _populated(tmp_path / "a.sqlite")
    out = tmp_path / "out.sqlite"
    out.write_text("previous content")
    with pytest.raises(DatabaseError):
        merge(tmp_path / "a.sqlite", tmp_path / "missing.sqlite", out)
    assert out.read_text() == "previous content"  # a failed merge leaves the old file alone
    merge(tmp_path / "a.sqlite", tmp_path / "a.sqlite", out)
    assert len(TuningStore(out).trials()) == 3
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_import_rejects_bad_files(tmp_path: Path) -> None:
    store = TuningStore(tmp_path / "db.sqlite")
    cases = {
        "missing.json": None,
        "garbage.bin": b"\x00\xff" * 100,
        "notes.json": b"{not json",
        "other.json": json.dumps({"format": "something-else"}).encode(),
        "broken.json": json.dumps({"format": "autocutlass-tuning-db", "schema_version": 1, "trials": [{}]}).encode(),
    }
    for name, data in cases.items():
        path = tmp_path / name
        if data is not None:
            path.write_bytes(data)
        with pytest.raises(DatabaseError) as info:
            import_(store, path)
        assert str(path) in str(info.value)
    future = tmp_path / "future.json"
    future.write_text(json.dumps({"format": "autocutlass-tuning-db", "schema_version": 99}))
    with pytest.raises(SchemaMismatch):
        import_(store, future)
    assert store.trials() == []


@pytest.mark.parametrize("suffix", [".sqlite", ".json"])
def test_problems_of_every_op_travel(tmp_path: Path, suffix: str) -> None:
    from autocutlass.ops.conv.problem import ConvProblem
    from autocutlass.ops.grouped.problem import GroupedGemmProblem

    conv = ConvProblem(direction="wgrad", n=32, h=56, w=56, c=64, k=64, r=3, s=3, pad_h=1, pad_w=1)
    moe = GroupedGemmProblem(experts=128, t=8192, n=768, k=2048)
    src = TuningStore(tmp_path / "src.sqlite")
    for p in (conv, moe, P1):
        t = src.record_trial(p, A_KEY, "f", {"op": p.op}, "ok", median_ms=1.0, tflops=2.0)
        src.record_best(p, A_KEY, "f", {"op": p.op}, 1.0, 2.0, trial_id=t)
    src.record_miss(GroupedGemmProblem(experts=128, t=17, n=768, k=2048), B_KEY)
    dst = TuningStore(tmp_path / "dst.sqlite")
    import_(dst, export(src, tmp_path / f"out{suffix}"))
    assert _content(dst) == _content(src)
    for p in (conv, moe, P1):
        rec = dst.lookup(p, A_KEY)
        assert rec is not None and rec.source == "exact" and rec.problem == p and rec.config == {"op": p.op}
    assert dst.pending_misses(B_KEY) == [GroupedGemmProblem(experts=128, t=17, n=768, k=2048)]


def test_torchs_time_travels_with_the_record_it_was_timed_with(tmp_path: Path) -> None:
    """A verdict compares two times of one tuning: merging a file whose record of ours wins brings
    its vendor record too, even a slower one; where ours already there stays, so does its vendor
    record, even if the file's is faster; a vendor record alone keeps the faster-wins rule."""
    from autocutlass.vendor import VENDOR_FAMILY, vendor_hard_key

    vk = vendor_hard_key(A_KEY, "2.11.0", "13.0")
    P3 = GemmProblem(m=64, n=2048, k=2048)  # noqa: N806

    def db(path: Path, rows: list[tuple[GemmProblem, str, float]]) -> Path:
        store = TuningStore(path)
        for p, fam, ms in rows:
            store.record_best(p, vk if fam == VENDOR_FAMILY else A_KEY, fam, {} if fam == VENDOR_FAMILY else {"t": 1},
                              ms, 1.0)  # fmt: skip
        return path

    a = db(tmp_path / "a.sqlite", [(P1, "f", 1.0), (P1, VENDOR_FAMILY, 0.7),   # A: torch timed faster
                                   (P2, "f", 0.5), (P2, VENDOR_FAMILY, 0.6),
                                   (P3, VENDOR_FAMILY, 0.4)])  # fmt: skip
    b = db(tmp_path / "b.sqlite", [(P1, "f", 0.9), (P1, VENDOR_FAMILY, 1.0),   # B's run: ours ahead of torch
                                   (P2, "f", 0.8), (P2, VENDOR_FAMILY, 0.3),   # ours slower than A's: A stays
                                   (P3, VENDOR_FAMILY, 0.35)])  # fmt: skip
    out = tmp_path / "c.sqlite"
    merge(a, b, out)
    merged = TuningStore(out)

    def ms(p: GemmProblem, key: HardKey) -> float:
        rec = merged.lookup(p, key)
        assert rec is not None and rec.source == "exact"
        return rec.median_ms

    assert (ms(P1, A_KEY), ms(P1, vk)) == (0.9, 1.0)  # B's pair (not A's torch at 0.7)
    assert (ms(P2, A_KEY), ms(P2, vk)) == (0.5, 0.6)  # A's pair (not B's torch at 0.3)
    assert ms(P3, vk) == 0.35  # no record of ours: the faster

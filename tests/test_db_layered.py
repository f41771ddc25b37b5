"""LayeredStore: the user database over shipped read-only databases."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from autocutlass.db import LayeredStore, TuningStore, export
from autocutlass.device import HardKey
from autocutlass.ops.gemm.problem import GemmProblem


def hk(gpu: str = "NVIDIA H100 80GB HBM3") -> HardKey:
    return HardKey(gpu_name=gpu, cc="9.0", sm_count=132, dsl_version="4.8.1", kernel_hash="k0", protocol_version=1)


H100, H200 = hk(), hk("NVIDIA H200")
P = GemmProblem(m=256, n=4096, k=4096)


def _shipped(tmp_path: Path, name: str, records: list[tuple[GemmProblem, HardKey, str]]) -> Path:
    """A shipped directory entry made the way releases make them: tune into a DB, export it."""
    work = TuningStore(tmp_path / f"work-{name}.sqlite")
    for problem, key, tag in records:
        work.record_best(problem, key, "f", {"from": tag}, 1.0, 1.0)
    out = tmp_path / "tuning_dbs" / f"{name}.sqlite"
    export(work, out)
    return out


def test_corrupt_user_db_still_finds_shipped_records(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    shipped = _shipped(tmp_path, "h100", [(P, H100, "shipped")])
    user_path = tmp_path / "user.sqlite"
    user_path.write_text("garbage, not sqlite\n" * 20)
    layered = LayeredStore(TuningStore(user_path), shipped.parent)
    with caplog.at_level(logging.WARNING, logger="autocutlass.db"):
        for _ in range(3):
            rec = layered.lookup(P, H100)
            assert rec is not None and rec.config == {"from": "shipped"} and rec.origin == str(shipped)
        assert layered.lookup(GemmProblem(m=256, n=8192, k=4096), H100) is None
        layered.record_miss(P, H100)  # best effort: reported, not raised
    reports = [r for r in caplog.records if str(user_path) in r.getMessage()]
    assert len(reports) == 1  # reported once


def test_user_db_first_then_shipped(tmp_path: Path) -> None:
    shipped = _shipped(tmp_path, "h100", [(P, H100, "shipped"), (GemmProblem(m=64, n=4096, k=4096), H100, "shipped64")])
    user = TuningStore(tmp_path / "user.sqlite")
    layered = LayeredStore(user, shipped.parent)
    assert layered.lookup(P, H100).config == {"from": "shipped"}  # type: ignore[union-attr]
    user.record_best(P, H100, "f", {"from": "user"}, 2.0, 1.0)
    assert layered.lookup(P, H100).config == {"from": "user"}  # type: ignore[union-attr]
    # The user's approximate record loses to a shipped exact one.
    rec = layered.lookup(GemmProblem(m=64, n=4096, k=4096), H100)
    assert rec is not None and rec.source == "exact" and rec.config == {"from": "shipped64"}
    # Neither has M=32's bucket: the nearest tuned M (64, shipped) wins over 256 (user).
    rec = layered.lookup(GemmProblem(m=32, n=4096, k=4096), H100)
    assert rec is not None and rec.source == "nearest" and rec.problem.m == 64


def test_shipped_db_of_other_gpus_is_skipped(tmp_path: Path) -> None:
    shipped = _shipped(tmp_path, "h200", [(P, H200, "h200")])
    layered = LayeredStore(TuningStore(tmp_path / "user.sqlite"), shipped.parent)
    assert layered.lookup(P, H100) is None
    assert layered.lookup(P, H200).config == {"from": "h200"}  # type: ignore[union-attr]


def test_shipped_dbs_are_never_written(tmp_path: Path) -> None:
    shipped = _shipped(tmp_path, "h100", [(P, H100, "shipped")])
    before = shipped.read_bytes()
    user = TuningStore(tmp_path / "user.sqlite")
    layered = LayeredStore(user, shipped.parent)
    layered.lookup(P, H100)
    layered.record_miss(GemmProblem(m=17, n=4096, k=4096), H100)
    assert user.pending_misses(H100) == [GemmProblem(m=17, n=4096, k=4096)]
    assert shipped.read_bytes() == before
    assert sorted(p.name for p in shipped.parent.iterdir()) == ["h100.sqlite"]  # no -wal/-shm/-journal


def test_corrupt_shipped_db_is_skipped_and_reported_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    good = _shipped(tmp_path, "b_h100", [(P, H100, "good")])
    bad = good.parent / "a_broken.sqlite"
    bad.write_bytes(b"\x00\x01" * 4096)
    layered = LayeredStore(TuningStore(tmp_path / "user.sqlite"), good.parent)
    assert layered.shipped_paths() == [bad, good]
    with caplog.at_level(logging.WARNING, logger="autocutlass.db"):
        for _ in range(2):
            assert layered.lookup(P, H100).config == {"from": "good"}  # type: ignore[union-attr]
    assert len([r for r in caplog.records if str(bad) in r.getMessage()]) == 1


def test_no_shipped_dir(tmp_path: Path) -> None:
    user = TuningStore(tmp_path / "user.sqlite")
    user.record_best(P, H100, "f", {"from": "user"}, 1.0, 1.0)
    for shipped_dir in (None, tmp_path / "does-not-exist"):
        layered = LayeredStore(user, shipped_dir)
        assert layered.shipped_paths() == []
        assert layered.lookup(P, H100).config == {"from": "user"}  # type: ignore[union-attr]


def test_seed_configs_order_family_filter_and_dedup(tmp_path: Path) -> None:
    """A tuning's priors: this GPU's record first, then a sibling GPU's record of the problem, then
    the nearest class winners; other families' records left out, each config once."""
    near = GemmProblem(m=512, n=4096, k=4096)
    far = GemmProblem(m=4096, n=4096, k=4096)
    shipped = _shipped(tmp_path, "h200", [(P, H200, "sibling"), (far, H200, "far-sibling")])
    user = TuningStore(tmp_path / "user.sqlite")
    user.record_best(near, H100, "f", {"from": "near"}, 1.0, 1.0)
    user.record_best(GemmProblem(m=1024, n=4096, k=4096), H100, "other", {"from": "other-family"}, 1.0, 1.0)
    user.record_best(GemmProblem(m=2048, n=4096, k=4096), H100, "f", {"from": "sibling"}, 1.0, 1.0)  # a repeat
    layered = LayeredStore(user, shipped.parent)
    seeds = layered.seed_configs(P, H100, "f")
    assert seeds[:2] == [{"from": "near"}, {"from": "sibling"}]  # own nearest record, then the sibling's exact one
    assert {"from": "other-family"} not in seeds
    assert seeds.count({"from": "sibling"}) == 1 and {"from": "far-sibling"} in seeds
    assert layered.seed_configs(P, H100, "no-such-family") == []
    assert LayeredStore(TuningStore(tmp_path / "empty.sqlite"), None).seed_configs(P, H100, "f") == []


def test_seed_configs_end_with_the_problems_retired_winner(tmp_path: Path) -> None:
    """After a kernel-source change the problem's old winner on this GPU (a record under another
    kernel hash) seeds the re-tuning; another GPU's or another family's retired record does not."""
    import dataclasses

    old = dataclasses.replace(H100, kernel_hash="k-old")
    older = dataclasses.replace(H100, kernel_hash="k-older")
    shipped = _shipped(tmp_path, "h100", [(P, older, "older")])
    user = TuningStore(tmp_path / "user.sqlite")
    user.record_best(P, old, "f", {"from": "retired"}, 1.0, 1.0)
    user.record_best(P, dataclasses.replace(H200, kernel_hash="k-old"), "f", {"from": "other-gpu"}, 1.0, 1.0)
    user.record_best(P, dataclasses.replace(H100, kernel_hash="k-g"), "g", {"from": "other-family"}, 1.0, 1.0)
    user.record_best(GemmProblem(m=512, n=4096, k=4096), H100, "f", {"from": "near"}, 1.0, 1.0)
    layered = LayeredStore(user, shipped.parent)
    assert layered.seed_configs(P, H100, "f") == [{"from": "near"}, {"from": "retired"}, {"from": "older"}]
    assert user.retired_configs(P, H100, "f") == [{"from": "retired"}]
    assert user.retired_configs(P, old, "f") == []  # its own record is not retired

"""``autocutlass db show`` (config fields that matter first, shipped records, GPU names matched
loosely, read-only) and ``db merge`` (refuses to overwrite, reports what the output holds)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autocutlass.cli import main
from autocutlass.cli.db import config_summary
from autocutlass.db import TuningStore, release
from autocutlass.device import HardKey
from autocutlass.ops.gemm.problem import GemmProblem

H100 = HardKey("NVIDIA H100 80GB HBM3", "9.0", 132, "4.8.1", "k0", 1)
H200 = HardKey("NVIDIA H200", "9.0", 132, "4.8.1", "k0", 1)
P1, P2, P3 = GemmProblem(m=128, n=4096, k=4096), GemmProblem(m=8192, n=1024, k=512), GemmProblem(m=64, n=64, k=64)
FULL = {"tile_m": 128, "tile_n": 256, "tile_k": 64, "cluster_m": 2, "cluster_n": 1, "stages": 0,
        "schedule": "cooperative", "raster": "along_n", "swizzle": 8, "split_k": 1, "store": "tma",
        "split_mode": "serial", "swap_ab": False, "stream_k": False}  # fmt: skip


def _best(path: Path, problem: GemmProblem, hk: HardKey, config: dict[str, object], ms: float, trials: int = 0) -> None:
    store = TuningStore(path)
    for i in range(trials):
        store.record_trial(problem, hk, "hopper_gemm", {**config, "stages": i}, "ok", median_ms=ms + i, tflops=1.0)
    store.record_best(problem, hk, "hopper_gemm", config, ms, 100.0 / ms)
    release(path)


@pytest.fixture
def dbs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A user database (P1 on H100) and a shipped directory (P1 and P2 on H200, P3 on H100)."""
    user, shipped = tmp_path / "user.sqlite", tmp_path / "shipped"
    shipped.mkdir()
    _best(user, P1, H100, FULL, 0.5)
    _best(shipped / "NVIDIA-H200.sqlite", P1, H200, {**FULL, "swap_ab": True}, 0.4)
    _best(shipped / "NVIDIA-H200.sqlite", P2, H200, FULL, 0.3)
    _best(shipped / "NVIDIA-H100.sqlite", P1, H100, FULL, 0.6)  # the user's record of it wins
    monkeypatch.setenv("AUTOCUTLASS_DB", str(user))
    monkeypatch.setenv("AUTOCUTLASS_SHIPPED_DBS", str(shipped))
    monkeypatch.setattr("autocutlass.cli.db._here", lambda: None)  # the same table on a GPU machine
    return user, shipped


# ---- show --------------------------------------------------------------------------------------
def test_config_summary_puts_tile_cluster_schedule_and_split_first() -> None:
    text = config_summary(FULL)
    assert text == ("tile=128x256x64 cluster=2x1 schedule=cooperative split_k=1 split_mode=serial stages=0 "
                    "raster=along_n swizzle=8 store=tma")  # fmt: skip
    assert config_summary({**FULL, "swap_ab": True, "zeta": 1}).endswith("split_mode=serial swap_ab=True stages=0 "
                                                                          "raster=along_n swizzle=8 store=tma zeta=1")
    assert config_summary({"tile_n": 256, "tile_m": 128, "a": 1}) == "tile_m=128 tile_n=256 a=1"  # no tile_k: no group
    assert config_summary(FULL, width=20) == "tile=128x256x64 clu…"


def test_show_lists_shipped_records_marked_shipped(dbs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["db", "show"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("gemm ")]
    assert len(rows) == 4 and "1 in" in out and "3 in the shipped NVIDIA-H100.sqlite, NVIDIA-H200.sqlite" in out
    assert rows[0].endswith("user") and "tile=128x256x64 cluster=2x1" in rows[0]
    assert sum(r.endswith("shipped NVIDIA-H200.sqlite") for r in rows) == 2
    assert rows[1].endswith("shipped NVIDIA-H100.sqlite, overridden")  # the user's own record serves P1 on H100
    assert "swap_ab=True" in out
    assert main(["db", "show", "--no-shipped"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("gemm ")]
    assert len(rows) == 1 and rows[0].endswith("user")


def test_show_matches_gpu_names_by_substring_in_any_case(dbs: tuple[Path, Path],
                                                         capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    assert main(["db", "show", "--gpu", "h200"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("gemm ")]
    assert len(rows) == 2 and all("NVIDIA H200" in r for r in rows)
    assert main(["db", "show", "--gpu", "H100 80gb"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("gemm ")]
    assert len(rows) == 2 and all("NVIDIA H100 80GB HBM3" in r for r in rows)
    assert main(["db", "show", "--gpu", "a100"]) == 0
    assert "no best records of GPUs matching 'a100'" in capsys.readouterr().out


def test_show_skips_an_unusable_shipped_database(dbs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    (dbs[1] / "broken.sqlite").write_text("not a database\n" * 10)
    assert main(["db", "show"]) == 0
    out, err = capsys.readouterr()
    assert len([line for line in out.splitlines() if line.startswith("gemm ")]) == 4
    assert "skipping shipped database" in err and "broken.sqlite" in err


def test_show_and_export_do_not_write(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty.sqlite"
    empty.touch()
    assert main(["db", "show", "--no-shipped", "--db", str(empty)]) == 0
    assert "no best records" in capsys.readouterr().out
    assert main(["db", "export", str(tmp_path / "out.json"), "--db", str(empty)]) == 0
    assert empty.stat().st_size == 0 and sorted(p.name for p in tmp_path.iterdir()) == ["empty.sqlite", "out.json"]


# ---- merge -------------------------------------------------------------------------------------
@pytest.fixture
def ab(tmp_path: Path) -> tuple[Path, Path]:
    a, b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    _best(a, P1, H100, FULL, 0.5, trials=3)
    _best(a, P2, H100, FULL, 0.5, trials=2)
    _best(b, P1, H100, {**FULL, "swizzle": 1}, 0.4, trials=1)
    _best(b, P3, H200, FULL, 0.2, trials=1)
    return a, b


def test_merge_refuses_an_existing_output_without_force(ab: tuple[Path, Path], tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    out = tmp_path / "c.sqlite"
    out.write_bytes(b"precious")
    assert main(["db", "merge", str(ab[0]), str(ab[1]), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "exists" in err and "--force" in err
    assert out.read_bytes() == b"precious"
    assert main(["db", "merge", str(ab[0]), str(ab[1]), "-o", str(out), "--force"]) == 0
    assert len(TuningStore(out, read_only=True).bests()) == 3


def test_merge_reports_what_the_output_holds(ab: tuple[Path, Path], tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    for out in (tmp_path / "c.sqlite", tmp_path / "c.json"):
        assert main(["db", "merge", str(ab[0]), str(ab[1]), "-o", str(out)]) == 0
        text = capsys.readouterr().out
        # C: P1 and P2 on H100, P3 on H200; 3 + 2 + 1 + 1 trials (B's merged into A's: 2 added)
        assert f"into {out.resolve()}: it holds 3 problems tuned, 3 best records, 7 trials" in text, text
        assert "  NVIDIA H100 80GB HBM3: 2 problems tuned, 2 best records, 6 trials" in text
        assert "  NVIDIA H200: 1 problems tuned, 1 best records, 1 trials" in text
        assert "(B's records merged into A's: 2 trials added" in text
    assert json.loads((tmp_path / "c.json").read_text())

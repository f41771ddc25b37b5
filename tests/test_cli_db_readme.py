"""``autocutlass db readme``: tuning_dbs/README.md is generated from the shipped databases, and the
committed one is what the command generates from the committed databases."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from autocutlass.cli import main
from autocutlass.cli.db_readme import render_readme
from autocutlass.db import TuningStore, release, shipped_db_paths
from autocutlass.device import HardKey
from autocutlass.ops.gemm.problem import DType, GemmProblem, Major

REPO = Path(__file__).resolve().parents[1]
SHIPPED = REPO / "tuning_dbs"

H200 = HardKey("NVIDIA H200", "9.0", 132, "4.8.1", "aaaa", 1)
H200_OLD = HardKey("NVIDIA H200", "9.0", 132, "4.8.0", "bbbb", 1)
BF16 = GemmProblem(m=128, n=4096, k=4096, b_major=Major.COL)
FP8 = GemmProblem(m=256, n=256, k=256, a_dtype=DType.E4M3, b_dtype=DType.E4M3, d_dtype=DType.BF16, b_major=Major.COL)
CFG = {"tile_m": 128, "tile_n": 256, "tile_k": 64, "cluster_m": 2, "cluster_n": 1, "schedule": "cooperative",
       "split_k": 1, "swap_ab": False}  # fmt: skip


def test_the_committed_readme_is_generated_from_the_committed_databases() -> None:
    expected = render_readme(shipped_db_paths(SHIPPED))
    assert (SHIPPED / "README.md").read_text(encoding="utf-8") == expected, (
        "tuning_dbs/README.md differs from what the shipped databases say: run `autocutlass db readme`"
    )


@pytest.fixture
def shipped(tmp_path: Path) -> Path:
    d = tmp_path / "dbs"
    d.mkdir()
    path = d / "NVIDIA-H200.sqlite"
    store = TuningStore(path)
    for i in range(3):
        store.record_trial(BF16, H200, "hopper_gemm", {**CFG, "stages": i}, "ok", median_ms=0.1 + i, tflops=300.0)
    store.record_trial(BF16, H200, "hopper_gemm", {**CFG, "stages": 9}, "compile_error", reason="ptxas")
    store.record_trial(FP8, H200, "hopper_gemm", CFG, "ok", median_ms=0.01, tflops=3000.0)
    store.record_best(BF16, H200, "hopper_gemm", CFG, 0.1234, 345.67)
    store.record_best(FP8, H200, "hopper_gemm", {**CFG, "swap_ab": True}, 0.01, 3000.0)
    store.record_best(BF16, H200_OLD, "hopper_gemm", CFG, 0.2, 170.0)
    release(path)
    (d / "empty.sqlite").touch()  # a database without tables reads as one without records
    return d


def test_render_describes_each_file_and_hard_key(shipped: Path) -> None:
    text = render_readme(shipped_db_paths(shipped))
    assert text.startswith("# Shipped tuning databases\n") and "autocutlass db readme" in text
    assert text.index("## NVIDIA-H200.sqlite") < text.index("## empty.sqlite")
    assert "2 problems with a best record (gemm 2), 3 best records, 5 trials." in text
    assert "### NVIDIA H200, kernel sources `aaaa`" in text and "### NVIDIA H200, kernel sources `bbbb`" in text
    assert "- GPU: NVIDIA H200, compute capability 9.0, 132 SMs" in text
    assert "- toolchain: nvidia-cutlass-dsl 4.8.1, kernel sources `aaaa`, timing protocol 1" in text
    today = datetime.now(UTC).date().isoformat()  # trials are stamped when recorded
    assert f"- 5 trials (4 ok; compile_error 1), recorded {today} (UTC)" in text
    assert ("| gemm 128x4096x4096 bf16 row/col | hopper_gemm | tile=128x256x64 cluster=2x1 schedule=cooperative "
            "split_k=1 | 0.1234 | 345.7 | 4 |") in text  # fmt: skip
    assert "| gemm 256x256x256 e4m3 row/col | hopper_gemm | " in text and "swap_ab=True | 0.0100 | 3000.0 | 1 |" in text
    assert "- 1 best record (gemm 1)\n- 0 trials\n" in text  # the older toolchain's record
    assert "0 problems with a best record, 0 best records, 0 trials." in text
    assert render_readme(shipped_db_paths(shipped)) == text  # the same bytes every time


def test_the_command_writes_the_readme(shipped: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["db", "readme", "--shipped-dir", str(shipped)]) == 0
    assert f"wrote {shipped / 'README.md'} from 2 databases" in capsys.readouterr().out
    text = (shipped / "README.md").read_text(encoding="utf-8")
    assert text == render_readme(shipped_db_paths(shipped))
    assert main(["db", "readme", "--shipped-dir", str(shipped), "-o", "-"]) == 0
    assert capsys.readouterr().out == text
    out = tmp_path / "elsewhere" / "R.md"
    assert main(["db", "readme", "--shipped-dir", str(shipped), "-o", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == text


def test_the_command_needs_a_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    assert main(["db", "readme", "--shipped-dir", str(tmp_path / "nope")]) == 2
    assert "not a directory" in capsys.readouterr().err
    monkeypatch.setenv("AUTOCUTLASS_SHIPPED_DBS", "off")
    assert main(["db", "readme"]) == 2
    assert "--shipped-dir" in capsys.readouterr().err


def test_torchs_times_get_their_own_table_with_what_serves_each_problem(tmp_path: Path) -> None:
    from autocutlass.vendor import VENDOR_FAMILY, vendor_hard_key

    d = tmp_path / "dbs"
    d.mkdir()
    path = d / "NVIDIA-H200.sqlite"
    store = TuningStore(path)
    vendor = vendor_hard_key(H200, "2.11.0", "13.0")
    store.record_best(BF16, H200, "hopper_gemm", CFG, 0.1, 300.0)
    store.record_best(BF16, vendor, VENDOR_FAMILY, {}, 0.08, 375.0)  # torch faster: it serves
    store.record_best(FP8, H200, "hopper_gemm", CFG, 0.01, 3000.0)
    store.record_best(FP8, vendor, VENDOR_FAMILY, {}, 0.0101, 2970.0)  # within the margin: ours
    # torch faster on the GPU by 0.02 ms, but its call costs the host 0.04 ms more than ours: ours
    other = GemmProblem(m=64, n=4096, k=4096, b_major=Major.COL)
    store.record_best(other, H200, "hopper_gemm", CFG, 0.1, 30.0)
    store.record_best(other, vendor, VENDOR_FAMILY, {"host_ms": 0.05, "ours_host_ms": 0.01}, 0.08, 37.0)
    release(path)
    text = render_readme(shipped_db_paths(d))
    assert "3 problems with a best record (gemm 3), 3 best records" in text  # torch's are not ours
    assert f"kernel sources `{vendor.kernel_hash}`" not in text
    assert "torch's time was recorded beside 3 best records; torch serves the 1 where" in text
    assert f"| {BF16.describe()} | 0.1000 | 0.0800 | 0.800 | - | - | torch |" in text
    assert f"| {FP8.describe()} | 0.0100 | 0.0101 | 1.010 | - | - | hopper_gemm |" in text
    assert f"| {other.describe()} | 0.1000 | 0.0800 | 0.800 | 0.0100 | 0.0500 | hopper_gemm |" in text


def test_a_variant_of_torchs_path_gets_a_row_of_its_own_named(tmp_path: Path) -> None:
    """conv2d's cuDNN outside benchmark mode (``heuristic``) beside benchmark mode: two rows of one
    problem, the variant's named after the problem, each with its own verdict."""
    from autocutlass.vendor import VENDOR_FAMILY, vendor_hard_key

    d = tmp_path / "dbs"
    d.mkdir()
    path = d / "NVIDIA-H200.sqlite"
    store = TuningStore(path)
    store.record_best(BF16, H200, "hopper_gemm", CFG, 0.1, 300.0)
    store.record_best(BF16, vendor_hard_key(H200, "2.11.0", "13.0"), VENDOR_FAMILY, {}, 0.2, 150.0)
    store.record_best(BF16, vendor_hard_key(H200, "2.11.0", "13.0", "heuristic"), VENDOR_FAMILY, {}, 0.05, 600.0)
    release(path)
    text = render_readme(shipped_db_paths(d))
    assert f"| {BF16.describe()} | 0.1000 | 0.2000 | 2.000 | - | - | hopper_gemm |" in text
    assert f"| {BF16.describe()} (heuristic) | 0.1000 | 0.0500 | 0.500 | - | - | torch |" in text
    assert "1 problem with a best record (gemm 1), 1 best record" in text

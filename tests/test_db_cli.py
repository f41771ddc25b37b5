"""``autocutlass db ...`` and ``info_db_lines``, run in-process through ``autocutlass.cli.main``."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from autocutlass import cli
from autocutlass.cli.info import info_db_lines
from autocutlass.db import SCHEMA_VERSION, TuningStore, release
from autocutlass.device import HardKey
from autocutlass.ops.gemm.problem import GemmProblem
from autocutlass.settings import Settings

H100 = HardKey("NVIDIA H100 80GB HBM3", "9.0", 132, "4.8.1", "k0", 1)
H200 = HardKey("NVIDIA H200", "9.0", 132, "4.8.1", "k0", 1)
P1, P2 = GemmProblem(m=128, n=4096, k=4096), GemmProblem(m=8192, n=1024, k=512)


main = cli.main


@pytest.fixture(autouse=True)
def no_shipped_dbs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The user's database only (test_cli_db.py covers the shipped ones)."""
    monkeypatch.setenv("AUTOCUTLASS_SHIPPED_DBS", "off")


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "tuning.sqlite"
    monkeypatch.setenv("AUTOCUTLASS_DB", str(path))
    store = TuningStore(path)
    t = store.record_trial(P1, H100, "sm90_ws", {"tile_m": 128, "tile_n": 256}, "ok", median_ms=0.0123, tflops=654.3)
    store.record_best(P1, H100, "sm90_ws", {"tile_m": 128, "tile_n": 256}, 0.0123, 654.3, trial_id=t)
    store.record_best(P2, H200, "sm90_pingpong", {"tile_m": 64}, 0.5, 300.0)
    return path


def test_show(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["db", "show"]) == 0
    out = capsys.readouterr().out
    for text in (P1.describe(), P2.describe(), "sm90_ws", "sm90_pingpong", "tile_m=128 tile_n=256", "0.0123",
                 "654.3", "NVIDIA H100 80GB HBM3", "NVIDIA H200", str(db)):  # fmt: skip
        assert text in out
    assert main(["db", "show", "--gpu", "NVIDIA H200", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "sm90_pingpong" in out and "sm90_ws" not in out
    assert main(["db", "show", "--gpu", "A100"]) == 0
    assert "no best records" in capsys.readouterr().out


def test_show_missing_db_creates_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "none.sqlite"
    assert main(["db", "show", "--db", str(path)]) == 0
    assert "no tuning database" in capsys.readouterr().out
    assert not path.exists()


def test_export_import_merge(db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    exported = tmp_path / "exports" / "all.json"
    assert main(["db", "export", str(exported)]) == 0
    assert exported.is_file()

    other = tmp_path / "other.sqlite"
    assert main(["db", "import", str(exported), "--db", str(other)]) == 0
    assert "1 trials added" in capsys.readouterr().out
    assert len(TuningStore(other).bests()) == 2

    faster = tmp_path / "faster.sqlite"
    TuningStore(faster).record_best(P1, H100, "sm90_ws", {"tile_m": 256}, 0.01, 800.0)
    merged = tmp_path / "merged.sqlite"
    assert main(["db", "merge", str(db), str(faster), "-o", str(merged)]) == 0
    assert str(merged) in capsys.readouterr().out
    rec = TuningStore(merged).lookup(P1, H100)
    assert rec is not None and rec.config == {"tile_m": 256}
    assert len(TuningStore(merged).trials()) == 1


def test_errors_exit_1_with_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.sqlite"
    bad.write_text("not a database\n" * 10)
    for argv in (
        ["db", "show", "--db", str(bad)],
        ["db", "export", str(tmp_path / "x.sqlite"), "--db", str(bad)],
        ["db", "import", str(bad), "--db", str(tmp_path / "ok.sqlite")],
        ["db", "merge", str(bad), str(bad), "-o", str(tmp_path / "m.sqlite")],
        ["db", "upgrade", "--db", str(bad)],
    ):
        assert main(argv) == 1, argv
        err = capsys.readouterr().err
        assert err.startswith("autocutlass: error:") and str(bad) in err


def test_upgrade(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["db", "upgrade"]) == 0
    assert "nothing to do" in capsys.readouterr().out
    release(db)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE meta SET value = ?", (str(SCHEMA_VERSION + 5),))
    assert main(["db", "upgrade", "--db", str(db)]) == 1
    assert "Upgrade autocutlass" in capsys.readouterr().err


def test_merge_requires_output(db: Path) -> None:
    with pytest.raises(SystemExit) as info:
        main(["db", "merge", "a", "b"])
    assert info.value.code == 2


def test_info_db_lines(db: Path, tmp_path: Path) -> None:
    shipped = tmp_path / "tuning_dbs"
    shipped.mkdir()
    TuningStore(db).check()
    from autocutlass.db import export

    export(TuningStore(db), shipped / "h100.sqlite")
    settings = Settings.from_env({"AUTOCUTLASS_DB": str(db), "AUTOCUTLASS_SHIPPED_DBS": str(shipped)})
    text = "\n".join(info_db_lines(settings))
    assert str(db) in text and str(shipped / "h100.sqlite") in text
    assert "NVIDIA H100 80GB HBM3: 1 problems tuned, 1 best records, 1 trials" in text
    assert "NVIDIA H200: 1 problems tuned, 1 best records, 0 trials" in text

    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"\x13" * 1000)
    for env in (
        {"AUTOCUTLASS_DB": str(bad), "AUTOCUTLASS_SHIPPED_DBS": "off"},
        {"AUTOCUTLASS_DB": "postgresql+psycopg://u:pw@127.0.0.1:1/x", "AUTOCUTLASS_SHIPPED_DBS": "off"},
        {"AUTOCUTLASS_DB": "nosuchdialect://x", "AUTOCUTLASS_SHIPPED_DBS": str(tmp_path)},  # bad.sqlite "shipped"
    ):
        lines = info_db_lines(Settings.from_env(env))
        assert any(line.strip().startswith("unusable:") for line in lines), lines
    lines = info_db_lines(Settings.from_env({"AUTOCUTLASS_DB": str(tmp_path / "new.sqlite")}))
    assert "not created yet" in lines[1]


def test_export_of_missing_db_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "missing.sqlite"
    assert main(["db", "export", str(tmp_path / "out.json"), "--db", str(missing)]) == 1
    assert "no tuning database" in capsys.readouterr().err
    assert not missing.exists() and not (tmp_path / "out.json").exists()

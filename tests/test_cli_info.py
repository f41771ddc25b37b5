"""``autocutlass info`` only reads: it opens every database read-only."""

from __future__ import annotations

from pathlib import Path

import pytest

from autocutlass.cli import main


@pytest.fixture(autouse=True)
def no_shipped_dbs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOCUTLASS_SHIPPED_DBS", "off")


def test_info_on_an_empty_file_leaves_it_empty(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    empty = tmp_path / "tuning.sqlite"
    empty.touch()
    monkeypatch.setenv("AUTOCUTLASS_DB", str(empty))
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert f"tuning database: {empty}" in out and "toolchain" in out
    assert empty.stat().st_size == 0 and [p.name for p in tmp_path.iterdir()] == ["tuning.sqlite"]


def test_info_creates_no_database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                  capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    monkeypatch.setenv("AUTOCUTLASS_DB", str(tmp_path / "new.sqlite"))
    assert main(["info"]) == 0
    assert "not created yet" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []


def test_info_names_the_families_switched_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    monkeypatch.setenv("AUTOCUTLASS_DB", str(tmp_path / "new.sqlite"))
    for name in ("AUTOCUTLASS_GROUPED_KERNELS", "AUTOCUTLASS_CONV_DGRAD"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AUTOCUTLASS_CONV_WGRAD", "0")
    monkeypatch.delenv("AUTOCUTLASS_GATED_KERNELS", raising=False)  # on by default
    assert main(["info"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("switched off"))
    assert "hopper_conv_wgrad (AUTOCUTLASS_CONV_WGRAD=unset to use it)" in line
    assert "hopper_conv_dgrad_strided (AUTOCUTLASS_CONV_DGRAD_STRIDED=1 to use it)" in line  # off by default
    for on in ("hopper_gemm_gated", "hopper_conv_dgrad", "hopper_grouped"):  # on by default
        assert f"{on} (" not in line
    monkeypatch.setenv("AUTOCUTLASS_GROUPED_KERNELS", "0")
    monkeypatch.setenv("AUTOCUTLASS_GATED_KERNELS", "0")
    monkeypatch.setenv("AUTOCUTLASS_CONV_DGRAD", "off")
    assert main(["info"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("switched off"))
    assert "hopper_gemm_gated (AUTOCUTLASS_GATED_KERNELS=unset to use it)" in line
    assert "hopper_conv_dgrad (AUTOCUTLASS_CONV_DGRAD=unset to use it)" in line
    assert "hopper_grouped (AUTOCUTLASS_GROUPED_KERNELS=unset to use it)" in line

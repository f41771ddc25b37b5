"""``autocutlass kernels``: the compile command's config filter (GPU-free, compiles nothing)."""

from __future__ import annotations

import argparse

import pytest

from autocutlass.cli import main
from autocutlass.cli.common import UsageError
from autocutlass.cli.kernels import _field_filter, keep_config


def test_field_filter_parses_and_rejects() -> None:
    assert _field_filter("swap_ab=True") == ("swap_ab", frozenset({"true"}))
    assert _field_filter(" tile_n = 16, 32 ") == ("tile_n", frozenset({"16", "32"}))
    for bad in ("swap_ab", "=1", "tile_n="):
        with pytest.raises(argparse.ArgumentTypeError):
            _field_filter(bad)


def test_keep_config_ands_filters_and_names_unknown_fields() -> None:
    cfg = {"tile_n": 16, "swap_ab": True, "schedule": "cooperative"}
    assert keep_config(cfg, [])
    assert keep_config(cfg, [("tile_n", frozenset({"16", "32"})), ("swap_ab", frozenset({"true"}))])
    assert not keep_config(cfg, [("tile_n", frozenset({"16"})), ("schedule", frozenset({"pingpong"}))])
    with pytest.raises(UsageError, match="no field 'tile_x'"):
        keep_config(cfg, [("tile_x", frozenset({"1"}))])


def test_compile_with_a_filter_that_keeps_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    # large problems get swapped configs in the cooperative schedule only, so nothing is compiled
    # (and no DSL is needed)
    assert main(["kernels", "compile", "--shape", "8192x8192x8192", "--filter", "swap_ab=true",
                 "--filter", "schedule=pingpong"]) == 0
    assert "compiled 0/0 hopper_gemm configs" in capsys.readouterr().out


def test_compile_with_an_unknown_filter_field_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["kernels", "compile", "--filter", "tile_x=1"]) == 2
    assert "no field 'tile_x'" in capsys.readouterr().err


def test_representative_problem_output_dtypes() -> None:
    from autocutlass.cli.kernels import representative_problem
    from autocutlass.ops.gemm.problem import DType, Major

    assert representative_problem("e4m3", "nt").d_dtype is DType.BF16
    assert representative_problem("tf32", "nn").d_dtype is DType.FP32
    p = representative_problem("bf16", "tn", "16x6144x4096")
    assert (p.m, p.a_major, p.b_major, p.d_dtype) == (16, Major.COL, Major.ROW, DType.BF16)


# ---- user errors: one line, exit 2 -------------------------------------------------------------
@pytest.mark.parametrize(("argv", "message"), [
    (["--shape", "4096x4096"], "argument --shape: expected MxNxK"),
    (["--shape", "0x64x64"], "argument --shape: expected MxNxK"),
    (["--layout", "xx"], "argument --layout: invalid choice: 'xx'"),
    (["--arch", "sm_80"], "argument --arch: invalid choice: 'sm_80' (choose from 'sm_90a')"),
    (["--workers", "0"], "argument --workers: must be a positive integer"),
])  # fmt: skip
def test_bad_arguments_exit_2_on_one_line(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["kernels", "compile", *argv])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


def test_fp8_in_a_layout_it_is_not_served_in_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["kernels", "compile", "--dtype", "e4m3", "--layout", "nn"]) == 2
    captured = capsys.readouterr()
    assert "compiled" not in captured.out and captured.err.count("\n") == 1
    assert "does not serve e4m3 --layout nn" in captured.err and "use --layout nt" in captured.err


def test_an_unknown_family_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["kernels", "compile", "--family", "nope"]) == 2
    assert "no such kernel family; known: hopper_gemm" in capsys.readouterr().err


# ---- progress ----------------------------------------------------------------------------------
def test_compile_reports_progress_and_failures(monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    from autocutlass.errors import KernelCompileError
    from autocutlass.kernels import get_family

    calls: list[object] = []

    def fake_compile(cfg: object, problem: object) -> None:
        calls.append(cfg)
        if len(calls) % 7 == 0:
            raise KernelCompileError("ptxas: too many registers")

    monkeypatch.delenv("CUTE_DSL_ARCH", raising=False)  # the command sets it; restored afterwards
    monkeypatch.setattr(get_family("hopper_gemm"), "compile", fake_compile)
    assert main(["kernels", "compile", "--limit", "25", "--shape", "4096x4096x4096"]) == 1
    out, err = capsys.readouterr()
    assert len(calls) == 25 and out.count("FAILED ") == 3 and "compiled 22/25 hopper_gemm configs" in out
    lines = err.strip().splitlines()
    assert [line.split(": ", 1)[1].split(",")[0] for line in lines] == ["10/25 configs", "20/25 configs", "25/25 configs"]
    assert all(line.startswith("compile hopper_gemm bf16 nt 4096x4096x4096: ") for line in lines)
    assert "1 failed" in lines[0] and "2 failed" in lines[1] and "3 failed" in lines[2] and " left" in lines[0]
    assert "/s" in lines[2] or " s per config" in lines[2]

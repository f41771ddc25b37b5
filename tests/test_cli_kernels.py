"""``autocutlass kernels``: the compile command's config filter (GPU-free, compiles nothing)."""

from __future__ import annotations

import argparse

import pytest

from autocutlass.cli import main
from autocutlass.cli_kernels import _field_filter, keep_config


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
    with pytest.raises(ValueError, match="no field 'tile_x'"):
        keep_config(cfg, [("tile_x", frozenset({"1"}))])


def test_compile_with_a_filter_that_keeps_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    # large problems get no swapped configs, so nothing is compiled (and no DSL is needed)
    assert main(["kernels", "compile", "--shape", "8192x8192x8192", "--filter", "swap_ab=true"]) == 0
    assert "compiled 0/0 hopper_gemm configs" in capsys.readouterr().out


def test_compile_with_an_unknown_filter_field_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["kernels", "compile", "--filter", "tile_x=1"]) == 2
    assert "no field 'tile_x'" in capsys.readouterr().err


def test_representative_problem_output_dtypes() -> None:
    from autocutlass.cli_kernels import representative_problem
    from autocutlass.ops.gemm.problem import DType, Major

    assert representative_problem("e4m3", "nt").d_dtype is DType.BF16
    assert representative_problem("tf32", "nn").d_dtype is DType.FP32
    p = representative_problem("bf16", "tn", "16x6144x4096")
    assert (p.m, p.a_major, p.b_major, p.d_dtype) == (16, Major.COL, Major.ROW, DType.BF16)

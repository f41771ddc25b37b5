"""``autocutlass bench`` on conv2d cases, without a GPU: cases and operands, the rows, ratios to
both cuDNN modes, geometric means over served cases and with fallbacks counted at 1.0, the table,
footer and plot of conv-only and mixed documents, the measuring steps on CPU tensors (every call
falls back to torch there) with a fake timer, and the command's exit codes."""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path
from typing import Any

import pytest
import torch

import autocutlass
from autocutlass import cli
from autocutlass.cli.bench import measure
from autocutlass.cli.bench.cases import (
    BenchCase,
    ConvOperandSpec,
    OperandSpec,
    Roofs,
    bench_suite,
    conv_operand_spec,
    conv_skip_reason,
    input_dtype,
    intensity,
)
from autocutlass.cli.bench.plot import plot_report
from autocutlass.cli.bench.report import (
    OP_BASELINES,
    Measured,
    assemble_report,
    case_row,
    footer_lines,
    geomean_line,
    geomean_title,
    progress_line,
    table,
)
from autocutlass.cli.shapes import Skipped
from autocutlass.device import gpu_available
from autocutlass.ops.conv.evaluation import make_inputs
from autocutlass.ops.conv.problem import ConvDirection, ConvProblem
from autocutlass.ops.types import DType, Epilogue
from autocutlass.search.timing import Timing

REPO = Path(__file__).resolve().parents[1]
ROOFS = Roofs(bandwidth_tbps=4.0, bandwidth_source="given", tflops_16bit=800.0, tflops_tf32=400.0)
DELTA = {"memo_hits": 0, "memo_misses": 1, "db_lookups": 1, "db_hits": 1, "misses_recorded": 0, "tunes": 0,
         "compiles": 1, "fallbacks": 0}  # fmt: skip
CONV = {"N": 8, "C": 64, "H": 14, "W": 14, "K": 128, "R": 3, "S": 3, "stride": [1, 1], "pad": [1, 1],
        "dilation": [1, 1], "dtype": "bf16", "directions": ["fprop", "dgrad", "wgrad"]}  # fmt: skip
MIXED = {"cases": [
    {"name": "sd", **CONV},
    # 37 channels under a 7x7 filter: unaligned, and too wide a row to unfold (no family serves it)
    {"name": "stem", **CONV, "C": 37, "R": 7, "S": 7, "stride": [2, 2], "pad": [3, 3], "directions": ["fprop"]},
    {"name": "tf32", **CONV, "dtype": "fp32", "directions": ["fprop", "wgrad"]},
    {"name": "gemm", "M": 256, "N": 512, "K": 128, "dtype": "bf16", "layout": "nt"},
]}  # fmt: skip


@pytest.fixture
def shapes(tmp_path: Path) -> Path:
    f = tmp_path / "mixed.json"
    f.write_text(json.dumps(MIXED))
    return f


def cases(shapes: Path) -> dict[str, BenchCase]:
    return {c.name: c for c in bench_suite(shapes).cases}


# ---- cases and operands ------------------------------------------------------------------------
def test_conv_cases_and_their_operands(shapes: Path) -> None:
    suite = bench_suite(shapes)
    by = {c.name: c for c in suite.cases}
    assert list(by) == ["sd", "sd/dgrad", "sd/wgrad", "stem", "tf32", "tf32/wgrad", "gemm"]
    assert all(c.skip is None for c in suite.cases) and suite.skipped == []
    sd, stem, tf = by["sd"].spec, by["stem"].spec, by["tf32"].spec
    assert isinstance(sd, ConvOperandSpec) and isinstance(by["gemm"].spec, OperandSpec)
    assert (sd.x_shape, sd.w_shape, sd.out_shape) == ((8, 64, 14, 14), (128, 64, 3, 3), (8, 128, 14, 14))
    assert (sd.stride, sd.padding, sd.dilation, sd.groups, sd.dtype, sd.out_dtype) == (
        (1, 1), (1, 1), (1, 1), 1, "bfloat16", "bfloat16")  # fmt: skip
    assert stem.out_shape == (8, 128, 7, 7) and stem.stride == (2, 2) and not stem.tf32
    assert tf.tf32 and tf.dtype == tf.out_dtype == "float32"
    assert by["sd"].op == "conv2d" and by["gemm"].op == "gemm"
    d = sd.as_dict()
    assert d["op"] == "conv2d" and d["x_shape"] == [8, 64, 14, 14] and d["memory_format"] == "channels_last"
    assert json.loads(json.dumps(d)) == d
    assert sd.describe() == ("x(8,64,14,14) * w(128,64,3,3) stride (1,1) pad (1,1) dil (1,1) -> bfloat16(8,128,14,14) "
                             "channels_last")  # fmt: skip
    dg, wg = by["sd/dgrad"].spec, by["sd/wgrad"].spec
    assert isinstance(dg, ConvOperandSpec) and isinstance(wg, ConvOperandSpec)
    assert (dg.direction, dg.out_shape, dg.y_shape) == ("dgrad", (8, 64, 14, 14), (8, 128, 14, 14))
    assert (wg.direction, wg.out_shape, wg.y_shape) == ("wgrad", (128, 64, 3, 3), (8, 128, 14, 14))
    assert dg.as_dict()["direction"] == "dgrad" and "direction" not in d
    assert wg.describe().startswith("wgrad: dy(8,128,14,14) * x(8,64,14,14) ") and "-> dw bfloat16(128,64,3,3)" in wg.describe()


@pytest.mark.parametrize("name", ["sd", "stem", "tf32", "sd/dgrad", "tf32/wgrad"])
def test_conv_operand_spec_matches_make_inputs(shapes: Path, name: str) -> None:
    """The first-call child builds operands from the spec; the bench builds them with make_inputs."""
    case = cases(shapes)[name]
    x = make_inputs(case.problem, device="cpu")
    spec = case.spec
    assert tuple(x.x.shape) == spec.x_shape and tuple(x.w.shape) == spec.w_shape
    assert tuple(x.output.shape) == spec.out_shape and tuple(x.y.shape) == (spec.y_shape or spec.out_shape)
    assert x.x.is_contiguous(memory_format=torch.channels_last) and x.w.is_contiguous(memory_format=torch.channels_last)
    assert x.output.dtype == getattr(torch, spec.out_dtype) and bool(x.output.isnan().all())
    if spec.direction != "fprop":
        return
    assert x.x.dtype == getattr(torch, spec.dtype) and x.y.dtype == getattr(torch, spec.out_dtype)
    p = case.problem
    ref = torch.nn.functional.conv2d(x.x.float(), x.w.float(), None, spec.stride, spec.padding, spec.dilation)
    assert tuple(ref.shape) == spec.out_shape == (p.n, p.k, p.p, p.q)


def test_conv_skip_reasons() -> None:
    p = ConvProblem(ConvDirection.FPROP, 2, 8, 8, 16, 16, 3, 3, pad_h=1, pad_w=1)
    assert conv_skip_reason(p) is None
    assert conv_skip_reason(ConvProblem(ConvDirection.WGRAD, 2, 8, 8, 16, 16, 3, 3)) is None  # measured, any direction
    assert conv_skip_reason(ConvProblem(ConvDirection.FPROP, 2, 8, 8, 16, 16, 1, 1, x_dtype=DType.E4M3)) == (
        "F.conv2d has no e4m3 convolution to compare with")  # fmt: skip
    epi = ConvProblem(ConvDirection.FPROP, 2, 8, 8, 16, 16, 1, 1, epilogue=Epilogue(bias=True))
    assert "epilogue" in (conv_skip_reason(epi) or "")
    assert BenchCase("e", epi, conv_operand_spec(epi)).skip == conv_skip_reason(epi)


def test_conv_roofs(shapes: Path) -> None:
    by = cases(shapes)
    sd, tf = by["sd"].problem, by["tf32"].problem
    assert input_dtype(sd) is DType.BF16 and input_dtype(tf) is DType.TF32
    assert ROOFS.compute_tflops(sd) == 800.0 and ROOFS.compute_tflops(tf) == 400.0
    assert intensity(sd) == sd.flops / sd.min_bytes and ROOFS.ridge(sd) == 200.0
    assert ROOFS.attainable_tflops(sd) == min(800.0, 4.0 * intensity(sd))


# ---- rows, ratios and geometric means ----------------------------------------------------------
def _rounds(ours: list[float], bench: list[float], default: list[float]) -> dict[str, list[float]]:
    return {"autocutlass": ours, "cudnn_benchmark": bench, "cudnn_default": default}


def synthetic_rows(shapes: Path) -> list[dict[str, Any]]:
    by = cases(shapes)
    extra = ConvProblem(ConvDirection.FPROP, 4, 32, 32, 64, 64, 3, 3, pad_h=1, pad_w=1)
    wrong = BenchCase("wrong", extra, conv_operand_spec(extra))
    return [
        case_row(by["sd"], ROOFS, Measured("db", DELTA, 0.05, True, output_poisoned=True,
                                           rounds_ms=_rounds([1.0, 1.0, 1.0], [1.2, 1.1, 1.3], [1.5, 1.4, 1.6]))),
        case_row(by["stem"], ROOFS, Measured("FALLBACK", {**DELTA, "fallbacks": 1}, 0.01, True, output_poisoned=False,
                                             fallback_reason="no kernel family serves it: C=3",
                                             rounds_ms=_rounds([2.0, 2.0, 2.0], [2.0, 2.1, 1.9], [2.2, 2.2, 2.2]))),
        case_row(by["tf32"], ROOFS, Measured("tuned", {**DELTA, "tunes": 1}, 30.0, True,
                                             rounds_ms=_rounds([1.0, 1.0, 1.0], [0.9, 0.9, 0.9], [1.0, 1.1, 1.0]))),
        case_row(wrong, ROOFS, Measured("default", DELTA, 1.0, False, why="12 output elements are NaN/Inf")),
        case_row(by["gemm"], ROOFS, Measured("db", DELTA, 0.02, True, rounds_ms={
            "autocutlass": [0.5, 0.5, 0.5], "torch": [0.6, 0.6, 0.6]})),
    ]  # fmt: skip


SKIPPED = [Skipped("sd", "dgrad", "no conv2d dgrad evaluation"), Skipped("sd", "wgrad", "no conv2d wgrad evaluation"),
           Skipped("tf32", "wgrad", "no conv2d wgrad evaluation")]  # fmt: skip
"""Directions a shapes file might list without being measured (none since dgrad and wgrad are)."""


def synthetic_doc(shapes: Path, *, gemm: bool = True) -> dict[str, Any]:
    rows = [r for r in synthetic_rows(shapes) if gemm or r["name"] != "gemm"]
    skipped = SKIPPED
    meta = {"gpu": "NVIDIA H200", "date": "2026-11-24", "versions": {"torch": "2.13.0"}, "settings": {"rounds": 3}}
    return assemble_report(meta=meta, roofs=ROOFS, rows=rows, host_overhead=None, first_call=None, skipped=skipped)


def test_conv_rows_carry_both_cudnn_ratios(shapes: Path) -> None:
    rows = {r["name"]: r for r in synthetic_rows(shapes)}
    sd, stem, tf, wrong = rows["sd"], rows["stem"], rows["tf32"], rows["wrong"]
    assert sd["status"] == "ok" and sd["ratio_vs_cudnn_benchmark"] == pytest.approx(1.2)
    assert sd["ratio_vs_cudnn_default"] == pytest.approx(1.5) and "ratio_vs_torch" not in sd
    assert sd["ms"] == {"autocutlass": 1.0, "cudnn_benchmark": 1.2, "cudnn_default": 1.5}
    assert sd["tflops"]["autocutlass"] == pytest.approx(cases(shapes)["sd"].problem.flops / 1e-3 / 1e12)
    assert sd["operands"]["op"] == "conv2d" and sd["problem_dict"]["op"] == "conv2d" and sd["output_poisoned"]
    assert stem["status"] == "fallback" and stem["fallback_reason"] == "no kernel family serves it: C=3"
    assert "torch ran it" in stem["note"] and "counted at 1.0" in stem["note"] and stem["note"].endswith("C=3")
    assert stem["output_poisoned"] is False and stem["ratio_vs_cudnn_benchmark"] == pytest.approx(1.0)
    assert tf["compute_roof_tflops"] == 400.0 and tf["ratio_vs_cudnn_benchmark"] == pytest.approx(0.9)
    assert wrong["status"] == "FAILED" and wrong["ms"] == {} and wrong["ratio_vs_cudnn_default"] is None
    assert "fallback_reason" not in sd and "output_poisoned" not in rows["gemm"]
    skipped = case_row(BenchCase("w", fp8 := ConvProblem(ConvDirection.WGRAD, 2, 8, 8, 16, 16, 3, 3, x_dtype=DType.E4M3),
                                 conv_operand_spec(fp8)), ROOFS, None)  # fmt: skip
    assert skipped["status"] == "skipped" and "e4m3" in skipped["note"]
    assert skipped["ratio_vs_cudnn_benchmark"] is None and skipped["ratio_vs_cudnn_default"] is None


def test_geomeans_over_served_cases_and_with_fallbacks_at_one(shapes: Path) -> None:
    g = synthetic_doc(shapes)["geomean"]
    served_bench, served_default = [1.2, 0.9], [1.5, 1.0]
    assert g["vs_cudnn_benchmark"] == pytest.approx(math.prod(served_bench) ** 0.5)
    assert g["vs_cudnn_default"] == pytest.approx(math.prod(served_default) ** 0.5)
    assert g["vs_cudnn_benchmark_cases"] == g["vs_cudnn_default_cases"] == 2
    assert g["vs_cudnn_benchmark_with_fallbacks"] == pytest.approx(math.prod([*served_bench, 1.0]) ** (1 / 3))
    assert g["vs_cudnn_default_with_fallbacks"] == pytest.approx(math.prod([*served_default, 1.0]) ** (1 / 3))
    assert g["vs_cudnn_benchmark_with_fallbacks_cases"] == 3  # the stem at 1.0 (its measured 1.0x is not used)
    assert g["fallbacks"] == {"stem": "no kernel family serves it: C=3"}
    assert g["excluded"] == {"stem": "fallback", "wrong": "FAILED"}
    # the GEMM case has its own geomean, against torch.matmul
    assert g["vs_torch"] == pytest.approx(1.2) and g["vs_torch_cases"] == 1 and g["vs_compile"] is None
    assert g["vs_torch_with_fallbacks"] == pytest.approx(1.2) and g["vs_torch_with_fallbacks_cases"] == 1


def test_a_fallback_counts_at_one_not_at_its_measured_ratio(shapes: Path) -> None:
    rows = synthetic_rows(shapes)
    rows[1]["ratio_vs_cudnn_benchmark"] = 0.5  # noise on torch against itself must not move the geomean
    doc = assemble_report(meta={}, roofs=ROOFS, rows=rows, host_overhead=None, first_call=None)
    assert doc["geomean"]["vs_cudnn_benchmark_with_fallbacks"] == pytest.approx((1.2 * 0.9 * 1.0) ** (1 / 3))


def test_documents_say_what_was_compared(shapes: Path) -> None:
    conv = synthetic_doc(shapes, gemm=False)
    assert conv["what"] == ("autocutlass.conv2d (and its dgrad / wgrad) vs F.conv2d (and aten.convolution_backward) "
                            "(cuDNN, torch.backends.cudnn.benchmark True and False), side by side in one process")  # fmt: skip
    assert "autocutlass.conv2d(x, w, None, stride, padding, dilation, groups)" in conv["protocol"]
    assert "each cuDNN mode called and timed on a thread of its own" in conv["protocol"]
    assert "matmul(a, b, out=d)" not in conv["protocol"] and "cudnn.allow_tf32" in conv["tf32"]
    assert conv["skipped_directions"][0] == {"name": "sd", "direction": "dgrad", "reason": "no conv2d dgrad evaluation"}
    assert "vs_torch" not in conv["geomean"]
    mixed = synthetic_doc(shapes)
    assert mixed["what"].startswith("autocutlass.matmul vs torch.matmul (cuBLAS) [and torch.compile]; "
                                    "autocutlass.conv2d")  # fmt: skip
    assert "matmul(a, b, out=d)" in mixed["protocol"] and "F.conv2d with the same arguments" in mixed["protocol"]
    gemm_only = assemble_report(meta={}, roofs=ROOFS, rows=[synthetic_rows(shapes)[-1]], host_overhead=None,
                                first_call=None)  # fmt: skip
    assert gemm_only["what"] == ("autocutlass.matmul vs torch.matmul (cuBLAS) [and torch.compile], side by side in "
                                 "one process")  # fmt: skip
    assert "conv2d" not in gemm_only["protocol"] and "skipped_directions" not in gemm_only
    assert json.loads(json.dumps(mixed, allow_nan=False)) == mixed


# ---- table, footer, progress -------------------------------------------------------------------
def test_conv_table_has_both_cudnn_columns(shapes: Path) -> None:
    headers, body = table(synthetic_doc(shapes, gemm=False))
    assert headers == ["case", "problem", "served by", "bound", "autocutlass", "cuDNN bench", "x cuDNN bench",
                       "cuDNN default", "x cuDNN default", "% roof", "1st call s"]  # fmt: skip
    col = {h: i for i, h in enumerate(headers)}
    rows = {r[0]: r for r in body}
    assert rows["sd"][col["x cuDNN bench"]] == "1.200" and rows["sd"][col["x cuDNN default"]] == "1.500"
    assert rows["stem"][col["x cuDNN bench"]] == "1.000 FALLBACK!" and rows["stem"][col["x cuDNN default"]] == "1.100"
    assert rows["wrong"][col["x cuDNN bench"]] == "FAILED" and rows["wrong"][col["x cuDNN default"]] == "-"
    assert rows["sd"][col["autocutlass"]].endswith("TF/s") and rows["sd"][col["served by"]] == "db"


def test_mixed_table_puts_each_status_under_its_ops_baseline(shapes: Path) -> None:
    headers, body = table(synthetic_doc(shapes))
    assert headers[5:11] == ["torch", "x torch", "cuDNN bench", "x cuDNN bench", "cuDNN default", "x cuDNN default"]
    col = {h: i for i, h in enumerate(headers)}
    rows = {r[0]: r for r in body}
    assert rows["gemm"][col["x torch"]] == "1.200" and rows["gemm"][col["x cuDNN bench"]] == "-"
    assert rows["wrong"][col["x torch"]] == "-" and rows["wrong"][col["x cuDNN bench"]] == "FAILED"
    assert "compile" not in headers  # optional, and not measured


def test_footer_lists_fallbacks_with_reasons_skipped_directions_and_the_geomeans(shapes: Path) -> None:
    doc = synthetic_doc(shapes)
    lines = footer_lines(doc)
    assert any(line.startswith("stem: fallback: ") and line.endswith("C=3") for line in lines)
    assert any(line.startswith("wrong: FAILED: wrong result: 12 output elements") for line in lines)
    assert "not measured: dgrad of 1 case(s) (sd): no conv2d dgrad evaluation" in lines
    assert "not measured: wgrad of 2 case(s) (sd, tf32): no conv2d wgrad evaluation" in lines
    last = lines[-1]
    assert last == geomean_line(doc)
    b, d = (1.2 * 0.9) ** 0.5, (1.5 * 1.0) ** 0.5
    bf, df = (1.2 * 0.9) ** (1 / 3), (1.5 * 1.0) ** (1 / 3)
    assert last == (f"geomean x1.200 vs torch.matmul over 1 cases; geomean x{b:.3f} vs cuDNN benchmark over 2 "
                    f"cases; x{d:.3f} vs cuDNN default over 2; with 1 fallback(s) counted at 1.0: x{bf:.3f} vs "
                    f"cuDNN benchmark over 3, x{df:.3f} vs cuDNN default over 3; excluded: stem (fallback), "
                    f"wrong (FAILED)")  # fmt: skip
    assert geomean_title(doc) == (f"geomean x1.200 vs torch.matmul over 1 cases, x{b:.3f} vs cuDNN benchmark "
                                  f"(x{bf:.3f} with fallbacks at 1.0), x{d:.3f} vs cuDNN default")  # fmt: skip


def test_geomean_line_without_a_served_conv_case(shapes: Path) -> None:
    rows = [r for r in synthetic_rows(shapes) if r["name"] in ("stem", "wrong")]
    doc = assemble_report(meta={}, roofs=ROOFS, rows=rows, host_overhead=None, first_call=None)
    assert geomean_line(doc) == ("geomean vs cuDNN benchmark: no served case; with 1 fallback(s) counted at 1.0: "
                                 "x1.000 vs cuDNN benchmark over 1, x1.000 vs cuDNN default over 1; excluded: "
                                 "stem (fallback), wrong (FAILED)")  # fmt: skip


def test_conv_progress_line(shapes: Path) -> None:
    rows = {r["name"]: r for r in synthetic_rows(shapes)}
    line = progress_line(1, 5, rows["sd"])
    assert line.startswith("[1/5] sd: ") and " vs cuDNN bench " in line and ": x1.200, vs cuDNN default " in line
    assert line.endswith(": x1.500 [db, first call 0.05 s]")
    assert "FALLBACK [FALLBACK, first call" in progress_line(2, 5, rows["stem"])
    assert progress_line(5, 5, rows["gemm"]).count(" vs ") == 1  # torch only: compile is optional


def test_plot_of_conv_and_mixed_documents(shapes: Path, tmp_path: Path) -> None:
    for gemm in (False, True):
        doc = json.loads(json.dumps(synthetic_doc(shapes, gemm=gemm)))  # the plot reads only what the JSON holds
        out = tmp_path / f"plot-{gemm}" / "bench.png"
        plot_report(doc, out)
        assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000


def test_every_op_has_a_primary_baseline_that_is_always_measured() -> None:
    assert set(OP_BASELINES) == {"gemm", "conv2d", "grouped_mm"}
    assert all(not bases[0].optional for bases in OP_BASELINES.values())
    assert [b.name for b in OP_BASELINES["conv2d"]] == ["cudnn_benchmark", "cudnn_default"]


# ---- the measuring steps, on CPU ---------------------------------------------------------------
@pytest.fixture
def fake_timer(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, bool, bool]]:
    """``time_callable`` replaced: it runs the callable once and returns 1.0, 1.25, 2.0 ms for the
    first, second, third callable it meets; per timing it records (which callable, whether it
    called autocutlass, torch.backends.cudnn.benchmark after the call)."""
    from autocutlass.search import timing

    seen: list[Any] = []
    timed: list[tuple[int, bool, bool]] = []
    marked: list[bool] = []
    real_conv2d, real_matmul = autocutlass.conv2d, autocutlass.matmul

    def conv2d(*args: Any, **kw: Any) -> Any:
        marked.append(True)
        return real_conv2d(*args, **kw)

    def matmul(*args: Any, **kw: Any) -> Any:
        marked.append(True)
        return real_matmul(*args, **kw)

    def time_callable(fn: Any, *, flush_bytes: int, flush_kind: str = "write", **_: Any) -> Timing:
        marked.clear()
        fn()
        if fn not in seen:
            seen.append(fn)
        i = seen.index(fn)
        timed.append((i, bool(marked), torch.backends.cudnn.benchmark))
        ms = (1.0, 1.25, 2.0)[i]
        return Timing(ms, ms, ms, 10)

    monkeypatch.setattr(timing, "time_callable", time_callable)
    monkeypatch.setattr(autocutlass, "conv2d", conv2d)
    monkeypatch.setattr(autocutlass, "matmul", matmul)
    return timed


def test_measure_a_conv_case_on_cpu(shapes: Path, fake_timer: list[tuple[int, bool, bool]]) -> None:
    case = cases(shapes)["sd"]
    flag = torch.backends.cudnn.benchmark
    m = measure._measure_case(case, ("torch",), 3, 0, "tune", device="cpu")
    assert torch.backends.cudnn.benchmark == flag  # the caller's cuDNN flags are restored
    assert m.verified and m.why is None and m.path == "FALLBACK" and m.error is None
    assert m.fallback_reason is not None and "served by torch" in m.fallback_reason and "cpu" in m.fallback_reason
    # interleaved rounds, the order reversed every other round: autocutlass (cuDNN flag off, as a
    # fallback runs), cuDNN with benchmark on, cuDNN with it off
    a, b, d = (0, True, False), (1, False, True), (2, False, False)
    assert fake_timer == [a, b, d, d, b, a, a, b, d]
    assert m.rounds_ms == {"autocutlass": [1.0] * 3, "cudnn_benchmark": [1.25] * 3, "cudnn_default": [2.0] * 3}
    assert isinstance(m.output_poisoned, bool) and m.compile_first_call_s is None
    row = case_row(case, ROOFS, m)
    assert row["status"] == "fallback"
    assert row["ratio_vs_cudnn_benchmark"] == 1.25 and row["ratio_vs_cudnn_default"] == 2.0


@pytest.mark.parametrize("name", ["sd/dgrad", "sd/wgrad", "tf32/wgrad"])
def test_measure_a_backward_case_on_cpu(shapes: Path, fake_timer: list[tuple[int, bool, bool]], name: str) -> None:
    """dgrad / wgrad: the dispatcher's conv2d_dgrad / conv2d_wgrad against aten.convolution_backward,
    verified against the float32 gradient, then the same interleaved rounds."""
    case = cases(shapes)[name]
    m = measure._measure_case(case, ("torch",), 3, 0, "tune", device="cpu")
    assert m.verified and m.why is None and m.path == "FALLBACK" and m.error is None and m.fallback_reason, m
    assert [(i, bench) for i, _, bench in fake_timer] == [(0, False), (1, True), (2, False), (2, False), (1, True),
                                                          (0, False), (0, False), (1, True), (2, False)]  # fmt: skip
    assert m.rounds_ms == {"autocutlass": [1.0] * 3, "cudnn_benchmark": [1.25] * 3, "cudnn_default": [2.0] * 3}
    assert case_row(case, ROOFS, m)["operands"]["direction"] == case.problem.direction.value


@pytest.mark.parametrize("name", ["sd", "sd/dgrad"])
def test_each_cudnn_mode_is_timed_with_a_plan_cache_of_its_own(shapes: Path, monkeypatch: pytest.MonkeyPatch,
                                                               name: str) -> None:  # fmt: skip
    """PyTorch keeps cuDNN's plan per thread, keyed without ``cudnn.benchmark`` (Conv_v8.cpp's
    thread_local benchmark_cache): a thread's first call of a layer fixes the plan every later call
    on that thread runs, whatever the flag. The fake cuDNN here does the same (benchmark mode's plan
    1.0 ms, the heuristic's 1.6 ms), and a call of ours (a fallback, flag off) fixes its thread's plan
    too. Timed on one thread, the default mode would read the benchmark's 1.0 ms or the benchmark
    mode the heuristic's 1.6 ms."""
    from autocutlass.search import timing

    plans = threading.local()
    threads: dict[str, set[int]] = {}
    names: dict[int, str] = {}
    real_sides = measure._ConvSides.sides

    def sides(self: Any, vs: Any) -> Any:
        fns, compile_s = real_sides(self, vs)
        names.update({id(fn): side for side, fn in fns.items()})
        return fns, compile_s

    def time_callable(fn: Any, *, flush_bytes: int, flush_kind: str = "write", **_: Any) -> Timing:
        fn()
        flag = torch.backends.cudnn.benchmark  # as the side set it for its call
        side = names[id(fn)]
        plan = getattr(plans, "plan", None)
        if plan is None:  # this thread's first call fixes its plan (ours: a fallback, flag off)
            plans.plan = plan = "find" if flag else "heuristic"
        threads.setdefault(side, set()).add(threading.get_ident())
        ms = 0.8 if side == "autocutlass" else {"find": 1.0, "heuristic": 1.6}[plan]
        return Timing(ms, ms, ms, 10)

    monkeypatch.setattr(timing, "time_callable", time_callable)
    monkeypatch.setattr(measure._ConvSides, "sides", sides)
    m = measure._measure_case(cases(shapes)[name], ("torch",), 3, 0, "tune", device="cpu")
    assert m.verified, m
    assert m.rounds_ms == {"autocutlass": [0.8] * 3, "cudnn_benchmark": [1.0] * 3, "cudnn_default": [1.6] * 3}
    main = threading.main_thread().ident
    assert threads["autocutlass"] == {main}
    (bench,), (default,) = threads["cudnn_benchmark"], threads["cudnn_default"]
    assert len({main, bench, default}) == 3
    assert not [t for t in threading.enumerate() if t.name.startswith("cudnn-")]  # closed with the case


def test_own_thread_runs_its_callable_there_and_passes_exceptions_back() -> None:
    seen: list[int] = []

    def fn() -> int:
        seen.append(threading.get_ident())
        return len(seen)

    side = measure.OwnThread(fn, "test-side", "cpu")
    try:
        assert side() == 1 and side.on_thread(side) == 2  # called on its thread: at once, no deadlock
        assert seen[0] == seen[1] == side.ident != threading.get_ident()

        def boom() -> None:
            raise ValueError("raised on the side's thread")

        with pytest.raises(ValueError, match="side's thread"):
            side.on_thread(boom)
    finally:
        side.close()
    assert not [t for t in threading.enumerate() if t.name.startswith("test-side")]


def test_measure_fails_a_wrong_conv_result(shapes: Path, fake_timer: list[tuple[int, bool, bool]],
                                           monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    real = autocutlass.conv2d
    monkeypatch.setattr(autocutlass, "conv2d", lambda *a, **k: real(*a, **k).mul_(1.5))
    m = measure._measure_case(cases(shapes)["stem"], ("torch",), 3, 0, "cached", device="cpu")
    assert not m.verified and "tolerance" in (m.why or "") and m.rounds_ms == {} and fake_timer == []
    assert case_row(cases(shapes)["stem"], ROOFS, m)["status"] == "FAILED"


def test_measure_checks_a_second_call_into_fresh_poison(shapes: Path, fake_timer: list[tuple[int, bool, bool]],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """A conv2d whose second call leaves its output unwritten is caught before timing."""
    real, calls = autocutlass.conv2d, []

    def first_only(x: Any, w: Any, *args: Any) -> Any:
        calls.append(1)
        y = real(x, w, *args)
        return y if len(calls) == 1 else torch.full_like(y, math.nan)

    monkeypatch.setattr(autocutlass, "conv2d", first_only)
    m = measure._measure_case(cases(shapes)["sd"], ("torch",), 3, 0, "cached", device="cpu")
    assert len(calls) == 2 and not m.verified and "NaN" in (m.why or "")


def test_measure_a_gemm_case_through_the_same_steps(shapes: Path, fake_timer: list[tuple[int, bool, bool]]) -> None:
    m = measure._measure_case(cases(shapes)["gemm"], ("torch",), 2, 0, "cached", device="cpu")
    assert m.verified and m.path == "FALLBACK" and [(i, ours) for i, ours, _ in fake_timer] == [
        (0, True), (1, False), (1, False), (0, True)]  # fmt: skip
    assert m.rounds_ms == {"autocutlass": [1.0, 1.0], "torch": [1.25, 1.25]} and m.output_poisoned is None


def test_the_fallback_reason_when_dispatch_logged_nothing(shapes: Path) -> None:
    by = cases(shapes)
    assert measure._fallback_reason(by["sd"], "torch (policy off)", []) == "policy 'off'"
    assert measure._fallback_reason(by["sd"], "FALLBACK", ["a", "b"]) == "a | b"
    stem = measure._fallback_reason(by["stem"], "FALLBACK", [])
    assert stem.startswith("no kernel family serves it: hopper_gemm: ") and "hopper_conv: " in stem
    assert "earlier case" in measure._fallback_reason(by["sd"], "FALLBACK", [])


# ---- the command -------------------------------------------------------------------------------
@pytest.mark.skipif(gpu_available(), reason="checks the message on a machine without CUDA")
@pytest.mark.parametrize("suite", [REPO / "benchmarks" / "shapes-conv.json", None])
def test_no_gpu_exits_2(shapes: Path, suite: Path | None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = cli.main(["bench", "--shapes", str(suite or shapes), "--out", str(tmp_path / "o")])
    assert rc == 2 and "no CUDA GPU" in capsys.readouterr().err and not (tmp_path / "o").exists()


def test_a_bad_conv_case_exits_1_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "bad.json"
    f.write_text(json.dumps({"cases": [{"name": "x", **CONV, "stride": [0, 1]}]}))
    assert cli.main(["bench", "--shapes", str(f)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("autocutlass bench: error: shapes file ") and "case 0 ('x'): field 'stride'" in err
    assert err.count("\n") == 1


def test_skipped_is_plain_data() -> None:
    s = Skipped("a", "dgrad", "why")
    doc = assemble_report(meta={}, roofs=ROOFS, rows=[], host_overhead=None, first_call=None, skipped=[s])
    assert doc["skipped_directions"] == [{"name": "a", "direction": "dgrad", "reason": "why"}]


# ---- on a GPU ----------------------------------------------------------------------------------
@pytest.mark.gpu
def test_bench_a_tiny_conv_suite_on_the_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 3x3 layer (fprop hopper_conv, dgrad hopper_conv_dgrad, wgrad hopper_conv_wgrad: tuned-only,
    but 'heuristic' runs a tuned-only family's default config too), a pointwise one (all three
    directions on hopper_gemm) and the 3-channel stride-2 stem (fprop on hopper_conv_unfold, wgrad on
    hopper_conv_wgrad_unfold; its strided dgrad falls back), under policy 'heuristic' (no database,
    default configs)."""
    monkeypatch.setenv("AUTOCUTLASS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("AUTOCUTLASS_SHIPPED_DBS", "off")
    monkeypatch.setenv("AUTOCUTLASS_DB", str(tmp_path / "db.sqlite"))
    monkeypatch.delenv("AUTOCUTLASS_STRICT", raising=False)
    monkeypatch.delenv("AUTOCUTLASS_CONV_WGRAD", raising=False)
    monkeypatch.setenv("AUTOCUTLASS_CONV_DGRAD", "1")  # the default, set against a caller environment
    autocutlass.reset()
    f = tmp_path / "conv.json"
    f.write_text(json.dumps({"cases": [
        {"name": "c3x3", **CONV}, {"name": "c1x1", **CONV, "R": 1, "S": 1, "pad": [0, 0]},
        {"name": "stem", **CONV, "C": 3, "R": 7, "S": 7, "stride": [2, 2], "pad": [3, 3]},
    ]}))  # fmt: skip
    out = tmp_path / "out"
    try:
        rc = cli.main(["bench", "--shapes", str(f), "--policy", "heuristic", "--no-first-call", "--rounds", "2",
                       "--out", str(out)])  # fmt: skip
    finally:
        autocutlass.reset()
    assert rc == 0
    doc = json.loads((out / "bench.json").read_text())
    rows = {r["name"]: r for r in doc["cases"]}
    served = ("c3x3", "c3x3/dgrad", "c3x3/wgrad", "c1x1", "c1x1/dgrad", "c1x1/wgrad", "stem", "stem/wgrad")
    for name in served:
        r = rows[name]
        assert r["status"] == "ok" and r["verified"] and r["path"] == "heuristic" and r["output_poisoned"], r
        assert len(r["rounds_ms"]["cudnn_benchmark"]) == len(r["rounds_ms"]["cudnn_default"]) == 2
        assert r["ratio_vs_cudnn_benchmark"] > 0 and r["ratio_vs_cudnn_default"] > 0
    fallbacks = ("stem/dgrad",)
    for name in fallbacks:
        assert rows[name]["status"] == "fallback" and rows[name]["verified"], rows[name]
    assert "hopper_conv_dgrad: stride 2x2" in rows["stem/dgrad"]["fallback_reason"]
    g = doc["geomean"]
    assert g["vs_cudnn_benchmark_cases"] == len(served) and g["vs_cudnn_benchmark_with_fallbacks_cases"] == 9
    assert set(g["fallbacks"]) == set(fallbacks)
    assert "skipped_directions" not in doc and doc["versions"]["cudnn"]
    assert (out / "bench.png").stat().st_size > 10_000

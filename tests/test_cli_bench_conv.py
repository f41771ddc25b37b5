"""``autocutlass bench`` on conv2d cases, without a GPU: cases and operands, the rows, ratios to
both cuDNN modes (each against ours in that mode), geometric means over served cases and with
fallbacks counted at 1.0 (per mode where torch served ours in one mode only), the table, footer and
plot of conv-only and mixed documents, the measuring steps on CPU tensors (every call falls back to
torch there) with a fake timer (each mode's sides of ours and cuDNN on that mode's thread, each
side of ours verified), and the command's exit codes."""

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
    VENDOR_PATH,
    Measured,
    OursCall,
    assemble_report,
    baseline_status,
    case_row,
    footer_lines,
    geomean_line,
    geomean_title,
    ours_sides,
    progress_line,
    table,
)
from autocutlass.cli.shapes import Skipped
from autocutlass.device import gpu_available
from autocutlass.dispatch import POLICY_OVERRIDE, Dispatcher, Policy
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
def _rounds(ours_bench: list[float], ours_default: list[float], bench: list[float],
            default: list[float]) -> dict[str, list[float]]:  # fmt: skip
    """Per side: ours in cuDNN benchmark mode, ours in the default mode, cuDNN in each."""
    return {"autocutlass_benchmark": ours_bench, "autocutlass": ours_default, "cudnn_benchmark": bench,
            "cudnn_default": default}  # fmt: skip


STEM_REASON = "no kernel family serves it: C=3"


def synthetic_rows(shapes: Path) -> list[dict[str, Any]]:
    """sd: served in both modes, ours 1.0 ms in benchmark mode and 0.75 ms in the default one (x1.2
    and x2.0; swapped, x1.6 and x1.5); the stem: torch in both modes; tf32: tuned; a FAILED one."""
    by = cases(shapes)
    extra = ConvProblem(ConvDirection.FPROP, 4, 32, 32, 64, 64, 3, 3, pad_h=1, pad_w=1)
    wrong = BenchCase("wrong", extra, conv_operand_spec(extra))
    fell = {**DELTA, "fallbacks": 1}
    return [
        case_row(by["sd"], ROOFS, Measured("db", DELTA, 0.05, True, output_poisoned=True,
                                           more_ours={"autocutlass": OursCall("db", DELTA, 0.01, output_poisoned=True)},
                                           rounds_ms=_rounds([1.0] * 3, [0.75] * 3, [1.2, 1.1, 1.3], [1.5, 1.4, 1.6]))),
        case_row(by["stem"], ROOFS, Measured("FALLBACK", fell, 0.01, True, output_poisoned=False,
                                             fallback_reason=STEM_REASON,
                                             more_ours={"autocutlass": OursCall("FALLBACK", fell, 0.01, STEM_REASON,
                                                                                output_poisoned=True)},
                                             rounds_ms=_rounds([2.0] * 3, [2.2] * 3, [2.0, 2.1, 1.9], [2.2] * 3))),
        case_row(by["tf32"], ROOFS, Measured("tuned", {**DELTA, "tunes": 1}, 30.0, True,
                                             more_ours={"autocutlass": OursCall("db", DELTA, 0.01)},
                                             rounds_ms=_rounds([1.0] * 3, [1.0] * 3, [0.9] * 3, [1.0, 1.1, 1.0]))),
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
    assert sd["ratio_vs_cudnn_default"] == pytest.approx(2.0) and "ratio_vs_torch" not in sd
    assert sd["ms"] == {"autocutlass_benchmark": 1.0, "autocutlass": 0.75, "cudnn_benchmark": 1.2, "cudnn_default": 1.5}
    problem = cases(shapes)["sd"].problem
    assert sd["tflops"]["autocutlass_benchmark"] == pytest.approx(problem.flops / 1e-3 / 1e12)
    assert sd["tflops"]["autocutlass"] == pytest.approx(problem.flops / 0.75e-3 / 1e12)
    assert sd["roof_fraction"] == pytest.approx(problem.flops / 1e-3 / 1e12 / ROOFS.attainable_tflops(problem))
    assert sd["operands"]["op"] == "conv2d" and sd["problem_dict"]["op"] == "conv2d" and sd["output_poisoned"]
    assert sd["path"] == "db" and sd["ours_sides"] == {
        "autocutlass_benchmark": {"path": "db", "first_call_s": 0.05, "stats_delta": DELTA, "output_poisoned": True},
        "autocutlass": {"path": "db", "first_call_s": 0.01, "stats_delta": DELTA, "output_poisoned": True}}
    assert stem["status"] == "fallback" and stem["fallback_reason"] == STEM_REASON  # the two modes' one reason
    assert stem["note"] == ("autocutlass did not serve this case: torch ran it, the ratio means nothing (counted at "
                            f"1.0): {STEM_REASON}")  # fmt: skip
    assert stem["output_poisoned"] is False and stem["ratio_vs_cudnn_benchmark"] == pytest.approx(1.0)
    assert stem["ours_sides"]["autocutlass"]["output_poisoned"] is True  # not all: the row says False
    assert stem["ratio_vs_cudnn_default"] == pytest.approx(1.0) and tf["ours_sides"]["autocutlass"]["path"] == "db"
    assert tf["compute_roof_tflops"] == 400.0 and tf["ratio_vs_cudnn_benchmark"] == pytest.approx(0.9)
    assert wrong["status"] == "FAILED" and wrong["ms"] == {} and wrong["ratio_vs_cudnn_default"] is None
    assert "fallback_reason" not in sd and "output_poisoned" not in rows["gemm"]
    skipped = case_row(BenchCase("w", fp8 := ConvProblem(ConvDirection.WGRAD, 2, 8, 8, 16, 16, 3, 3, x_dtype=DType.E4M3),
                                 conv_operand_spec(fp8)), ROOFS, None)  # fmt: skip
    assert skipped["status"] == "skipped" and "e4m3" in skipped["note"]
    assert skipped["ratio_vs_cudnn_benchmark"] is None and skipped["ratio_vs_cudnn_default"] is None


def test_geomeans_over_served_cases_and_with_fallbacks_at_one(shapes: Path) -> None:
    g = synthetic_doc(shapes)["geomean"]
    served_bench, served_default = [1.2, 0.9], [2.0, 1.0]
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
    assert "ours timed once per cuDNN mode, as a user in that mode gets it" in conv["protocol"]
    assert "called and timed on a thread of its own started for the case, both its sides on it" in conv["protocol"]
    assert "apply as they would for a user in that mode" in conv["protocol"]
    assert ("ratio_vs_cudnn_benchmark divides by autocutlass_benchmark, ratio_vs_cudnn_default by autocutlass"
            in conv["protocol"])  # fmt: skip
    assert "each side of ours verified" in conv["protocol"]
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
    assert headers == ["case", "problem", "served by", "bound", "ours bench", "cuDNN bench", "x cuDNN bench",
                       "ours default", "cuDNN default", "x cuDNN default", "% roof", "1st call s"]  # fmt: skip
    col = {h: i for i, h in enumerate(headers)}
    rows = {r[0]: r for r in body}
    assert rows["sd"][col["x cuDNN bench"]] == "1.200" and rows["sd"][col["x cuDNN default"]] == "2.000"
    assert rows["stem"][col["x cuDNN bench"]] == "1.000 FALLBACK!"
    assert rows["stem"][col["x cuDNN default"]] == "1.000 FALLBACK!"  # torch served ours in each mode
    assert rows["wrong"][col["x cuDNN bench"]] == "FAILED" and rows["wrong"][col["x cuDNN default"]] == "-"
    tflops = cases(shapes)["sd"].problem.flops / 1e-3 / 1e12
    assert rows["sd"][col["ours bench"]] == f"{tflops:.1f} TF/s"  # 1.0 ms
    assert rows["sd"][col["ours default"]] == f"{tflops / 0.75:.1f} TF/s"  # 0.75 ms
    assert rows["sd"][col["served by"]] == "db" and rows["stem"][col["served by"]] == "FALLBACK"


def test_mixed_table_puts_each_status_under_its_ops_baseline(shapes: Path) -> None:
    headers, body = table(synthetic_doc(shapes))
    assert headers[4:13] == ["autocutlass", "torch", "x torch", "ours bench", "cuDNN bench", "x cuDNN bench",
                             "ours default", "cuDNN default", "x cuDNN default"]  # fmt: skip
    col = {h: i for i, h in enumerate(headers)}
    rows = {r[0]: r for r in body}
    assert rows["gemm"][col["x torch"]] == "1.200" and rows["gemm"][col["x cuDNN bench"]] == "-"
    assert rows["gemm"][col["autocutlass"]] != "-" and rows["gemm"][col["ours bench"]] == "-"
    assert rows["gemm"][col["ours default"]] == "-" and rows["sd"][col["autocutlass"]] == "-"  # a column per op
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
    b, d = (1.2 * 0.9) ** 0.5, (2.0 * 1.0) ** 0.5
    bf, df = (1.2 * 0.9) ** (1 / 3), (2.0 * 1.0) ** (1 / 3)
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
    flops = cases(shapes)["sd"].problem.flops

    def tf(ms: float) -> str:
        return f"{flops / (ms * 1e-3) / 1e12:.1f} TF/s"

    assert line == (f"[1/5] sd: ours bench {tf(1.0)} vs cuDNN bench {tf(1.2)}: x1.200, ours default {tf(0.75)} vs "
                    f"cuDNN default {tf(1.5)}: x2.000 [db, first call 0.05 s]")  # fmt: skip
    assert "FALLBACK [FALLBACK, first call" in progress_line(2, 5, rows["stem"])
    gemm = progress_line(5, 5, rows["gemm"])
    assert gemm.count(" vs ") == 1 and "ours" not in gemm  # torch only: compile is optional


def test_each_cudnn_ratio_divides_by_ours_in_that_mode(shapes: Path) -> None:
    """Against cuDNN benchmark mode: ours timed in benchmark mode; against the default mode: ours in
    the default mode (a vendor verdict may let torch serve a layer in one mode and not the other),
    in the row, the geometric means, the table and the progress line."""
    case = cases(shapes)["sd"]
    m = Measured("db", DELTA, 0.05, True, more_ours={"autocutlass": OursCall("db", DELTA, 0.01)},
                 rounds_ms=_rounds([2.0, 1.0, 4.0], [0.5, 0.25, 1.0], [3.0, 1.5, 6.0], [1.0, 0.5, 2.0]))
    row = case_row(case, ROOFS, m)
    assert row["ratio_vs_cudnn_benchmark"] == 1.5  # 3.0 / 2.0 per round; over the default mode's ours: 6.0
    assert row["ratio_vs_cudnn_default"] == 2.0  # 1.0 / 0.5 per round; over benchmark mode's ours: 0.5
    assert row["ms"]["autocutlass_benchmark"] == 2.0 and row["ms"]["autocutlass"] == 0.5
    doc = assemble_report(meta={}, roofs=ROOFS, rows=[row], host_overhead=None, first_call=None)
    assert doc["geomean"]["vs_cudnn_benchmark"] == 1.5 and doc["geomean"]["vs_cudnn_default"] == 2.0
    headers, body = table(doc)
    assert body[0][headers.index("x cuDNN bench")] == "1.500" and body[0][headers.index("x cuDNN default")] == "2.000"
    ours_bench, ours_default = body[0][headers.index("ours bench")], body[0][headers.index("ours default")]
    assert ours_bench == f"{case.problem.flops / 2e-3 / 1e12:.1f} TF/s"
    assert ours_default == f"{case.problem.flops / 0.5e-3 / 1e12:.1f} TF/s"
    line = progress_line(1, 1, row)
    assert f"ours bench {ours_bench} vs cuDNN bench " in line and ": x1.500, " in line
    assert f"ours default {ours_default} vs cuDNN default " in line and ": x2.000 [db" in line


def test_torch_serving_one_mode_is_a_fallback_against_its_baseline_only(shapes: Path, tmp_path: Path) -> None:
    """A vendor verdict applies in the cuDNN mode it was judged in: in benchmark mode torch serves
    the layer, in the default mode our kernel does. The row is a fallback (listed, with its reason),
    counted at 1.0 against cuDNN benchmark and at its ratio against cuDNN default; and the other way
    round for a default-mode verdict."""
    by = cases(shapes)
    why = "its tuning measured torch faster than our best kernel (vendor verdict)"
    verdict = {**DELTA, "vendor_hits": 1}
    bench_verdict = case_row(by["tf32/wgrad"], ROOFS, Measured(
        VENDOR_PATH, verdict, 0.02, True, fallback_reason=why, output_poisoned=True,
        more_ours={"autocutlass": OursCall("db", DELTA, 0.01, output_poisoned=True)},
        rounds_ms=_rounds([1.0] * 3, [0.8] * 3, [1.05] * 3, [1.2] * 3)))  # fmt: skip
    assert bench_verdict["status"] == "fallback" and bench_verdict["path"] == VENDOR_PATH
    assert bench_verdict["ratio_vs_cudnn_benchmark"] == pytest.approx(1.05)
    assert bench_verdict["ratio_vs_cudnn_default"] == pytest.approx(1.5)
    assert bench_verdict["note"] == ("autocutlass in cuDNN benchmark mode did not serve this case: torch ran it, the "
                                     f"ratio vs cuDNN benchmark means nothing (counted at 1.0): {why}")  # fmt: skip
    assert bench_verdict["fallback_reason"] == why
    on_bench, on_default = OP_BASELINES["conv2d"]
    assert baseline_status(bench_verdict, on_bench) == "fallback" and baseline_status(bench_verdict, on_default) == "ok"

    doc = assemble_report(meta={}, roofs=ROOFS, rows=[*synthetic_rows(shapes), bench_verdict], host_overhead=None,
                          first_call=None)  # fmt: skip
    g = doc["geomean"]
    assert g["vs_cudnn_benchmark"] == pytest.approx((1.2 * 0.9) ** 0.5) and g["vs_cudnn_benchmark_cases"] == 2
    assert g["vs_cudnn_benchmark_with_fallbacks"] == pytest.approx((1.2 * 0.9) ** 0.25)  # stem and it at 1.0
    assert g["vs_cudnn_benchmark_with_fallbacks_cases"] == 4
    assert g["vs_cudnn_default"] == pytest.approx((2.0 * 1.0 * 1.5) ** (1 / 3)) and g["vs_cudnn_default_cases"] == 3
    assert g["vs_cudnn_default_with_fallbacks"] == pytest.approx((2.0 * 1.0 * 1.5) ** 0.25)  # the stem at 1.0
    assert g["excluded"]["tf32/wgrad"] == "fallback vs cuDNN benchmark" and g["excluded"]["stem"] == "fallback"
    assert g["fallbacks"] == {"stem": STEM_REASON, "tf32/wgrad": why}
    assert "tf32/wgrad (fallback vs cuDNN benchmark)" in geomean_line(doc)
    headers, body = table(doc)
    cells = dict(zip(headers, body[-1], strict=True))
    assert cells["served by"] == "ours bench: torch (verdict), ours default: db"
    assert cells["x cuDNN bench"] == "1.050 FALLBACK!" and cells["x cuDNN default"] == "1.500"
    assert progress_line(1, 1, bench_verdict).endswith(
        "FALLBACK [ours bench: torch (verdict), ours default: db, first call 0.02 s]")  # fmt: skip
    plot_report(json.loads(json.dumps(doc)), tmp_path / "bench.png")

    default_verdict = case_row(by["tf32/wgrad"], ROOFS, Measured(
        "db", DELTA, 0.02, True, more_ours={"autocutlass": OursCall(VENDOR_PATH, verdict, 0.01, why)},
        rounds_ms=_rounds([0.8] * 3, [1.0] * 3, [1.2] * 3, [1.05] * 3)))  # fmt: skip
    assert baseline_status(default_verdict, on_bench) == "ok"
    assert baseline_status(default_verdict, on_default) == "fallback"
    assert default_verdict["note"].startswith("autocutlass in cuDNN default mode did not serve this case")
    doc = assemble_report(meta={}, roofs=ROOFS, rows=[default_verdict], host_overhead=None, first_call=None)
    headers, body = table(doc)
    cells = dict(zip(headers, body[0], strict=True))
    assert cells["x cuDNN bench"] == "1.500" and cells["x cuDNN default"] == "1.050 FALLBACK!"
    assert doc["geomean"]["vs_cudnn_benchmark"] == pytest.approx(1.5) and doc["geomean"]["vs_cudnn_default"] is None

    both = case_row(by["tf32/wgrad"], ROOFS, Measured(
        VENDOR_PATH, verdict, 0.02, True, fallback_reason=why,
        more_ours={"autocutlass": OursCall("FALLBACK", {**DELTA, "fallbacks": 1}, 0.01, "logged: no family")},
        rounds_ms=_rounds([1.0] * 3, [1.0] * 3, [1.0] * 3, [1.0] * 3)))  # fmt: skip
    assert both["fallback_reason"] == (f"autocutlass in cuDNN benchmark mode: {why}; "
                                       "autocutlass in cuDNN default mode: logged: no family")  # fmt: skip
    assert both["note"].startswith("autocutlass did not serve this case: torch ran it")


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
    # each cuDNN mode against ours in it; benchmark mode's first (its first call is the case's: _ConvSides.ours)
    assert [b.ours for b in OP_BASELINES["conv2d"]] == list(ours_sides("conv2d")) == ["autocutlass_benchmark",
                                                                                     "autocutlass"]  # fmt: skip
    assert list(ours_sides("gemm")) == list(ours_sides("grouped_mm")) == ["autocutlass"]


# ---- the measuring steps, on CPU ---------------------------------------------------------------
@pytest.fixture
def fake_timer(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, bool, bool]]:
    """``time_callable`` replaced: it runs the callable once and returns 1.0, 1.25, 2.0, 3.0 ms for
    the first, second, third, fourth callable it meets; per timing it records (which callable,
    whether it called autocutlass, torch.backends.cudnn.benchmark after the call)."""
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
        ms = (1.0, 1.25, 2.0, 3.0)[i]
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
    # the default mode's first call, after benchmark mode's, finds the reason logged: the same one
    assert list(m.more_ours) == ["autocutlass"] and m.more_ours["autocutlass"].path == "FALLBACK"
    assert m.more_ours["autocutlass"].fallback_reason == m.fallback_reason
    # interleaved rounds, the order reversed every other round: autocutlass with cuDNN's flag on and
    # off, cuDNN with it on and off
    ob, od, cb, cd = (0, True, True), (1, True, False), (2, False, True), (3, False, False)
    assert fake_timer == [ob, od, cb, cd, cd, cb, od, ob, ob, od, cb, cd]
    assert m.rounds_ms == {"autocutlass_benchmark": [1.0] * 3, "autocutlass": [1.25] * 3,
                           "cudnn_benchmark": [2.0] * 3, "cudnn_default": [3.0] * 3}  # fmt: skip
    assert isinstance(m.output_poisoned, bool) and m.compile_first_call_s is None
    assert isinstance(m.more_ours["autocutlass"].output_poisoned, bool)
    row = case_row(case, ROOFS, m)
    assert row["status"] == "fallback" and set(row["ours_sides"]) == {"autocutlass_benchmark", "autocutlass"}
    assert row["ratio_vs_cudnn_benchmark"] == 2.0 and row["ratio_vs_cudnn_default"] == 2.4  # 2.0 / 1.0, 3.0 / 1.25


@pytest.mark.parametrize("name", ["sd/dgrad", "sd/wgrad", "tf32/wgrad"])
def test_measure_a_backward_case_on_cpu(shapes: Path, fake_timer: list[tuple[int, bool, bool]], name: str) -> None:
    """dgrad / wgrad: the dispatcher's conv2d_dgrad / conv2d_wgrad against aten.convolution_backward,
    verified against the float32 gradient, then the same interleaved rounds."""
    case = cases(shapes)[name]
    m = measure._measure_case(case, ("torch",), 3, 0, "tune", device="cpu")
    assert m.verified and m.why is None and m.path == "FALLBACK" and m.error is None and m.fallback_reason, m
    ob, od, cb, cd = (0, True), (1, False), (2, True), (3, False)
    assert [(i, bench) for i, _, bench in fake_timer] == [ob, od, cb, cd, cd, cb, od, ob, ob, od, cb, cd]
    assert m.rounds_ms == {"autocutlass_benchmark": [1.0] * 3, "autocutlass": [1.25] * 3,
                           "cudnn_benchmark": [2.0] * 3, "cudnn_default": [3.0] * 3}  # fmt: skip
    assert case_row(case, ROOFS, m)["operands"]["direction"] == case.problem.direction.value


@pytest.mark.parametrize("name", ["sd", "sd/dgrad"])
def test_each_cudnn_mode_is_timed_with_a_plan_cache_of_its_own(shapes: Path, monkeypatch: pytest.MonkeyPatch,
                                                               name: str) -> None:  # fmt: skip
    """PyTorch keeps cuDNN's plan per thread, keyed without ``cudnn.benchmark`` (Conv_v8.cpp's
    thread_local benchmark_cache): a thread's first call of a layer fixes the plan every later call
    on that thread runs, whatever the flag. The fake cuDNN here does the same (benchmark mode's plan
    1.0 ms, the heuristic's 1.6 ms), and ours, a fallback on CPU, runs its thread's plan as F.conv2d
    would. Timed on one thread, the default mode would read the benchmark's 1.0 ms or the benchmark
    mode the heuristic's 1.6 ms; ours in each mode, on that mode's thread, reads that mode's plan."""
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
        if plan is None:  # this thread's first call fixes its plan
            plans.plan = plan = "find" if flag else "heuristic"
        threads.setdefault(side, set()).add(threading.get_ident())
        ms = {"find": 1.0, "heuristic": 1.6}[plan]  # ours too: a fallback runs F.conv2d
        return Timing(ms, ms, ms, 10)

    monkeypatch.setattr(timing, "time_callable", time_callable)
    monkeypatch.setattr(measure._ConvSides, "sides", sides)
    m = measure._measure_case(cases(shapes)[name], ("torch",), 3, 0, "tune", device="cpu")
    assert m.verified, m
    assert m.rounds_ms == {"autocutlass_benchmark": [1.0] * 3, "autocutlass": [1.6] * 3,
                           "cudnn_benchmark": [1.0] * 3, "cudnn_default": [1.6] * 3}  # fmt: skip
    main = threading.main_thread().ident
    (bench,), (default,) = threads["cudnn_benchmark"], threads["cudnn_default"]
    assert len({main, bench, default}) == 3
    assert threads["autocutlass_benchmark"] == {bench} and threads["autocutlass"] == {default}
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


def test_own_thread_sides_share_its_thread_and_the_callers_policy() -> None:
    """``same_thread`` gives a side on the same thread (ours beside cuDNN in one mode), closed with
    it; a call from another thread runs under that thread's policy override, which dispatch keeps
    per thread (the bench's ``autocutlass.policy(...)`` on the caller's thread holds there too)."""
    seen: list[tuple[str, int, Any]] = []

    def where(tag: str) -> Any:
        return lambda: seen.append((tag, threading.get_ident(), POLICY_OVERRIDE.policy))

    caller = POLICY_OVERRIDE.policy
    side = measure.OwnThread(where("a"), "test-pair", "cpu")
    other = side.same_thread(where("b"))
    try:
        side()
        other()
        with autocutlass.policy("heuristic"):
            other()
            other.on_thread(side)  # on the thread: at once, under the policy it was called with
        side()
    finally:
        other.close()  # either side's close ends the thread
    t = side.ident
    assert t == other.ident and t not in (None, threading.get_ident())
    assert seen == [("a", t, caller), ("b", t, caller), ("b", t, Policy.HEURISTIC), ("a", t, Policy.HEURISTIC),
                    ("a", t, caller)]  # fmt: skip
    assert not [t for t in threading.enumerate() if t.name.startswith("test-pair")]
    side.close()  # closing again is harmless (a case closes each mode's thread once per side)


@pytest.mark.parametrize("name", ["sd", "sd/dgrad", "sd/wgrad"])
def test_each_side_of_ours_runs_in_its_cudnn_mode_on_that_modes_thread(shapes: Path, monkeypatch: pytest.MonkeyPatch,
                                                                       name: str) -> None:  # fmt: skip
    """Ours in benchmark mode is called (its first call, the verification's second one, every
    round) with ``cudnn.benchmark`` True on the cuDNN benchmark side's thread, ours in the default
    mode with it False on the default side's thread, as a user in that mode calls it: the flag is in
    the conv front-ends' memo key and decides whether a verdict lets torch serve the layer, and the
    thread decides which cached cuDNN plan a fallback runs. Benchmark mode's first call is the
    case's (it may tune); each runs under the caller's policy override."""
    from autocutlass.search import timing

    names: dict[int, str] = {}
    real_sides, real_call = measure._ConvSides.sides, Dispatcher.call
    timing_side: list[str | None] = [None]
    dispatched: list[tuple[str | None, int, bool, Any]] = []  # (side being timed or None, thread, flag, policy)
    timed: list[tuple[str, int, bool]] = []

    def sides(self: Any, vs: Any) -> Any:
        fns, compile_s = real_sides(self, vs)
        names.update({id(fn): side for side, fn in fns.items()})
        return fns, compile_s

    def call(self: Any, fe: Any, *args: Any) -> Any:  # what dispatch sees: the memo key reads the flag
        dispatched.append((timing_side[0], threading.get_ident(), torch._C._get_cudnn_benchmark(),
                           POLICY_OVERRIDE.policy))  # fmt: skip
        return real_call(self, fe, *args)

    def time_callable(fn: Any, *, flush_bytes: int, flush_kind: str = "write", **_: Any) -> Timing:
        timing_side[0] = names[id(fn)]
        fn()
        timing_side[0] = None
        timed.append((names[id(fn)], threading.get_ident(), torch.backends.cudnn.benchmark))
        return Timing(1.0, 1.0, 1.0, 10)

    monkeypatch.setattr(timing, "time_callable", time_callable)
    monkeypatch.setattr(measure._ConvSides, "sides", sides)
    monkeypatch.setattr(Dispatcher, "call", call)
    with autocutlass.policy("cached"):
        m = measure._measure_case(cases(shapes)[name], ("torch",), 2, 0, "cached", device="cpu")
    assert m.verified, m
    on = {side: {t for s, t, _ in timed if s == side} for side in names.values()}
    (bench,), (default,), main = on["cudnn_benchmark"], on["cudnn_default"], threading.get_ident()
    assert len({main, bench, default}) == 3
    assert on["autocutlass_benchmark"] == {bench} and on["autocutlass"] == {default}
    assert [flag for s, _, flag in timed if s in ("autocutlass_benchmark", "cudnn_benchmark")] == [True] * 4
    assert [flag for s, _, flag in timed if s in ("autocutlass", "cudnn_default")] == [False] * 4
    assert [(t, flag) for s, t, flag, _ in dispatched if s is None] == [(bench, True)] * 2 + [(default, False)] * 2
    assert [(t, flag) for s, t, flag, _ in dispatched if s == "autocutlass_benchmark"] == [(bench, True)] * 2
    assert [(t, flag) for s, t, flag, _ in dispatched if s == "autocutlass"] == [(default, False)] * 2
    assert len(dispatched) == 8 and {p for *_, p in dispatched} == {Policy.CACHED}
    assert not [t for t in threading.enumerate() if t.name.startswith("cudnn-")]  # closed with the case


@pytest.mark.parametrize("benchmark_mode", [True, False])
@pytest.mark.parametrize("wrong_call", [1, 2])
def test_each_side_of_ours_is_verified(shapes: Path, fake_timer: list[tuple[int, bool, bool]],
                                       monkeypatch: pytest.MonkeyPatch, benchmark_mode: bool,
                                       wrong_call: int) -> None:  # fmt: skip
    """A wrong result of ours in one cuDNN mode only, on that mode's first call or on its second
    (into fresh poison), fails the case before anything is timed, naming the side: each side of
    ours is verified as the case's first call is."""
    real, calls = autocutlass.conv2d, []

    def wrong_in_one_mode(x: Any, w: Any, *args: Any) -> Any:
        y = real(x, w, *args)
        if torch._C._get_cudnn_benchmark() != benchmark_mode:
            return y
        calls.append(1)
        return y.mul_(1.5) if len(calls) == wrong_call else y

    monkeypatch.setattr(autocutlass, "conv2d", wrong_in_one_mode)
    case = cases(shapes)["sd"]
    m = measure._measure_case(case, ("torch",), 3, 0, "cached", device="cpu")
    side = "autocutlass_benchmark" if benchmark_mode else "autocutlass"
    assert not m.verified and m.rounds_ms == {} and fake_timer == [] and len(calls) == wrong_call
    assert (m.why or "").startswith(f"{side}: ") and "tolerance" in (m.why or ""), m.why
    assert list(m.more_ours) == ([] if benchmark_mode else ["autocutlass"])  # benchmark mode first: it stops there
    row = case_row(case, ROOFS, m)
    assert row["status"] == "FAILED" and row["note"].startswith(f"wrong result: {side}: ")
    assert list(row["ours_sides"]) == ["autocutlass_benchmark", *([] if benchmark_mode else ["autocutlass"])]


def test_a_side_of_ours_that_raises_ends_the_case_named(shapes: Path, fake_timer: list[tuple[int, bool, bool]],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """Under ``AUTOCUTLASS_STRICT=1`` a side of ours raises instead of serving: the case is
    'unsupported', untimed, and the error names the side (here the default mode's, benchmark
    mode's first call having served)."""
    from autocutlass.errors import UnsupportedProblem

    real = autocutlass.conv2d

    def strict_in_default_mode(*args: Any) -> Any:
        if not torch._C._get_cudnn_benchmark():
            raise UnsupportedProblem("no family")
        return real(*args)

    monkeypatch.setattr(autocutlass, "conv2d", strict_in_default_mode)
    case = cases(shapes)["sd"]
    m = measure._measure_case(case, ("torch",), 3, 0, "cached", device="cpu")
    assert m.error == "UnsupportedProblem (autocutlass): no family" and not m.verified and fake_timer == []
    assert m.path == "FALLBACK" and m.more_ours["autocutlass"].path == "raised"
    row = case_row(case, ROOFS, m)
    assert row["status"] == "unsupported" and row["note"] == "autocutlass raised UnsupportedProblem (autocutlass): no family"


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
        assert {side: c["path"] for side, c in r["ours_sides"].items()} == {"autocutlass_benchmark": "heuristic",
                                                                            "autocutlass": "heuristic"}  # fmt: skip
        assert all(c["output_poisoned"] for c in r["ours_sides"].values()), r
        assert len(r["rounds_ms"]["cudnn_benchmark"]) == len(r["rounds_ms"]["cudnn_default"]) == 2
        assert len(r["rounds_ms"]["autocutlass_benchmark"]) == len(r["rounds_ms"]["autocutlass"]) == 2
        assert r["ratio_vs_cudnn_benchmark"] > 0 and r["ratio_vs_cudnn_default"] > 0
    fallbacks = ("stem/dgrad",)
    for name in fallbacks:
        assert rows[name]["status"] == "fallback" and rows[name]["verified"], rows[name]
        assert {c["path"] for c in rows[name]["ours_sides"].values()} == {"FALLBACK"}  # in both modes
    assert "hopper_conv_dgrad: stride 2x2" in rows["stem/dgrad"]["fallback_reason"]
    g = doc["geomean"]
    assert g["vs_cudnn_benchmark_cases"] == len(served) and g["vs_cudnn_benchmark_with_fallbacks_cases"] == 9
    assert set(g["fallbacks"]) == set(fallbacks)
    assert "skipped_directions" not in doc and doc["versions"]["cudnn"]
    assert (out / "bench.png").stat().st_size > 10_000

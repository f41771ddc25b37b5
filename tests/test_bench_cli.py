"""``autocutlass bench``: parsing, cases and operands, the ridge, ratio math, the JSON document,
the plot, the table, a clear error without a GPU; and (marker ``gpu``) one tiny case end to end."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from autocutlass import cli
from autocutlass.cli.bench import add_bench_parser
from autocutlass.cli.bench.cases import BenchCase, Roofs, bench_cases, intensity, is_memory_bound, operand_spec
from autocutlass.cli.bench.plot import plot_report
from autocutlass.cli.bench.report import (
    Measured,
    assemble_report,
    case_row,
    default_out_dir,
    first_call_case,
    first_call_path,
    footer_lines,
    memo_path,
    geomean,
    gpu_slug,
    progress_line,
    round_ratio,
    table,
    write_json,
)
from autocutlass.device import gpu_available
from autocutlass.ops.gemm.evaluation import make_inputs
from autocutlass.ops.gemm.problem import DType, GemmProblem, Major

REPO = Path(__file__).resolve().parents[1]

SHAPES = {
    "cases": [
        {"name": "square", "M": 96, "N": 96, "K": 96, "dtype": "bf16", "layout": "nn"},
        {"name": "linear", "M": 16, "N": 512, "K": 256, "dtype": "bf16", "layout": "nt"},
        {"name": "batched", "L": 4, "M": 128, "N": 64, "K": 32, "dtype": "fp16", "layout": "nn"},
        {"name": "tf32", "M": 64, "N": 32, "K": 48, "dtype": "fp32", "layout": "tn"},
    ],
}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="autocutlass")
    add_bench_parser(p.add_subparsers(dest="command"))
    return p


@pytest.fixture
def shapes(tmp_path: Path) -> Path:
    f = tmp_path / "shapes.json"
    f.write_text(json.dumps(SHAPES))
    return f


# ---- arguments ---------------------------------------------------------------------------------
def test_defaults(shapes: Path) -> None:
    ns = parser().parse_args(["bench", "--shapes", str(shapes)])
    assert ns.vs == ("torch",) and ns.rounds == 5 and ns.first_call and ns.policy is None
    assert ns.out is None and ns.only is None and ns.bandwidth_roof is None
    assert ns.compute_roof == (790.0, 395.0) and callable(ns.func) and ns.flush == "write"


def test_options(shapes: Path) -> None:
    ns = parser().parse_args([
        "bench", "--shapes", str(shapes), "--only", "square", "--only", "tf32", "--vs", "torch,compile",
        "--out", "x", "--policy", "cached", "--rounds", "3", "--no-first-call", "--compute-roof", "800",
        "--bandwidth-roof", "4.5",
    ])  # fmt: skip
    assert ns.only == ["square", "tf32"] and ns.vs == ("torch", "compile") and ns.out == "x"
    assert ns.policy == "cached" and ns.rounds == 3 and not ns.first_call
    assert ns.compute_roof == (800.0, 400.0) and ns.bandwidth_roof == 4.5
    assert parser().parse_args(["bench", "--shapes", "f", "--compute-roof", "800,420"]).compute_roof == (800.0, 420.0)
    assert parser().parse_args(["bench", "--shapes", "f", "--vs", "compile"]).vs == ("torch", "compile")
    assert parser().parse_args(["bench", "--shapes", "f", "--flush", "read"]).flush == "read"


@pytest.mark.parametrize("argv", [
    [], ["--shapes", "f", "--vs", "cublas"], ["--shapes", "f", "--rounds", "0"], ["--shapes", "f", "--policy", "x"],
    ["--shapes", "f", "--compute-roof", "1,2,3"], ["--shapes", "f", "--bandwidth-roof", "-1"],
    ["--shapes", "f", "--flush", "zero"],
])  # fmt: skip
def test_bad_usage_exits(argv: list[str]) -> None:
    with pytest.raises(SystemExit):
        parser().parse_args(["bench", *argv])


def test_registered_in_the_main_parser(shapes: Path) -> None:
    ns = cli.build_parser().parse_args(["bench", "--shapes", str(shapes)])
    assert ns.cmd == "bench" and ns.func.__name__ == "cmd_bench"


# ---- cases and operands ------------------------------------------------------------------------
def test_case_selection(shapes: Path) -> None:
    assert [c.name for c in bench_cases(shapes)] == ["square", "linear", "batched", "tf32"]
    assert [c.name for c in bench_cases(shapes, ["tf32", "linear"])] == ["linear", "tf32"]
    with pytest.raises(ValueError, match="no case named nope"):
        bench_cases(shapes, ["nope"])


def test_operand_specs(shapes: Path) -> None:
    cases = {c.name: c for c in bench_cases(shapes)}
    sq, lin, bat, tf = (cases[n].spec for n in ("square", "linear", "batched", "tf32"))
    assert (sq.a_storage, sq.a_transposed, sq.b_storage, sq.b_transposed) == ((96, 96), False, (96, 96), False)
    assert lin.layout == "nt" and lin.a_storage == (16, 256) and lin.b_storage == (512, 256) and lin.b_transposed
    assert lin.out_shape == (16, 512) and lin.dtype == "bfloat16" and not lin.tf32
    assert bat.a_storage == (4, 128, 32) and bat.b_storage == (4, 32, 64) and bat.out_shape == (4, 128, 64)
    assert bat.dtype == "float16"
    assert tf.tf32 and tf.dtype == tf.out_dtype == "float32" and tf.layout == "tn" and tf.a_storage == (48, 64)
    assert "W(512,256).t()" in lin.describe()


@pytest.mark.parametrize("name", ["square", "linear", "batched", "tf32"])
def test_operand_spec_matches_make_inputs(shapes: Path, name: str) -> None:
    """The child process builds operands from the spec; the bench builds them with make_inputs."""
    case = next(c for c in bench_cases(shapes) if c.name == name)
    x = make_inputs(case.problem, device="cpu")
    spec = case.spec
    a_store = x.a.transpose(-1, -2) if spec.a_transposed else x.a
    b_store = x.b.transpose(-1, -2) if spec.b_transposed else x.b
    assert tuple(a_store.shape) == spec.a_storage and a_store.is_contiguous()
    assert tuple(b_store.shape) == spec.b_storage and b_store.is_contiguous()
    assert tuple(x.d.shape) == spec.out_shape
    assert x.a.dtype == getattr(torch, spec.dtype) and x.d.dtype == getattr(torch, spec.out_dtype)
    assert torch.matmul(x.a.float(), x.b.float()).shape == x.d.shape


def test_unbenchmarkable_cases_are_skipped() -> None:
    fp8 = GemmProblem(64, 64, 64, a_dtype=DType.E4M3, b_dtype=DType.E4M3, d_dtype=DType.BF16)
    assert "torch._scaled_mm" in (BenchCase("fp8", fp8, operand_spec(fp8)).skip or "")  # 'nn': not served
    fp8_nt = GemmProblem(64, 64, 64, a_dtype=DType.E4M3, b_dtype=DType.E4M3, d_dtype=DType.BF16, b_major=Major.COL)
    assert BenchCase("fp8-nt", fp8_nt, operand_spec(fp8_nt)).skip is None
    empty = GemmProblem(0, 64, 64)
    assert BenchCase("empty", empty, operand_spec(empty)).skip == "empty problem (a zero dimension)"
    assert BenchCase("ok", GemmProblem(64, 64, 64), operand_spec(GemmProblem(64, 64, 64))).skip is None


# ---- the ridge ---------------------------------------------------------------------------------
def test_memory_bound_at_the_ridge() -> None:
    p = GemmProblem(96, 96, 96)  # bf16: 2*96^3 flops / (3 * 96^2 * 2 bytes) = 32 flop/byte exactly
    assert intensity(p) == 32.0
    at = Roofs(bandwidth_tbps=2.0, bandwidth_source="test", tflops_16bit=64.0, tflops_tf32=32.0)
    assert at.ridge(p) == 32.0 and not is_memory_bound(p, at)  # at the ridge: compute-bound
    above = Roofs(bandwidth_tbps=2.0, bandwidth_source="test", tflops_16bit=64.001, tflops_tf32=32.0)
    assert is_memory_bound(p, above)
    below = Roofs(bandwidth_tbps=2.0, bandwidth_source="test", tflops_16bit=63.999, tflops_tf32=32.0)
    assert not is_memory_bound(p, below)
    assert at.attainable_tflops(p) == 64.0


def test_suite_classification_with_default_roofs() -> None:
    roofs = Roofs(bandwidth_tbps=4.27, bandwidth_source="test")  # the H200 copy ceiling; 790 / 395
    decode = GemmProblem(16, 6144, 4096, b_major="col")
    square = GemmProblem(8192, 8192, 8192)
    tf32 = GemmProblem(512, 512, 512, a_dtype=DType.TF32, b_dtype=DType.TF32, d_dtype=DType.FP32)
    assert is_memory_bound(decode, roofs) and not is_memory_bound(square, roofs)
    assert roofs.compute_tflops(tf32) == 395.0 and roofs.ridge(tf32) == pytest.approx(395.0 / 4.27)
    assert intensity(tf32) == pytest.approx(2 * 512**3 / (3 * 512 * 512 * 4))  # 85.3 < 395 / 4.27 = 92.5
    assert is_memory_bound(tf32, roofs)
    assert not is_memory_bound(GemmProblem(1024, 1024, 1024, a_dtype=DType.TF32, b_dtype=DType.TF32,
                                       d_dtype=DType.FP32), roofs)  # 170.7 flop/byte


# ---- ratio math --------------------------------------------------------------------------------
def test_geomean() -> None:
    assert geomean([2.0, 0.5]) == pytest.approx(1.0)
    assert geomean([1.1, 1.1, 1.1]) == pytest.approx(1.1)
    assert geomean([1.2, None, 0.8]) == pytest.approx((1.2 * 0.8) ** 0.5)
    assert geomean([]) is None and geomean([None]) is None
    with pytest.raises(ValueError):
        geomean([1.0, 0.0])


def test_round_ratio_is_the_median_of_per_round_ratios() -> None:
    torch_ms, ours_ms = [1.0, 1.0, 2.0], [0.5, 1.0, 1.0]  # per round: 2.0, 1.0, 2.0
    assert round_ratio(torch_ms, ours_ms) == 2.0
    assert round_ratio([], []) is None and round_ratio([1.0], [1.0, 2.0]) is None


def test_first_call_path() -> None:
    assert first_call_path({"fallbacks": 1, "memo_misses": 1}, "tune") == "FALLBACK"
    assert first_call_path({"tunes": 1, "memo_misses": 1, "compiles": 1}, "tune") == "tuned"
    assert first_call_path({"db_hits": 1, "db_lookups": 1, "memo_misses": 1}, "cached") == "db"
    assert first_call_path({"sibling_hits": 1, "db_lookups": 2, "memo_misses": 1}, "cached") == "sibling"
    assert first_call_path({"memo_misses": 1, "compiles": 1}, "heuristic") == "heuristic"
    assert first_call_path({"memo_misses": 1, "db_lookups": 1, "misses_recorded": 1}, "cached") == "default"
    assert first_call_path({"memo_hits": 1}, "tune") == "memo"
    assert first_call_path({"memo_misses": 1}, "off") == "torch (policy off)"
    # torch in place of an untuned problem's stand-in (a tuned-only family: the grouped kernels)
    assert first_call_path({"memo_misses": 1, "db_lookups": 2, "torch_standins": 1}, "cached") == "torch (stand-in)"


def test_a_memo_hit_on_a_torch_verdict_is_flagged_as_the_verdict() -> None:
    """Two cases of one problem (a grouped GEMM routed balanced, then skewed): the second call hits
    the first's memo entry, which counts no vendor call; when the first was torch by verdict, the
    second is too (not timed as our kernel against torch)."""
    p, q = GemmProblem(m=64, n=64, k=64), GemmProblem(m=128, n=64, k=64)
    served = {p: ("torch (verdict)", "its tuning measured torch faster")}
    assert memo_path("memo", p, served) == ("torch (verdict)", "its tuning measured torch faster")
    assert memo_path("memo", q, served) == ("memo", None)  # no earlier case of q
    assert memo_path("db", p, served) == ("db", None)  # not a memo hit: its own path
    assert memo_path("memo", p, {p: ("db", None)}) == ("memo", None)  # ours, served from the memo


# ---- the JSON document -------------------------------------------------------------------------
ROOFS = Roofs(bandwidth_tbps=4.0, bandwidth_source="given", tflops_16bit=800.0, tflops_tf32=400.0)
DELTA = {"memo_hits": 0, "memo_misses": 1, "db_lookups": 1, "db_hits": 1, "misses_recorded": 0, "tunes": 0,
         "compiles": 1, "fallbacks": 0}  # fmt: skip


def _case(name: str, m: int, n: int, k: int, dtype: str = "bf16", layout: str = "nt") -> BenchCase:
    from autocutlass.ops.gemm.problem import problem_from_case

    p = problem_from_case({"name": name, "M": m, "N": n, "K": k, "dtype": dtype, "layout": layout})
    return BenchCase(name, p, operand_spec(p))


def synthetic_rows() -> list[dict[str, Any]]:
    big, decode, odd, wrong = _case("big", 8192, 8192, 8192), _case("decode", 16, 6144, 4096), \
        _case("odd", 2000, 3000, 1000), _case("wrong", 256, 256, 256)  # fmt: skip
    tf32 = _case("tf32", 4096, 4096, 4096, "fp32", "nn")
    fp8_problem = GemmProblem(64, 64, 64, a_dtype=DType.E4M3, b_dtype=DType.E4M3, d_dtype=DType.BF16)
    return [
        case_row(big, ROOFS, Measured("db", DELTA, 0.05, True, rounds_ms={
            "autocutlass": [1.5, 1.4, 1.45], "torch": [1.5, 1.54, 1.5], "compile": [1.6, 1.6, 1.6]},
            host_ms={"autocutlass": 0.012, "torch": 0.009})),
        case_row(decode, ROOFS, Measured("tuned", {**DELTA, "tunes": 1}, 42.0, True, rounds_ms={
            "autocutlass": [0.0300, 0.0310, 0.0305], "torch": [0.0330, 0.0320, 0.0325], "compile": [0.03, 0.03, 0.03]})),
        case_row(tf32, ROOFS, Measured("db", DELTA, 0.1, True, rounds_ms={
            "autocutlass": [0.4, 0.4, 0.4], "torch": [0.42, 0.41, 0.43], "compile": [0.4, 0.4, 0.4]})),
        case_row(odd, ROOFS, Measured("FALLBACK", {**DELTA, "fallbacks": 1}, 0.01, True, rounds_ms={
            "autocutlass": [0.1, 0.1, 0.1], "torch": [0.1, 0.1, 0.1], "compile": [0.1, 0.1, 0.1]})),
        case_row(wrong, ROOFS, Measured("heuristic", DELTA, 3.0, False, why="12 output elements are NaN/Inf")),
        case_row(BenchCase("fp8", fp8_problem, operand_spec(fp8_problem)), ROOFS, None),
    ]  # fmt: skip


def synthetic_doc() -> dict[str, Any]:
    meta = {"gpu": "NVIDIA H200", "date": "2026-11-22", "versions": {"torch": "2.13.0"}, "settings": {"rounds": 3}}
    host = {"shape": "64x64x64 bf16", "calls": 2000, "rounds": 10, "policy": "cached", "served_by": "db",
            "autocutlass_us": 9.5, "torch_us": 6.0, "overhead_us": 3.5, "rounds_us": {}}  # fmt: skip
    first = {"case": "big", "served_by_in_bench": "db", "policy": "cached", "has_db_record": True, "db": "x.sqlite",
             "warm_cache": {"import_torch_s": 1.0, "import_autocutlass_s": 0.1, "setup_s": 0.5, "first_call_s": 0.4,
                            "second_call_s": 0.0001, "stats": {}, "kernels_compiled": 0, "kernels_from_disk": 1,
                            "dsl_imported": False},
             "cold_cache": {"returncode": 1, "error": "boom"}}  # fmt: skip
    return assemble_report(meta=meta, roofs=ROOFS, rows=synthetic_rows(), host_overhead=host, first_call=first)


def test_rows() -> None:
    rows = {r["name"]: r for r in synthetic_rows()}
    big, decode = rows["big"], rows["decode"]
    assert big["status"] == "ok" and not big["memory_bound"] and big["headline"] == "TFLOP/s"
    assert big["ms"]["autocutlass"] == 1.45 and big["tflops"]["autocutlass"] == pytest.approx(2 * 8192**3 / 1.45e-3 / 1e12)
    assert big["ratio_vs_torch"] == pytest.approx(1.5 / 1.45) and big["ratio_vs_compile"] == pytest.approx(1.6 / 1.45)
    assert big["roof_fraction"] == pytest.approx(big["tflops"]["autocutlass"] / 800.0)
    assert big["host_us"] == pytest.approx({"autocutlass": 12.0, "torch": 9.0}) and "host_us" not in decode
    assert decode["memory_bound"] and decode["headline"] == "TB/s"
    assert decode["tbps"]["autocutlass"] == pytest.approx(decode["min_bytes"] / 0.0305e-3 / 1e12)
    assert decode["tune_or_lookup_s"] == 42.0 and decode["stats_delta"]["tunes"] == 1
    assert rows["tf32"]["compute_roof_tflops"] == 400.0 and rows["tf32"]["operands"]["tf32"]
    assert rows["odd"]["status"] == "fallback" and "torch ran it" in rows["odd"]["note"]
    assert rows["wrong"]["status"] == "FAILED" and "NaN" in rows["wrong"]["note"] and rows["wrong"]["ms"] == {}
    assert rows["fp8"]["status"] == "skipped" and rows["fp8"]["ratio_vs_torch"] is None


def test_unsupported_under_strict_is_not_a_failure() -> None:
    row = case_row(_case("x", 64, 64, 64), ROOFS, Measured("raised", DELTA, 0.01, False, error="UnsupportedProblem: no"))
    assert row["status"] == "unsupported" and "UnsupportedProblem" in row["note"]


def test_report_geomean_excludes_fallbacks_and_failures(tmp_path: Path) -> None:
    doc = synthetic_doc()
    g = doc["geomean"]
    rows = {r["name"]: r for r in doc["cases"]}
    served = [rows[n]["ratio_vs_torch"] for n in ("big", "decode", "tf32")]
    assert g["vs_torch"] == pytest.approx((served[0] * served[1] * served[2]) ** (1 / 3)) and g["vs_torch_cases"] == 3
    assert g["vs_compile_cases"] == 3 and g["vs_compile"] is not None
    assert g["excluded"] == {"odd": "fallback", "wrong": "FAILED", "fp8": "skipped"}
    assert doc["gpu"] == "NVIDIA H200" and doc["schema"] == 1 and doc["roofs"]["bandwidth_tbps"] == 4.0
    assert doc["roofs"]["compute_tflops"]["tf32"] == 400.0 and "tf32" in doc["tf32"]
    assert doc["host_overhead"]["overhead_us"] == 3.5 and doc["first_call"]["warm_cache"]["first_call_s"] == 0.4
    path = tmp_path / "out" / "bench.json"
    write_json(doc, path)
    assert json.loads(path.read_text()) == json.loads(json.dumps(doc))
    assert [p.name for p in path.parent.iterdir()] == ["bench.json"]  # no temp file left


def test_report_without_compile_or_side_measurements() -> None:
    row = case_row(_case("a", 256, 256, 256), ROOFS, Measured("heuristic", DELTA, 1.0, True, rounds_ms={
        "autocutlass": [0.01], "torch": [0.012]}))  # fmt: skip
    doc = assemble_report(meta={"gpu": "g", "date": "d"}, roofs=ROOFS, rows=[row], host_overhead=None, first_call=None)
    assert doc["geomean"]["vs_compile"] is None and doc["geomean"]["vs_compile_cases"] == 0
    assert doc["geomean"]["vs_torch"] == pytest.approx(1.2) and doc["first_call"] is None
    headers, body = table(doc)
    assert "x compile" not in headers and body[0][headers.index("x torch")] == "1.200"
    assert footer_lines(doc)[-1].startswith("geomean x1.200 vs torch.matmul over 1 cases")


def test_table_flags_fallbacks_and_puts_the_geomean_last() -> None:
    doc = synthetic_doc()
    headers, body = table(doc)
    col = {h: i for i, h in enumerate(headers)}
    rows = {r[0]: r for r in body}
    assert "FALLBACK!" in rows["odd"][col["x torch"]] and rows["odd"][col["served by"]] == "FALLBACK"
    assert rows["wrong"][col["x torch"]] == "FAILED" and rows["fp8"][col["x torch"]] == "skipped"
    assert rows["decode"][col["bound"]] == "memory" and rows["decode"][col["autocutlass"]].endswith("TB/s")
    assert rows["big"][col["autocutlass"]].endswith("TF/s") and "x compile" in headers
    lines = footer_lines(doc)
    assert lines[-1].startswith("geomean x") and "excluded: odd (fallback), wrong (FAILED), fp8 (skipped)" in lines[-1]
    assert any("overhead +3.5 us" in line for line in lines)
    assert any("child failed" in line and "boom" in line for line in lines)
    assert any("0.400 s; with import autocutlass (0.10 s) 0.50 s on top of import torch (1.00 s)" in line
               and line.endswith("no CuTe DSL import") for line in lines), lines  # fmt: skip


def test_progress_line() -> None:
    rows = {r["name"]: r for r in synthetic_rows()}
    line = progress_line(1, 6, rows["big"])
    assert line.startswith("[1/6] big: ") and "TF/s vs torch" in line and "x1.034 [db, first call 0.05 s]" in line
    assert "FALLBACK" in progress_line(4, 6, rows["odd"])
    assert progress_line(6, 6, rows["fp8"]).startswith("[6/6] fp8: skipped: fp8 cases compare with torch._scaled_mm")


def test_plot_writes_a_png_from_the_json(tmp_path: Path) -> None:
    doc = json.loads(json.dumps(synthetic_doc()))  # the plot reads only what the JSON holds
    out = tmp_path / "plots" / "bench.png"
    plot_report(doc, out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000


def test_first_call_case_prefers_a_recorded_one() -> None:
    rows = synthetic_rows()
    assert first_call_case(rows) == "big"
    rows[0]["path"] = "heuristic"
    assert first_call_case(rows) == "decode"
    assert first_call_case([r for r in rows if r["status"] != "ok"]) is None


def test_out_dir_and_slug() -> None:
    assert gpu_slug("NVIDIA H100 80GB HBM3") == "h100-80gb-hbm3" and gpu_slug("NVIDIA H200") == "h200"
    assert default_out_dir("NVIDIA H200", "2026-11-22") == Path("benchmarks/results/2026-11-22-h200")


# ---- without a GPU -----------------------------------------------------------------------------
@pytest.mark.skipif(gpu_available(), reason="checks the message on a machine without CUDA")
def test_no_gpu_exits_with_a_clear_message(shapes: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["bench", "--shapes", str(shapes), "--out", str(tmp_path / "o")]) == 2  # a user error
    assert "no CUDA GPU" in capsys.readouterr().err
    r = subprocess.run([sys.executable, "-m", "autocutlass.cli", "bench", "--shapes", str(shapes), "--out",
                        str(tmp_path / "o")], cwd=REPO, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert r.returncode == 2 and "no CUDA GPU" in r.stderr and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == [r.stderr.strip()]
    assert not (tmp_path / "o").exists()


def test_bad_shapes_file_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["bench", "--shapes", str(tmp_path / "missing.json")]) == 1
    assert "cannot read shapes file" in capsys.readouterr().err


# ---- on a GPU ----------------------------------------------------------------------------------
@pytest.fixture
def isolated(tmp_path: Path) -> Iterator[Path]:
    import autocutlass

    saved = dict(os.environ)
    os.environ.update({"AUTOCUTLASS_CACHE_DIR": str(tmp_path / "cache"), "AUTOCUTLASS_SHIPPED_DBS": "off"})
    os.environ.pop("AUTOCUTLASS_STRICT", None)
    os.environ.pop("AUTOCUTLASS_DB", None)
    autocutlass.reset()
    yield tmp_path
    os.environ.clear()
    os.environ.update(saved)
    autocutlass.reset()


@pytest.mark.gpu
def test_bench_one_tiny_case_on_the_gpu(isolated: Path) -> None:
    f = isolated / "shapes.json"
    f.write_text(json.dumps({"cases": [{"name": "tiny", "M": 256, "N": 512, "K": 128, "dtype": "bf16", "layout": "nt"}]}))
    out = isolated / "out"
    rc = cli.main(["bench", "--shapes", str(f), "--policy", "heuristic", "--no-first-call", "--rounds", "2",
                   "--out", str(out)])  # fmt: skip
    assert rc == 0
    doc = json.loads((out / "bench.json").read_text())
    (row,) = doc["cases"]
    assert row["status"] == "ok" and row["verified"] and row["path"] == "heuristic", row
    assert row["stats_delta"]["fallbacks"] == 0 and row["stats_delta"]["compiles"] == 1
    assert len(row["rounds_ms"]["autocutlass"]) == len(row["rounds_ms"]["torch"]) == 2
    assert row["ratio_vs_torch"] > 0 and row["tflops"]["autocutlass"] > 0 and row["tbps"]["torch"] > 0
    assert doc["geomean"]["vs_torch"] == pytest.approx(row["ratio_vs_torch"]) and doc["first_call"] is None
    assert doc["roofs"]["bandwidth_tbps"] > 0.5 and doc["roofs"]["bandwidth_source"].startswith("measured")
    assert doc["versions"]["torch"] == torch.__version__ and doc["settings"]["policy"] == "heuristic"
    ho = doc["host_overhead"]
    assert ho["served_by"] == "heuristic" and 0 < ho["torch_us"] < ho["autocutlass_us"] + 50
    assert (out / "bench.png").stat().st_size > 10_000


@pytest.mark.gpu
def test_bench_first_call_in_fresh_processes(tmp_path: Path) -> None:
    """As a command in its own process: kernel families fix their cache directory at first use."""
    f = tmp_path / "shapes.json"
    f.write_text(json.dumps({"cases": [{"name": "tiny", "M": 256, "N": 512, "K": 128, "dtype": "bf16", "layout": "nn"}]}))
    out = tmp_path / "out"
    env = {**os.environ, "AUTOCUTLASS_CACHE_DIR": str(tmp_path / "cache"), "AUTOCUTLASS_SHIPPED_DBS": "off"}
    env.pop("AUTOCUTLASS_DB", None)
    env.pop("AUTOCUTLASS_STRICT", None)
    r = subprocess.run([sys.executable, "-m", "autocutlass.cli", "bench", "--shapes", str(f), "--policy", "heuristic",
                        "--rounds", "1", "--out", str(out), "--bandwidth-roof", "4.0"],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=1800)  # fmt: skip
    assert r.returncode == 0, r.stderr[-4000:]
    assert r.stdout.strip().splitlines()[-1].startswith("geomean x")
    fc = json.loads((out / "bench.json").read_text())["first_call"]
    warm, cold = fc["warm_cache"], fc["cold_cache"]
    assert fc["case"] == "tiny" and "first_call_s" in warm and "first_call_s" in cold, fc
    assert warm["kernels_compiled"] == 0 and warm["kernels_from_disk"] == 1, warm
    assert cold["kernels_compiled"] == 1 and cold["stats"]["fallbacks"] == 0, cold
    assert cold["first_call_s"] > warm["first_call_s"]


def test_time_callable_rejects_an_unknown_flush_kind() -> None:
    from autocutlass.search.timing import FLUSH_KINDS, time_callable

    assert FLUSH_KINDS == ("write", "read")
    with pytest.raises(ValueError, match="flush_kind"):
        time_callable(lambda: None, flush_bytes=0, flush_kind="zero")

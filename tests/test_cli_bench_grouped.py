"""``autocutlass bench`` and ``autocutlass tune`` on grouped-GEMM cases, without a GPU: the public
suite's cases (routing, weight layout) and their problems, operands and skip reasons, the
measuring steps on CPU tensors (every call falls back to torch there) with a fake timer against
torch._grouped_mm and the per-expert loop, rows whose bytes are the routing's, the table, the
geometric means and the plot."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

import autocutlass
from autocutlass.cli.bench import measure
from autocutlass.cli.bench.cases import (
    BenchCase,
    GroupedOperandSpec,
    Roofs,
    bench_suite,
    grouped_skip_reason,
)
from autocutlass.cli.bench.plot import plot_report
from autocutlass.cli.bench.report import (
    OP_BASELINES,
    assemble_report,
    case_row,
    footer_lines,
    geomean_line,
    progress_line,
    table,
)
from autocutlass.cli.shapes import load_shapes
from autocutlass.ops.grouped import evaluation
from autocutlass.ops.grouped.problem import GroupedGemmProblem
from autocutlass.ops.types import DType, Major
from autocutlass.search.timing import Timing

REPO = Path(__file__).resolve().parents[1]
SUITE = REPO / "benchmarks" / "shapes-grouped.json"
ROOFS = Roofs(bandwidth_tbps=4.0, bandwidth_source="given", tflops_16bit=800.0, tflops_tf32=400.0)
SMALL = {"cases": [
    {"name": "moe-skewed", "E": 8, "N": 48, "K": 64, "T": 100, "routing": "skewed", "dtype": "bf16"},
    {"name": "moe-kn", "E": 4, "N": 40, "K": 32, "T": 33, "dtype": "bf16", "w_layout": "kn"},
    {"name": "moe-fp16", "E": 4, "N": 40, "K": 32, "T": 33, "dtype": "fp16"},
    {"name": "gemm", "M": 64, "N": 32, "K": 16, "dtype": "bf16"},
]}  # fmt: skip


@pytest.fixture
def shapes(tmp_path: Path) -> Path:
    f = tmp_path / "grouped.json"
    f.write_text(json.dumps(SMALL))
    return f


def by_name(path: Path) -> dict[str, BenchCase]:
    return {c.name: c for c in bench_suite(path).cases}


def test_the_public_suite_reads_as_grouped_problems() -> None:
    shapes = load_shapes(SUITE)
    assert len(shapes.cases) == 24 and not shapes.skipped
    c = {c.name: c for c in shapes.cases}
    up = c["qwen3moe-up-T256-skewed"]
    assert up.routing == "skewed" and up.problem == GroupedGemmProblem(experts=128, t=256, n=1536, k=2048,
                                                                       w_major=Major.COL)  # fmt: skip
    assert c["qwen3moe-up-T256-balanced"].problem == up.problem  # a routing is not part of the problem
    suite = bench_suite(SUITE)
    assert all(case.skip is None and isinstance(case.spec, GroupedOperandSpec) for case in suite.cases)
    spec = {x.name: x for x in suite.cases}["dsv3-up-T4096-balanced"].spec
    assert spec.as_dict() == {"op": "grouped_mm", "x_shape": [4096, 7168], "w_storage": [256, 4096, 7168],
                              "w_transposed": True, "out_shape": [4096, 4096], "routing": "balanced",
                              "dtype": "bfloat16", "out_dtype": "bfloat16", "tf32": False}  # fmt: skip


def test_small_cases_their_alignment_and_skip_reasons(shapes: Path) -> None:
    c = by_name(shapes)
    assert c["moe-kn"].problem.w_major is Major.ROW and c["moe-kn"].spec.w_storage == (4, 32, 40)
    assert c["moe-kn"].problem.align_out == 16 and c["moe-kn"].spec.routing == "balanced"
    assert "bfloat16" in (c["moe-fp16"].skip or "")
    assert c["gemm"].op == "gemm" and c["moe-skewed"].op == "grouped_mm"
    assert "empty" in (grouped_skip_reason(GroupedGemmProblem(experts=4, t=0, n=8, k=8)) or "")
    odd = GroupedGemmProblem(experts=4, t=8, n=8, k=8, x_dtype=DType.FP16, w_dtype=DType.FP16, out_dtype=DType.FP16)
    assert grouped_skip_reason(odd) is not None


@pytest.mark.parametrize("bad, field", [({"routing": "random"}, "routing"), ({"w_layout": "nn"}, "w_layout"),
                                        ({"E": 0}, "E"), ({"dtype": "fp32"}, "dtype")])  # fmt: skip
def test_a_bad_grouped_case_names_its_field(tmp_path: Path, bad: dict[str, Any], field: str) -> None:
    f = tmp_path / "bad.json"
    f.write_text(json.dumps({"cases": [{**SMALL["cases"][0], **bad}]}))
    with pytest.raises(ValueError, match=f"field '{field}'"):
        load_shapes(f)


def test_operands_match_the_evaluation(shapes: Path) -> None:
    for name in ("moe-skewed", "moe-kn"):
        case = by_name(shapes)[name]
        x = evaluation.make_inputs(case.problem, device="cpu", routing=case.spec.routing)
        assert tuple(x.x.shape) == case.spec.x_shape and tuple(x.out.shape) == case.spec.out_shape
        storage = x.w.transpose(-2, -1) if case.spec.w_transposed else x.w
        assert tuple(storage.shape) == case.spec.w_storage and storage.is_contiguous()


@pytest.fixture
def fake_timer(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, bool]]:
    """``time_callable`` replaced: runs the callable once, returns 1.0, 1.5, 4.0 ms for the first,
    second, third callable met; records (which, whether it called autocutlass.grouped_mm)."""
    from autocutlass.search import timing

    seen: list[Any] = []
    timed: list[tuple[int, bool]] = []
    marked: list[bool] = []
    real = autocutlass.grouped_mm

    def grouped_mm(*args: Any, **kw: Any) -> Any:
        marked.append(True)
        return real(*args, **kw)

    def time_callable(fn: Any, *, flush_bytes: int, flush_kind: str = "write", **_: Any) -> Timing:
        marked.clear()
        fn()
        if fn not in seen:
            seen.append(fn)
        i = seen.index(fn)
        timed.append((i, bool(marked)))
        ms = (1.0, 1.5, 4.0)[i % 3]
        return Timing(ms, ms, ms, 10)

    monkeypatch.setattr(timing, "time_callable", time_callable)
    monkeypatch.setattr(autocutlass, "grouped_mm", grouped_mm)
    return timed


def test_measure_a_grouped_case_on_cpu(shapes: Path, fake_timer: list[tuple[int, bool]]) -> None:
    case = by_name(shapes)["moe-skewed"]
    m = measure._measure_case(case, ("torch",), 3, 0, "cached", device="cpu")
    assert m.verified and m.path == "FALLBACK" and "cpu" in (m.fallback_reason or "")
    assert fake_timer == [(0, True), (1, False), (2, False), (2, False), (1, False), (0, True), (0, True),
                          (1, False), (2, False)]  # fmt: skip
    assert m.rounds_ms == {"autocutlass": [1.0] * 3, "grouped_mm": [1.5] * 3, "loop": [4.0] * 3}
    sizes = evaluation.expert_sizes(100, 8, "skewed")
    p = case.problem
    assert m.bytes_moved == 100 * 64 * 2 + sum(n > 0 for n in sizes) * 64 * 48 * 2 + 100 * 48 * 2
    row = case_row(case, ROOFS, m)
    assert row["status"] == "fallback" and row["ratio_vs_grouped_mm"] == 1.5 and row["ratio_vs_loop"] == 4.0
    assert row["bytes_moved"] == m.bytes_moved and row["min_bytes"] == p.min_bytes
    assert row["tbps"]["autocutlass"] == pytest.approx(m.bytes_moved / 1e-3 / 1e12)
    served = {**row, "status": "ok"}
    doc = assemble_report(meta={"gpu": "cpu"}, roofs=ROOFS, rows=[served], host_overhead=None, first_call=None)
    headers, body = table(doc)
    assert "_grouped_mm" in headers and "x loop" in headers and body[0][headers.index("x _grouped_mm")] == "1.500"
    assert "x1.500 vs torch._grouped_mm over 1 cases" in geomean_line(doc) and "x4.000 vs a matmul loop" in geomean_line(doc)
    assert "torch._grouped_mm" in doc["what"] and "grouped cases" in doc["protocol"]
    assert "_grouped_mm" in progress_line(1, 1, served)
    assert footer_lines(doc)[-1] == geomean_line(doc)


def test_measure_fails_a_wrong_grouped_result(shapes: Path, fake_timer: list[tuple[int, bool]],
                                              monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    real = autocutlass.grouped_mm
    monkeypatch.setattr(autocutlass, "grouped_mm", lambda *a, **k: real(*a, **k).mul_(1.5))
    case = by_name(shapes)["moe-kn"]
    m = measure._measure_case(case, ("torch",), 3, 0, "cached", device="cpu")
    assert not m.verified and m.rounds_ms == {} and case_row(case, ROOFS, m)["status"] == "FAILED"


def test_plot_of_a_grouped_document(shapes: Path, tmp_path: Path, fake_timer: list[tuple[int, bool]]) -> None:
    rows = []
    for name in ("moe-skewed", "moe-kn", "gemm"):
        case = by_name(shapes)[name]
        rows.append(case_row(case, ROOFS, measure._measure_case(case, ("torch",), 1, 0, "cached", device="cpu")))
    doc = assemble_report(meta={"gpu": "cpu"}, roofs=ROOFS, rows=rows, host_overhead=None, first_call=None)
    assert {r["status"] for r in doc["cases"]} == {"fallback"}
    out = tmp_path / "bench.png"
    plot_report(doc, out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_grouped_baselines() -> None:
    assert [b.name for b in OP_BASELINES["grouped_mm"]] == ["grouped_mm", "loop"]
    assert not any(b.optional for b in OP_BASELINES["grouped_mm"])


def test_tune_reads_the_grouped_suite() -> None:
    from autocutlass.cli.shapes import load_cases

    cases = load_cases(SUITE, ["mixtral-up-T4096-skewed"])
    assert [c.problem.describe() for c in cases] == ["grouped_mm 8 experts T=4096 N=14336 K=4096 bf16 w col"]
    assert torch.is_tensor(evaluation.offsets(4096, 8, cases[0].routing))

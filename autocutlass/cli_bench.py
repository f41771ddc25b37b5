"""``autocutlass bench``: autocutlass against torch.matmul (cuBLAS), side by side, per case of a shapes file.

    autocutlass bench --shapes FILE.json [--only NAME]... [--vs torch[,compile]] [--out DIR]
                      [--policy tune|cached|heuristic|off] [--rounds N] [--no-first-call]
                      [--compute-roof T16[,TF32]] [--bandwidth-roof TBPS]

Per case, in this one process: operands as the shapes file says (``operand_spec``), one
``autocutlass.matmul(a, b, out=d)`` (fp8 'e4m3' cases: ``autocutlass.scaled_mm`` with random
per-tensor scales, against ``torch._scaled_mm``, both with ``use_fast_accum=True``) on a
NaN-poisoned ``d`` (it may tune or look up the database:
its wall time is ``tune_or_lookup_s``, the ``autocutlass.stats()`` delta says what it did)
checked against the float32 reference (a wrong result marks the case FAILED and it is not
timed), then ``--rounds`` rounds that each time autocutlass, torch.matmul and optionally
``torch.compile(mode="max-autotune-no-cudagraphs")`` with the timing protocol of
``autocutlass.search.timing`` (order reversed every other round). A ratio is the median of the
per-round ratios baseline_ms / autocutlass_ms (> 1: autocutlass is faster). fp32 cases run with
``torch.backends.cuda.matmul.fp32_precision = "tf32"`` on every side.

A case is memory-bound when its arithmetic intensity (flops / min_bytes) is below the ridge
point (compute roof / bandwidth roof); its headline is TB/s (min_bytes / time), else TFLOP/s.
A case that autocutlass served with torch (a fallback) is flagged and left out of the geometric
means, as are FAILED, unsupported (``AUTOCUTLASS_STRICT=1`` raised) and skipped cases.

Then: the hit path's host cost per call (a 64x64x64 bf16 call under policy 'heuristic', back to
back, against torch.matmul), and, unless ``--no-first-call``, the first call in a fresh process with this
process's database, once with the compiled-kernel cache and once with an empty one.

Writes ``bench.json`` (after every case) and ``bench.png`` to ``--out`` (default
``benchmarks/results/<date>-<gpu-slug>``); prints a table, the geometric means last. Exit code
0, or 1 without a CUDA GPU, for a bad shapes file, or when any case FAILED.

Everything but the measuring (``run_bench`` and the ``_measure_*`` helpers) is pure and runs
on CPU: case loading, classification, ratio math, the JSON document and the plot from it.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autocutlass import cli_common
from autocutlass.cli_common import positive_float, positive_int
from autocutlass.cli_tune import load_cases
from autocutlass.ops.gemm.problem import DType, Major, GemmProblem

SCHEMA_VERSION = 1
"""Version of the ``bench.json`` layout."""

COMPUTE_ROOF_16BIT_TFLOPS = 790.0
"""Default dense bf16/fp16 compute roof (TFLOP/s); TF32's is half of it, e4m3's twice."""

SIDES = ("autocutlass", "torch", "compile")
BASELINES = ("torch", "compile")

HOST_OVERHEAD_SHAPE = (64, 64, 64)
HOST_OVERHEAD_CALLS = 2000
HOST_OVERHEAD_ROUNDS = 10
COPY_BYTES = 1 << 30
"""Size of the device-to-device copy that measures the bandwidth roof (each of source and destination)."""
FIRST_CALL_TIMEOUT_S = 900

COMPILE_MODE = "max-autotune-no-cudagraphs"

_TORCH_DTYPE_NAMES = {DType.BF16: "bfloat16", DType.FP16: "float16", DType.TF32: "float32",
                      DType.FP32: "float32", DType.E4M3: "float8_e4m3fn"}  # fmt: skip


# ---- cases and operands ------------------------------------------------------------------------
@dataclass(frozen=True)
class OperandSpec:
    """How a case's operands are allocated: A @ B into a preallocated, row-major ``out``.

    A is ``a_storage`` contiguous, used as is (K contiguous) or, when ``a_transposed``, as its
    ``transpose(-1, -2)`` (M contiguous); likewise B: (K, N) as is, or a row-major (N, K) weight
    W used as ``W.t()`` (layout letter 't', as in x @ W.T). A leading L is the batch (L > 1)."""

    a_storage: tuple[int, ...]
    a_transposed: bool
    b_storage: tuple[int, ...]
    b_transposed: bool
    out_shape: tuple[int, ...]
    dtype: str
    """torch dtype name of A and B."""
    out_dtype: str
    tf32: bool
    """fp32 operands: run with torch's fp32 matmul precision 'tf32' (autocutlass serves them only then)."""

    @property
    def layout(self) -> str:
        return ("t" if self.a_transposed else "n") + ("t" if self.b_transposed else "n")

    def describe(self) -> str:
        a = f"A{_dims(self.a_storage)}" + (".t()" if self.a_transposed else "")
        b = f"W{_dims(self.b_storage)}.t()" if self.b_transposed else f"B{_dims(self.b_storage)}"
        return f"{a} @ {b} -> {self.out_dtype}{_dims(self.out_shape)}" + (" (tf32)" if self.tf32 else "")

    def as_dict(self) -> dict[str, Any]:
        return {"a_storage": list(self.a_storage), "a_transposed": self.a_transposed,
                "b_storage": list(self.b_storage), "b_transposed": self.b_transposed,
                "out_shape": list(self.out_shape), "dtype": self.dtype, "out_dtype": self.out_dtype,
                "tf32": self.tf32, "layout": self.layout}  # fmt: skip


def _dims(shape: Sequence[int]) -> str:
    return "(" + ",".join(str(s) for s in shape) + ")"


def operand_spec(problem: GemmProblem) -> OperandSpec:
    """The operands of ``problem`` (the layout of ``autocutlass.ops.gemm.evaluation.make_inputs``)."""
    m, n, k = problem.m, problem.n, problem.k
    batch = (problem.l,) if problem.l > 1 else ()
    a_t = problem.a_major is Major.COL
    b_t = problem.b_major is Major.COL
    return OperandSpec(
        a_storage=batch + ((k, m) if a_t else (m, k)),
        a_transposed=a_t,
        b_storage=batch + ((n, k) if b_t else (k, n)),
        b_transposed=b_t,
        out_shape=batch + (m, n),
        dtype=_TORCH_DTYPE_NAMES[problem.a_dtype],
        out_dtype=_TORCH_DTYPE_NAMES[problem.d_dtype],
        tf32=problem.a_dtype is DType.TF32,
    )


def skip_reason(problem: GemmProblem) -> str | None:
    """Why a case cannot be benchmarked against torch.matmul at all, or None."""
    if min(problem.m, problem.n, problem.k, problem.l) == 0:
        return "empty problem (a zero dimension)"
    if problem.a_dtype is DType.E4M3:
        if (problem.a_major, problem.b_major) != (Major.ROW, Major.COL) or problem.l != 1:
            return "fp8 cases compare with torch._scaled_mm, which takes only 2-D row-major A and W.t() B ('nt')"
    elif problem.a_dtype not in (DType.BF16, DType.FP16, DType.TF32):
        return f"torch.matmul has no {problem.a_dtype.value} matmul to compare with"
    if not problem.epilogue.is_plain:
        return "bench compares plain matmuls; this case has an epilogue"
    return None


@dataclass(frozen=True)
class BenchCase:
    """One case of the shapes file: its name, GemmProblem and operands."""

    name: str
    problem: GemmProblem
    spec: OperandSpec

    @property
    def skip(self) -> str | None:
        return skip_reason(self.problem)


def bench_cases(path: str | Path, only: Sequence[str] | None = None) -> list[BenchCase]:
    """The cases of a shapes file (``autocutlass tune``'s format), optionally only those named.

    Raises ValueError naming the file for a malformed file or an unknown name."""
    return [BenchCase(c.name, c.problem, operand_spec(c.problem)) for c in load_cases(path, only)]


# ---- roofs and classification ------------------------------------------------------------------
@dataclass(frozen=True)
class Roofs:
    """The ceilings a case is judged against: dense compute per dtype and memory bandwidth."""

    bandwidth_tbps: float
    bandwidth_source: str
    tflops_16bit: float = COMPUTE_ROOF_16BIT_TFLOPS
    tflops_tf32: float = COMPUTE_ROOF_16BIT_TFLOPS / 2

    def compute_tflops(self, problem: GemmProblem) -> float:
        dt_ = problem.a_dtype
        if dt_ in (DType.TF32, DType.FP32):
            return self.tflops_tf32
        if dt_ is DType.E4M3:
            return 2 * self.tflops_16bit
        return self.tflops_16bit

    def ridge(self, problem: GemmProblem) -> float:
        """Arithmetic intensity (flop/byte) at which the compute and bandwidth roofs meet."""
        return self.compute_tflops(problem) / self.bandwidth_tbps

    def attainable_tflops(self, problem: GemmProblem) -> float:
        """The roofline: min(compute roof, bandwidth roof x intensity)."""
        return min(self.compute_tflops(problem), self.bandwidth_tbps * intensity(problem))

    def as_dict(self) -> dict[str, Any]:
        return {"compute_tflops": {"bf16": self.tflops_16bit, "fp16": self.tflops_16bit, "tf32": self.tflops_tf32,
                                   "e4m3": 2 * self.tflops_16bit},
                "bandwidth_tbps": self.bandwidth_tbps, "bandwidth_source": self.bandwidth_source}  # fmt: skip


def intensity(problem: GemmProblem) -> float:
    """Arithmetic intensity: flops per byte of the fewest bytes the GEMM must move."""
    return problem.flops / problem.min_bytes if problem.min_bytes else math.inf


def is_memory_bound(problem: GemmProblem, roofs: Roofs) -> bool:
    """True when the problem's intensity is below the ridge point (at the ridge: compute-bound)."""
    return intensity(problem) < roofs.ridge(problem)


# ---- ratio math --------------------------------------------------------------------------------
def round_ratio(baseline_ms: Sequence[float], ours_ms: Sequence[float]) -> float | None:
    """Median over rounds of baseline_ms / ours_ms (> 1: ours is faster); None without rounds."""
    if not baseline_ms or len(baseline_ms) != len(ours_ms):
        return None
    return statistics.median(b / o for b, o in zip(baseline_ms, ours_ms, strict=True))


def geomean(values: Iterable[float | None]) -> float | None:
    """Geometric mean of the positive values, None values ignored; None when there are none."""
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    if any(v <= 0 or not math.isfinite(v) for v in vals):
        raise ValueError(f"geomean of non-positive or non-finite ratios: {vals}")
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


# ---- what the first call did -------------------------------------------------------------------
FALLBACK_PATHS = ("FALLBACK", "torch (policy off)")


def first_call_path(delta: Mapping[str, int], policy: str) -> str:
    """How dispatch served a case's first call, from the ``autocutlass.stats()`` delta around it.

    'FALLBACK' (torch ran it), 'torch (policy off)', 'tuned', 'db' (a stored record), 'memo'
    (an earlier case had the same tensor fingerprint), 'heuristic' (policy heuristic) or
    'default' (a miss served by the family's default config)."""
    if policy == "off":
        return "torch (policy off)"
    if delta.get("fallbacks", 0) > 0:
        return "FALLBACK"
    if delta.get("tunes", 0) > 0:
        return "tuned"
    if delta.get("db_hits", 0) > 0:
        return "db"
    if delta.get("memo_misses", 0) == 0:
        return "memo"
    return "heuristic" if policy == "heuristic" else "default"


def stats_delta(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, int]:
    return {k: int(after[k]) - int(before.get(k, 0)) for k in after}


# ---- per-case results and rows -----------------------------------------------------------------
@dataclass(frozen=True)
class Measured:
    """What the GPU loop measured for one case (plain data)."""

    path: str
    stats_delta: dict[str, int]
    tune_or_lookup_s: float
    verified: bool
    why: str | None = None
    rounds_ms: dict[str, list[float]] = field(default_factory=dict)
    """Per side ('autocutlass', 'torch', 'compile'): the protocol's median of each round."""
    compile_first_call_s: float | None = None
    """Wall time of torch.compile's first call (tracing and autotuning)."""
    error: str | None = None
    """The error autocutlass raised instead of serving (``AUTOCUTLASS_STRICT=1``); not timed."""


def _tflops(flops: int, ms: float | None) -> float | None:
    return None if ms is None else flops / (ms * 1e-3) / 1e12


def _tbps(nbytes: int, ms: float | None) -> float | None:
    return None if ms is None else nbytes / (ms * 1e-3) / 1e12


def case_row(case: BenchCase, roofs: Roofs, measured: Measured | None) -> dict[str, Any]:
    """The JSON row of one case; ``measured`` None: skipped (``case.skip`` says why)."""
    p = case.problem
    mem = is_memory_bound(p, roofs)
    row: dict[str, Any] = {
        "name": case.name,
        "problem": p.describe(),
        "problem_dict": p.as_dict(),
        "operands": case.spec.as_dict(),
        "flops": p.flops,
        "min_bytes": p.min_bytes,
        "intensity": intensity(p),
        "ridge": roofs.ridge(p),
        "memory_bound": mem,
        "headline": "TB/s" if mem else "TFLOP/s",
        "compute_roof_tflops": roofs.compute_tflops(p),
        "attainable_tflops": roofs.attainable_tflops(p),
    }
    if measured is None:
        row.update(status="skipped", note=case.skip or "not measured", path=None, ratio_vs_torch=None,
                   ratio_vs_compile=None, ms={}, tflops={}, tbps={}, rounds_ms={}, roof_fraction=None)  # fmt: skip
        return row
    ms = {side: statistics.median(v) for side, v in measured.rounds_ms.items() if v}
    ours = measured.rounds_ms.get("autocutlass", [])
    if measured.error is not None:
        status, note = "unsupported", f"autocutlass raised {measured.error}"
    elif not measured.verified:
        status, note = "FAILED", f"wrong result: {measured.why}"
    elif measured.path in FALLBACK_PATHS:
        status, note = "fallback", "autocutlass did not serve this case: torch ran it, the ratio means nothing"
    else:
        status, note = "ok", None
    ours_tflops = _tflops(p.flops, ms.get("autocutlass"))
    row.update(
        status=status,
        note=note,
        path=measured.path,
        stats_delta=measured.stats_delta,
        tune_or_lookup_s=measured.tune_or_lookup_s,
        compile_first_call_s=measured.compile_first_call_s,
        verified=measured.verified,
        rounds_ms=measured.rounds_ms,
        ms=ms,
        tflops={side: _tflops(p.flops, v) for side, v in ms.items()},
        tbps={side: _tbps(p.min_bytes, v) for side, v in ms.items()},
        ratio_vs_torch=round_ratio(measured.rounds_ms.get("torch", []), ours),
        ratio_vs_compile=round_ratio(measured.rounds_ms.get("compile", []), ours),
        roof_fraction=None if ours_tflops is None else ours_tflops / roofs.attainable_tflops(p),
    )
    return row


def summary(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Geometric means of the ratios over the cases autocutlass served correctly, and what was left out."""
    served = [r for r in rows if r["status"] == "ok"]
    excluded = {r["name"]: r["status"] for r in rows if r["status"] != "ok"}
    out: dict[str, Any] = {"excluded": excluded}
    for base in BASELINES:
        vals = [r[f"ratio_vs_{base}"] for r in served if r.get(f"ratio_vs_{base}") is not None]
        out[f"vs_{base}"] = geomean(vals)
        out[f"vs_{base}_cases"] = len(vals)
    return out


def assemble_report(
    *,
    meta: Mapping[str, Any],
    roofs: Roofs,
    rows: Sequence[Mapping[str, Any]],
    host_overhead: Mapping[str, Any] | None,
    first_call: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The ``bench.json`` document. ``meta``: gpu, date, versions, settings (copied as given)."""
    return {
        "what": "autocutlass.matmul vs torch.matmul (cuBLAS) [and torch.compile], side by side in one process",
        "schema": SCHEMA_VERSION,
        **meta,
        "protocol": (
            "autocutlass.search.timing v1 per side and round (L2 flushed before every timed call, by writing or "
            "reading a buffer of twice its size as settings.flush says, CUDA events, "
            "median); sides alternate, order reversed every other round; ratio = median over rounds of "
            "baseline_ms / autocutlass_ms (> 1: autocutlass faster); autocutlass called as matmul(a, b, out=d), "
            "torch as torch.matmul(a, b, out=d), torch.compile(mode='max-autotune-no-cudagraphs') of a @ b as "
            "compiled(a, b) (it allocates its output); autocutlass's first call verified against a float32 "
            "reference before timing"
        ),
        "tf32": "fp32 cases run with torch.backends.cuda.matmul.fp32_precision = 'tf32' on every side",
        "roofs": roofs.as_dict(),
        "cases": list(rows),
        "geomean": summary(rows),
        "host_overhead": None if host_overhead is None else dict(host_overhead),
        "first_call": None if first_call is None else dict(first_call),
    }


def gpu_slug(name: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'h100-80gb-hbm3': a file-name piece."""
    s = re.sub(r"^nvidia\s+", "", name.strip(), flags=re.IGNORECASE).lower()
    s = re.sub(r"[^a-z0-9]+", "-", s).strip("-")
    return s or "gpu"


def default_out_dir(gpu_name: str, date: str) -> Path:
    return Path("benchmarks") / "results" / f"{date}-{gpu_slug(gpu_name)}"


def write_json(doc: Mapping[str, Any], path: Path) -> None:
    """Write ``doc`` atomically (temp file + os.replace)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(doc, indent=1, allow_nan=False) + "\n")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


# ---- the plot (from the JSON document) ---------------------------------------------------------
_MARKERS = {"autocutlass": ("o", "tab:blue"), "torch": ("x", "tab:orange"), "compile": ("^", "tab:green")}


def plot_report(doc: Mapping[str, Any], path: Path) -> None:
    """Two panels: the ratio per case (vs torch, and vs compile when measured) with a 1.0 line;
    achieved TFLOP/s against intensity, under the compute and bandwidth roofs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = list(doc["cases"])
    fig, (bars, roof) = plt.subplots(1, 2, figsize=(15, 5.5), gridspec_kw={"width_ratios": [1.3, 1]})
    _plot_ratios(bars, rows)
    _plot_roofline(roof, rows, doc["roofs"])
    g = doc.get("geomean", {})
    title = f"{doc.get('gpu', '?')}, {doc.get('date', '')}"
    if g.get("vs_torch") is not None:
        title += f": geomean x{g['vs_torch']:.3f} vs torch.matmul over {g['vs_torch_cases']} cases"
    if g.get("vs_compile") is not None:
        title += f", x{g['vs_compile']:.3f} vs torch.compile"
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_ratios(ax: Any, rows: Sequence[Mapping[str, Any]]) -> None:
    names = [r["name"] for r in rows]
    with_compile = any(r.get("ratio_vs_compile") is not None for r in rows)
    measured = [v for r in rows for v in (r.get("ratio_vs_torch"), r.get("ratio_vs_compile")) if v]
    bottom = min([0.5, *(0.9 * v for v in measured)])
    top = max([1.3, *(1.05 * v for v in measured)])
    width = 0.4 if with_compile else 0.7
    xs = list(range(len(rows)))
    series = [("torch", "tab:blue", "vs torch.matmul", -width / 2 if with_compile else 0.0)]
    if with_compile:
        series.append(("compile", "tab:green", "vs torch.compile", width / 2))
    for base, color, label, dx in series:
        vals = [r.get(f"ratio_vs_{base}") for r in rows]
        colors = [color if r["status"] == "ok" else "lightgrey" for r in rows]
        ax.bar([x + dx for x in xs], [v or 0.0 for v in vals], width, color=colors, label=label)
        for x, v in zip(xs, vals, strict=True):
            if v:
                ax.text(x + dx, v, f"{v:.2f}", ha="center", va="bottom", fontsize=6)
    for x, r in zip(xs, rows, strict=True):
        if r["status"] != "ok":
            ax.text(x, bottom + 0.02 * (top - bottom), r["status"].upper(), rotation=90, ha="center", va="bottom",
                    fontsize=8, color="red")  # fmt: skip
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_ylim(bottom, top)
    ax.set_xticks(xs, names, rotation=35, ha="right", fontsize=8)
    ax.set_ylabel("speed-up of autocutlass (baseline ms / autocutlass ms)")
    ax.legend(loc="upper right", fontsize=8)


def _plot_roofline(ax: Any, rows: Sequence[Mapping[str, Any]], roofs: Mapping[str, Any]) -> None:
    bw = float(roofs["bandwidth_tbps"])
    timed = [r for r in rows if r.get("tflops")]
    by_roof: dict[float, set[str]] = {}
    for r in timed:
        by_roof.setdefault(float(r["compute_roof_tflops"]), set()).add(str(r["problem_dict"]["a_dtype"]))
    if not by_roof:
        by_roof = {float(roofs["compute_tflops"]["bf16"]): {"bf16", "fp16"}}
    ais = [float(r["intensity"]) for r in timed] or [1.0]
    lo = min(ais) / 2
    hi = max([*ais, *(c / bw for c in by_roof)]) * 2
    xs = [lo * (hi / lo) ** (i / 199) for i in range(200)]
    for i, c in enumerate(sorted(by_roof, reverse=True)):
        ax.plot(xs, [min(c, bw * x) for x in xs], color="k", lw=1.2 if i == 0 else 0.8, ls="-" if i == 0 else "--",
                label=f"roof {c:g} TFLOP/s ({'/'.join(sorted(by_roof[c]))}), {bw:.2f} TB/s")  # fmt: skip
    for side, (marker, color) in _MARKERS.items():
        pts = [(r["intensity"], r["tflops"][side]) for r in timed if r["tflops"].get(side)]
        if pts:
            ax.scatter([p[0] for p in pts], [p[1] for p in pts], marker=marker, color=color, s=28, label=side, zorder=3)
    for r in timed:
        t = r["tflops"].get("autocutlass")
        if t:
            ax.annotate(r["name"], (r["intensity"], t), fontsize=6, xytext=(3, -8), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (flop / min byte)")
    ax.set_ylabel("achieved TFLOP/s")
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(True, which="both", lw=0.3, alpha=0.5)


# ---- the table ---------------------------------------------------------------------------------
def _fmt(v: float | None, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def _headline(row: Mapping[str, Any], side: str) -> str:
    if row["memory_bound"]:
        v = row.get("tbps", {}).get(side)
        return "-" if v is None else f"{v:.2f} TB/s"
    v = row.get("tflops", {}).get(side)
    return "-" if v is None else f"{v:.1f} TF/s"


def table(doc: Mapping[str, Any]) -> tuple[list[str], list[tuple[str, ...]]]:
    """Headers and rows of the printed table."""
    rows = doc["cases"]
    compile_cols = any(r.get("ratio_vs_compile") is not None for r in rows)
    headers = ["case", "problem", "served by", "bound", "autocutlass", "torch", "x torch"]
    if compile_cols:
        headers += ["compile", "x compile"]
    headers += ["% roof", "1st call s"]
    body = []
    for r in rows:
        st = r["status"]
        if st in ("skipped", "unsupported", "FAILED"):
            vt = st
        elif st == "fallback":
            vt = f"{_fmt(r['ratio_vs_torch'], '.3f')} FALLBACK!"
        else:
            vt = _fmt(r["ratio_vs_torch"], ".3f")
        cells = [r["name"], r["problem"], str(r["path"] or "-"), "memory" if r["memory_bound"] else "compute",
                 _headline(r, "autocutlass"), _headline(r, "torch"), vt]  # fmt: skip
        if compile_cols:
            cells += [_headline(r, "compile"), _fmt(r.get("ratio_vs_compile"), ".3f")]
        frac = r.get("roof_fraction")
        cells += [_fmt(None if frac is None else 100 * frac, ".0f"), _fmt(r.get("tune_or_lookup_s"), ".2f")]
        body.append(tuple(cells))
    return headers, body


def footer_lines(doc: Mapping[str, Any]) -> list[str]:
    """Notes, host overhead and first-call lines, and the geometric means last."""
    lines = [f"{r['name']}: {r['status']}: {r['note']}" for r in doc["cases"] if r.get("note")]
    ho = doc.get("host_overhead")
    if ho:
        lines.append(f"hit-path host time per call ({ho['shape']}, {ho['calls']} calls): autocutlass "
                     f"{ho['autocutlass_us']:.1f} us, torch.matmul {ho['torch_us']:.1f} us "
                     f"(overhead {ho['overhead_us']:+.1f} us)")  # fmt: skip
    fc = doc.get("first_call")
    if fc and fc.get("case") is None:
        lines.append(f"first call in a fresh process: {fc.get('note')}")
    elif fc:
        for label, key in (("with kernel cache", "warm_cache"), ("empty kernel cache", "cold_cache")):
            r = fc.get(key) or {}
            if "first_call_s" in r:
                lines.append(f"first call in a fresh process, warm DB, {label} ({fc['case']}): {r['first_call_s']:.3f} s"
                             f" (imports {r['import_torch_s'] + r['import_autocutlass_s']:.2f} s not included;"
                             f" kernels compiled {r.get('kernels_compiled')}, loaded from disk {r.get('kernels_from_disk')})"
                             + (" FELL BACK TO TORCH" if r.get("stats", {}).get("fallbacks") else ""))  # fmt: skip
            elif r:
                lines.append(f"first call, {label}: child failed (exit {r.get('returncode')}): {r.get('error', '')[-300:]}")
    g = doc["geomean"]
    parts = [f"geomean x{g['vs_torch']:.3f} vs torch.matmul over {g['vs_torch_cases']} cases"
             if g.get("vs_torch") is not None else "geomean vs torch.matmul: no served case"]  # fmt: skip
    if g.get("vs_compile") is not None:
        parts.append(f"x{g['vs_compile']:.3f} vs torch.compile over {g['vs_compile_cases']}")
    if g.get("excluded"):
        parts.append("excluded: " + ", ".join(f"{n} ({s})" for n, s in g["excluded"].items()))
    lines.append("; ".join(parts))
    return lines


def print_report(doc: Mapping[str, Any], *, title: str) -> None:
    headers, body = table(doc)
    styles = ["bold red" if r["status"] in ("FAILED", "fallback") else None for r in doc["cases"]]
    cli_common.print_table(title, headers, body, right=lambda i: i >= 4, row_styles=styles)
    for line in footer_lines(doc):
        print(line)


# ---- the command -------------------------------------------------------------------------------
def add_bench_parser(subparsers: argparse._SubParsersAction[Any]) -> argparse.ArgumentParser:
    """Register ``bench`` on ``subparsers``; returns its parser."""
    p = subparsers.add_parser("bench", help="benchmark autocutlass against torch.matmul (and torch.compile)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--shapes", required=True, metavar="FILE.json", help="cases, in the benchmark-suite format")
    p.add_argument("--only", metavar="NAME", action="append", default=None, help="only the case of this name (repeatable)")
    p.add_argument("--vs", type=_baselines, default=("torch",), metavar="torch[,compile]",
                   help="baselines: torch.matmul (always), and torch.compile(mode='max-autotune-no-cudagraphs')")  # fmt: skip
    p.add_argument("--out", metavar="DIR", default=None,
                   help="where bench.json and bench.png go (default benchmarks/results/<date>-<gpu-slug>)")  # fmt: skip
    p.add_argument("--policy", choices=["tune", "cached", "heuristic", "off"], default=None,
                   help="miss policy for the benchmarked calls (default: AUTOCUTLASS_POLICY; 'cached' never tunes)")  # fmt: skip
    p.add_argument("--rounds", type=positive_int, default=5, metavar="N",
                   help="alternations of autocutlass and the baselines (default 5; ratio = median of per-round ratios)")  # fmt: skip
    p.add_argument("--no-first-call", dest="first_call", action="store_false",
                   help="skip the fresh-process first-call measurements")  # fmt: skip
    p.add_argument("--compute-roof", type=_compute_roof, metavar="T16[,TF32]",
                   default=(COMPUTE_ROOF_16BIT_TFLOPS, COMPUTE_ROOF_16BIT_TFLOPS / 2),
                   help="dense TFLOP/s of bf16/fp16 [and tf32] (default 790,395; tf32 default: half)")  # fmt: skip
    p.add_argument("--flush", choices=["write", "read"], default="write",
                   help="L2 flush before each timed call: 'write' (the tuner's protocol v1; leaves dirty lines whose "
                        "write-back the timed call pays) or 'read' (leaves clean lines); see "
                        "autocutlass.search.timing.FLUSH_KINDS")  # fmt: skip
    p.add_argument("--bandwidth-roof", type=positive_float, default=None, metavar="TBPS",
                   help="memory bandwidth in TB/s (default: measured by a device-to-device copy, "
                        "bytes read + written)")  # fmt: skip
    p.set_defaults(func=cmd_bench)
    return p




def _baselines(text: str) -> tuple[str, ...]:
    names = [t.strip() for t in text.split(",") if t.strip()]
    unknown = [n for n in names if n not in BASELINES]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown baseline {', '.join(unknown)}; choose from: torch, compile")
    return tuple(b for b in BASELINES if b == "torch" or b in names)


def _compute_roof(text: str) -> tuple[float, float]:
    parts = text.split(",")
    if len(parts) > 2:
        raise argparse.ArgumentTypeError(f"expected T16 or T16,TF32 (TFLOP/s), got {text!r}")
    t16 = positive_float(parts[0])
    return t16, positive_float(parts[1]) if len(parts) == 2 else t16 / 2


def cmd_bench(ns: argparse.Namespace) -> int:
    try:
        cases = bench_cases(ns.shapes, ns.only)
    except ValueError as e:
        print(f"autocutlass bench: error: {e}", file=sys.stderr)
        return 1
    from autocutlass.device import gpu_available

    if not gpu_available():
        print("autocutlass bench: error: no CUDA GPU is visible to this process (torch.cuda.is_available() is "
              "False); bench times kernels on an sm_90 GPU (H100/H200)", file=sys.stderr)  # fmt: skip
        return 1
    return run_bench(ns, cases)


# ---- on the GPU --------------------------------------------------------------------------------
def run_bench(ns: argparse.Namespace, cases: Sequence[BenchCase]) -> int:
    """Measure every case, the host overhead and the first call; write JSON and PNG; print."""
    import torch

    import autocutlass
    from autocutlass import settings as settings_mod
    from autocutlass.device import current_device, dsl_version, kernel_source_hash

    settings = settings_mod.current()
    policy = ns.policy or settings.policy.value
    dev = current_device()
    if dev.cc != "9.0":
        print(f"autocutlass bench: warning: autocutlass's kernels are for sm_90 (H100/H200); {dev.gpu_name} is cc "
              f"{dev.cc}, so every case will fall back to torch", file=sys.stderr)  # fmt: skip
    date = dt.date.today().isoformat()
    out_dir = Path(ns.out) if ns.out else default_out_dir(dev.gpu_name, date)
    flush = 2 * dev.l2_bytes
    if ns.bandwidth_roof is not None:
        bw, bw_source = ns.bandwidth_roof, "given (--bandwidth-roof)"
    else:
        bw = _measure_bandwidth(flush, ns.flush)
        bw_source = f"measured: device-to-device copy of {COPY_BYTES >> 20} MiB, bytes read + written"
    roofs = Roofs(bandwidth_tbps=bw, bandwidth_source=bw_source, tflops_16bit=ns.compute_roof[0],
                  tflops_tf32=ns.compute_roof[1])  # fmt: skip
    meta = {
        "gpu": dev.gpu_name, "cc": dev.cc, "sm_count": dev.sm_count, "date": date,
        "versions": {"torch": torch.__version__, "cuda": torch.version.cuda, "nvidia-cutlass-dsl": dsl_version(),
                     "kernel_source_hash": kernel_source_hash(), "driver": dev.driver_version,
                     "autocutlass": autocutlass.__version__},
        "settings": {"shapes": str(ns.shapes), "only": ns.only, "vs": list(ns.vs), "policy": policy,
                     "rounds": ns.rounds, "flush": ns.flush, "db": settings.db_url, "cache_dir": str(settings.cache_dir),
                     "tune_trials": settings.tune_trials, "tune_seconds": settings.tune_seconds},
    }  # fmt: skip
    json_path, png_path = out_dir / "bench.json", out_dir / "bench.png"
    rows: list[dict[str, Any]] = []

    def report(host: Mapping[str, Any] | None = None, first: Mapping[str, Any] | None = None) -> dict[str, Any]:
        doc = assemble_report(meta=meta, roofs=roofs, rows=rows, host_overhead=host, first_call=first)
        write_json(doc, json_path)
        return doc

    with autocutlass.policy(policy):
        for i, case in enumerate(cases, 1):
            measured = None if case.skip else _measure_case(case, ns.vs, ns.rounds, flush, policy, ns.flush)
            rows.append(case_row(case, roofs, measured))
            _progress(i, len(cases), rows[-1])
            report()
    host = _measure_host_overhead()
    first = None
    if ns.first_call:
        first = _measure_first_call(cases, rows, settings, _no_tune(policy))
    doc = report(host, first)
    plot_report(doc, png_path)
    print_report(doc, title=f"autocutlass bench on {dev.gpu_name}, policy {policy}; {json_path}, {png_path}")
    return 1 if any(r["status"] == "FAILED" for r in rows) else 0


def _no_tune(policy: str) -> str:
    """The policy for side measurements that must not start a tuning: 'tune' becomes 'cached'."""
    return "cached" if policy == "tune" else policy


def _progress(i: int, n: int, row: Mapping[str, Any]) -> None:
    if row["status"] == "skipped":
        msg = f"skipped: {row['note']}"
    else:
        flag = "" if row["status"] == "ok" else f" {row['status'].upper()}"
        msg = (f"{_headline(row, 'autocutlass')} vs torch {_headline(row, 'torch')}: "
               f"x{_fmt(row['ratio_vs_torch'], '.3f')}{flag} [{row['path']}, "
               f"first call {row['tune_or_lookup_s']:.2f} s]")  # fmt: skip
    print(f"[{i}/{n}] {row['name']}: {msg}", file=sys.stderr, flush=True)


def _measure_bandwidth(flush_bytes: int, flush_kind: str = "write") -> float:
    """TB/s of a device-to-device copy (bytes read + bytes written), timed by the protocol."""
    import torch

    from autocutlass.search.timing import time_callable

    src = torch.empty(COPY_BYTES, dtype=torch.uint8, device="cuda").fill_(1)
    dst = torch.empty_like(src)
    t = time_callable(lambda: dst.copy_(src), flush_bytes=flush_bytes, flush_kind=flush_kind)
    del src, dst
    torch.cuda.empty_cache()
    return 2 * COPY_BYTES / (t.median_ms * 1e-3) / 1e12


def _measure_case(case: BenchCase, vs: Sequence[str], rounds: int, flush_bytes: int, policy: str,
                  flush_kind: str = "write") -> Measured:
    """Verify autocutlass's first call on one case, then time every side ``rounds`` times."""
    import contextlib

    import torch

    import autocutlass
    from autocutlass.errors import CantImplement, KernelCompileError, UnsupportedProblem
    from autocutlass.search.timing import time_callable
    from autocutlass.ops.gemm.evaluation import check_output, fp32_matmul_precision, make_inputs, reference

    prob = case.problem
    precision = fp32_matmul_precision("tf32") if case.spec.tf32 else contextlib.nullcontext()
    with precision:
        x = make_inputs(prob, device="cuda", seed=0)
        a, b, d = x.a, x.b, x.d
        ref = reference(prob, x)
        x.poison()
        torch.cuda.synchronize()
        fp8 = prob.a_dtype is DType.E4M3
        sa, sb = x.scale_a, x.scale_b
        if fp8:  # autocutlass.scaled_mm against torch._scaled_mm (cuBLASLt), same scales

            # Both with fast accumulation (WGMMA accumulates across all of K): what the kernel does.
            def ours() -> object:
                return autocutlass.scaled_mm(a, b, sa, sb, out_dtype=d.dtype, out=d, use_fast_accum=True)

            def theirs() -> object:
                return torch._scaled_mm(a, b, sa, sb, out_dtype=d.dtype, use_fast_accum=True)
        else:

            def ours() -> object:
                return autocutlass.matmul(a, b, out=d)

            d_torch = torch.empty_like(d)

            def theirs() -> object:
                return torch.matmul(a, b, out=d_torch)

        before = autocutlass.stats().as_dict()
        t0 = time.perf_counter()
        try:
            ours()
            torch.cuda.synchronize()
        except (UnsupportedProblem, CantImplement, KernelCompileError) as e:  # AUTOCUTLASS_STRICT=1
            delta = stats_delta(before, autocutlass.stats().as_dict())
            return Measured(path="raised", stats_delta=delta, tune_or_lookup_s=time.perf_counter() - t0,
                            verified=False, error=f"{type(e).__name__}: {e}")  # fmt: skip
        first_s = time.perf_counter() - t0
        delta = stats_delta(before, autocutlass.stats().as_dict())
        ok, why = check_output(prob, d, ref)
        del ref
        path = first_call_path(delta, policy)
        if not ok:
            return Measured(path=path, stats_delta=delta, tune_or_lookup_s=first_s, verified=False, why=why)
        fns: dict[str, Callable[[], object]] = {"autocutlass": ours, "torch": theirs}
        compile_s = None
        if "compile" in vs and not fp8:
            fns["compile"], compile_s = _compiled_matmul(a, b)
        times: dict[str, list[float]] = {side: [] for side in fns}
        for r in range(rounds):
            order = list(fns) if r % 2 == 0 else list(reversed(fns))
            for side in order:
                times[side].append(time_callable(fns[side], flush_bytes=flush_bytes, flush_kind=flush_kind).median_ms)
    return Measured(path=path, stats_delta=delta, tune_or_lookup_s=first_s, verified=True, rounds_ms=times,
                    compile_first_call_s=compile_s)  # fmt: skip


def _mm(a: Any, b: Any) -> Any:
    import torch

    return torch.matmul(a, b)


def _compiled_matmul(a: Any, b: Any) -> tuple[Callable[[], object], float]:
    """torch.compile(max-autotune-no-cudagraphs) of a @ b for these operands, and its first call's wall time."""
    import torch

    torch._dynamo.reset()  # a fresh cache per case: no recompile limit, no reuse of another case's choice
    fn = torch.compile(_mm, mode=COMPILE_MODE, dynamic=False)
    t0 = time.perf_counter()
    fn(a, b)
    torch.cuda.synchronize()
    return (lambda: fn(a, b)), time.perf_counter() - t0


def _measure_host_overhead() -> dict[str, Any]:
    """Host time per call of a memo hit on a tiny problem against torch.matmul's, back to back.

    Under policy 'heuristic': the hit path does not depend on where its config came from, and a
    lookup under 'cached' would record the tiny problem as a miss to tune in the user's database.

    Rounds of ``HOST_OVERHEAD_CALLS / HOST_OVERHEAD_ROUNDS`` calls, the two alternating; each
    round is timed by the CPU clock from its first call until the last one returns (launches
    are asynchronous; a round is shorter than the launch queue, so it measures the host), and
    the GPU is synchronised between rounds. Per call: the median over rounds."""
    import torch

    import autocutlass

    m, n, k = HOST_OVERHEAD_SHAPE
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    per_round = HOST_OVERHEAD_CALLS // HOST_OVERHEAD_ROUNDS
    policy = "heuristic"
    with autocutlass.policy(policy):
        before = autocutlass.stats().as_dict()
        autocutlass.matmul(a, b)
        path = first_call_path(stats_delta(before, autocutlass.stats().as_dict()), policy)
        fns = {"autocutlass": lambda: autocutlass.matmul(a, b), "torch": lambda: torch.matmul(a, b)}
        for f in fns.values():
            for _ in range(50):
                f()
        us: dict[str, list[float]] = {side: [] for side in fns}
        for _ in range(HOST_OVERHEAD_ROUNDS):
            for side, f in fns.items():
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                for _ in range(per_round):
                    f()
                us[side].append((time.perf_counter() - t0) / per_round * 1e6)
        torch.cuda.synchronize()
    ours, theirs = statistics.median(us["autocutlass"]), statistics.median(us["torch"])
    return {"shape": f"{m}x{n}x{k} bf16", "calls": HOST_OVERHEAD_CALLS, "rounds": HOST_OVERHEAD_ROUNDS,
            "policy": policy, "served_by": path, "autocutlass_us": ours, "torch_us": theirs,
            "overhead_us": ours - theirs, "rounds_us": us}  # fmt: skip


_FIRST_CALL_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
import autocutlass, autocutlass.api
t2 = time.perf_counter()
spec = json.loads(sys.argv[1])
if spec["tf32"]:
    torch.backends.cuda.matmul.fp32_precision = "tf32"
dtype, out_dtype = getattr(torch, spec["dtype"]), getattr(torch, spec["out_dtype"])
a = torch.randn(spec["a_storage"], device="cuda").to(dtype)
b = torch.randn(spec["b_storage"], device="cuda").to(dtype)
a = a.transpose(-1, -2) if spec["a_transposed"] else a
b = b.transpose(-1, -2) if spec["b_transposed"] else b
d = torch.empty(spec["out_shape"], device="cuda", dtype=out_dtype)
torch.cuda.synchronize()
t3 = time.perf_counter()
autocutlass.matmul(a, b, out=d)
torch.cuda.synchronize()
t4 = time.perf_counter()
autocutlass.matmul(a, b, out=d)
torch.cuda.synchronize()
t5 = time.perf_counter()
kc = sys.modules.get("autocutlass.kernels.hopper_gemm.compile")
print(json.dumps({
    "import_torch_s": t1 - t0, "import_autocutlass_s": t2 - t1, "setup_s": t3 - t2,
    "first_call_s": t4 - t3, "second_call_s": t5 - t4, "stats": autocutlass.stats().as_dict(),
    "kernels_compiled": kc.STATS.compiled if kc else None, "kernels_from_disk": kc.STATS.disk_hits if kc else None,
}))
"""


def first_call_case(rows: Sequence[Mapping[str, Any]]) -> str | None:
    """The case the first-call measurement uses: the first served one with a database record
    ('tuned' or 'db'), else the first served one; None when none was served."""
    served = [r for r in rows if r["status"] == "ok"]
    recorded = [r for r in served if r["path"] in ("tuned", "db")]
    pick = (recorded or served or [None])[0]
    return None if pick is None else str(pick["name"])


def _measure_first_call(cases: Sequence[BenchCase], rows: Sequence[Mapping[str, Any]], settings: Any,
                        policy: str) -> dict[str, Any] | None:  # fmt: skip
    """The first call of one served case in fresh processes: with this process's database and
    kernel cache, and with the same database but empty kernel caches (ours and the DSL's)."""
    name = first_call_case(rows)
    if name is None:
        return {"case": None, "note": "not measured: autocutlass served no case"}
    case = next(c for c in cases if c.name == name)
    row = next(r for r in rows if r["name"] == name)
    import autocutlass

    source_root = str(Path(autocutlass.__file__).resolve().parents[1])  # the child imports this autocutlass
    pythonpath = os.pathsep.join(p for p in (source_root, os.environ.get("PYTHONPATH")) if p)
    base = {**os.environ, "PYTHONPATH": pythonpath, "AUTOCUTLASS_DB": settings.db_url,
            "AUTOCUTLASS_CACHE_DIR": str(settings.cache_dir), "AUTOCUTLASS_POLICY": policy}  # fmt: skip
    out: dict[str, Any] = {"case": name, "served_by_in_bench": row["path"], "policy": policy,
                           "has_db_record": row["path"] in ("tuned", "db"), "db": settings.db_url}  # fmt: skip
    out["warm_cache"] = _run_child(case.spec, base)
    with tempfile.TemporaryDirectory(prefix="autocutlass-bench-") as tmp:
        cold = {**base, "AUTOCUTLASS_CACHE_DIR": tmp, "CUTE_DSL_CACHE_DIR": str(Path(tmp) / "cute_dsl")}
        out["cold_cache"] = _run_child(case.spec, cold)
    return out


def _run_child(spec: OperandSpec, env: Mapping[str, str]) -> dict[str, Any]:
    try:
        r = subprocess.run([sys.executable, "-c", _FIRST_CALL_CHILD, json.dumps(spec.as_dict())], env=dict(env),
                           capture_output=True, text=True, timeout=FIRST_CALL_TIMEOUT_S)  # fmt: skip
    except subprocess.TimeoutExpired:
        return {"returncode": None, "error": f"timed out after {FIRST_CALL_TIMEOUT_S} s"}
    lines = r.stdout.strip().splitlines()
    if r.returncode != 0 or not lines:
        return {"returncode": r.returncode, "error": r.stderr[-2000:]}
    try:
        return dict(json.loads(lines[-1]))
    except json.JSONDecodeError:
        return {"returncode": r.returncode, "error": f"unreadable child output: {lines[-1][:300]}"}

"""``autocutlass bench``'s report, from plain data: per-round ratios and their geometric means, the
row of each case, the ``bench.json`` document, the printed table and its footer. Pure (no torch,
no GPU): everything here runs on CPU from what ``measure`` hands over or from a saved JSON.

A ratio is the median of the per-round ratios baseline_ms / autocutlass_ms (> 1: autocutlass is
faster). A case that autocutlass served with torch (a fallback) is flagged and left out of the
geometric means, as are FAILED, unsupported (``AUTOCUTLASS_STRICT=1`` raised) and skipped cases.
"""

from __future__ import annotations

import json
import math
import os
import re
import statistics
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autocutlass.cli import common
from autocutlass.cli.bench.cases import BenchCase, Roofs, intensity, is_memory_bound

SCHEMA_VERSION = 1
"""Version of the ``bench.json`` layout."""

SIDES = ("autocutlass", "torch", "compile")
BASELINES = ("torch", "compile")


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

# ---- which case the first-call measurement uses -------------------------------------------------
def first_call_case(rows: Sequence[Mapping[str, Any]]) -> str | None:
    """The case the first-call measurement uses: the first served one with a database record
    ('tuned' or 'db'), else the first served one; None when none was served."""
    served = [r for r in rows if r["status"] == "ok"]
    recorded = [r for r in served if r["path"] in ("tuned", "db")]
    pick = (recorded or served or [None])[0]
    return None if pick is None else str(pick["name"])

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
    common.print_table(title, headers, body, right=lambda i: i >= 4, row_styles=styles)
    for line in footer_lines(doc):
        print(line)

def progress_line(i: int, n: int, row: Mapping[str, Any]) -> str:
    """The line printed (on stderr) after case ``i`` of ``n`` is measured."""
    if row["status"] == "skipped":
        msg = f"skipped: {row['note']}"
    else:
        flag = "" if row["status"] == "ok" else f" {row['status'].upper()}"
        msg = (f"{_headline(row, 'autocutlass')} vs torch {_headline(row, 'torch')}: "
               f"x{_fmt(row['ratio_vs_torch'], '.3f')}{flag} [{row['path']}, "
               f"first call {row['tune_or_lookup_s']:.2f} s]")  # fmt: skip
    return f"[{i}/{n}] {row['name']}: {msg}"

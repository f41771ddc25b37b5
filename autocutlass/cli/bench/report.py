"""``autocutlass bench``'s report, from plain data: per-round ratios and their geometric means, the
row of each case, the ``bench.json`` document, the printed table and its footer. Pure (no torch,
no GPU): everything here runs on CPU from what ``measure`` hands over or from a saved JSON.

Each op has its baselines (``OP_BASELINES``): a GEMM is compared with torch.matmul (fp8: torch._scaled_mm)
and optionally torch.compile, a conv2d with ``F.conv2d`` (cuDNN) under
``torch.backends.cudnn.benchmark = True`` and under False (PyTorch's default heuristic), a grouped
GEMM with ``torch._grouped_mm`` and with a loop of ``torch.matmul`` per expert. A grouped row's
bytes (TB/s, intensity, roofline) are those its routing moves: x, the output and the weights of
the experts that received rows (``Measured.bytes_moved``), not every expert's. A row
holds ``ratio_vs_<baseline>`` for its op's baselines; a shapes file may mix ops.

A ratio is the median of the per-round ratios baseline_ms / autocutlass_ms (> 1: autocutlass is
faster), autocutlass being the baseline's side of ours (``Baseline.ours``): 'autocutlass', but a
conv2d's cuDNN modes are each compared with ours called in that mode ('autocutlass_benchmark'
against 'cudnn_benchmark', 'autocutlass' against 'cudnn_default'), as a user in that mode gets it:
whether a vendor verdict lets torch serve a layer depends on the mode. A case that autocutlass
served with torch (a fallback, or a vendor verdict) is flagged and left out of the geometric means
of the baselines whose side of ours torch served (``baseline_status``: a conv2d layer's verdict in
benchmark mode leaves it in the default mode's), as are FAILED, unsupported
(``AUTOCUTLASS_STRICT=1`` raised) and skipped cases; a second geometric mean per baseline
(``vs_<baseline>_with_fallbacks``) counts each fallback at 1.0 (torch against itself), and
``geomean.fallbacks`` lists them with their reason.
"""

from __future__ import annotations

import dataclasses
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
from autocutlass.cli.shapes import Skipped

SCHEMA_VERSION = 1
"""Version of the ``bench.json`` layout."""


@dataclass(frozen=True)
class Baseline:
    """What autocutlass is compared with: ``name`` keys its rounds (``rounds_ms``) and its ratio
    (``ratio_vs_<name>``); ``label`` names it in sentences, ``column`` in the table. An
    ``optional`` baseline is measured only when asked (``--vs``): its columns show only then."""

    name: str
    label: str
    column: str
    optional: bool = False
    ours: str = "autocutlass"
    """The side of ours whose rounds its ratio divides: 'autocutlass', but for each of conv2d's
    cuDNN modes ours called in that mode ('autocutlass_benchmark' for benchmark mode, 'autocutlass'
    for the default), on that mode's thread (``measure._ConvSides``): the verdicts that let torch
    serve a layer apply in one mode and not the other, so one time of ours cannot stand for both."""
    ours_column: str = "autocutlass"
    """The table's column of that side of ours (baselines with the same side share it); where an
    op has several sides of ours, also its name in the served-by cell and the progress line."""
    ours_label: str = "autocutlass"
    """That side of ours in sentences (notes, fallback reasons, the plot's legend)."""


OP_BASELINES: dict[str, tuple[Baseline, ...]] = {
    "gemm": (Baseline("torch", "torch.matmul", "torch"),
             Baseline("compile", "torch.compile", "compile", optional=True)),
    "conv2d": (Baseline("cudnn_benchmark", "cuDNN benchmark", "cuDNN bench", ours="autocutlass_benchmark",
                        ours_column="ours bench", ours_label="autocutlass in cuDNN benchmark mode"),
               Baseline("cudnn_default", "cuDNN default", "cuDNN default", ours="autocutlass",
                        ours_column="ours default", ours_label="autocutlass in cuDNN default mode")),
    "grouped_mm": (Baseline("grouped_mm", "torch._grouped_mm", "_grouped_mm"),
                   Baseline("loop", "a matmul loop per expert", "loop")),
}  # fmt: skip
"""Per op, its baselines, the primary first (its ratio column also carries the row's status; its
side of ours is the one whose first call is the case's first, ``Measured.path``)."""
PRIMARY = frozenset(bases[0] for bases in OP_BASELINES.values())
BASELINES = tuple(b.name for b in OP_BASELINES["gemm"])
"""The GEMM baselines ``--vs`` chooses from (torch always)."""
SIDES = (*dict.fromkeys(b.ours for bs in OP_BASELINES.values() for b in bs),
         *(b.name for bs in OP_BASELINES.values() for b in bs))  # fmt: skip
"""Every side's name in ``rounds_ms``: the sides of ours, then the baselines."""


def ours_sides(op: str) -> dict[str, Baseline]:
    """The sides of ours of ``op``, each with the first of its baselines that is compared with it;
    the primary baseline's first (the side whose first call is the case's first)."""
    out: dict[str, Baseline] = {}
    for b in OP_BASELINES[op]:
        out.setdefault(b.ours, b)
    return out


def row_op(row: Mapping[str, Any]) -> str:
    """The op of a row (its problem's; rows of files written before conv2d are GEMMs)."""
    return str(row["problem_dict"].get("op", "gemm"))


def row_ops(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The ops of ``rows``, in ``OP_BASELINES`` order; GEMM for no rows."""
    ops = {row_op(r) for r in rows}
    return [op for op in OP_BASELINES if op in ops] or ["gemm"]


def doc_baselines(rows: Sequence[Mapping[str, Any]], *, measured_only: bool = False) -> list[Baseline]:
    """The baselines of the ops in ``rows``, in ``OP_BASELINES`` order; with ``measured_only``, an
    optional one only where some row measured it."""
    return [
        b for op in row_ops(rows) for b in OP_BASELINES[op]
        if not (measured_only and b.optional) or any(r.get(f"ratio_vs_{b.name}") is not None for r in rows)
    ]  # fmt: skip


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
VENDOR_PATH = "torch (verdict)"
STANDIN_PATH = "torch (stand-in)"
FALLBACK_PATHS = ("FALLBACK", "torch (policy off)", VENDOR_PATH, STANDIN_PATH)


def first_call_path(delta: Mapping[str, int], policy: str) -> str:
    """How dispatch served a case's first call, from the ``autocutlass.stats()`` delta around it.

    'FALLBACK' (torch ran it), 'torch (policy off)', 'torch (verdict)' (the problem's tuning measured
    torch faster than our best: ``autocutlass.vendor``), 'torch (stand-in)' (torch in place of an
    untuned problem's stand-in config: a tuned-only family's, or one not compiled yet under
    ``background``), 'tuned', 'db' (a stored record of this GPU),
    'sibling' (a record a sibling GPU measured: an H200's on an H100), 'memo' (an earlier case had
    the same tensor fingerprint), 'heuristic' (policy heuristic) or 'default' (a miss served by the
    family's default config)."""
    if policy == "off":
        return "torch (policy off)"
    if delta.get("fallbacks", 0) > 0:
        return "FALLBACK"
    if delta.get("vendor_hits", 0) > 0:
        return VENDOR_PATH
    if delta.get("torch_standins", 0) > 0:
        return STANDIN_PATH
    if delta.get("tunes", 0) > 0:
        return "tuned"
    if delta.get("db_hits", 0) > 0:
        return "db"
    if delta.get("sibling_hits", 0) > 0:
        return "sibling"
    if delta.get("memo_misses", 0) == 0:
        return "memo"
    return "heuristic" if policy == "heuristic" else "default"


def memo_path(path: str, problem: Any, earlier: Mapping[Any, tuple[str, str | None]]) -> tuple[str, str | None]:
    """A 'memo' first call serves what the earlier case of the same problem was served by (its
    memo key is that case's, and a memo hit counts no vendor or fallback call in the stats): that
    case's (path, fallback reason) when it was torch (so a torch verdict served from the memo is
    flagged as one, not timed as ours), else ('memo', None). ``earlier``: problem -> (path,
    reason) of the latest earlier case of it."""
    if path == "memo" and problem in earlier and earlier[problem][0] in FALLBACK_PATHS:
        first, reason = earlier[problem]
        return first, reason
    return path, None


def stats_delta(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, int]:
    return {k: int(after[k]) - int(before.get(k, 0)) for k in after}

# ---- per-case results and rows -----------------------------------------------------------------
@dataclass(frozen=True)
class OursCall:
    """The first call of one side of ours: how dispatch served it, the ``autocutlass.stats()``
    delta around it and its wall time, why torch ran it (a fallback) and whether its verified
    output was poisoned memory. ``Measured``'s own fields say this of the case's first side of ours
    (the primary baseline's); ``Measured.more_ours`` of the others."""

    path: str
    stats_delta: dict[str, int]
    first_call_s: float
    fallback_reason: str | None = None
    output_poisoned: bool | None = None

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"path": self.path, "first_call_s": self.first_call_s, "stats_delta": self.stats_delta}
        if self.fallback_reason is not None:
            d["fallback_reason"] = self.fallback_reason
        if self.output_poisoned is not None:
            d["output_poisoned"] = self.output_poisoned
        return d


@dataclass(frozen=True)
class Measured:
    """What the GPU loop measured for one case (plain data). ``path``, ``stats_delta``,
    ``tune_or_lookup_s``, ``fallback_reason`` and ``output_poisoned`` are of the case's first call:
    that of the primary baseline's side of ours (``ours_sides``; conv2d: ours in cuDNN benchmark
    mode), which may tune; ``more_ours`` holds the other sides' first calls."""

    path: str
    stats_delta: dict[str, int]
    tune_or_lookup_s: float
    verified: bool
    why: str | None = None
    rounds_ms: dict[str, list[float]] = field(default_factory=dict)
    """Per side ('autocutlass', 'torch', 'compile'; conv2d: 'autocutlass_benchmark', 'autocutlass',
    'cudnn_benchmark', 'cudnn_default'): the protocol's median of each round."""
    compile_first_call_s: float | None = None
    """Wall time of torch.compile's first call (tracing and autotuning)."""
    error: str | None = None
    """The error autocutlass raised instead of serving (``AUTOCUTLASS_STRICT=1``); not timed."""
    fallback_reason: str | None = None
    """Why torch ran the case (path 'FALLBACK'), as far as known."""
    output_poisoned: bool | None = None
    """Whether the verified output was NaN-poisoned memory (a GEMM's ``out``: always; conv2d, which
    allocates its output: whether it got the poisoned block back from the allocator)."""
    bytes_moved: int | None = None
    """The bytes the case must move as measured (grouped GEMM: under its routing); None: the
    problem's ``min_bytes``."""
    host_ms: dict[str, float] = field(default_factory=dict)
    """Per side: the host time of issuing one call (``Timing.host_ms``), median over the rounds."""
    more_ours: dict[str, OursCall] = field(default_factory=dict)
    """The first calls of the op's other sides of ours (conv2d: 'autocutlass', ours in cuDNN's
    default mode, called after benchmark mode's), each verified as the case's first call is; a
    side missing here was not reached (the case failed or raised before it)."""

    def ours_calls(self, op: str) -> dict[str, OursCall]:
        """Every side of ours that was called: the case's first call under the primary baseline's
        side name, then ``more_ours``."""
        first = next(iter(ours_sides(op)))
        return {first: OursCall(self.path, self.stats_delta, self.tune_or_lookup_s, self.fallback_reason,
                                self.output_poisoned), **self.more_ours}  # fmt: skip


def _tflops(flops: int, ms: float | None) -> float | None:
    return None if ms is None else flops / (ms * 1e-3) / 1e12


def _tbps(nbytes: int, ms: float | None) -> float | None:
    return None if ms is None else nbytes / (ms * 1e-3) / 1e12


def case_row(case: BenchCase, roofs: Roofs, measured: Measured | None) -> dict[str, Any]:
    """The JSON row of one case; ``measured`` None: skipped (``case.skip`` says why)."""
    p = case.problem
    nbytes = p.min_bytes if measured is None or measured.bytes_moved is None else measured.bytes_moved
    mem = is_memory_bound(p, roofs, nbytes)
    row: dict[str, Any] = {
        "name": case.name,
        "problem": p.describe(),
        "problem_dict": p.as_dict(),
        "operands": case.spec.as_dict(),
        "flops": p.flops,
        "min_bytes": p.min_bytes,
        "intensity": intensity(p, nbytes),
        "ridge": roofs.ridge(p),
        "memory_bound": mem,
        "headline": "TB/s" if mem else "TFLOP/s",
        "compute_roof_tflops": roofs.compute_tflops(p),
        "attainable_tflops": roofs.attainable_tflops(p, nbytes),
    }
    if nbytes != p.min_bytes:
        row["bytes_moved"] = nbytes
    bases = OP_BASELINES[p.op]
    ratio_keys = [f"ratio_vs_{b.name}" for b in bases]
    if measured is None:
        row.update(status="skipped", note=case.skip or "not measured", path=None, **dict.fromkeys(ratio_keys),
                   ms={}, tflops={}, tbps={}, rounds_ms={}, roof_fraction=None)  # fmt: skip
        return row
    ms = {side: statistics.median(v) for side, v in measured.rounds_ms.items() if v}
    sides = ours_sides(p.op)
    calls = measured.ours_calls(p.op)
    torch_ran = [side for side, c in calls.items() if c.path in FALLBACK_PATHS]
    reason = _fallback_reasons(calls, torch_ran, sides)
    if measured.error is not None:
        status, note = "unsupported", f"autocutlass raised {measured.error}"
    elif not measured.verified:
        status, note = "FAILED", f"wrong result: {measured.why}"
    elif torch_ran and len(torch_ran) == len(calls):
        status = "fallback"
        note = ("autocutlass did not serve this case: torch ran it, the ratio means nothing (counted at 1.0)"
                + (f": {reason}" if reason else ""))  # fmt: skip
    elif torch_ran:
        status = "fallback"
        vs = ", ".join(b.label for b in bases if b.ours in torch_ran)
        note = (f"{' and '.join(sides[s].ours_label for s in torch_ran)} did not serve this case: torch ran it, "
                f"the ratio vs {vs} means nothing (counted at 1.0)" + (f": {reason}" if reason else ""))  # fmt: skip
    else:
        status, note = "ok", None
    ours_tflops = _tflops(p.flops, ms.get(bases[0].ours))
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
        tbps={side: _tbps(nbytes, v) for side, v in ms.items()},
        **{f"ratio_vs_{b.name}": round_ratio(measured.rounds_ms.get(b.name, []), measured.rounds_ms.get(b.ours, []))
           for b in bases},
        roof_fraction=None if ours_tflops is None else ours_tflops / roofs.attainable_tflops(p, nbytes),
    )  # fmt: skip
    if len(sides) > 1:
        row["ours_sides"] = {side: c.as_dict() for side, c in calls.items()}
    if measured.host_ms:
        row["host_us"] = {side: v * 1e3 for side, v in measured.host_ms.items()}
    if reason is not None:
        row["fallback_reason"] = reason
    poisoned = [c.output_poisoned for c in calls.values() if c.output_poisoned is not None]
    if poisoned:
        row["output_poisoned"] = all(poisoned)
    return row


def _fallback_reasons(calls: Mapping[str, OursCall], torch_ran: Sequence[str],
                      sides: Mapping[str, Baseline]) -> str | None:  # fmt: skip
    """Why torch ran the sides of ours in ``torch_ran``: the reason, where they share it (or there
    is one side); else each one's, named by its side (``Baseline.ours_label``)."""
    reasons = {side: calls[side].fallback_reason for side in torch_ran if calls[side].fallback_reason}
    if len(set(reasons.values())) <= 1:
        return next(iter(reasons.values()), None)
    return "; ".join(f"{sides[side].ours_label}: {why}" for side, why in reasons.items())


def side_paths(row: Mapping[str, Any]) -> dict[str, str]:
    """How dispatch served each side of ours of a measured row (``ours_sides``), from its
    ``ours_sides`` (ops with several) or its ``path`` (one side; rows of files written before
    conv2d had a side of ours per cuDNN mode)."""
    if "ours_sides" in row:
        return {side: str(c["path"]) for side, c in row["ours_sides"].items()}
    return {} if row.get("path") is None else {next(iter(ours_sides(row_op(row)))): str(row["path"])}


def baseline_status(row: Mapping[str, Any], b: Baseline) -> str:
    """The row's status as far as baseline ``b`` goes: a fallback row of an op with several sides of
    ours (``ours_sides``) is 'fallback' against ``b`` where torch served ``b``'s side and 'ok' where
    ours did (a conv2d layer whose verdict lets torch serve it in benchmark mode only is a fallback
    against cuDNN benchmark and served against cuDNN default); otherwise the row's status."""
    status = str(row["status"])
    if status != "fallback" or "ours_sides" not in row:
        return status
    path = row["ours_sides"].get(b.ours, {}).get("path")
    return "ok" if path is not None and path not in FALLBACK_PATHS else "fallback"


def served_by(row: Mapping[str, Any]) -> str:
    """The table's served-by cell: the path, or each side of ours' where they differ (conv2d:
    'ours bench: torch (verdict), ours default: db')."""
    paths = side_paths(row)
    if len(set(paths.values())) <= 1:
        return str(row.get("path") or "-")
    sides = ours_sides(row_op(row))
    return ", ".join(f"{sides[side].ours_column if side in sides else side}: {path}" for side, path in paths.items())


def summary(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per baseline of the rows' ops: the geometric mean of the ratios over the cases autocutlass
    served correctly (``vs_<name>``, ``vs_<name>_cases``), and the same with every fallback measured
    against that baseline counted at 1.0 (``vs_<name>_with_fallbacks``, ``..._cases``); what was
    left out (``excluded``: name -> status) and the fallbacks (``fallbacks``: name -> reason)."""
    fell_back = [r for r in rows if r["status"] == "fallback"]
    out: dict[str, Any] = {"excluded": {r["name"]: _excluded(r) for r in rows if r["status"] != "ok"}}
    for b in doc_baselines(rows):
        key = f"ratio_vs_{b.name}"
        vals = [r[key] for r in rows if r.get(key) is not None and baseline_status(r, b) == "ok"]
        ones = [1.0 for r in rows if r.get(key) is not None and baseline_status(r, b) == "fallback"]
        out[f"vs_{b.name}"] = geomean(vals)
        out[f"vs_{b.name}_cases"] = len(vals)
        out[f"vs_{b.name}_with_fallbacks"] = geomean(vals + ones)
        out[f"vs_{b.name}_with_fallbacks_cases"] = len(vals) + len(ones)
    out["fallbacks"] = {r["name"]: r.get("fallback_reason") or "not known" for r in fell_back}
    return out


def _excluded(row: Mapping[str, Any]) -> str:
    """Why a row is left out of geometric means: its status, and for a fallback that only some of
    its op's baselines count as one (``baseline_status``), which: 'fallback vs cuDNN benchmark'."""
    bases = OP_BASELINES[row_op(row)]
    fell = [b.label for b in bases if baseline_status(row, b) == "fallback"]
    if row["status"] != "fallback" or len(fell) == len(bases):
        return str(row["status"])
    return f"fallback vs {', '.join(fell)}"


_WHAT = {
    "gemm": "autocutlass.matmul vs torch.matmul (cuBLAS) [and torch.compile]",
    "conv2d": "autocutlass.conv2d (and its dgrad / wgrad) vs F.conv2d (and aten.convolution_backward) (cuDNN, "
              "torch.backends.cudnn.benchmark True and False)",
    "grouped_mm": "autocutlass.grouped_mm vs torch._grouped_mm and a torch.matmul loop per expert",
}
_CALLS = {
    "gemm": (
        "autocutlass called as matmul(a, b, out=d), torch as torch.matmul(a, b, out=d), "
        "torch.compile(mode='max-autotune-no-cudagraphs') of a @ b as compiled(a, b) (it allocates its output)"
    ),
    "conv2d": (
        "conv2d cases: autocutlass called as autocutlass.conv2d(x, w, None, stride, padding, dilation, groups) on "
        "channels_last x and w, cuDNN as F.conv2d with the same arguments; ours timed once per cuDNN mode, as a "
        "user in that mode gets it: each mode (torch.backends.cudnn.benchmark True: sides autocutlass_benchmark "
        "and cudnn_benchmark; False, PyTorch's default: sides autocutlass and cudnn_default) called and timed on "
        "a thread of its own started for the case, both its sides on it, each setting the flag before its call "
        "(PyTorch caches cuDNN's plans per thread, keyed without the flag: where dispatch lets torch serve a "
        "layer, ours runs the plan a user in that mode has on that thread; up to session 41 both modes ran on "
        "one thread and the default mode's column was benchmark mode's plans); the vendor verdicts that let "
        "torch serve a layer apply as they would for a user in that mode (the conv front-ends' memo key holds "
        "the flag), and each side of ours' first call says how it was served (ours_sides; path: benchmark "
        "mode's, called first: it may tune); ratio_vs_cudnn_benchmark divides by autocutlass_benchmark, "
        "ratio_vs_cudnn_default by autocutlass (until session 43 ours was timed once, with the flag False on "
        "the caller's thread, and compared with both modes); dgrad and "
        "wgrad cases ('<name>/dgrad', '<name>/wgrad'): autocutlass as the conv2d_dgrad / conv2d_wgrad dispatcher "
        "calls of conv2d's backward on channels_last dy and w (or x), cuDNN as aten.convolution_backward with that "
        "one output in its mask (what autograd runs; hopper_conv_dgrad's flipped filter is computed by the first "
        "call and reused, the weight not changing); all allocate "
        "their output; each side of ours verified before timing: its first call's output and a second call's (in "
        "the block of a NaN-filled tensor just freed: output_poisoned says whether the allocator handed that block "
        "back; per side in ours_sides)"
    ),
    "grouped_mm": (
        "grouped cases: autocutlass called as autocutlass.grouped_mm(x, w, offs) and torch as "
        "torch._grouped_mm(x, w, offs) (both allocate their output; verified like conv2d's), the loop as "
        "torch.matmul(x[rows], w[e], out=out[rows]) per expert with rows (the routing's sizes read on the host "
        "once, before timing); x (T, K), w stored (E, N, K) and used transposed, offs int32 of the case's routing"
    ),
}
_TF32 = {
    "gemm": "fp32 cases run with torch.backends.cuda.matmul.fp32_precision = 'tf32' on every side",
    "conv2d": "fp32 conv2d cases run with torch.backends.cudnn.allow_tf32 = True on every side",
    "grouped_mm": "grouped cases are bf16 (no tf32)",
}


def assemble_report(
    *,
    meta: Mapping[str, Any],
    roofs: Roofs,
    rows: Sequence[Mapping[str, Any]],
    host_overhead: Mapping[str, Any] | None,
    first_call: Mapping[str, Any] | None,
    skipped: Sequence[Skipped] = (),
) -> dict[str, Any]:
    """The ``bench.json`` document. ``meta``: gpu, date, versions, settings (copied as given);
    ``skipped``: the conv directions the shapes file lists that are not measured."""
    ops = row_ops(rows)
    doc = {
        "what": "; ".join(_WHAT[op] for op in ops) + ", side by side in one process",
        "schema": SCHEMA_VERSION,
        **meta,
        "protocol": (
            "autocutlass.search.timing v1 per side and round (L2 flushed before every timed call, by writing or "
            "reading a buffer of twice its size as settings.flush says, CUDA events, "
            "median); sides alternate, order reversed every other round; ratio = median over rounds of "
            "baseline_ms / autocutlass_ms (> 1: autocutlass faster); " + "; ".join(_CALLS[op] for op in ops)
            + "; autocutlass's first call verified against a float32 reference before timing"
        ),
        "tf32": "; ".join(_TF32[op] for op in ops),
        "roofs": roofs.as_dict(),
        "cases": list(rows),
        "geomean": summary(rows),
        "host_overhead": None if host_overhead is None else dict(host_overhead),
        "first_call": None if first_call is None else dict(first_call),
    }
    if skipped:
        doc["skipped_directions"] = [dataclasses.asdict(s) for s in skipped]
    return doc


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
    ('tuned', 'db' or 'sibling'), else the first served one; None when none was served."""
    served = [r for r in rows if r["status"] == "ok"]
    recorded = [r for r in served if r["path"] in ("tuned", "db", "sibling")]
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


def _ratio_cell(row: Mapping[str, Any], b: Baseline) -> str:
    """The ratio cell of ``b``; the primary baseline of the row's op also says the row's status, and
    the first baseline of each side of ours whether torch served that side (FALLBACK!)."""
    ratio = _fmt(row.get(f"ratio_vs_{b.name}"), ".3f")
    primary = b == OP_BASELINES[row_op(row)][0]
    st = baseline_status(row, b)
    if primary and st in ("skipped", "unsupported", "FAILED"):
        return st
    flagged = st == "fallback" and ours_sides(row_op(row))[b.ours] == b
    return f"{ratio} FALLBACK!" if flagged else ratio


def _ours_cell(row: Mapping[str, Any], column: str) -> str:
    """The headline of the row's side of ours shown in ``column`` (``Baseline.ours_column``); '-'
    where the row's op has no side there (a GEMM row under conv2d's 'ours bench')."""
    side = next((b.ours for b in OP_BASELINES[row_op(row)] if b.ours_column == column), None)
    return "-" if side is None else _headline(row, side)


def table(doc: Mapping[str, Any]) -> tuple[list[str], list[tuple[str, ...]]]:
    """Headers and rows of the printed table: per baseline of the rows' ops (an optional one when
    measured), its headline figure and the ratio to it, after the headline of its side of ours
    where no earlier baseline showed that column (conv2d: 'ours bench' before cuDNN benchmark's,
    'ours default' before cuDNN default's; GEMM and grouped GEMM share 'autocutlass')."""
    rows = doc["cases"]
    bases = doc_baselines(rows, measured_only=True)
    columns: list[str | Baseline] = []  # a side of ours' column (its name) or a baseline's two
    for b in bases:
        columns += [b.ours_column] if b.ours_column not in columns else []
        columns.append(b)
    headers = ["case", "problem", "served by", "bound"]
    for c in columns:
        headers += [c] if isinstance(c, str) else [c.column, f"x {c.column}"]
    headers += ["% roof", "1st call s"]
    body = []
    for r in rows:
        cells = [r["name"], r["problem"], served_by(r), "memory" if r["memory_bound"] else "compute"]
        for c in columns:
            cells += [_ours_cell(r, c)] if isinstance(c, str) else [_headline(r, c.name), _ratio_cell(r, c)]
        frac = r.get("roof_fraction")
        cells += [_fmt(None if frac is None else 100 * frac, ".0f"), _fmt(r.get("tune_or_lookup_s"), ".2f")]
        body.append(tuple(cells))
    return headers, body


def geomean_line(doc: Mapping[str, Any]) -> str:
    """The geometric means: per op, over the served cases (the primary baseline always, the others
    when measured); with the fallbacks counted at 1.0 when there are any; what was excluded."""
    g, rows = doc["geomean"], doc["cases"]
    parts = []
    for op in row_ops(rows):
        for i, b in enumerate(OP_BASELINES[op]):
            v, n = g.get(f"vs_{b.name}"), g.get(f"vs_{b.name}_cases")
            if i == 0:
                parts.append(f"geomean x{v:.3f} vs {b.label} over {n} cases" if v is not None
                             else f"geomean vs {b.label}: no served case")  # fmt: skip
            elif v is not None:
                parts.append(f"x{v:.3f} vs {b.label} over {n}")
    if g.get("fallbacks"):
        counted = [f"x{g[f'vs_{b.name}_with_fallbacks']:.3f} vs {b.label} over {g[f'vs_{b.name}_with_fallbacks_cases']}"
                   for b in doc_baselines(rows)
                   if g.get(f"vs_{b.name}_with_fallbacks") is not None
                   and g[f"vs_{b.name}_with_fallbacks_cases"] != g[f"vs_{b.name}_cases"]]  # fmt: skip
        if counted:
            parts.append(f"with {len(g['fallbacks'])} fallback(s) counted at 1.0: " + ", ".join(counted))
    if g.get("excluded"):
        parts.append("excluded: " + ", ".join(f"{n} ({s})" for n, s in g["excluded"].items()))
    return "; ".join(parts)


def geomean_title(doc: Mapping[str, Any]) -> str:
    """The geometric means in a few words (the plot's title): each measured baseline's, and the
    primary baseline's with the fallbacks counted at 1.0 when there are any."""
    g, rows = doc.get("geomean", {}), doc["cases"]
    parts = []
    for b in doc_baselines(rows):
        v = g.get(f"vs_{b.name}")
        if v is None:
            continue
        text = f"x{v:.3f} vs {b.label}" + (f" over {g[f'vs_{b.name}_cases']} cases" if not parts else "")
        w, n = g.get(f"vs_{b.name}_with_fallbacks"), g.get(f"vs_{b.name}_with_fallbacks_cases")
        if b in PRIMARY and w is not None and n != g.get(f"vs_{b.name}_cases"):
            text += f" (x{w:.3f} with fallbacks at 1.0)"
        parts.append(text)
    return ("geomean " + ", ".join(parts)) if parts else ""


def skipped_lines(doc: Mapping[str, Any]) -> list[str]:
    """One line per (direction, reason) the shapes file lists but the bench does not measure."""
    groups: dict[tuple[str, str], list[str]] = {}
    for s in doc.get("skipped_directions") or ():
        groups.setdefault((s["direction"], s["reason"]), []).append(s["name"])
    return [f"not measured: {d} of {len(names)} case(s) ({', '.join(names)}): {why}"
            for (d, why), names in groups.items()]


def footer_lines(doc: Mapping[str, Any]) -> list[str]:
    """Notes, skipped directions, host overhead and first-call lines, and the geometric means last."""
    lines = [f"{r['name']}: {r['status']}: {r['note']}" for r in doc["cases"] if r.get("note")]
    lines += skipped_lines(doc)
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
                first, ours = r["first_call_s"], r["import_autocutlass_s"]
                dsl = {True: "; imported the CuTe DSL", False: "; no CuTe DSL import"}.get(r.get("dsl_imported"), "")
                lines.append(f"first call in a fresh process, warm DB, {label} ({fc['case']}): {first:.3f} s;"
                             f" with import autocutlass ({ours:.2f} s) {ours + first:.2f} s on top of import torch"
                             f" ({r['import_torch_s']:.2f} s); kernels compiled {r.get('kernels_compiled')},"
                             f" loaded from disk {r.get('kernels_from_disk')}{dsl}"
                             + (" FELL BACK TO TORCH" if r.get("stats", {}).get("fallbacks") else ""))  # fmt: skip
            elif r:
                lines.append(f"first call, {label}: child failed (exit {r.get('returncode')}): {r.get('error', '')[-300:]}")
    lines.append(geomean_line(doc))
    return lines


def print_report(doc: Mapping[str, Any], *, title: str) -> None:
    headers, body = table(doc)
    styles = ["bold red" if r["status"] in ("FAILED", "fallback") else None for r in doc["cases"]]
    common.print_table(title, headers, body, right=lambda i: i >= 4, row_styles=styles)
    for line in footer_lines(doc):
        print(line)

def progress_line(i: int, n: int, row: Mapping[str, Any]) -> str:
    """The line printed (on stderr) after case ``i`` of ``n`` is measured: autocutlass against each
    baseline its op always has (conv2d: each cuDNN mode against ours in that mode)."""
    if row["status"] == "skipped":
        msg = f"skipped: {row['note']}"
    else:
        flag = "" if row["status"] == "ok" else f" {row['status'].upper()}"
        several = len(ours_sides(row_op(row))) > 1
        parts, last = [], None
        for b in OP_BASELINES[row_op(row)]:
            if b.optional:
                continue
            ours = "" if b.ours == last else (f"{b.ours_column} " if several else "") + f"{_headline(row, b.ours)} "
            last = b.ours
            parts.append(f"{ours}vs {b.column} {_headline(row, b.name)}: x{_fmt(row.get(f'ratio_vs_{b.name}'), '.3f')}")
        msg = f"{', '.join(parts)}{flag} [{served_by(row)}, first call {row['tune_or_lookup_s']:.2f} s]"
    return f"[{i}/{n}] {row['name']}: {msg}"

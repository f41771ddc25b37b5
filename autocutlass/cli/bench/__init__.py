"""``autocutlass bench``: autocutlass against torch.matmul (cuBLAS), F.conv2d (cuDNN) and
torch._grouped_mm, side by side, per case of a shapes file.

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

conv2d cases (``autocutlass.cli.shapes``: fprop, and the dgrad and wgrad directions a case lists,
through the dispatcher's backward front-ends against ``aten.convolution_backward``) run
``autocutlass.conv2d(x, w, None, stride, padding, dilation, groups)`` on channels_last operands
against ``F.conv2d`` (cuDNN) with ``torch.backends.cudnn.benchmark`` True and with it False
(PyTorch's default heuristic), and ours once in each mode, as a user in that mode is served
(vendor verdicts per mode), each mode's two sides on a thread of their own (PyTorch caches cuDNN's
plans per thread), the four sides in the same interleaved rounds; each ratio divides that mode's
cuDNN time by ours in the same mode. Each side of ours is verified first (a NaN-poisoned block,
the float32 reference, the op's tolerance), on the first call and on a second one. fp32 conv cases run with
``torch.backends.cudnn.allow_tf32`` on. ``--vs compile`` applies to GEMM cases only.

Grouped-GEMM cases (``benchmarks/shapes-grouped.json``) run ``autocutlass.grouped_mm(x, w, offs)``
on the offsets of the case's routing against ``torch._grouped_mm(x, w, offs)`` and a loop of
``torch.matmul`` per expert, in the same interleaved rounds; their bytes (TB/s) are those the
routing moves: x, the output and the weights of the experts that got rows. The grouped kernels
serve only problems tuned on this GPU (a case without a record is a 'torch (stand-in)' fallback
row) and not at all with ``AUTOCUTLASS_GROUPED_KERNELS=0`` (every grouped case a fallback).

A case is memory-bound when its arithmetic intensity (flops / min_bytes) is below the ridge
point (compute roof / bandwidth roof); its headline is TB/s (min_bytes / time), else TFLOP/s.
A case that autocutlass served with torch (a fallback, or a vendor verdict: its tuning measured
torch faster, ``autocutlass.vendor``) is flagged and left out of the geometric means, as are FAILED, unsupported (``AUTOCUTLASS_STRICT=1`` raised) and skipped cases; a second
geometric mean counts the fallbacks at 1.0, and they are listed with their reason.

Then: the hit path's host cost per call (a 64x64x64 bf16 call under policy 'heuristic', back to
back, against torch.matmul), and, unless ``--no-first-call``, the first call in a fresh process with this
process's database, once with the compiled-kernel cache and once with an empty one.

Writes ``bench.json`` (after every case) and ``bench.png`` to ``--out`` (default
``benchmarks/results/<date>-<gpu-slug>``); prints a table, the geometric means last. Exit code
0; 1 for a bad shapes file or when any case FAILED; 2 without a CUDA GPU (a user error).

The package splits by job: ``cases`` (shapes file -> cases, operands, roofline; pure),
``report`` (ratios, rows, the JSON document, the table; pure), ``plot`` (the PNG from the
JSON) and ``measure`` (everything that runs on the GPU).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from autocutlass.cli.bench.cases import COMPUTE_ROOF_16BIT_TFLOPS, bench_suite
from autocutlass.cli.bench.report import BASELINES
from autocutlass.cli.common import positive_float, positive_int, require_gpu

__all__ = ["add_bench_parser", "cmd_bench"]


def add_bench_parser(subparsers: argparse._SubParsersAction[Any]) -> argparse.ArgumentParser:
    """Register ``bench`` on ``subparsers``; returns its parser."""
    p = subparsers.add_parser("bench", help="benchmark autocutlass against torch.matmul (and torch.compile), "
                                            "F.conv2d (cuDNN) and torch._grouped_mm",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--shapes", required=True, metavar="FILE.json", help="cases, in the benchmark-suite format")
    p.add_argument("--only", metavar="NAME", action="append", default=None,
                   help="only the case of this name (repeatable); conv cases: NAME/dgrad, NAME/wgrad for one "
                        "direction, '*/fprop' (or dgrad, wgrad) for that direction of every case")  # fmt: skip
    p.add_argument("--vs", type=_baselines, default=("torch",), metavar="torch[,compile]",
                   help="GEMM baselines: torch.matmul (always), and torch.compile(mode='max-autotune-no-cudagraphs'); "
                        "conv2d cases always run against cuDNN with benchmark mode on and off")  # fmt: skip
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
    """``autocutlass bench``: 0, or 1 for a bad shapes file or a FAILED case; raises ``NoGPU``
    (exit 2 through ``autocutlass.cli.main``) without a CUDA GPU, before writing anything."""
    try:
        suite = bench_suite(ns.shapes, ns.only)
    except ValueError as e:
        print(f"autocutlass bench: error: {e}", file=sys.stderr)
        return 1
    require_gpu("autocutlass bench")
    from autocutlass.cli.bench.measure import run_bench

    return run_bench(ns, suite.cases, suite.skipped)

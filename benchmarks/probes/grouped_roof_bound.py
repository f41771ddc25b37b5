"""The most any kernel could gain over ``torch._grouped_mm`` on a grouped-GEMM bench run (no GPU).

Reads a ``autocutlass bench --shapes benchmarks/shapes-grouped.json`` JSON and, per case, bounds the
speedup of a perfect kernel over torch's measured time: a kernel can go no faster than the bytes the
routing moves at the bandwidth roof, nor than the FLOPs at the compute roof, so its time is at least
``max(min_bytes / bandwidth, flops / peak)``; torch's measured throughput is a fraction of each roof,
and the bound is ``1 / max(torch_tbps / bandwidth, torch_tflops / peak)``. Issue 19 asks for a
geomean of x1.5 over the cases with at most 512 rows per expert on average; this prints the bound's
geomean over those cases, with the run's own measured copy roof and with a bandwidth given on the
command line (the HBM data-sheet figure, say), beside our measured ratio.

    python benchmarks/probes/grouped_roof_bound.py BENCH.json [--bandwidth TBPS ...] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

MAX_ROWS_PER_EXPERT = 512


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def bounds(bench: dict[str, Any], bandwidth: float) -> list[dict[str, Any]]:
    """Per case of at most MAX_ROWS_PER_EXPERT rows per expert: torch's throughput, the bound at
    ``bandwidth`` TB/s and the run's bf16 peak, and our measured ratio (1.0 where torch served)."""
    peak = bench["roofs"]["compute_tflops"]["bf16"]
    out = []
    for c in bench["cases"]:
        p = c["problem_dict"]
        rows = p["t"] / p["experts"]
        if rows > MAX_ROWS_PER_EXPERT:
            continue
        tb, tf = c["tbps"]["grouped_mm"], c["tflops"]["grouped_mm"]
        out.append({"case": c["name"], "rows_per_expert": rows, "torch_tbps": tb, "torch_tflops": tf,
                    "bound": 1 / max(tb / bandwidth, tf / peak), "ours": c.get("ratio_vs_grouped_mm") or 1.0})  # fmt: skip
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bench", type=Path)
    ap.add_argument("--bandwidth", type=float, nargs="*", default=[], metavar="TBPS")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    bench = json.loads(args.bench.read_text())
    report: dict[str, Any] = {"bench": args.bench.name, "gpu": bench["gpu"], "roofs": bench["roofs"], "bounds": {}}
    for bw in [bench["roofs"]["bandwidth_tbps"], *args.bandwidth]:
        rows = bounds(bench, bw)
        g_bound, g_ours = geomean([r["bound"] for r in rows]), geomean([r["ours"] for r in rows])
        report["bounds"][f"{bw:.2f}"] = {"cases": rows, "bound_geomean": g_bound, "ours_geomean": g_ours}
        print(f"{bench['gpu']}, bandwidth {bw:.2f} TB/s, bf16 peak {bench['roofs']['compute_tflops']['bf16']:.0f} TFLOP/s: "
              f"{len(rows)} cases; a perfect kernel x{g_bound:.3f} geomean (min x{min(r['bound'] for r in rows):.2f}), "
              f"ours x{g_ours:.3f} ({g_ours / g_bound:.0%} of the bound)")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()

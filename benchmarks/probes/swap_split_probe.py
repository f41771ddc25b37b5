"""Probe: ``swap_ab`` with workspace split-K (session 25: the reduce kernel's transposed class writes
the column-major D') on few-tile, long-K GEMMs whose M leaves the last 128-row tile partly empty,
against the unswapped split picks and torch.matmul (GPU machine).

320x640x40960 read x0.80-0.83 of torch (sessions 24-25): 320 rows are 2.5 tiles of 128, so a sixth
of the MMA work is wasted, and 64-row tiles are slower still. Swapped, the 640 columns go on the
64-row WGMMA side (5 tiles of 128) and the 320 rows are tile_n 160 (2 tiles), no waste. Per shape:
the first 9 configs of ``model_picks`` (the swapped split pick and its clusters, and the unswapped
split picks), each verified against the fp32 reference first, then timed with torch.matmul.
Protocol and timing loop: ``fitted_widths_probe.py``'s.

    python benchmarks/probes/swap_split_probe.py [--json OUT] [--cache DIR] [--compile-only]
"""

from __future__ import annotations

from typing import Any

from fitted_widths_probe import Plan, cli  # benchmarks/probes is the script's directory

from autocutlass.kernels.hopper_gemm import model_picks
from autocutlass.ops.gemm.problem import GemmProblem, Major

T = Major.COL
SHAPES = [
    ("320x640x40960-nn", GemmProblem(m=320, n=640, k=40960)),  # benchmarks/shapes-longk.json
    ("200x512x32768-nt", GemmProblem(m=200, n=512, k=32768, b_major=T)),
    ("320x384x49152-nt", GemmProblem(m=320, n=384, k=49152, b_major=T)),
    ("192x768x32768-nn", GemmProblem(m=192, n=768, k=32768)),
    ("448x256x65536-tn", GemmProblem(m=448, n=256, k=65536, a_major=T)),
    ("576x512x32768-nn", GemmProblem(m=576, n=512, k=32768)),
]


def cases() -> Plan:
    return [("swap", case, p, {c.short(): c for c in model_picks(p)[:9]}) for case, p in SHAPES]


def best_per_case(rows: list[dict[str, Any]]) -> None:
    for case in dict.fromkeys(r["case"] for r in rows):
        mine = [r for r in rows if r["case"] == case and r["config"]]
        swap = max((r for r in mine if r["config"]["swap_ab"]), key=lambda r: r["ratio_vs_torch"], default=None)
        plain = max((r for r in mine if not r["config"]["swap_ab"]), key=lambda r: r["ratio_vs_torch"], default=None)
        s = f"{swap['side']:40s} x{swap['ratio_vs_torch']:.3f}" if swap else "-"
        q = f"{plain['side']:40s} x{plain['ratio_vs_torch']:.3f}" if plain else "-"
        print(f"best {case:18s} swapped {s}   unswapped {q}")


def main() -> None:
    cli(__doc__ or "", cases, best_per_case, 7, ".swap-split-cache")


if __name__ == "__main__":
    main()

"""Probe: raster order and swizzle of the GEMM family's persistent scheduler on tall, narrow and
short, wide GEMMs, against torch.matmul (GPU machine).

Session 23's fitted-widths probe (``benchmarks/results/2026-11-27-h100-s23-fitted-widths-probe.txt``,
its "rates" rows) ran 16896 x (4 tiles) x 4096 GEMMs at 213-243 us in 128-row tiles, raster along M,
no swizzle, where torch.matmul took 81-189 us: a wave of 132 CTAs walking one tile column reads all
of A, so A is streamed once per tile column. Walking along N (or in swizzle groups) reads each A
tile once for all columns. This probe times, per problem, the data-parallel tile the wave model
picks (``model_picks``) in raster along M and along N, swizzle 1 and 8, no cluster and 2-CTA
clusters, verified against the fp32 reference first. Protocol and timing loop: ``fitted_widths_probe.py``'s;
``--compile-only`` builds every kernel into ``--cache`` without a GPU.

    python benchmarks/probes/raster_probe.py [--json OUT] [--cache DIR] [--compile-only]
"""

from __future__ import annotations

import dataclasses
from typing import Any

from fitted_widths_probe import Plan, cli  # benchmarks/probes is the script's directory

from autocutlass.kernels.hopper_gemm import HopperGemmConfig as C, HopperGemmFamily, model_picks
from autocutlass.ops.gemm.problem import GemmProblem, Major

T = Major.COL
SHAPES = [
    ("tall-16896x512", GemmProblem(m=16896, n=512, k=4096, b_major=T)),
    ("tall-16896x1024", GemmProblem(m=16896, n=1024, k=4096, b_major=T)),
    ("tall-32768x768-nn", GemmProblem(m=32768, n=768, k=2048)),
    ("wide-512x16896", GemmProblem(m=512, n=16896, k=4096, b_major=T)),
    ("wide-1024x32768", GemmProblem(m=1024, n=32768, k=4096, b_major=T)),
]


def variants(p: GemmProblem) -> dict[str, C]:
    """The model's data-parallel tile in every raster order, swizzle 1 / 8 and cluster shape that
    ``check`` accepts for ``p``."""
    fam = HopperGemmFamily()
    base = next(c for c in model_picks(p) if c.split_k == 1)
    base = dataclasses.replace(base, cluster_m=1, cluster_n=1)
    out: dict[str, C] = {}
    for raster in ("along_m", "along_n"):
        for swizzle in (1, 8):
            for cm, cn in ((1, 1), (2, 1), (1, 2)):
                cfg = dataclasses.replace(base, raster=raster, swizzle=swizzle, cluster_m=cm, cluster_n=cn)
                if fam.check(cfg, p) is None:
                    out[cfg.short()] = cfg
    return out


def cases() -> Plan:
    return [("raster", case, p, variants(p)) for case, p in SHAPES]


def best_per_case(rows: list[dict[str, Any]]) -> None:
    for case in dict.fromkeys(r["case"] for r in rows):
        best = max((r for r in rows if r["case"] == case and r["config"]), key=lambda r: r["ratio_vs_torch"])
        print(f"best {case:20s} {best['side']:40s} x{best['ratio_vs_torch']:.3f}")


def main() -> None:
    cli(__doc__ or "", cases, best_per_case, 5, ".raster-cache")


if __name__ == "__main__":
    main()

"""Probe: raster order and swizzle of the GEMM family's persistent scheduler on tall, narrow and
short, wide GEMMs, against torch.matmul (GPU machine).

Session 23's fitted-widths probe (``benchmarks/results/2026-11-27-h100-s23-fitted-widths-probe.txt``,
its "rates" rows) ran 16896 x (4 tiles) x 4096 GEMMs at 213-243 us in 128-row tiles, raster along M,
no swizzle, where torch.matmul took 81-189 us: a wave of 132 CTAs walking one tile column reads all
of A, so A is streamed once per tile column. Walking along N (or in swizzle groups) reads each A
tile once for all columns. This probe times, per problem, the data-parallel tile the wave model
picks (``model_picks``) in raster along M and along N, swizzle 1 and 8, no cluster and 2-CTA
clusters, verified against the fp32 reference first. Protocol as ``fitted_widths_probe.py``;
``--compile-only`` builds every kernel into ``--cache`` without a GPU.

    python benchmarks/probes/raster_probe.py [--json OUT] [--cache DIR] [--compile-only]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
from pathlib import Path
from typing import Any

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


def compile_only(cache: Path) -> None:
    from autocutlass.kernels.hopper_gemm.compile import get_compiled

    for case, p in SHAPES:
        for side, cfg in variants(p).items():
            get_compiled(cfg, p, 2, cache)
            print(f"compiled {case} {side}", flush=True)


def run(cache: Path | None, rounds: int) -> list[dict[str, Any]]:
    import torch

    from autocutlass.ops.gemm.evaluation import make_inputs, reference, torch_baseline, verify
    from autocutlass.search.handlers import interleaved_rounds
    from autocutlass.search.timing import time_callable

    fam = HopperGemmFamily(cache_dir=cache)
    flush = 2 * torch.cuda.get_device_properties(0).L2_cache_size
    rows: list[dict[str, Any]] = []
    for case, p in SHAPES:
        x = make_inputs(p, device="cuda", seed=0)
        ref = reference(p, x)
        calls = {"torch": torch_baseline(p, x)}
        configs = variants(p)
        for side, cfg in configs.items():
            runner = fam.compile(cfg, p)
            ok, why = verify(runner, p, x, ref)
            assert ok, (case, side, why)
            calls[side] = lambda r=runner: x.run(r)
        per = dict(zip(calls, interleaved_rounds(
            [lambda f=f: time_callable(f, flush_bytes=flush).median_ms for f in calls.values()], rounds)))  # fmt: skip
        t_torch = statistics.median(per["torch"])
        flops = 2 * p.m * p.n * p.k * p.l
        for side, v in per.items():
            ms = statistics.median(v)
            cfg = configs.get(side)
            rows.append({"case": case, "problem": p.describe(), "side": side, "config": cfg.as_dict() if cfg else None,
                         "ms": ms, "tflops": flops / ms / 1e9, "ratio_vs_torch": t_torch / ms, "rounds_ms": v})  # fmt: skip
            print(f"{case:20s} {side:40s} {ms * 1e3:8.1f} us {flops / ms / 1e9:6.0f} TFLOP/s  x{t_torch / ms:.3f}", flush=True)
        del x, ref
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--cache", type=Path)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--compile-only", action="store_true")
    args = ap.parse_args()
    if args.compile_only:
        compile_only(args.cache or Path(".raster-cache"))
        return
    rows = run(args.cache, args.rounds)
    if args.json:
        args.json.write_text(json.dumps({"rows": rows}, indent=1))
    for case in dict.fromkeys(r["case"] for r in rows):
        best = max((r for r in rows if r["case"] == case and r["config"]), key=lambda r: r["ratio_vs_torch"])
        print(f"best {case:20s} {best['side']:40s} x{best['ratio_vs_torch']:.3f}")


if __name__ == "__main__":
    main()

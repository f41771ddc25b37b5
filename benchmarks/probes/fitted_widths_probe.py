"""Probe: the GEMM family's fitted tile widths (``hopper_gemm.check.TILE_N_FITTED``: 112, 144, 176,
240 columns, between the widths of ``config.TILE_N``) against the widths before them and torch.matmul.

Two parts, in one process (GPU machine):

* ``rates``: each 128-row tile width (the fitted ones and their neighbours) on an M x N x K problem
  of exactly 4 full waves of 132 CTAs (M = 128 * 132 rows, N = 4 tiles), data-parallel, no
  cluster: its TFLOP/s over 128x256's, the main-loop efficiency ``GEMM_TILE_RATES`` interpolates
  for the fitted widths;
* ``shapes``: for GEMMs whose cost-model pick (``model_picks``) is a fitted width, that pick and the
  pick among ``config.TILE_N``'s widths alone (the model before the fitted widths), each with no
  cluster and 2x1 / 1x2 clusters, against torch.matmul.

Every config is verified against the fp32 reference first. Protocol: write flush of 2x L2 before
every timed call, sides interleaved, ``--rounds`` rounds, order reversed every other round, per
side the median over rounds; ratio = torch / side. ``--compile-only`` (no GPU, CUTE_DSL_ARCH=sm_90a)
builds every kernel into ``--cache`` first, so that the GPU run loads instead of compiling.

    python benchmarks/probes/fitted_widths_probe.py [--json OUT] [--cache DIR] [--compile-only]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from autocutlass.kernels.hopper_gemm import HopperGemmConfig as C, HopperGemmFamily, model_picks, modelled_configs
from autocutlass.kernels.hopper_gemm.check import TILE_N_FITTED
from autocutlass.kernels.hopper_gemm.config import TILE_N
from autocutlass.ops.gemm.problem import GemmProblem, Major

R, T = Major.ROW, Major.COL
SMS = 132
RATE_WIDTHS = (96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256)
SHAPES = [
    ("few-tiles", GemmProblem(m=1536, n=1536, k=8192, b_major=T)),  # benchmarks/shapes-online.json
    ("768x3072x4096-nt", GemmProblem(m=768, n=3072, k=4096, b_major=T)),
    ("1152x2304x8192-nn", GemmProblem(m=1152, n=2304, k=8192)),
    ("2304x3072x4096-nt", GemmProblem(m=2304, n=3072, k=4096, b_major=T)),
    ("6144x2304x4096-nn", GemmProblem(m=6144, n=2304, k=4096)),
    ("3072x6144x4096-nt", GemmProblem(m=3072, n=6144, k=4096, b_major=T)),
    ("1536x1152x16384-tn", GemmProblem(m=1536, n=1152, k=16384, a_major=T)),
    ("4608x1152x4096-nt", GemmProblem(m=4608, n=1152, k=4096, b_major=T)),
]


def old_pick(p: GemmProblem) -> C:
    """The cost model's data-parallel pick among ``config.TILE_N``'s widths (the model before)."""
    return next(c for _, c in modelled_configs(p) if c.split_k == 1 and c.tile_n in TILE_N)


def clustered(cfg: C) -> list[C]:
    return [cfg, dataclasses.replace(cfg, cluster_m=2), dataclasses.replace(cfg, cluster_n=2)]


def plan() -> list[tuple[str, str, GemmProblem, dict[str, C]]]:  # a Plan
    """(part, case, problem, {side: config}) of the whole run."""
    out: list[tuple[str, str, GemmProblem, dict[str, C]]] = []
    for w in RATE_WIDTHS:
        p = GemmProblem(m=128 * SMS, n=4 * w, k=4096, b_major=T)
        out.append(("rates", f"128x{w}", p, {f"128x{w}": C(128, w, 64)}))
    for name, p in SHAPES:
        new = next(c for c in model_picks(p) if c.split_k == 1)
        sides = {f"old {c.short()}": c for c in clustered(old_pick(p))}
        if new.tile_n in TILE_N_FITTED:
            sides.update({f"fitted {c.short()}": c for c in clustered(new)})
        out.append(("shapes", name, p, sides))
    return out


def feasible(fam: HopperGemmFamily, p: GemmProblem, sides: dict[str, C]) -> dict[str, C]:
    return {k: c for k, c in sides.items() if fam.check(c, p) is None}


Plan = list[tuple[str, str, GemmProblem, dict[str, C]]]


def compile_only(cache: Path, cases: Plan) -> None:
    """Every feasible config of ``cases`` compiled into ``cache`` with the helper kernels its
    runner loads (split-K reduce passes, transposes) (no GPU; CUTE_DSL_ARCH=sm_90a)."""
    fam = HopperGemmFamily(cache_dir=cache)
    for _, case, p, sides in cases:
        for side, cfg in feasible(fam, p, sides).items():
            fam.compile(cfg, p)
            print(f"compiled {case} {side}", flush=True)


def run(cache: Path | None, rounds: int, cases: Plan) -> list[dict[str, Any]]:
    """Each case's feasible configs verified, then timed side by side with torch.matmul (protocol
    in the module docstring); one row per (case, side), printed as it comes."""
    import torch

    from autocutlass.ops.gemm.evaluation import make_inputs, reference, torch_baseline, verify
    from autocutlass.search.handlers import interleaved_rounds
    from autocutlass.search.timing import time_callable

    fam = HopperGemmFamily(cache_dir=cache)
    flush = 2 * torch.cuda.get_device_properties(0).L2_cache_size
    rows: list[dict[str, Any]] = []
    for part, case, p, sides in cases:
        x = make_inputs(p, device="cuda", seed=0)
        ref = reference(p, x)
        calls = {"torch": torch_baseline(p, x)}
        configs = feasible(fam, p, sides)
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
            rows.append({"part": part, "case": case, "problem": p.describe(), "side": side,
                         "config": cfg.as_dict() if cfg else None, "ms": ms, "tflops": flops / ms / 1e9,
                         "ratio_vs_torch": t_torch / ms, "rounds_ms": v})  # fmt: skip
            print(f"{part:6s} {case:20s} {side:40s} {ms * 1e3:8.1f} us {flops / ms / 1e9:6.0f} TFLOP/s  x{t_torch / ms:.3f}",
                  flush=True)  # fmt: skip
        del x, ref
    return rows


def summary(rows: list[dict[str, Any]]) -> None:
    """The rate of each width (over 128x256's) and, per shape, the best old and best fitted side."""
    rate = {r["case"]: r["tflops"] for r in rows if r["part"] == "rates" and r["side"] != "torch"}
    if "128x256" in rate:
        print("rates: " + ", ".join(f"{k} {v / rate['128x256']:.2f}" for k, v in rate.items()))
    print(f"{'case':20s} {'best old':>10s} {'best fitted':>12s}")
    for case in dict.fromkeys(r["case"] for r in rows if r["part"] == "shapes"):
        mine = [r for r in rows if r["case"] == case]
        best = {kind: max((r["ratio_vs_torch"] for r in mine if r["side"].startswith(kind)), default=float("nan"))
                for kind in ("old", "fitted")}  # fmt: skip
        print(f"{case:20s} {best['old']:10.3f} {best['fitted']:12.3f}")


def cli(doc: str, cases: Callable[[], Plan], summarise: Callable[[list[dict[str, Any]]], None], rounds: int,
        default_cache: str) -> None:
    """The command line of a probe built on this one's ``compile_only`` and ``run``."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--cache", type=Path)
    ap.add_argument("--rounds", type=int, default=rounds)
    ap.add_argument("--compile-only", action="store_true")
    ap.add_argument("--only", nargs="*", default=None, metavar="CASE", help="run only these cases")
    args = ap.parse_args()
    plan = [c for c in cases() if args.only is None or c[1] in args.only]
    if args.compile_only:
        compile_only(args.cache or Path(default_cache), plan)
        return
    rows = run(args.cache, args.rounds, plan)
    if args.json:
        args.json.write_text(json.dumps({"rows": rows}, indent=1))
    summarise(rows)


def main() -> None:
    cli(__doc__ or "", plan, summary, 7, ".fitted-cache")


if __name__ == "__main__":
    main()

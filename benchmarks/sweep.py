"""Best-of-space benchmark of the Hopper GEMM family against torch.matmul (cuBLAS), per case of a
shapes file, on the GPU machine:

    python benchmarks/sweep.py --shapes benchmarks/shapes.json --out benchmarks/results/DIR

Two levels, both verified before timing (random inputs, NaN-poisoned output, fp32 reference):

1. every feasible (tile_m, tile_n, tile_k, cluster, schedule) with stages = as many as fit,
   raster along M, swizzle 1 (a short timing: warm-up, 10 L2-flushed repetitions);
2. the five fastest, crossed with raster {M, N} x swizzle {1, 2, 4, 8}.

The top candidates are then re-timed with the full timing protocol of ``autocutlass.search.timing``
interleaved with torch.matmul on the same inputs (five alternating rounds; the ratio is the
median of the per-round ratios). Compilation runs first, GPU-blind, in a process pool that fills
the on-disk kernel cache. Writes ``sweep.json`` and ``sweep.png`` to ``--out``.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import dataclasses
import datetime as dt
import json
import multiprocessing as mp
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

CACHE = Path(os.environ.get("AUTOCUTLASS_CACHE_DIR", "/tmp/autocutlass-cache")) / "kernels"


def _compile_one(args: tuple[dict, dict, int]) -> tuple[str, str | None]:
    os.environ["CUTE_DSL_ARCH"] = "sm_90a"
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    from autocutlass.errors import CantImplement, KernelCompileError
    from autocutlass.kernels.hopper_gemm import HopperGemmConfig
    from autocutlass.kernels.hopper_gemm.compile import get_compiled
    from autocutlass.ops.gemm.problem import GemmProblem

    cfg = HopperGemmConfig.from_dict(args[0])
    try:
        get_compiled(cfg, GemmProblem.from_dict(args[1]), args[2], CACHE)
        return cfg.short(), None
    except (CantImplement, KernelCompileError) as e:
        return cfg.short(), str(e)[:300]


def precompile(pairs: list[tuple[Any, Any]], workers: int) -> dict[str, str]:
    """Compile (config, problem) pairs into the disk cache; returns failures by config label."""
    todo = {}
    for cfg, prob in pairs:
        key = (json.dumps(cfg.as_dict(), sort_keys=True), prob.kernel_class_key(), 3 if prob.l > 1 else 2)
        todo[key] = (cfg.as_dict(), prob.as_dict(), key[2])
    failures: dict[str, str] = {}
    ctx = mp.get_context("spawn")
    with cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        for label, err in pool.map(_compile_one, todo.values(), chunksize=4):
            if err:
                failures[label] = err
    return failures


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="benchmarks/shapes.json")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--only", action="append")
    ap.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    ap.add_argument("--anchors", default=None, help="anchors JSON (cutlass.operators / cuBLAS figures)")
    args = ap.parse_args()

    import torch

    from autocutlass.device import current_device
    from autocutlass.kernels.hopper_gemm import HopperGemmConfig, HopperGemmFamily, Raster, check
    from autocutlass.ops.gemm.problem import problem_from_case
    from autocutlass.search.timing import time_callable
    from autocutlass.ops.gemm.evaluation import make_inputs, reference, verify

    dev = current_device()
    flush = 2 * dev.l2_bytes
    fam = HopperGemmFamily(cache_dir=CACHE)
    cases = json.loads(Path(args.shapes).read_text())["cases"]
    cases = [c for c in cases if c["dtype"] in ("bf16", "fp16") and (not args.only or c["name"] in args.only)]
    probs = {c["name"]: problem_from_case(c) for c in cases}

    level1 = {}
    for name, prob in probs.items():
        # Every feasible config of the family's space at raster along M, swizzle 1 (tiles, clusters,
        # schedules, stores and, for small problems, split-K); raster and swizzle come in level 2.
        level1[name] = [
            c for c in fam.space(prob)
            if c.raster is Raster.ALONG_M and c.swizzle == 1 and check(c, prob) is None
        ]
    t0 = time.time()
    fails = precompile([(c, probs[n]) for n, cs in level1.items() for c in cs], args.workers)
    t_compile = time.time() - t0
    n_compiled = sum(len(v) for v in level1.values())
    print(f"level-1 compile: {n_compiled} (config, case) pairs, {len(fails)} failures, {t_compile:.0f} s", flush=True)
    for k, v in list(fails.items())[:5]:
        print("  compile failure", k, v, flush=True)

    def run(cfg: HopperGemmConfig, prob: Any, inputs: Any, ref: Any, reps: int | None) -> float | None:
        runner = fam.compile(cfg, prob)
        ok, why = verify(runner, prob, inputs, ref)
        if not ok:
            print(f"  WRONG {cfg.short()}: {why}", flush=True)
            return None
        d = torch.empty_like(inputs.d)
        return time_callable(lambda: runner(inputs.a, inputs.b, d), flush_bytes=flush, reps=reps).median_ms

    results: dict[str, Any] = {}
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, prob in probs.items():
        inputs = make_inputs(prob, device="cuda", seed=1)
        ref = reference(prob, inputs)
        timed: dict[HopperGemmConfig, float] = {}
        t_case = time.time()
        for cfg in level1[name]:
            if cfg.short() in fails:
                continue
            ms = run(cfg, prob, inputs, ref, reps=10)
            if ms is not None:
                timed[cfg] = ms
        top = sorted(timed, key=timed.get)[:5]
        level2 = [dataclasses.replace(c, raster=r, swizzle=s) for c in top for r in Raster for s in (1, 2, 4, 8)]
        level2 = [c for c in level2 if c not in timed]
        precompile([(c, prob) for c in level2], args.workers)
        for cfg in level2:
            ms = run(cfg, prob, inputs, ref, reps=10)
            if ms is not None:
                timed[cfg] = ms
        finalists = sorted(timed, key=timed.get)[:3]
        # Side by side: alternate torch and each finalist, full protocol, five rounds.
        a, b = inputs.a, inputs.b
        d = torch.empty_like(inputs.d)
        runners = {c: fam.compile(c, prob) for c in finalists}
        rounds: dict[HopperGemmConfig, list[float]] = {c: [] for c in finalists}
        torch_ms: list[float] = []
        for _ in range(5):
            tt = time_callable(lambda: torch.matmul(a, b), flush_bytes=flush).median_ms
            torch_ms.append(tt)
            for c in finalists:
                rounds[c].append(time_callable(lambda: runners[c](a, b, d), flush_bytes=flush).median_ms)
        best = min(finalists, key=lambda c: statistics.median(rounds[c]))
        ours = statistics.median(rounds[best])
        theirs = statistics.median(torch_ms)
        ratio = statistics.median([t / o for t, o in zip(torch_ms, rounds[best])])
        results[name] = {
            "problem": prob.as_dict(),
            "best_config": best.as_dict(),
            "best_label": best.short(),
            "ms": ours,
            "torch_ms": theirs,
            "tflops": prob.flops / ours / 1e9,
            "torch_tflops": prob.flops / theirs / 1e9,
            "tbps": prob.min_bytes / ours / 1e9,
            "ratio_vs_torch": ratio,
            "configs_timed": len(timed),
            "finalists": {c.short(): statistics.median(v) for c, v in rounds.items()},
            "wall_s": round(time.time() - t_case, 1),
        }
        r = results[name]
        print(f"{name:16s} {r['best_label']:34s} {r['tflops']:7.1f} TFLOP/s  torch {r['torch_tflops']:7.1f}"
              f"  x{ratio:.3f}  ({len(timed)} timed, {r['wall_s']} s)", flush=True)
        _write(out_dir, dev, results, args, n_compiled, t_compile)
    _write(out_dir, dev, results, args, n_compiled, t_compile)
    return 0


def _write(out_dir: Path, dev: Any, results: dict[str, Any], args: argparse.Namespace, n_compiled: int,
           t_compile: float) -> None:
    import torch

    from autocutlass.device import dsl_version
    from autocutlass.kernels import source_hashes

    ratios = [r["ratio_vs_torch"] for r in results.values()]
    geo = statistics.geometric_mean(ratios) if ratios else None
    anchors: dict[str, Any] = {}
    if args.anchors and Path(args.anchors).is_file():
        anchors = json.loads(Path(args.anchors).read_text())["cases"]
    doc = {
        "what": "hopper_gemm best of space vs torch.matmul (cuBLAS), side by side in one process",
        "gpu": dev.gpu_name,
        "sm_count": dev.sm_count,
        "date": dt.date.today().isoformat(),
        "versions": {"torch": torch.__version__, "cuda": torch.version.cuda, "nvidia-cutlass-dsl": dsl_version(),
                     "kernel_source_hashes": source_hashes(), "driver": dev.driver_version},
        "protocol": "autocutlass.search.timing v1: L2 flushed (2x L2) before every timed call, CUDA events, "
                    "medians; ratio = median over 5 alternating rounds of torch_ms / ours_ms",
        "compile": {"pairs": n_compiled, "seconds": round(t_compile, 1)},
        "geomean_ratio_vs_torch": geo,
        "cases": results,
    }
    for name, r in results.items():
        a = anchors.get(name, {})
        if "ratio_ops_vs_cublas" in a:
            r["anchor_ratio_cutlass_operators_vs_cublas"] = a["ratio_ops_vs_cublas"]
            r["beats_cutlass_operators"] = r["ratio_vs_torch"] > a["ratio_ops_vs_cublas"]
    (out_dir / "sweep.json").write_text(json.dumps(doc, indent=1))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        names = list(results)
        fig, ax = plt.subplots(figsize=(11, 4.5))
        xs = range(len(names))
        ax.bar([x - 0.2 for x in xs], [results[n]["ratio_vs_torch"] for n in names], 0.4, label="autocutlass best")
        ops = [results[n].get("anchor_ratio_cutlass_operators_vs_cublas") for n in names]
        ax.bar([x + 0.2 for x in xs], [o or 0 for o in ops], 0.4, label="cutlass.operators best-of-28 (anchor)")
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_xticks(list(xs), names, rotation=30, ha="right")
        ax.set_ylabel("speed vs torch.matmul (cuBLAS)")
        ax.set_ylim(0.5, 1.3)
        ax.set_title(f"{dev.gpu_name}, {doc['date']}, geomean x{geo:.3f}" if geo else dev.gpu_name)
        ax.legend(loc="lower left")
        fig.tight_layout()
        fig.savefig(out_dir / "sweep.png", dpi=110)
        plt.close(fig)
    except ImportError:
        pass


if __name__ == "__main__":
    sys.exit(main())

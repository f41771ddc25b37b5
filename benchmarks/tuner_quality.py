"""Tuner quality on the GPU machine: the exhaustive best of the family's space against what the
Optuna tuner finds with its default budget, for the same problem in the same process.

    python benchmarks/tuner_quality.py --only batched --out DIR

Per case: ``tune_problem(exhaustive=True)`` (every feasible config, a grid, no early stop) into
one temporary database and ``tune_problem()`` (TPE, seeds, early stop) into another; then both
winners are re-timed side by side (five alternating rounds, the timing protocol of
``autocutlass.search.timing``) so that the comparison does not rest on two separate timings.
Writes ``tuner_quality.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="benchmarks/shapes.json")
    ap.add_argument("--only", action="append", required=True)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--exhaustive-seconds", type=float, default=None, help="cap on the exhaustive run")
    ap.add_argument("--workers", type=int, default=15)
    args = ap.parse_args()

    import torch

    from autocutlass.db import TuningStore
    from autocutlass.device import current_device
    from autocutlass.kernels import get_family
    from autocutlass.problem import problem_from_case
    from autocutlass.search import tune_problem
    from autocutlass.search.timing import time_callable
    from autocutlass.search.verify import make_inputs
    from autocutlass.search.workers import CandidatePipeline

    dev = current_device()
    fam = get_family("hopper_gemm")
    cases = [c for c in json.loads(Path(args.shapes).read_text())["cases"] if c["name"] in args.only]
    out: dict[str, object] = {"gpu": dev.gpu_name, "date": time.strftime("%Y-%m-%d"), "cases": {}}
    tmp = Path(tempfile.mkdtemp())
    for case in cases:
        prob = problem_from_case(case)
        with CandidatePipeline(fam.name, compile_workers=args.workers) as pipe:
            t0 = time.time()
            ex = tune_problem(prob, fam, TuningStore(tmp / f"{case['name']}-ex.sqlite"), exhaustive=True,
                              seconds=args.exhaustive_seconds, evaluator=pipe, resume=False)
            t_ex = time.time() - t0
            t0 = time.time()
            opt = tune_problem(prob, fam, TuningStore(tmp / f"{case['name']}-opt.sqlite"), evaluator=pipe,
                               resume=False)
            t_opt = time.time() - t0
        assert ex.best is not None and opt.best is not None
        run_ex = fam.compile(fam.config_from_dict(ex.best.config), prob)
        run_opt = fam.compile(fam.config_from_dict(opt.best.config), prob)
        inputs = make_inputs(prob, device="cuda", seed=5)
        flush = 2 * dev.l2_bytes
        rounds = []
        for _ in range(5):
            a = time_callable(lambda: run_ex(inputs.a, inputs.b, inputs.d), flush_bytes=flush).median_ms
            b = time_callable(lambda: run_opt(inputs.a, inputs.b, inputs.d), flush_bytes=flush).median_ms
            rounds.append(b / a)
        gap = statistics.median(rounds) - 1.0
        row = {
            "exhaustive": {"evaluated": ex.evaluated, "feasible": ex.feasible, "stop": ex.stop_reason,
                           "best": ex.best.config, "best_ms": ex.best.timing.median_ms if ex.best.timing else None, "wall_s": round(t_ex, 1)},
            "optuna": {"evaluated": opt.evaluated, "stop": opt.stop_reason, "best": opt.best.config,
                       "best_ms": opt.best.timing.median_ms if opt.best.timing else None, "wall_s": round(t_opt, 1)},
            "trial_fraction": opt.evaluated / max(1, ex.evaluated),
            "optuna_slower_by": gap,
            "within_3pct": gap <= 0.03,
        }
        out["cases"][case["name"]] = row  # type: ignore[index]
        print(f"{case['name']}: exhaustive {ex.evaluated} trials ({t_ex:.0f} s), optuna {opt.evaluated} trials "
              f"({t_opt:.0f} s, {row['trial_fraction']:.1%}); optuna's winner slower by {gap:+.1%} "
              f"(side by side) -> {'within' if gap <= 0.03 else 'NOT within'} 3%", flush=True)
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "tuner_quality.json").write_text(json.dumps(out, indent=1, default=str))
    del torch
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Tuner quality on the GPU machine: the exhaustive best of the family's space against what the
Optuna tuner finds with its default budget, for the same problem in the same process.

    python benchmarks/tuner_quality.py --only batched --out DIR

Per case: ``tune_problem(exhaustive=True)`` (every feasible config, a grid, no early stop;
``--exhaustive-seconds`` caps it, and the JSON then says how much of the space it covered) into
one temporary database and ``tune_problem()`` (TPE, seeds, early stop) into another; then the
winners are re-timed side by side (six rounds, order reversed every other round, the timing protocol of
``autocutlass.search.timing``) so that the comparison does not rest on two separate timings.

The family's seeds come from best-of-space sweeps of this very suite, which flatters the seeded
run; ``--unseeded`` adds a third run with no seeds (TPE from random starts, same budget), the
tuner's quality on a problem it has never seen.

``--new-shape MxNxK`` times one default ``tune_problem`` of a shape outside the suite (bf16,
A row-major, B column-major) from a cold kernel cache: the wall time a user waits.
Writes ``tuner_quality.json`` after every case.
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
    ap.add_argument("--only", action="append", default=[])
    ap.add_argument("--unseeded", action="store_true", help="also run the tuner without seeds")
    ap.add_argument("--new-shape", default=None, help="MxNxK: time one default tuning from a cold cache")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--exhaustive-seconds", type=float, default=None, help="cap on the exhaustive run")
    ap.add_argument("--workers", type=int, default=15)
    args = ap.parse_args()

    import torch

    from autocutlass.db import TuningStore
    from autocutlass.device import current_device
    from autocutlass.kernels import get_family
    from autocutlass.ops.gemm.problem import problem_from_case
    from autocutlass.search import tune_problem
    from autocutlass.search.timing import time_callable
    from autocutlass.ops.gemm.evaluation import make_inputs
    from autocutlass.search.workers import CandidatePipeline

    dev = current_device()
    fam = get_family("hopper_gemm")

    class _Unseeded(type(fam)):  # type: ignore[misc]
        def seeds(self, problem):  # noqa: ANN001, ANN202
            return []

    unseeded_fam = _Unseeded()
    cases = [c for c in json.loads(Path(args.shapes).read_text())["cases"] if c["name"] in args.only]
    out: dict[str, object] = {"gpu": dev.gpu_name, "date": time.strftime("%Y-%m-%d"), "cases": {}}
    tmp = Path(tempfile.mkdtemp())
    for case in cases:
        prob = problem_from_case(case)
        print(f"== {case['name']}", flush=True)
        with CandidatePipeline(fam.name, compile_workers=args.workers) as pipe:
            t0 = time.time()
            ex = tune_problem(prob, fam, TuningStore(tmp / f"{case['name']}-ex.sqlite"), exhaustive=True,
                              seconds=args.exhaustive_seconds, evaluator=pipe, resume=False)
            t_ex = time.time() - t0
            t0 = time.time()
            opt = tune_problem(prob, fam, TuningStore(tmp / f"{case['name']}-opt.sqlite"), evaluator=pipe,
                               resume=False)
            t_opt = time.time() - t0
            uns = None
            if args.unseeded:
                t0 = time.time()
                uns = tune_problem(prob, unseeded_fam, TuningStore(tmp / f"{case['name']}-uns.sqlite"),
                                   evaluator=pipe, resume=False)
                t_uns = time.time() - t0
        assert ex.best is not None and opt.best is not None
        run_ex = fam.compile(fam.config_from_dict(ex.best.config), prob)
        run_opt = fam.compile(fam.config_from_dict(opt.best.config), prob)
        run_uns = fam.compile(fam.config_from_dict(uns.best.config), prob) if uns and uns.best else None
        inputs = make_inputs(prob, device="cuda", seed=5)
        flush = 2 * dev.l2_bytes
        rounds, rounds_uns = [], []
        sides = {"ex": run_ex, "opt": run_opt, **({"uns": run_uns} if run_uns is not None else {})}
        for rnd in range(6):
            # The order is reversed every other round: the side timed second runs on a warmer GPU
            # (a same-config pair read 4% apart when the order was fixed, H200 2026-11-22).
            order = list(sides) if rnd % 2 == 0 else list(reversed(sides))
            ms = {name: time_callable(lambda f=sides[name]: f(inputs.a, inputs.b, inputs.d),
                                      flush_bytes=flush).median_ms for name in order}
            rounds.append(ms["opt"] / ms["ex"])
            if "uns" in ms:
                rounds_uns.append(ms["uns"] / ms["ex"])
        gap = statistics.median(rounds) - 1.0
        row = {
            "exhaustive": {"evaluated": ex.evaluated, "feasible": ex.feasible, "stop": ex.stop_reason,
                           "best": ex.best.config, "best_ms": ex.best.timing.median_ms if ex.best.timing else None, "wall_s": round(t_ex, 1)},
            "optuna": {"evaluated": opt.evaluated, "stop": opt.stop_reason, "best": opt.best.config,
                       "best_ms": opt.best.timing.median_ms if opt.best.timing else None, "wall_s": round(t_opt, 1)},
            "exhaustive_coverage": ex.evaluated / max(1, ex.feasible),
            "trial_fraction": opt.evaluated / max(1, ex.evaluated),
            "optuna_slower_by": gap,
            "within_3pct": gap <= 0.03,
        }
        if uns is not None and uns.best is not None:
            gap_u = statistics.median(rounds_uns) - 1.0
            row["unseeded"] = {"evaluated": uns.evaluated, "stop": uns.stop_reason, "best": uns.best.config,
                               "wall_s": round(t_uns, 1), "slower_by": gap_u, "within_3pct": gap_u <= 0.03}
            print(f"  unseeded: {uns.evaluated} trials ({t_uns:.0f} s), slower by {gap_u:+.1%}", flush=True)
        out["cases"][case["name"]] = row  # type: ignore[index]
        print(f"{case['name']}: exhaustive {ex.evaluated} trials ({t_ex:.0f} s), optuna {opt.evaluated} trials "
              f"({t_opt:.0f} s, {row['trial_fraction']:.1%}); optuna's winner slower by {gap:+.1%} "
              f"(side by side) -> {'within' if gap <= 0.03 else 'NOT within'} 3%", flush=True)
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "tuner_quality.json").write_text(json.dumps(out, indent=1, default=str))
    if args.new_shape:
        out["new_shape"] = _tune_new_shape(args.new_shape, fam, tmp, args.workers)
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "tuner_quality.json").write_text(json.dumps(out, indent=1, default=str))
    del torch
    return 0


def _tune_new_shape(spec: str, fam, tmp: Path, workers: int) -> dict[str, object]:  # noqa: ANN001
    """One default tuning of an unseen shape with a cold kernel cache, timed end to end (worker
    start-up, compiles, verification, timing, recording)."""
    from autocutlass.db import TuningStore
    from autocutlass.ops.gemm.problem import Major, GemmProblem
    from autocutlass.search import tune_problem

    m, n, k = (int(x) for x in spec.lower().split("x"))
    prob = GemmProblem(m=m, n=n, k=k, b_major=Major.COL)
    os.environ["AUTOCUTLASS_CACHE_DIR"] = str(tmp / "cold-cache")  # the compile workers inherit it
    t0 = time.time()
    res = tune_problem(prob, fam, TuningStore(tmp / "new-shape.sqlite"), compile_workers=workers, resume=False)
    wall = time.time() - t0
    best_ms = res.best.timing.median_ms if res.best and res.best.timing else None
    row = {"shape": spec, "wall_s": round(wall, 1), "evaluated": res.evaluated, "stop": res.stop_reason,
           "best": res.best.config if res.best else None, "best_ms": best_ms,
           "tflops": 2 * m * n * k / best_ms / 1e9 if best_ms else None, "within_60s": wall <= 60}
    print(f"new shape {spec}: tuned in {wall:.1f} s ({res.evaluated} trials, stop: {res.stop_reason}), "
          f"best {row['tflops']:.0f} TFLOP/s" if best_ms else f"new shape {spec}: no winner", flush=True)
    return row


if __name__ == "__main__":
    sys.exit(main())

"""Probe: is the product path (autocutlass.matmul) as fast as the tuned kernel called directly?

The 2026-11-22 bench read llama8b-o/down 10% slower through ``autocutlass.matmul`` than the tuning
run had measured the same configs minutes earlier, while torch.matmul read the same. This times,
per case, in interleaved rounds (order reversed every other round, the timing protocol of
``autocutlass.search.timing``): the database's best config called directly (``runner(a, b, d)``),
``autocutlass.matmul(a, b, out=d)`` and ``torch.matmul``. Equal direct and dispatched times mean
the gap is the GPU's state (clocks, power), not our host path.

GPU machine: python benchmarks/probes/dispatch_probe.py --db DB [--only NAME]... [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from typing import Any


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", required=True)
    ap.add_argument("--shapes", default="benchmarks/shapes.json")
    ap.add_argument("--only", action="append")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--json")
    ns = ap.parse_args()

    import torch

    import autocutlass
    from autocutlass.cli.bench.cases import bench_cases
    from autocutlass.db import TuningStore
    from autocutlass.device import current_device
    from autocutlass.kernels import get_family
    from autocutlass.search.timing import time_callable
    from autocutlass.ops.gemm.evaluation import make_inputs

    dev = current_device(0)
    store = TuningStore(ns.db, read_only=True)
    flush = 2 * (dev.l2_bytes or 64 << 20)
    rows: list[dict[str, Any]] = []
    for case in bench_cases(ns.shapes, ns.only):
        prob = case.problem
        best = store.lookup(prob, dev.hard_key())
        if best is None:
            print(f"{case.name}: no best record in {ns.db}", file=sys.stderr)
            continue
        fam = get_family(best.family)
        runner = fam.compile(fam.config_from_dict(best.config), prob)
        x = make_inputs(prob, device="cuda", seed=0)
        d_t = torch.empty_like(x.d)
        d_r = torch.empty_like(x.d)
        with autocutlass.policy("cached"):
            autocutlass.matmul(x.a, x.b, out=x.d)
        fns = {
            "direct": lambda: runner(x.a, x.b, d_r),
            "matmul": lambda: autocutlass.matmul(x.a, x.b, out=x.d),
            "torch": lambda: torch.matmul(x.a, x.b, out=d_t),
        }
        times: dict[str, list[float]] = {k: [] for k in fns}
        with autocutlass.policy("cached"):
            for r in range(ns.rounds):
                for side in list(fns) if r % 2 == 0 else list(reversed(fns)):
                    times[side].append(time_callable(fns[side], flush_bytes=flush).median_ms)
        med = {k: statistics.median(v) for k, v in times.items()}
        rows.append({"name": case.name, "config": best.config, "db_ms": best.median_ms, "rounds_ms": times,
                     "ms": med, "tflops": {k: prob.flops / v / 1e9 for k, v in med.items()}})  # fmt: skip
        del x, d_t, d_r
        torch.cuda.empty_cache()
    print(f"{'case':16s} {'db ms':>8s} {'direct':>8s} {'matmul':>8s} {'torch':>8s}  direct/matmul  torch/matmul")
    for r in rows:
        m = r["ms"]
        print(f"{r['name']:16s} {r['db_ms']:8.4f} {m['direct']:8.4f} {m['matmul']:8.4f} {m['torch']:8.4f}"
              f"  {m['direct'] / m['matmul']:13.3f}  {m['torch'] / m['matmul']:12.3f}")
    if ns.json:
        with open(ns.json, "w") as f:
            json.dump({"gpu": dev.gpu_name, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

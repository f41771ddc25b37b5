"""Where does the grouped kernel's tuning and the bench disagree? (session 18: Mixtral T=16384 on
an H100, the tuning put our record x1.02 ahead of torch._grouped_mm over both routings back to
back, the bench x0.95 behind one routing at a time.)

On one problem's search inputs (``ops.grouped.evaluation.make_search_inputs``), times in
interleaved rounds (``search.timing`` protocol v1, L2 flushed by writing), per call:
  runner-<routing>   our runner launched directly on the routing's offsets
  api-<routing>      ``autocutlass.grouped_mm`` on the same tensors (the record must serve it:
                     run with AUTOCUTLASS_DB naming a database holding it)
  torch-<routing>    ``torch._grouped_mm`` on the same tensors
  runner-both / torch-both   the search's own runs (every timing routing back to back), per call.

GPU: python benchmarks/probes/grouped_path_probe.py [--rounds 7] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--t", type=int, default=16384)
    ap.add_argument("--n", type=int, default=14336)
    ap.add_argument("--k", type=int, default=4096)
    ap.add_argument("--config", default='{"cluster_m": 1, "cluster_n": 2, "raster": "along_m", "schedule": '
                    '"cooperative", "store": "tma", "tile_k": 64, "tile_m": 128, "tile_n": 256}')
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--json")
    ns = ap.parse_args()
    import torch

    import autocutlass
    from autocutlass.device import current_device
    from autocutlass.kernels.hopper_grouped import HopperGroupedFamily
    from autocutlass.ops.grouped import evaluation as ev
    from autocutlass.ops.grouped.problem import GroupedGemmProblem
    from autocutlass.ops.types import Major
    from autocutlass.search.handlers import interleaved_rounds
    from autocutlass.search.timing import time_callable

    p = GroupedGemmProblem(experts=ns.experts, t=ns.t, n=ns.n, k=ns.k, w_major=Major.COL)
    fam = HopperGroupedFamily(cache_dir=None)
    cfg = fam.config_from_dict(json.loads(ns.config))
    runner = fam.compile(cfg, p)
    inputs = ev.make_search_inputs(p, device="cuda")
    x, w, out = inputs.x, inputs.w, inputs.out
    routings = {"balanced": inputs.offs, "skewed": inputs.also[0]}
    flush = 2 * (current_device(0).l2_bytes or (50 << 20))
    before = autocutlass.stats()
    autocutlass.grouped_mm(x, w, routings["balanced"])
    after = autocutlass.stats()
    served = "kernel" if after.compiles + after.db_hits > before.compiles + before.db_hits and \
        after.vendor_hits == before.vendor_hits and after.torch_standins == before.torch_standins else "torch"
    fns = {}
    for r, offs in routings.items():
        fns[f"runner-{r}"] = (lambda o=offs: runner(x, w, o, out), 1)
        fns[f"api-{r}"] = (lambda o=offs: autocutlass.grouped_mm(x, w, o), 1)
        fns[f"torch-{r}"] = (lambda o=offs: torch._grouped_mm(x, w, o), 1)
    fns["runner-both"] = (lambda: inputs.run(runner), inputs.calls_per_run)
    torch_both = ev.torch_baseline(p, inputs)
    fns["torch-both"] = (torch_both, inputs.calls_per_run)
    timers = [lambda f=f, c=c: time_callable(f, flush_bytes=flush).median_ms / c for f, c in fns.values()]
    per = dict(zip(fns, interleaved_rounds(timers, ns.rounds), strict=True))
    med = {k: statistics.median(v) for k, v in per.items()}
    flops = 2 * p.t * p.n * p.k
    print(f"{p.describe()}  config {ns.config}  api served by {served}")
    for k, ms in med.items():
        print(f"  {k:18s} {ms:8.4f} ms  {flops / ms / 1e9:7.1f} TF/s")
    for r in ("balanced", "skewed", "both"):
        print(f"  x torch {r:9s} runner {med[f'torch-{r}'] / med[f'runner-{r}']:.3f}"
              + (f"  api {med[f'torch-{r}'] / med[f'api-{r}']:.3f}" if f"api-{r}" in med else ""))
    if ns.json:
        with open(ns.json, "w") as f:
            json.dump({"problem": p.describe(), "config": json.loads(ns.config), "api_served_by": served,
                       "rounds_ms": per, "median_ms": med, "gpu": torch.cuda.get_device_name(0)}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

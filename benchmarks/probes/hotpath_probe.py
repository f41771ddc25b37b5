"""Host time of a hit: autocutlass.matmul / linear (with bias) / conv2d against their torch
counterparts, side by side in one process, on tiny problems where the host is the whole cost.

Each side runs back to back (no synchronisation inside a round), rounds alternate the order,
the result is the median per-call time over rounds. Policy ``heuristic`` so nothing is looked up
(the memo serves every call after the first).

GPU machine: python benchmarks/probes/hotpath_probe.py [--json OUT] [--rounds N] [--calls N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable


def per_call_us(f: Callable[[], object], calls: int) -> float:
    import torch

    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        f()
    dt = time.perf_counter() - t0
    torch.cuda.synchronize()
    return dt / calls * 1e6


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--json")
    ns = ap.parse_args()

    import torch
    import torch.nn.functional as F

    import autocutlass

    bf, cl = torch.bfloat16, torch.channels_last
    a, b = torch.randn(64, 64, device="cuda", dtype=bf), torch.randn(64, 64, device="cuda", dtype=bf)
    x, w, bias = (torch.randn(64, 64, device="cuda", dtype=bf), torch.randn(64, 64, device="cuda", dtype=bf),
                  torch.randn(64, device="cuda", dtype=bf))  # fmt: skip
    cx = torch.randn(1, 64, 8, 8, device="cuda", dtype=bf).contiguous(memory_format=cl)
    cw = torch.randn(64, 64, 1, 1, device="cuda", dtype=bf).contiguous(memory_format=cl)
    pairs = {
        "matmul 64x64x64": (lambda: autocutlass.matmul(a, b), lambda: torch.matmul(a, b)),
        "linear 64x64x64 + bias": (lambda: autocutlass.linear(x, w, bias), lambda: F.linear(x, w, bias)),
        "conv2d 1x64x8x8 k64 1x1": (lambda: autocutlass.conv2d(cx, cw), lambda: F.conv2d(cx, cw)),
    }
    rows = []
    with autocutlass.policy("heuristic"):
        for name, (ours, theirs) in pairs.items():
            for f in (ours, theirs):
                for _ in range(200):
                    f()
            us: dict[str, list[float]] = {"autocutlass": [], "torch": []}
            for r in range(ns.rounds):
                order = [("autocutlass", ours), ("torch", theirs)]
                for side, f in order if r % 2 == 0 else order[::-1]:
                    us[side].append(per_call_us(f, ns.calls))
            row = {"call": name, **{k: round(statistics.median(v), 2) for k, v in us.items()}}
            rows.append(row)
            print(json.dumps(row), flush=True)
    stats = autocutlass.stats()
    doc = {"what": "hit-path host time per call, us (median of rounds)", "gpu": torch.cuda.get_device_name(),
           "torch": torch.__version__, "rounds": ns.rounds, "calls": ns.calls, "fallbacks": stats.fallbacks,
           "date": time.strftime("%Y-%m-%d"), "rows": rows}  # fmt: skip
    if ns.json:
        with open(ns.json, "w") as f:
            json.dump(doc, f, indent=1)
    for r in rows:
        print(f"{r['call']:28} autocutlass {r['autocutlass']:6.2f} us   torch {r['torch']:6.2f} us")
    print(f"fallbacks {stats.fallbacks}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

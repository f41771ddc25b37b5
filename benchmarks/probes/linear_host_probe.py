"""Probe: the host time of one eager ``autocutlass.linear`` hit, split into its parts, beside
``F.linear``'s, on tiny GEMMs (the GPU work is a few microseconds, so a loop of calls is bound by
the host): per-call medians of ``--rounds`` loops of ``--calls`` calls, each loop synchronised
before and after. Parts: the public entry (``autocutlass.linear``), the dispatcher's memo key
alone, the memoised entry called directly, and the runner's compiled function alone (TVM-FFI) on
prepared operands. Inputs 2-D and 3-D ([1, T, K]), with and without bias.

GPU machine: AUTOCUTLASS_POLICY=cached python benchmarks/probes/linear_host_probe.py [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--json", default=None)
    ns = ap.parse_args()
    import torch
    import torch.nn.functional as F

    import autocutlass
    from autocutlass.api import dispatcher
    from autocutlass.ops.gemm.entries import LINEAR
    from autocutlass.settings import Policy

    d = dispatcher()
    bf = torch.bfloat16
    k = n = 64
    w = torch.randn(n, k, device="cuda", dtype=bf)
    bias = torch.randn(n, device="cuda", dtype=bf)

    def per_call_us(fn) -> float:  # noqa: ANN001
        res = []
        for _ in range(ns.rounds):
            torch.cuda.synchronize()
            t = time.perf_counter()
            for _ in range(ns.calls):
                fn()
            torch.cuda.synchronize()
            res.append((time.perf_counter() - t) / ns.calls * 1e6)
        return statistics.median(res)

    rows = []
    for name, x, b in (("2d", torch.randn(8, k, device="cuda", dtype=bf), None),
                       ("2d+bias", torch.randn(8, k, device="cuda", dtype=bf), bias),
                       ("3d [1,8,K]", torch.randn(1, 8, k, device="cuda", dtype=bf), None),
                       ("3d [1,1,K]", torch.randn(1, 1, k, device="cuda", dtype=bf), None)):  # fmt: skip
        autocutlass.linear(x, w, b)
        torch.cuda.synchronize()
        key = LINEAR.memo_key(Policy.CACHED, x, w, b, None)
        entry = d._memo.get(LINEAR.memo_key(d._policy, x, w, b, None))
        row = {
            "case": name,
            "torch F.linear": per_call_us(lambda: F.linear(x, w, b)),
            "autocutlass.linear": per_call_us(lambda: autocutlass.linear(x, w, b)),
            "memo key only": per_call_us(lambda: LINEAR.memo_key(Policy.CACHED, x, w, b, None)),
            "entry only": per_call_us(lambda: entry(x, w, b, None)) if entry else None,
            "torch.empty only": per_call_us(lambda: torch.empty((8, n), dtype=bf, device=x.device)),
        }
        del key
        rows.append(row)
        print(" | ".join(f"{k_}: {v:.2f}" if isinstance(v, float) else f"{k_}: {v}" for k_, v in row.items()), flush=True)
    import cProfile
    import io
    import pstats

    x = torch.randn(1, 1, k, device="cuda", dtype=bf)
    autocutlass.linear(x, w)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(ns.calls):
        autocutlass.linear(x, w)
    prof.disable()
    torch.cuda.synchronize()
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(14)
    print("\n".join(s.getvalue().splitlines()[:30]))
    print("stats", autocutlass.stats().as_dict())
    if ns.json:
        with open(ns.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "unit": "us per call", "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

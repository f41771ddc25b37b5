"""``autocutlass.linear(x, w, residual=h)`` (the residual add in the GEMM's epilogue) against torch's
unfused ``F.linear(x, w) + h``, and against our own unfused ``autocutlass.linear(x, w) + h``.

The projections whose output a transformer adds to its residual stream: Llama-3-8B's o_proj
(4096 x 4096) and down_proj (4096 x 14336), Llama-3-70B's (8192 x 8192, 8192 x 28672), at prefill
(M = 8192 tokens) and decode (M = 1, 8, 64). Each problem is tuned first (policy ``tune``, into
the database ``AUTOCUTLASS_DB`` points at; the fused and the plain linear are separate problems),
then timed in interleaved rounds (order reversed every other round; ``search.timing`` protocol
v1, L2 flushed by writing before every timed call), medians. Random bf16 inputs; the fused
output is checked against a float32 reference first.

GPU machine: python benchmarks/probes/linear_residual_bench.py --json OUT.json [--rounds N] [--trials N] [--cases A,B]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any

LAYERS = {"l8b-o": (4096, 4096), "l8b-down": (4096, 14336), "l70b-o": (8192, 8192), "l70b-down": (8192, 28672)}
TOKENS = (8192, 64, 8, 1)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--trials", type=int, default=16)
    ap.add_argument("--cases", help="comma-separated case names, e.g. l8b-o@8192 (default: all)")
    ap.add_argument("--json")
    ns = ap.parse_args()

    import os

    os.environ["AUTOCUTLASS_TUNE_TRIALS"] = str(ns.trials)
    import torch
    import torch.nn.functional as F

    import autocutlass
    from autocutlass.device import current_device
    from autocutlass.ops.compare import compare
    from side_by_side import geomean, header, interleaved, paired_ratio, write_json

    dev = current_device()
    flush = 2 * (dev.l2_bytes or (64 << 20))
    rows: list[dict[str, Any]] = []
    for layer, (n, k) in LAYERS.items():
        for m in TOKENS:
            name = f"{layer}@{m}"
            if ns.cases and name not in ns.cases.split(","):
                continue
            x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
            w = (torch.randn(n, k, device="cuda") * k**-0.5).to(torch.bfloat16)
            h = torch.randn(m, n, device="cuda").to(torch.bfloat16)
            t0 = time.perf_counter()
            with autocutlass.policy("tune"):
                y = autocutlass.linear(x, w, residual=h)
                autocutlass.linear(x, w)
            tune_s = time.perf_counter() - t0
            ok, why = compare(y, F.linear(x.float(), w.float()) + h.float(), 1e-2, "bf16")
            before = autocutlass.stats().fallbacks

            def fused() -> object:
                with autocutlass.policy("cached"):
                    return autocutlass.linear(x, w, residual=h)

            def ours_unfused() -> object:
                with autocutlass.policy("cached"):
                    return autocutlass.linear(x, w) + h

            timers = {"fused": fused, "ours_unfused": ours_unfused, "torch": lambda: F.linear(x, w) + h}
            for fn in timers.values():
                fn()
            per = interleaved(timers, ns.rounds, flush)
            med = {key: statistics.median(v) for key, v in per.items()}
            row = {
                "name": name, "M": m, "N": n, "K": k, "ok": ok, "why": why, "tune_s": round(tune_s, 1),
                "fallbacks_in_timing": autocutlass.stats().fallbacks - before,
                **{f"{key}_ms": round(v, 5) for key, v in med.items()},
                "x_torch": paired_ratio(per, "fused", "torch"), "x_ours_unfused": paired_ratio(per, "fused", "ours_unfused"),
            }  # fmt: skip
            rows.append(row)
            print(json.dumps(row), flush=True)
    what = "autocutlass.linear(x, w, residual=h) vs F.linear(x, w) + h (and our unfused linear + h), bf16"
    doc = {**header(what, dev, ns.rounds), "trials": ns.trials, "rows": rows, "geomean_x_torch": geomean(rows, "x_torch"),
           "geomean_x_ours_unfused": geomean(rows, "x_ours_unfused")}  # fmt: skip
    write_json(ns.json, doc)
    print(f"{'case':16} {'fused ms':>9} {'torch ms':>9} {'x torch':>8} {'x unfused':>9} ok")
    for r in rows:
        print(f"{r['name']:16} {r['fused_ms']:9.4f} {r['torch_ms']:9.4f} {r['x_torch']:8.3f} {r['x_ours_unfused']:9.3f} "
              f"{r['ok']}")  # fmt: skip
    print(f"geomean x torch {doc['geomean_x_torch']}, x our unfused {doc['geomean_x_ours_unfused']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A gated MLP, ``down(silu(gate(x)) * up(x))``, on autocutlass, three ways in one run: fused
SwiGLU (one GEMM over the packed weight cat([W_gate, W_up]) whose epilogue pairs gate and up
columns, ``linear(..., activation="swiglu")`` on the hopper_gemm_swiglu kernels, then down), the
gated path (``GatedMLP``'s two-GEMM path: the activation and the product in the gate
projection's epilogue, ``linear(..., mul=)`` on the hopper_gemm_gated kernels), against torch's
unfused sequence (three ``F.linear``, ``F.silu``, a multiply) and against our three GEMMs with
torch's two elementwise passes between them.

Llama-3-8B (hidden 4096, intermediate 14336) and Llama-3-70B (8192, 28672) MLPs at prefill
(M = 8192 tokens) and decode (M = 1, 8, 64). Every problem is tuned first (policy ``tune``,
``--trials``, into ``AUTOCUTLASS_DB``), then timed in interleaved rounds (order reversed every
other round; ``search.timing`` protocol v1, L2 flushed by writing before every timed call),
medians. Random bf16 inputs and weights; the fused output is checked against a float32
reference first (both fused variants). Sets ``AUTOCUTLASS_GATED_KERNELS=1`` and
``AUTOCUTLASS_SWIGLU_KERNELS=1``; ``fallbacks_in_timing`` > 0 means some variant ran torch.

GPU machine: python benchmarks/probes/gated_mlp_bench.py --json OUT.json [--rounds N] [--trials N] [--cases A,B]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any

MODELS = {"l8b": (4096, 14336), "l70b": (8192, 28672)}
TOKENS = (8192, 64, 8, 1)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--trials", type=int, default=16)
    ap.add_argument("--cases", help="comma-separated case names, e.g. l8b@8192 (default: all)")
    ap.add_argument("--json")
    ns = ap.parse_args()
    os.environ["AUTOCUTLASS_TUNE_TRIALS"] = str(ns.trials)
    os.environ["AUTOCUTLASS_GATED_KERNELS"] = "1"
    os.environ["AUTOCUTLASS_SWIGLU_KERNELS"] = "1"
    import torch
    import torch.nn.functional as F

    import autocutlass
    from autocutlass.device import current_device
    from autocutlass.ops.compare import compare
    from side_by_side import geomean, header, interleaved, paired_ratio, write_json

    dev = current_device()
    flush = 2 * (dev.l2_bytes or (64 << 20))
    rows: list[dict[str, Any]] = []
    for model, (hidden, inter) in MODELS.items():
        wg, wu = ((torch.randn(inter, hidden, device="cuda") * hidden**-0.5).to(torch.bfloat16) for _ in range(2))
        wd = (torch.randn(hidden, inter, device="cuda") * inter**-0.5).to(torch.bfloat16)
        wgu = torch.cat([wg, wu])  # the packed (2I, H) weight GatedMLP makes at swap time
        for m in TOKENS:
            name = f"{model}@{m}"
            if ns.cases and name not in ns.cases.split(","):
                continue
            x = torch.randn(m, hidden, device="cuda").to(torch.bfloat16)

            def gated() -> torch.Tensor:
                up = autocutlass.linear(x, wu)
                return autocutlass.linear(autocutlass.linear(x, wg, activation="silu", mul=up), wd)

            def swiglu() -> torch.Tensor:
                return autocutlass.linear(autocutlass.linear(x, wgu, activation="swiglu"), wd)

            def ours_unfused() -> torch.Tensor:
                return autocutlass.linear(F.silu(autocutlass.linear(x, wg)) * autocutlass.linear(x, wu), wd)

            def torch_mlp() -> torch.Tensor:
                return F.linear(F.silu(F.linear(x, wg)) * F.linear(x, wu), wd)

            t0 = time.perf_counter()
            with autocutlass.policy("tune"):
                y = gated()
                y_sw = swiglu()
                ours_unfused()
            tune_s = time.perf_counter() - t0
            h = F.silu(F.linear(x.float(), wg.float())) * F.linear(x.float(), wu.float())
            want = F.linear(h.to(torch.bfloat16).float(), wd.float())
            ok, why = compare(y, want, 2e-2, "bf16")
            ok_sw, why_sw = compare(y_sw, want, 2e-2, "bf16")
            before = autocutlass.stats().fallbacks

            def cached(fn: Any) -> Any:
                def run() -> object:
                    with autocutlass.policy("cached"):
                        return fn()

                return run

            timers = {"swiglu": cached(swiglu), "gated": cached(gated), "ours_unfused": cached(ours_unfused),
                      "torch": torch_mlp}  # fmt: skip
            for fn in timers.values():
                fn()
            per = interleaved(timers, ns.rounds, flush)
            med = {key: statistics.median(v) for key, v in per.items()}
            row = {
                "name": name, "M": m, "hidden": hidden, "intermediate": inter, "ok": ok, "why": why,
                "ok_swiglu": ok_sw, "why_swiglu": why_sw,
                "tune_s": round(tune_s, 1), "fallbacks_in_timing": autocutlass.stats().fallbacks - before,
                **{f"{key}_ms": round(v, 5) for key, v in med.items()},
                "x_torch": paired_ratio(per, "gated", "torch"), "x_ours_unfused": paired_ratio(per, "gated", "ours_unfused"),
                "swiglu_x_torch": paired_ratio(per, "swiglu", "torch"),
                "swiglu_x_gated": paired_ratio(per, "swiglu", "gated"),
            }  # fmt: skip
            rows.append(row)
            print(json.dumps(row), flush=True)
    what = ("Gated MLP: fused SwiGLU (packed gate+up GEMM) and GatedMLP's gated path (silu(gate) * up in the gate "
            "GEMM's epilogue) vs torch's unfused MLP and ours unfused, bf16")
    doc = {**header(what, dev, ns.rounds), "trials": ns.trials, "rows": rows, "geomean_x_torch": geomean(rows, "x_torch"),
           "geomean_x_ours_unfused": geomean(rows, "x_ours_unfused"),
           "geomean_swiglu_x_torch": geomean(rows, "swiglu_x_torch"),
           "geomean_swiglu_x_gated": geomean(rows, "swiglu_x_gated")}  # fmt: skip
    write_json(ns.json, doc)
    print(f"{'case':12} {'swiglu ms':>9} {'gated ms':>9} {'torch ms':>9} {'sw x torch':>10} {'sw x gated':>10} "
          f"{'x torch':>8} {'x unfused':>9} ok")  # fmt: skip
    for r in rows:
        print(f"{r['name']:12} {r['swiglu_ms']:9.4f} {r['gated_ms']:9.4f} {r['torch_ms']:9.4f} {r['swiglu_x_torch']:10.3f} "
              f"{r['swiglu_x_gated']:10.3f} {r['x_torch']:8.3f} {r['x_ours_unfused']:9.3f} {r['ok']}/{r['ok_swiglu']}")  # fmt: skip
    print(f"geomean: gated x torch {doc['geomean_x_torch']}, x our unfused {doc['geomean_x_ours_unfused']}; "
          f"swiglu x torch {doc['geomean_swiglu_x_torch']}, x gated {doc['geomean_swiglu_x_gated']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

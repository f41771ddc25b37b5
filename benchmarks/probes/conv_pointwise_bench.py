"""Pointwise (1x1, stride 1) conv2d layers: ``autocutlass.conv2d`` against cuDNN, side by side.

Each layer is first tuned (policy ``tune``, into the database ``AUTOCUTLASS_DB`` points at), then
timed in interleaved rounds (order reversed every other round; ``search.timing`` protocol v1, L2
flushed by writing before every timed call): ours (policy ``cached``), ``F.conv2d`` with
``cudnn.benchmark = True`` and with it False (PyTorch's default heuristic). Inputs are random
channels_last bf16; each layer's output is checked against a float32 reference first.

Layers: the public suite's pointwise fprop cases (``--shapes``, 1x1 stride 1 no padding) and a
few of our own (ResNet-50's other 1x1 widths, UNet-style projections).

The whole public suite (pointwise and 3x3 layers, fallbacks counted at 1.0) is measured the same
way by ``autocutlass bench --shapes benchmarks/shapes-conv.json``; this probe keeps the layers of
our own.

Its cuDNN default-mode column runs on the thread that ran benchmark mode first, so it reads benchmark
mode's plans (PyTorch caches cuDNN's plans per thread, keyed without ``cudnn.benchmark``; session 42,
``benchmarks/probes/cudnn_plan_cache.py``); ``autocutlass bench`` times each mode on a thread of its own.

GPU machine: python benchmarks/probes/conv_pointwise_bench.py --json OUT.json [--rounds N] [--trials N] [--layers A,B]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any

OWN = [
    {"name": "rn50-l4-1x1-up", "N": 32, "C": 512, "H": 7, "W": 7, "K": 2048},
    {"name": "rn50-l2-1x1-down-b128", "N": 128, "C": 512, "H": 28, "W": 28, "K": 128},
    {"name": "unet-proj-640", "N": 2, "C": 640, "H": 64, "W": 64, "K": 640},
    {"name": "unet-proj-1280", "N": 4, "C": 1280, "H": 32, "W": 32, "K": 1280},
]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="benchmarks/shapes-conv.json")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--trials", type=int, default=24)
    ap.add_argument("--json")
    ap.add_argument("--layers", help="comma-separated layer names (default: all)")
    ns = ap.parse_args()

    import torch
    import torch.nn.functional as F

    import autocutlass
    from autocutlass.device import current_device
    from autocutlass.ops.compare import compare
    from side_by_side import geomean, header, interleaved, paired_ratio, write_json

    import os

    os.environ["AUTOCUTLASS_TUNE_TRIALS"] = str(ns.trials)
    autocutlass.reset()
    with open(ns.shapes) as f:
        suite = json.load(f)["cases"]
    cases = [c for c in suite if (c["R"], c["S"], *c["stride"], *c["pad"]) == (1, 1, 1, 1, 0, 0) and "fprop" in c["directions"]]
    cases += OWN
    if ns.layers:
        cases = [c for c in cases if c["name"] in ns.layers.split(",")]
    dev = current_device()
    flush = 2 * (dev.l2_bytes or (64 << 20))
    cl = torch.channels_last
    rows: list[dict[str, Any]] = []
    for c in cases:
        n, ch, h, w, k = c["N"], c["C"], c["H"], c["W"], c["K"]
        x = torch.randn(n, ch, h, w, device="cuda").to(torch.bfloat16).contiguous(memory_format=cl)
        wt = (torch.randn(k, ch, 1, 1, device="cuda") * ch**-0.5).to(torch.bfloat16).contiguous(memory_format=cl)
        t0 = time.perf_counter()
        with autocutlass.policy("tune"):
            y = autocutlass.conv2d(x, wt)
        tune_s = time.perf_counter() - t0
        ok, why = compare(y, F.conv2d(x.float(), wt.float()), 1e-2, "bf16")
        stats = autocutlass.stats()

        def ours() -> object:
            with autocutlass.policy("cached"):
                return autocutlass.conv2d(x, wt)

        def cudnn(bench: bool) -> Any:
            def run() -> object:
                torch.backends.cudnn.benchmark = bench
                return F.conv2d(x, wt)

            return run

        timers = {"ours": ours, "cudnn_bench": cudnn(True), "cudnn_default": cudnn(False)}
        for t in timers.values():  # warm: cuDNN benchmark mode picks its algorithm here
            t()
        per = interleaved(timers, ns.rounds, flush)
        torch.backends.cudnn.benchmark = False
        flops = 2 * n * h * w * k * ch
        med = {name: statistics.median(v) for name, v in per.items()}
        row = {
            "name": c["name"], "N": n, "C": ch, "H": h, "W": w, "K": k, "ok": ok, "why": why, "tune_s": round(tune_s, 1),
            "fallbacks": stats.fallbacks,
            **{f"{name}_ms": round(m, 5) for name, m in med.items()},
            **{f"{name}_tflops": round(flops / m / 1e9, 1) for name, m in med.items()},
            "x_cudnn_bench": paired_ratio(per, "ours", "cudnn_bench"),
            "x_cudnn_default": paired_ratio(per, "ours", "cudnn_default"),
        }  # fmt: skip
        rows.append(row)
        print(json.dumps(row), flush=True)
    what = "autocutlass.conv2d (pointwise layers through the GEMM family) vs F.conv2d (cuDNN), channels_last bf16"
    doc = {**header(what, dev, ns.rounds), "cudnn": torch.backends.cudnn.version(), "rows": rows,
           "geomean_x_cudnn_bench": geomean(rows, "x_cudnn_bench"),
           "geomean_x_cudnn_default": geomean(rows, "x_cudnn_default")}  # fmt: skip
    write_json(ns.json, doc)
    print(f"{'layer':24} {'ours TF/s':>9} {'cuDNN b':>8} {'cuDNN d':>8} {'x bench':>8} {'x default':>9} ok")
    for r in rows:
        print(f"{r['name']:24} {r['ours_tflops']:9.1f} {r['cudnn_bench_tflops']:8.1f} {r['cudnn_default_tflops']:8.1f}"
              f" {r['x_cudnn_bench']:8.3f} {r['x_cudnn_default']:9.3f} {r['ok']}")  # fmt: skip
    print(f"geomean x cuDNN benchmark {doc['geomean_x_cudnn_bench']}, x cuDNN default {doc['geomean_x_cudnn_default']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

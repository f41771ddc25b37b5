"""Where a ResNet-50 (or UNet-stack) training step on autocutlass loses its round-to-round jitter
(GPU machine).

conv_train_probe's rounds of our swapped model vary by up to 30% (29 to 39 ms on an H200, b128)
while torch's rounds in the same process stay within 1%. This probe profiles ``--steps``
consecutive training steps of each side (policy ``cached``, one CUDA-event fence at the end) with
torch.profiler's CUDA activity, then reads the GPU timeline: the span, the busy time (the union of
kernel and memset intervals), the largest idle gaps with the kernels on each side of them, and
per kernel name the count, median and largest duration; a kernel that is sometimes slow shows a
large max/median. Both sides' summaries go to ``--json``; a table is printed.

GPU machine: python benchmarks/probes/conv_train_jitter_probe.py [--model resnet50|unet] [--steps 15]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any


def _timeline(trace_path: str) -> dict[str, Any]:
    """The GPU side of a chrome trace: span, busy, gaps, per-kernel stats."""
    with open(trace_path) as fh:
        events = json.load(fh)["traceEvents"]
    ks = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy")]
    ks.sort(key=lambda e: e["ts"])
    if not ks:
        return {}
    busy, gaps = 0.0, []
    cur_s, cur_e = ks[0]["ts"], ks[0]["ts"] + ks[0]["dur"]
    last = ks[0]  # the event that ends the current busy interval
    for e in ks[1:]:
        s, d = e["ts"], e["ts"] + e["dur"]
        if s > cur_e:
            busy += cur_e - cur_s
            gaps.append((s - cur_e, last["name"][:90], e["name"][:90]))
            cur_s, cur_e, last = s, d, e
        elif d > cur_e:
            cur_e, last = d, e
    busy += cur_e - cur_s
    span = cur_e - ks[0]["ts"]
    per: dict[str, list[float]] = {}
    for e in ks:
        per.setdefault(e["name"], []).append(float(e["dur"]))
    stats = []
    for name, ds in per.items():
        med = statistics.median(ds)
        stats.append({"kernel": name[:140], "count": len(ds), "median_us": round(med, 1), "max_us": round(max(ds), 1),
                      "total_ms": round(sum(ds) / 1e3, 3), "excess_ms": round((sum(ds) - med * len(ds)) / 1e3, 3)})  # fmt: skip
    stats.sort(key=lambda r: -r["excess_ms"])
    gaps.sort(key=lambda g: -g[0])
    return {
        "span_ms": round(span / 1e3, 3), "busy_ms": round(busy / 1e3, 3), "idle_ms": round((span - busy) / 1e3, 3),
        "gaps_over_50us": sum(1 for g in gaps if g[0] > 50), "idle_in_gaps_over_50us_ms": round(sum(g[0] for g in gaps if g[0] > 50) / 1e3, 3),
        "largest_gaps": [{"us": round(g[0], 1), "after": g[1], "before": g[2]} for g in gaps[:12]],
        "kernels_by_excess": stats[:15],
    }  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=["resnet50", "unet"], default="resnet50")
    ap.add_argument("--batch", type=int, default=0, help="default 128 (resnet50) / 8 (unet)")
    ap.add_argument("--steps", type=int, default=15)
    ap.add_argument("--json")
    ns = ap.parse_args()
    os.environ.setdefault("AUTOCUTLASS_POLICY", "cached")
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import torch
    from conv_train_host_probe import training_pair  # type: ignore[import-not-found]
    from torch.profiler import ProfilerActivity, profile

    step, batch = training_pair(ns.model, ns.batch)
    torch.cuda.synchronize()
    out: dict[str, Any] = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "model": ns.model,
                           "batch": batch, "steps": ns.steps, "sides": {}}  # fmt: skip
    for k in ("autocutlass", "torch", "autocutlass"):
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(ns.steps):
                step(k)
            end.record()
            end.synchronize()
        with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as tf:
            path = tf.name
        prof.export_chrome_trace(path)
        tl = _timeline(path)
        os.unlink(path)
        tl["event_ms_per_step"] = round(start.elapsed_time(end) / ns.steps, 3)
        out["sides"].setdefault(k, []).append(tl)
    for k, tls in out["sides"].items():
        for tl in tls:
            print(f"{k:12s} per step: wall {tl['event_ms_per_step']:.2f} ms; GPU span {tl['span_ms'] / ns.steps:.2f}, "
                  f"busy {tl['busy_ms'] / ns.steps:.2f}, idle {tl['idle_ms'] / ns.steps:.2f} "
                  f"({tl['gaps_over_50us']} gaps > 50 us: {tl['idle_in_gaps_over_50us_ms']:.2f} ms over {ns.steps} steps)")  # fmt: skip
            for g in tl["largest_gaps"][:6]:
                print(f"    gap {g['us']:8.1f} us  after {g['after'][:60]}  before {g['before'][:60]}")
            for r in tl["kernels_by_excess"][:8]:
                print(f"    {r['count']:5d} x median {r['median_us']:7.1f} max {r['max_us']:8.1f} us  excess {r['excess_ms']:6.3f} ms  {r['kernel'][:80]}")  # fmt: skip
    if ns.json:
        with open(ns.json, "w") as fh:
            json.dump(out, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

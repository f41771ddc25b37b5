"""Session 32 summary: collects the numbers of the session's result files into one JSON and one plot.
python benchmarks/results/s32_summary.py  (from the project root; matplotlib)"""

from __future__ import annotations

import json
import re
from pathlib import Path

R = Path(__file__).resolve().parent
P = "2026-11-28-"


def load(name: str) -> dict:
    return json.loads((R / f"{P}{name}").read_text())


def train(name: str, model: str) -> dict:
    d = load(name)
    m = d["models"][model]
    return {"file": f"{P}{name}", "device": d["device"], "compile": d.get("compile", "off"), "batch": m["batch"],
            "ms_per_step": m["ms_per_step"], "rounds_ms": m["rounds_ms"], "host_ms_per_step": m.get("host_ms_per_step"),
            "x_vs_torch": m["speedup_vs_torch"]}  # fmt: skip


def ncu(name: str) -> list[dict]:
    """Per profiled kernel of an ncu text report: its name and a few SpeedOfLight / launch metrics."""
    rows: list[dict] = []
    keys = ("SM Frequency", "Duration", "Compute (SM) Throughput", "L2 Cache Throughput", "DRAM Throughput",
            "Memory Throughput", "Warp Cycles Per Issued Instruction", "Grid Size", "Registers Per Thread")  # fmt: skip
    for line in (R / f"{P}{name}").read_text().splitlines():
        if re.match(r"^  \S", line) and "Context" in line:
            rows.append({"kernel": line.strip()[:80]})
        elif rows:
            for k in keys:
                if line.strip().startswith(k + " ") and k not in rows[-1]:
                    parts = line.split()
                    rows[-1][k] = f"{parts[-1]} {parts[-2]}"  # value, unit
    return rows


probe = load("h100-s32-a-conv-streamk-probe.json")
best: dict[str, dict] = {}
for r in probe["rows"]:
    if r["us"] is None or r["kernel"].startswith("cudnn"):
        continue
    kind = "stream-K" if "streamk" in r["kernel"] else ("record" if r["kernel"].startswith("record") else "seed")
    cur = best.setdefault(r["layer"], {})
    if kind not in cur or r["x_cudnn"] > cur[kind]["x_cudnn"]:
        cur[kind] = {"kernel": r["kernel"], "us": r["us"], "x_cudnn": r["x_cudnn"]}

out = {
    "date": "2026-11-28", "session": 32, "torch": "2.11.0+cu130", "cudnn": 91900, "dsl": "nvidia-cutlass-dsl 4.8.1",
    "compiled_training": {
        "unet_b8_h100_c": train("h100-s32-c-train-unet-compiled.json", "unet"),
        "unet_b8_h200_e": train("h200-s32-e-train-unet-compiled.json", "unet"),
        "unet_b16_h100_d": train("h100-s32-d-train-unet16-compiled.json", "unet"),
        "rn50_b128_h100_d": train("h100-s32-d-train-rn50-compiled.json", "resnet50"),
    },
    "conv_streamk_probe_h100_a": {"file": f"{P}h100-s32-a-conv-streamk-probe.json", "best_of_each_kind": best},
    "ncu_gemm_4096x4096x8192_h100_b": ncu("h100-s32-b-ncu-square-4k-k8192.txt"),
    "conv_suite_fprop_h100_f": {"file": f"{P}h100-s32-f-bench-fprop.json",
                                "geomean": load("h100-s32-f-bench-fprop.json")["geomean"]},
    "conv_suite_fprop_h200_g": {"file": f"{P}h200-s32-g-bench-fprop.json",
                                "geomean": load("h200-s32-g-bench-fprop.json")["geomean"]},
}  # fmt: skip
(R / f"{P}s32-summary.json").write_text(json.dumps(out, indent=1))

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

fig, (a1, a2) = plt.subplots(1, 2, figsize=(13, 4.5))
tr = out["compiled_training"]
names = list(tr)
a1.bar(range(len(names)), [tr[n]["x_vs_torch"] for n in names], color="tab:green")
a1.axhline(1.0, color="k", lw=0.8)
a1.set_xticks(range(len(names)), [n.replace("_", "\n") for n in names], fontsize=7)
a1.set_ylim(0.9, 1.2)
a1.set_title('training step under torch.compile(mode="reduce-overhead"), x vs torch compiled alike', fontsize=9)
layers = list(best)
kinds = ("record", "seed", "stream-K")
for i, kind in enumerate(kinds):
    a2.bar([j + (i - 1) * 0.27 for j in range(len(layers))],
           [best[lay].get(kind, {}).get("x_cudnn", 0) for lay in layers], 0.27, label=kind)  # fmt: skip
a2.axhline(1.0, color="k", lw=0.8)
a2.set_xticks(range(len(layers)), layers, rotation=35, ha="right", fontsize=7)
a2.set_title("conv fprop on an H100, best of each kind, x vs cuDNN (benchmark mode)", fontsize=9)
a2.legend(fontsize=8)
fig.tight_layout()
fig.savefig(R / f"{P}s32-summary.png", dpi=110)
print(json.dumps({n: round(v["x_vs_torch"], 3) for n, v in tr.items()}, indent=1))
print(json.dumps(out["ncu_gemm_4096x4096x8192_h100_b"], indent=1)[:1500])

"""Session 31 summary: collects the numbers of the session's result files into one JSON and one plot.
python benchmarks/results/s31_summary.py  (from the project root; matplotlib)"""

from __future__ import annotations

import json
from pathlib import Path

R = Path(__file__).resolve().parent
P = "2026-11-28-"


def load(name: str) -> dict:
    return json.loads((R / f"{P}{name}").read_text())


def train(name: str, model: str) -> dict:
    d = load(name)
    m = d["models"][model]
    return {"file": f"{P}{name}", "device": d["device"], "node_host_ms": d.get("site_node_host_ms"),
            "nchw_copy": d.get("nchw_copy", "on"), "ms_per_step": m["ms_per_step"],
            "host_ms_per_step": m.get("host_ms_per_step"), "x_vs_torch": m["speedup_vs_torch"],
            "gpu_ms_per_step": {k: v[0]["ms"] for k, v in m.get("profile", {}).items()} or None}  # fmt: skip


def infer(name: str) -> dict:
    d = load(name)
    return {"file": f"{P}{name}", "device": d["device"], "ms_per_forward": d["ms_per_forward"],
            "x_vs_torch": d["speedup_vs_torch"]}  # fmt: skip


out = {
    "date": "2026-11-28", "session": 31, "torch": "2.11.0+cu130", "cudnn": 91900, "dsl": "nvidia-cutlass-dsl 4.8.1",
    "unet_inference_b8": {"h100_c": infer("h100-s31-c-unet-infer.json"), "h100_e": infer("h100-s31-e-unet-infer.json"),
                          "h200_f": infer("h200-s31-f-unet-infer.json")},
    "unet_training_b8": {
        "h100_b_pass1_untuned": train("h100-s31-b-train-unet-pass1.json", "unet"),
        "h100_b_pass2_tuned": train("h100-s31-b-train-unet-pass2.json", "unet"),
        "h100_c_copy_on_node_0.03": train("h100-s31-c-train-unet-nchw-copy-on.json", "unet"),
        "h100_c_copy_off_node_0.03": train("h100-s31-c-train-unet-nchw-copy-off.json", "unet"),
        "h100_d_copy_on_node_0.14": train("h100-s31-d-train-unet-user-db.json", "unet"),
        "h100_e_final_file": train("h100-s31-e-train-unet.json", "unet"),
        "h200_f_final_file": train("h200-s31-f-train-unet.json", "unet"),
    },
    "rn50_training_b128": {"h100_e_final_file": train("h100-s31-e-train-rn50.json", "resnet50")},
    "epilogue_probe_h100": load("h100-s31-a-epilogue-probe.json"),
}  # fmt: skip
(R / f"{P}s31-summary.json").write_text(json.dumps(out, indent=1))

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.5))
inf = out["unet_inference_b8"]
labels, on, off = [], [], []
for k, v in inf.items():
    labels.append(k)
    on.append(v["x_vs_torch"]["ours nchw-copy on"])
    off.append(v["x_vs_torch"]["ours nchw-copy off"])
xs = range(len(labels))
a1.bar([i - 0.2 for i in xs], off, 0.4, label="NCHW input served by torch (before)")
a1.bar([i + 0.2 for i in xs], on, 0.4, label="NCHW input made channels_last (session 31)")
a1.axhline(1.0, color="k", lw=0.8)
a1.set_xticks(list(xs), labels)
a1.set_ylim(0.8, 1.25)
a1.set_title("UNet-style stack b8 inference, x vs torch (cudnn.benchmark)")
a1.legend(fontsize=8)
tr = out["unet_training_b8"]
names = list(tr)
a2.bar(range(len(names)), [tr[n]["x_vs_torch"] for n in names], color="tab:green")
a2.axhline(1.0, color="k", lw=0.8)
a2.set_xticks(range(len(names)), [n.replace("_", "\n", 2) for n in names], fontsize=6)
a2.set_ylim(0.7, 1.1)
a2.set_title("UNet-style stack b8 training step, x vs torch")
fig.tight_layout()
fig.savefig(R / f"{P}s31-summary.png", dpi=110)
print(json.dumps({k: {n: round(v["x_vs_torch"], 3) if isinstance(v["x_vs_torch"], float) else v["x_vs_torch"]
                      for n, v in d.items()} for k, d in out.items() if k.startswith(("unet", "rn50"))}, indent=1))  # fmt: skip

"""Session 30's summary: the conv fprop suite and the few-tile file against cuDNN (benchmark mode),
the H200's wgrad suite, and the best time of each split mode per few-tile layer, from the bench
JSON and split-mode files of calls a-d. Writes 2026-11-28-s30-summary.{json,png}."""

import json
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

HERE = Path(__file__).parent
P = "2026-11-28-"


def bench(name: str) -> dict:
    d = json.loads((HERE / f"{P}{name}.json").read_text())
    ratios = {c["name"]: c.get("vs_cudnn_benchmark") or c.get("ratio_vs_cudnn_benchmark") for c in d["cases"]}
    return {"file": f"{P}{name}.json", "gpu": d["gpu"], "geomean": d["geomean"], "ratios": ratios}


def modes(name: str) -> dict:
    out: dict[str, dict[str, float]] = {}
    for line in (HERE / f"{P}{name}.txt").read_text().splitlines():
        m = re.match(r"(\{.*\}) (\w+)\s+([\d.]+) us", line)
        if m:
            d = json.loads(m.group(1))
            key = f"n{d['n']} {d['h']}x{d['w']}x{d['c']} k{d['k']}"
            out.setdefault(key, {})[m.group(2)] = float(m.group(3))
    return {"file": f"{P}{name}.txt", "best_us": out}


summary = {
    "what": "session 30: workspace split-K in the conv forward; the search's fix for fields a config dict leaves out",
    "fprop_suite": {"h100_call_a": bench("h100-s30-a-bench-fprop"), "h100_call_b": bench("h100-s30-b-bench-suite"),
                    "h200_call_c": bench("h200-s30-c-bench-suite")},
    "fewtiles": {"h100_12_trials": bench("h100-s30-b-bench-fewtiles"), "h100_32_trials": bench("h100-s30-e-bench-fewtiles"),
                 "h100": bench("h100-s30-f-bench-fewtiles"),
                 "h200": bench("h200-s30-c-bench-fewtiles")},
    "wgrad_suite": {"h200_call_d": bench("h200-s30-d-bench-wgrad")},
    "split_modes": {"h100": modes("h100-s30-b-split-modes"), "h200": modes("h200-s30-c-split-modes")},
}
(HERE / f"{P}s30-summary.json").write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")

fig, (a, b) = plt.subplots(1, 2, figsize=(14, 5))
names = list(summary["fewtiles"]["h100"]["ratios"])
for i, (gpu, w) in enumerate((("h100", -0.2), ("h200", 0.2))):
    r = summary["fewtiles"][gpu]["ratios"]
    a.bar([j + w for j in range(len(names))], [r[n] or 0 for n in names], width=0.4, label=gpu.upper())
a.axhline(1.0, color="k", lw=0.8)
a.set_xticks(range(len(names)), names, rotation=45, ha="right", fontsize=8)
a.set_ylabel("x cuDNN (benchmark mode)")
a.set_title("few-tile conv fprop (shapes-conv-fewtiles.json), policy cached\n(H100: call f, the final file; H200: call c)", fontsize=9)
a.legend()
layers = list(summary["split_modes"]["h100"]["best_us"])
for i, mode in enumerate(("unsplit", "serial", "workspace")):
    t = summary["split_modes"]["h100"]["best_us"]
    b.bar([j + (i - 1) * 0.27 for j in range(len(layers))], [t[l].get(mode, 0) for l in layers], width=0.27, label=mode)
b.set_xticks(range(len(layers)), layers, rotation=45, ha="right", fontsize=8)
b.set_ylabel("best trial, us (H100)")
b.set_title("split modes per layer (one tuning each)")
b.legend()
fig.tight_layout()
fig.savefig(HERE / f"{P}s30-summary.png", dpi=110)
print(json.dumps({k: v["geomean"] for k, v in {**summary["fprop_suite"], **summary["fewtiles"], **summary["wgrad_suite"]}.items()}, indent=1)[:3000])

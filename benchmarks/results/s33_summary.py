"""Session 33's summary: the few-tile conv file before and after the narrow workspace-split seeds (H100 call d,
H200 call e: the shipped file as a user gets it, then with its 9 layers tuned again from the priors, 12 trials),
and the H100 grid of the hopper_conv space on rn50-l4-3x3 (calls b and c: every config timed once, L2 flushed).
Writes 2026-11-28-s33-summary.{json,png}.

    python benchmarks/results/s33_summary.py
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).resolve().parent
P = "2026-11-28"


def bench(name: str) -> dict:
    d = json.loads((HERE / f"{P}-{name}.json").read_text())
    return {"gpu": d["gpu"], "geomean": d["geomean"]["vs_cudnn_benchmark"],
            "cases": {c["name"]: c["ratio_vs_cudnn_benchmark"] for c in d["cases"]}}  # fmt: skip


def main() -> None:
    few = {}
    for gpu, call in (("h100", "d"), ("h200", "e")):
        few[gpu] = {w: bench(f"{gpu}-s33-{call}-bench-fewtiles-{w}") for w in ("before", "after")}
    grid = []
    for f in ("h100-s33-b-grid-few-all", "h100-s33-c-grid-narrow"):
        d = json.loads((HERE / f"{P}-{f}.json").read_text())
        cudnn = {r["layer"]: r["us"] for r in d["rows"] if r["kernel"].startswith("cudnn")}
        grid += [{**r, "cudnn_us": cudnn.get(r["layer"]), "grid": f.split("-")[-1]} for r in d["sweep"]]
    out = {"date": P, "fewtiles": few, "grid": grid}
    (HERE / f"{P}-s33-summary.json").write_text(json.dumps(out, indent=1))

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(15, 5.5))
    names = list(few["h100"]["before"]["cases"])
    x = range(len(names))
    wd = 0.2
    for i, (gpu, w) in enumerate((("h100", "before"), ("h100", "after"), ("h200", "before"), ("h200", "after"))):
        b = few[gpu][w]
        a1.bar([j + (i - 1.5) * wd for j in x], [b["cases"][n] for n in names], wd,
               label=f"{gpu.upper()} {w} (geomean x{b['geomean']:.3f})")  # fmt: skip
    a1.axhline(1.0, color="k", lw=0.8)
    a1.set_xticks(list(x), names, rotation=35, ha="right", fontsize=8)
    a1.set_ylabel("x cuDNN (benchmark mode)")
    a1.set_title("Few-tile conv forward: shipped file before / after the narrow-seed re-tune")
    a1.legend(fontsize=8)
    layers = sorted({r["layer"] for r in grid})
    for j, lay in enumerate(layers):
        rs = [r for r in grid if r["layer"] == lay]
        ys = [r["cudnn_us"] / r["us"] for r in rs]
        a2.scatter([j + (0.15 if r["grid"] == "narrow" else -0.15) for r in rs], ys, s=8,
                   c=["tab:orange" if r["grid"] == "narrow" else "tab:blue" for r in rs])  # fmt: skip
    a2.axhline(1.0, color="k", lw=0.8)
    a2.set_xticks(range(len(layers)), layers, rotation=20, fontsize=8)
    a2.set_ylabel("x cuDNN (one timing each)")
    a2.set_title("H100 grid of the hopper_conv space (blue: 'few' grid, orange: 64-column tiles)")
    fig.suptitle(f"Session 33 ({P}); NVIDIA H100 80GB HBM3 / H200, torch 2.11.0+cu130, cuDNN 9.19, DSL 4.8.1")
    fig.tight_layout()
    fig.savefig(HERE / f"{P}-s33-summary.png", dpi=110)
    print(json.dumps({g: {w: round(few[g][w]["geomean"], 3) for w in few[g]} for g in few}))
    best = {}
    for r in grid:
        if r["cudnn_us"] and (r["layer"] not in best or r["us"] < best[r["layer"]]["us"]):
            best[r["layer"]] = r
    for lay, r in best.items():
        print(f"{lay}: fastest of the grids {r['kernel']} {r['us']:.1f} us, cuDNN {r['cudnn_us']:.1f} us")


if __name__ == "__main__":
    main()

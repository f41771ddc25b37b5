"""Session 34's summary (NVIDIA H200): the split order of split-K (contiguous against interleaved, ``interleave``)
on few-tile, long-K GEMMs (call b) and the conv suite's wgrad layers (call c); the few-tile / long-K GEMMs as a
user gets the shipped file before and after a 16-trial re-tune with the new seeds (call d); the public GEMM suite
with the three vendor-verdict rules (calls e, g, h) and ResNet-50 b128 eager training steps with each (g, h).
Writes 2026-11-28-s34-summary.{json,png}.

    python benchmarks/results/s34_summary.py
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).resolve().parent
P = "2026-11-28-h200-s34"


def load(name: str) -> dict:
    return json.loads((HERE / f"{P}-{name}.json").read_text())


def suite(name: str) -> dict:
    d = load(name)
    return {"geomean_with_fallbacks": d["geomean"]["vs_torch_with_fallbacks"],
            "cases": {c["name"]: (c["ratio_vs_torch"], c["path"]) for c in d["cases"]}}  # fmt: skip


def train(name: str) -> dict:
    r = load(name)["models"]["resnet50"]
    ms, host = r["ms_per_step"], r["host_ms_per_step"]
    return {"ms": ms, "host_ms": host, "ratio": ms["torch"] / ms["autocutlass"]}


def main() -> None:
    order = [r for r in load("b-split-order-gemm")["rows"]]
    pairs = []
    for r in order:
        if r["side"].startswith("contig"):
            i = next((x for x in order if x["case"] == r["case"] and x["side"] == "inter  " + r["side"][7:]), None)
            if i is not None:
                pairs.append({"case": r["case"], "config": r["side"][7:], "contig_us": r["ms"] * 1e3,
                              "inter_us": i["ms"] * 1e3, "inter_speedup": r["ms"] / i["ms"]})  # fmt: skip
    wg = load("c-wgrad-interleave")["rows"]
    wpairs = []
    for r in wg:
        if r["tag"] == "shipped":
            i = next((x for x in wg if x["layer"] == r["layer"] and x["tag"] == "shipped-i"), None)
            if i is not None:
                wpairs.append({"layer": r["layer"], "contig_us": r["us"], "inter_us": i["us"], "inter_speedup": r["us"] / i["us"]})
    longk = {w: {**suite(f"d-bench-longk-{w}")["cases"], **suite(f"d-bench-online-{w}")["cases"]} for w in ("before", "after")}
    rules = {"sum (default)": suite("e-bench-suite"), "gpu time (AUTOCUTLASS_VENDOR_HOST=0)": suite("g-bench-suite-gpu-verdicts"),
             "host share 0.25 (not kept)": suite("h-bench-suite-host-share")}  # fmt: skip
    trains = {"sum (default)": train("g-train-rn50-host1"), "gpu time (AUTOCUTLASS_VENDOR_HOST=0)": train("g-train-rn50-host0"),
              "host share 0.25 (not kept)": train("h-train-rn50-host-share")}  # fmt: skip
    out = {"gpu": "NVIDIA H200", "date": "2026-11-28", "split_order_gemm": pairs, "split_order_wgrad": wpairs,
           "longk_before_after": longk, "suite_by_verdict_rule": rules, "rn50_train_by_verdict_rule": trains}  # fmt: skip
    (HERE / "2026-11-28-s34-summary.json").write_text(json.dumps(out, indent=1))

    fig, (a1, a2, a3) = plt.subplots(1, 3, figsize=(18, 5.5))
    a1.bar(range(len(pairs)), [p["inter_speedup"] for p in pairs], color="tab:blue", label="GEMM split configs")
    a1.bar([len(pairs) + 1 + j for j in range(len(wpairs))], [p["inter_speedup"] for p in wpairs], color="tab:orange",
           label="conv wgrad shipped split records")  # fmt: skip
    a1.axhline(1.0, color="k", lw=0.8)
    a1.set_xticks(list(range(len(pairs))) + [len(pairs) + 1 + j for j in range(len(wpairs))],
                  [f"{p['case']} {p['config'].split(' s0')[0]}" for p in pairs] + [p["layer"] for p in wpairs],
                  rotation=80, fontsize=6)  # fmt: skip
    a1.set_ylim(0.9, 1.1)
    a1.set_ylabel("contiguous time / interleaved time")
    a1.set_title("Split order: interleaved K blocks vs one run per split")
    a1.legend(fontsize=8)
    names = list(longk["before"])
    x = range(len(names))
    for k, w in enumerate(("before", "after")):
        a2.bar([j + (k - 0.5) * 0.4 for j in x], [longk[w][n][0] for n in names], 0.4, label=w)
    a2.axhline(1.0, color="k", lw=0.8)
    a2.set_xticks(list(x), names, rotation=35, ha="right", fontsize=8)
    a2.set_ylim(0.8, 1.1)
    a2.set_ylabel("x torch.matmul (fallbacks run torch)")
    a2.set_title("Few-tile / long-K GEMMs: shipped file before / after re-tune")
    a2.legend(fontsize=8)
    labels = list(rules)
    a3.bar([j - 0.2 for j in range(3)], [rules[k]["geomean_with_fallbacks"] for k in labels], 0.4, label="GEMM suite geomean")
    a3.bar([j + 0.2 for j in range(3)], [trains[k]["ratio"] for k in labels], 0.4, label="ResNet-50 b128 train step")
    a3.axhline(1.0, color="k", lw=0.8)
    a3.set_ylim(0.9, 1.05)
    a3.set_xticks(range(3), labels, rotation=10, fontsize=8)
    a3.set_ylabel("x torch")
    a3.set_title("Vendor-verdict rule: GEMM suite vs ResNet-50 training")
    a3.legend(fontsize=8)
    fig.suptitle("Session 34 (2026-11-28), NVIDIA H200, torch 2.11.0+cu130, cuDNN 9.19, nvidia-cutlass-dsl 4.8.1")
    fig.tight_layout()
    fig.savefig(HERE / "2026-11-28-s34-summary.png", dpi=110)
    print(json.dumps({k: round(v["geomean_with_fallbacks"], 3) for k, v in rules.items()}))
    print(json.dumps({k: round(v["ratio"], 3) for k, v in trains.items()}))


if __name__ == "__main__":
    main()

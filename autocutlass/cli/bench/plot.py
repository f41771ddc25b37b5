"""``bench.png``: the ratio per case and the roofline, drawn from the ``bench.json`` document alone
(GEMM cases against torch.matmul and torch.compile, conv2d cases against cuDNN in both modes, each
mode's ratio the row's, against ours in that mode)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from autocutlass.cli.bench.report import (
    OP_BASELINES,
    baseline_status,
    doc_baselines,
    geomean_title,
    ours_sides,
    row_op,
    row_ops,
)

_MARKERS = {"autocutlass": ("o", "tab:blue"), "autocutlass_benchmark": ("D", "tab:cyan"), "torch": ("x", "tab:orange"),
            "compile": ("^", "tab:green"), "cudnn_benchmark": ("s", "tab:red"),
            "cudnn_default": ("v", "tab:purple")}  # fmt: skip
_BAR_COLORS = {"torch": "tab:blue", "compile": "tab:green", "cudnn_benchmark": "tab:red", "cudnn_default": "tab:purple"}
_LABELS = {b.name: b.label for bs in OP_BASELINES.values() for b in bs}


def plot_report(doc: Mapping[str, Any], path: Path) -> None:
    """Two panels: the ratio per case against each baseline of its op (torch.compile when measured)
    with a 1.0 line; achieved TFLOP/s against intensity, under the compute and bandwidth roofs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = list(doc["cases"])
    fig, (bars, roof) = plt.subplots(1, 2, figsize=(15, 5.5), gridspec_kw={"width_ratios": [1.3, 1]})
    _plot_ratios(bars, rows)
    _plot_roofline(roof, rows, doc["roofs"])
    title = f"{doc.get('gpu', '?')}, {doc.get('date', '')}"
    means = geomean_title(doc)
    fig.suptitle(f"{title}: {means}" if means else title, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_ratios(ax: Any, rows: Sequence[Mapping[str, Any]]) -> None:
    names = [r["name"] for r in rows]
    bases = doc_baselines(rows, measured_only=True)
    measured = [v for r in rows for v in (r.get(f"ratio_vs_{b.name}") for b in bases) if v]
    bottom = min([0.5, *(0.9 * v for v in measured)])
    top = max([1.3, *(1.05 * v for v in measured)])
    xs = list(range(len(rows)))
    slots: dict[str, tuple[int, int]] = {}  # baseline -> (its place among its op's bars, their count)
    for op in row_ops(rows):
        mine = [b.name for b in bases if b in OP_BASELINES[op]]
        slots.update({name: (i, len(mine)) for i, name in enumerate(mine)})
    for b in bases:
        base = b.name
        i, k = slots[base]
        width = 0.8 / k if k > 1 else 0.7
        dx = (i - (k - 1) / 2) * width
        vals = [r.get(f"ratio_vs_{base}") for r in rows]  # each against its own side of ours (Baseline.ours)
        colors = [_BAR_COLORS.get(base, "tab:gray") if baseline_status(r, b) == "ok" else "lightgrey" for r in rows]
        ax.bar([x + dx for x in xs], [v or 0.0 for v in vals], width, color=colors, label=f"vs {_LABELS[base]}")
        for x, v in zip(xs, vals, strict=True):
            if v:
                ax.text(x + dx, v, f"{v:.2f}", ha="center", va="bottom", fontsize=6)
    for x, r in zip(xs, rows, strict=True):
        if r["status"] != "ok":
            ax.text(x, bottom + 0.02 * (top - bottom), r["status"].upper(), rotation=90, ha="center", va="bottom",
                    fontsize=8, color="red")  # fmt: skip
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_ylim(bottom, top)
    ax.set_xticks(xs, names, rotation=35, ha="right", fontsize=8)
    ax.set_ylabel("speed-up of autocutlass (baseline ms / autocutlass ms)")
    ax.legend(loc="upper right", fontsize=8)


def _plot_roofline(ax: Any, rows: Sequence[Mapping[str, Any]], roofs: Mapping[str, Any]) -> None:
    bw = float(roofs["bandwidth_tbps"])
    timed = [r for r in rows if r.get("tflops")]
    by_roof: dict[float, set[str]] = {}
    for r in timed:
        pd = r["problem_dict"]
        by_roof.setdefault(float(r["compute_roof_tflops"]), set()).add(str(pd.get("a_dtype") or pd.get("x_dtype")))
    if not by_roof:
        by_roof = {float(roofs["compute_tflops"]["bf16"]): {"bf16", "fp16"}}
    ais = [float(r["intensity"]) for r in timed] or [1.0]
    lo = min(ais) / 2
    hi = max([*ais, *(c / bw for c in by_roof)]) * 2
    xs = [lo * (hi / lo) ** (i / 199) for i in range(200)]
    for i, c in enumerate(sorted(by_roof, reverse=True)):
        ax.plot(xs, [min(c, bw * x) for x in xs], color="k", lw=1.2 if i == 0 else 0.8, ls="-" if i == 0 else "--",
                label=f"roof {c:g} TFLOP/s ({'/'.join(sorted(by_roof[c]))}), {bw:.2f} TB/s")  # fmt: skip
    for side, (marker, color) in _MARKERS.items():
        pts = [(r["intensity"], r["tflops"][side]) for r in timed if r["tflops"].get(side)]
        if pts:
            ax.scatter([p[0] for p in pts], [p[1] for p in pts], marker=marker, color=color, s=28,
                       label=_side_label(side, timed), zorder=3)  # fmt: skip
    for r in timed:
        primary = next(iter(ours_sides(row_op(r))))  # the name at the primary baseline's side of ours (older files:
        t = r["tflops"].get(primary) or r["tflops"].get("autocutlass")  # conv2d had one, 'autocutlass')
        if t:
            ax.annotate(r["name"], (r["intensity"], t), fontsize=6, xytext=(3, -8), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (flop / min byte)")
    ax.set_ylabel("achieved TFLOP/s")
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(True, which="both", lw=0.3, alpha=0.5)


def _side_label(side: str, rows: Sequence[Mapping[str, Any]]) -> str:
    """A side's name in the legend: a baseline's label, or the labels of a side of ours in the ops
    of ``rows`` that time it ('autocutlass' for GEMMs, 'autocutlass in cuDNN default mode' for
    conv2d: the same side name)."""
    if side in _LABELS:
        return _LABELS[side]
    names = dict.fromkeys(b.ours_label for op in row_ops(rows) for b in OP_BASELINES[op] if b.ours == side)
    return " / ".join(names) or side

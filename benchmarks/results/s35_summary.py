"""Session 35's summary (NVIDIA H200): the strided conv2d dgrad family (``hopper_conv_dgrad_strided``, one
stride-1 convolution per stride phase) against cuDNN on benchmarks/shapes-conv-strided-dgrad.json, as its
tunings measured it side by side with cuDNN in benchmark mode (the best of 6-8 trials per layer): call a with
the register scatter store only, call c with the staged (shared-memory) scatter store in the space too, call d
with the phases launched side by side on side streams (reverted). Writes 2026-11-28-s35-summary.{json,png}.

    python benchmarks/results/s35_summary.py
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).resolve().parent
P = "2026-11-28-h200-s35"
CALLS = {"a": "register scatter", "c": "staged scatter", "d": "phases side by side"}
ROW = re.compile(r"^(\S+)/dgrad\s+conv2d dgrad .*?\s(\d+\.\d+)\s+(\d+\.\d+)\s+(\d+\.\d+)\s+\d+")


def tunings(call: str) -> dict[str, dict[str, float]]:
    """case -> ours and cuDNN TFLOP/s and the ratio, from the call's tune table."""
    out = {}
    for line in (HERE / f"{P}-{call}-tune-and-log.txt").read_text().splitlines():
        m = ROW.match(line)
        if m:
            out[m.group(1)] = {"ours_tflops": float(m.group(2)), "cudnn_tflops": float(m.group(3)),
                               "ratio": float(m.group(4))}  # fmt: skip
    return out


def main() -> None:
    data = {call: tunings(call) for call in CALLS}
    summary = {"gpu": "NVIDIA H200", "date": "2026-11-28", "what": __doc__.split("\n\n")[0], "calls": CALLS,
               "tunings": data}  # fmt: skip
    (HERE / "2026-11-28-s35-summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    cases = sorted({c for d in data.values() for c in d})
    fig, ax = plt.subplots(figsize=(11, 4.5))
    width = 0.8 / len(CALLS)
    for i, (call, label) in enumerate(CALLS.items()):
        xs = [j + i * width for j, c in enumerate(cases) if c in data[call]]
        ys = [data[call][c]["ratio"] for c in cases if c in data[call]]
        ax.bar(xs, ys, width, label=f"call {call}: {label}")
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks([j + width for j in range(len(cases))], cases, rotation=25, ha="right", fontsize=8)
    ax.set_ylabel("x cuDNN (benchmark mode), at tune time")
    ax.set_title("Strided conv2d dgrad by stride phases, NVIDIA H200, 2026-11-28 (session 35)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(HERE / "2026-11-28-s35-summary.png", dpi=110)


if __name__ == "__main__":
    main()

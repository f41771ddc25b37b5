"""Probe: split-K with the splits' K blocks interleaved (``HopperGemmConfig.interleave``: split s
of S takes K blocks s, s + S, ...) against the contiguous order (one run of about K / S blocks per
split), on GEMMs of few output tiles and a long K, against torch.matmul (GPU machine).

Per shape: the wave model's split picks (``model_picks``, the first ``PICKS`` with split_k > 1)
and a 128x128 workspace split filling one wave, each in both orders. Every config is verified
against the fp32 reference first; protocol and timing loop: ``fitted_widths_probe.py``'s (L2
write-flush before every call, interleaved rounds, medians).

    python benchmarks/probes/split_order_gemm_probe.py [--json OUT] [--cache DIR] [--rounds N]
"""

from __future__ import annotations

import dataclasses
from typing import Any

from fitted_widths_probe import Plan, cli  # benchmarks/probes is the script's directory
from split_probe import SHAPES as SPLIT_SHAPES

from autocutlass.kernels.hopper_gemm import HopperGemmConfig as C, model_picks
from autocutlass.kernels.hopper_gemm.config import SplitMode
from autocutlass.ops.gemm.problem import GemmProblem, Major

T = Major.COL
PICKS = 3
SHAPES = [c for c in SPLIT_SHAPES if c[0] in ("large-k", "large-k-2", "384x384x49152-nt", "256x512x32768-nt",
                                                "768x768x16384-nn")] + [
    ("256x1024x6272-tn", GemmProblem(m=256, n=1024, k=6272, a_major=T)),  # rn50-l3-1x1's wgrad as a GEMM
]


def variants(p: GemmProblem) -> dict[str, C]:
    splits = [c for c in model_picks(p) if c.split_k > 1 and not c.interleave][:PICKS]
    tiles = -(-p.m // 128) * -(-p.n // 128)
    s = max(2, min(16, 132 // tiles))
    splits.append(C(128, 128, 64, split_k=s, split_mode=SplitMode.WORKSPACE))
    out: dict[str, C] = {}
    for c in dict.fromkeys(splits):
        out[f"contig {c.short()}"] = c
        out[f"inter  {c.short()}"] = dataclasses.replace(c, interleave=True)
    return out


def cases() -> Plan:
    return [("order", case, p, variants(p)) for case, p in SHAPES]


def pairs(rows: list[dict[str, Any]]) -> None:
    """Per case and config: the interleaved order's time over the contiguous one's, and the best of each."""
    for case in dict.fromkeys(r["case"] for r in rows):
        mine = {r["side"]: r for r in rows if r["case"] == case}
        for side, r in mine.items():
            if side.startswith("contig"):
                i = mine.get("inter  " + side[len("contig "):])
                if i is not None:
                    print(f"{case:20s} {side[7:]:40s} contig x{r['ratio_vs_torch']:.3f}  inter x{i['ratio_vs_torch']:.3f}"
                          f"  inter/contig x{r['ms'] / i['ms']:.3f}")
        for kind in ("contig", "inter"):
            best = max((r for s, r in mine.items() if s.startswith(kind)), key=lambda r: r["ratio_vs_torch"])
            print(f"best {kind:6s} {case:20s} {best['side']:46s} x{best['ratio_vs_torch']:.3f}")


def main() -> None:
    cli(__doc__ or "", cases, pairs, 5, ".split-order-cache")


if __name__ == "__main__":
    main()

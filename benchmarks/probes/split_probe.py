"""Probe: wide workspace split-K (up to 128 splits, where ``config.SPLIT_K`` stops at 16) on GEMMs of
few output tiles and a very long K, against torch.matmul (GPU machine).

**The results ran at commit b1c3728**, which had the wide splits (``hopper_gemm.check.WORKSPACE_SPLIT_MAX``,
the reduce kernel in two passes beyond 16 splits). They measured slower than 16 splits or fewer on
all eight GEMMs (H100, benchmarks/results/2026-11-27-h100-s24-split-probe{,-2}.txt) and were
removed in the next commit; since then the probe's counts stop at ``max(config.SPLIT_K)``.

Session 24's 16-trial tunes (H100, ``benchmarks/results/2026-11-27-h100-s24-tune-online.json``)
left 256x256x65536 at x0.870 in 128x64 tiles split 16 ways and 512x384x32768 at x0.923 in 128x128
split 11 ways. Such a GEMM is bound by operand traffic, not by the tensor cores (256x256x65536 reads
64 MB for 8.6 GFLOP): a 128x64 tile reads its operands from L2 four times over, 128x128 three, but
at 16 splits the larger tiles leave most SMs idle. This probe times, per problem, tiles of 128x64,
128x128, 128x256 and 256x128 with the split counts that fill one or two waves of 132 CTAs, tile_k
64 (alone and in 2-CTA clusters: multicast halves one operand's L2 reads) and 128 (alone),
next to the configs the wave model picks today (``model_picks``). Every config is verified against
the fp32 reference first. Protocol and timing loop: ``fitted_widths_probe.py``'s; ``--compile-only``
builds every kernel into ``--cache`` without a GPU.

    python benchmarks/probes/split_probe.py [--json OUT] [--cache DIR] [--compile-only]
"""

from __future__ import annotations

import dataclasses
from typing import Any

from fitted_widths_probe import Plan, cli  # benchmarks/probes is the script's directory

from autocutlass.kernels.hopper_gemm import HopperGemmConfig as C, HopperGemmFamily, model_picks
from autocutlass.kernels.hopper_gemm.config import SPLIT_K, SplitMode
from autocutlass.ops.gemm.problem import GemmProblem, Major

T = Major.COL
SMS = 132
SHAPES = [
    ("large-k", GemmProblem(m=256, n=256, k=65536)),  # benchmarks/shapes-online.json
    ("large-k-2", GemmProblem(m=512, n=384, k=32768)),  # benchmarks/shapes-online.json
    ("384x384x49152-nt", GemmProblem(m=384, n=384, k=49152, b_major=T)),
    ("256x512x32768-nt", GemmProblem(m=256, n=512, k=32768, b_major=T)),
    ("768x768x16384-nn", GemmProblem(m=768, n=768, k=16384)),
    ("128x1024x65536-nt", GemmProblem(m=128, n=1024, k=65536, b_major=T)),
    # one or two output tiles of 128 x 128: 16 splits leave most SMs idle
    ("256x128x131072-nn", GemmProblem(m=256, n=128, k=131072)),
    ("256x256x131072-nt", GemmProblem(m=256, n=256, k=131072, b_major=T)),
]
TILES = ((128, 64), (128, 128), (128, 256), (256, 128))


def wave_splits(tiles: int, k_blocks: int) -> list[int]:
    """Split counts whose work units fill one or two waves of ``SMS`` CTAs best (at least 4 K blocks
    each; at most ``max(config.SPLIT_K)``; at commit b1c3728, up to 128 where the reduce kernel's
    two passes could sum them)."""
    out = []
    for waves in (1, 2):
        s = min(max(SPLIT_K), waves * SMS // tiles, k_blocks // 4)
        if s >= 2 and s not in out:
            out.append(s)
    return out


def variants(p: GemmProblem) -> dict[str, C]:
    fam = HopperGemmFamily()
    out: dict[str, C] = {f"model {c.short()}": c for c in model_picks(p)[:3]}
    for tm, tn in TILES:
        tiles = -(-p.m // tm) * -(-p.n // tn) * p.l
        for tk in (64, 128):
            for s in wave_splits(tiles, p.k // tk):
                base = C(tm, tn, tk, split_k=s, split_mode=SplitMode.WORKSPACE)
                for cm, cn in ((1, 1), (2, 1), (1, 2)) if tk == 64 else ((1, 1),):
                    cfg = dataclasses.replace(base, cluster_m=cm, cluster_n=cn)
                    if cfg not in out.values() and fam.check(cfg, p) is None:
                        out[cfg.short()] = cfg
    return out


def cases() -> Plan:
    return [("split", case, p, variants(p)) for case, p in SHAPES]


def best_per_case(rows: list[dict[str, Any]]) -> None:
    for case in dict.fromkeys(r["case"] for r in rows):
        mine = [r for r in rows if r["case"] == case and r["config"]]
        best = max(mine, key=lambda r: r["ratio_vs_torch"])
        model = max((r for r in mine if r["side"].startswith("model")), key=lambda r: r["ratio_vs_torch"], default=None)
        said = f"model's best {model['side']:40s} x{model['ratio_vs_torch']:.3f}" if model else "(decode GEMM: no model picks)"
        print(f"best {case:20s} {best['side']:44s} x{best['ratio_vs_torch']:.3f}   {said}")


def main() -> None:
    cli(__doc__ or "", cases, best_per_case, 5, ".split-cache")


if __name__ == "__main__":
    main()

"""Probe: the cost of workspace split-K's second kernel (the reduce), old against new, on GEMMs of few
output tiles and a very long K, against torch.matmul (GPU machine).

Session 14's ncu (``benchmarks/results/2026-11-25-h100-s14-ncu-classes.md``) timed our reduce at
6.4-6.5 us on 256x256 and 512x384 outputs of 11-16 splits, where cuBLAS's took 4.4-4.8 us: 32 and 96
blocks of 256 threads (16 bytes of D each) left most SMs idle while the kernel waited on memory.
This probe times the workspace-split configs the wave model picks (``model_picks``; its first,
second and fourth pick: two cluster shapes of its best tile and its next tile) and two large
outputs whose reduce moves tens of MiB (there, the reduce is bandwidth-bound), side by side with
torch.matmul.

**Session 25's A/B** (``benchmarks/device/s25_a.sh``, H100,
``benchmarks/results/2026-11-27-h100-s25-splitk-reduce-probe.*``) ran four builds, each in its own
process and kernel cache, chosen at compile time by environment variables that existed only in
that run's working tree (they are not in the committed code, which is build v2):

* v0, ``AUTOCUTLASS_EXP_REDUCE=old AUTOCUTLASS_EXP_PDL=0``: 256 threads, 16 bytes of D per thread,
  plain launches (the code before session 25): geomean x0.801 over 29 configs;
* v1, ``new``/``0``: 128 threads, 4 columns per thread (a 16-byte load per split): x0.811;
* v2, ``new``/``1``: v1 launched with programmatic dependent launch, waiting on
  ``griddepcontrol.wait`` first: x0.833 (committed);
* v3, ``new``/``2``: v2 and the GEMM kernel, in workspace split-K, issuing
  ``griddepcontrol.launch_dependents`` as it starts: x0.807 (not kept).

Today the probe times the committed build against torch.matmul.

Protocol and timing loop: ``fitted_widths_probe.py``'s (write flush of 2x L2 before every timed
call, sides interleaved, medians; every config verified against the fp32 reference first).

    python benchmarks/probes/splitk_reduce_probe.py [--json OUT] [--cache DIR] [--compile-only]
"""

from __future__ import annotations

from typing import Any

from fitted_widths_probe import Plan, cli  # benchmarks/probes is the script's directory

from autocutlass.kernels.hopper_gemm import HopperGemmConfig as C, model_picks
from autocutlass.kernels.hopper_gemm.config import SplitMode
from autocutlass.ops.gemm.problem import GemmProblem, Major

T = Major.COL
SHAPES = [
    ("large-k", GemmProblem(m=256, n=256, k=65536)),  # benchmarks/shapes-online.json
    ("large-k-2", GemmProblem(m=512, n=384, k=32768)),  # benchmarks/shapes-online.json
    ("longk-384x384", GemmProblem(m=384, n=384, k=49152, b_major=T)),  # benchmarks/shapes-longk.json
    ("longk-256x512", GemmProblem(m=256, n=512, k=32768, b_major=T)),
    ("longk-768x768", GemmProblem(m=768, n=768, k=16384)),
    ("longk-512x256", GemmProblem(m=512, n=256, k=65536, a_major=T)),
    ("longk-320x640", GemmProblem(m=320, n=640, k=40960)),
    ("256x128x131072-nn", GemmProblem(m=256, n=128, k=131072)),
    ("256x256x131072-nt", GemmProblem(m=256, n=256, k=131072, b_major=T)),
]
BIG = [  # outputs of 16-32 MiB per split: the reduce is bound by bandwidth
    ("big-4096x4096x8192", GemmProblem(m=4096, n=4096, k=8192), C(128, 256, 64, split_k=2, split_mode=SplitMode.WORKSPACE)),
    ("big-2048x2048x32768", GemmProblem(m=2048, n=2048, k=32768), C(128, 128, 64, split_k=4, split_mode=SplitMode.WORKSPACE)),
]


def cases() -> Plan:
    plan: Plan = []
    for case, p in SHAPES:
        picks = [c for c in model_picks(p) if c.split_k > 1 and c.split_mode is SplitMode.WORKSPACE]
        chosen = [picks[i] for i in (0, 1, 3) if i < len(picks)]
        plan.append(("split", case, p, {c.short(): c for c in chosen}))
    for case, p, cfg in BIG:
        plan.append(("big", case, p, {cfg.short(): cfg}))
    return plan


def best_per_case(rows: list[dict[str, Any]]) -> None:
    for case in dict.fromkeys(r["case"] for r in rows):
        mine = [r for r in rows if r["case"] == case and r["config"]]
        best = max(mine, key=lambda r: r["ratio_vs_torch"])
        print(f"best {case:20s} {best['side']:44s} {best['ms'] * 1e3:8.1f} us  x{best['ratio_vs_torch']:.3f}")


def main() -> None:
    cli(__doc__ or "", cases, best_per_case, 7, ".splitk-reduce-cache")


if __name__ == "__main__":
    main()

"""Probe: which factor breaks swap_ab on gemm 2x100x520x300 bf16 col/row (GPU test failure,
2026-11-22)? Runs variants (rank, layouts, tile_n, store, swapped or the same kernel problem
unswapped) and prints the max abs error against the fp32 reference and the verify verdict.

GPU machine: python benchmarks/probes/swap_probe.py"""

from __future__ import annotations

import torch

from autocutlass.kernels.hopper_gemm import HopperGemmConfig as C, HopperGemmFamily, check
from autocutlass.ops.gemm.problem import Major, GemmProblem
from autocutlass.ops.gemm.evaluation import make_inputs, reference, verify

R, T = Major.ROW, Major.COL
fam = HopperGemmFamily(cache_dir=None)
VARIANTS = [
    ("failing: swap l=2 col/row", C(128, 64, 64, swap_ab=True), GemmProblem(m=100, n=520, k=300, l=2, a_major=T, b_major=R)),
    ("swap l=1 col/row", C(128, 64, 64, swap_ab=True), GemmProblem(m=100, n=520, k=300, a_major=T, b_major=R)),
    ("swap l=2 row/row", C(128, 64, 64, swap_ab=True), GemmProblem(m=100, n=520, k=300, l=2, b_major=R)),
    ("swap l=2 col/col", C(128, 64, 64, swap_ab=True), GemmProblem(m=100, n=520, k=300, l=2, a_major=T, b_major=T)),
    ("swap l=2 row/col", C(128, 64, 64, swap_ab=True), GemmProblem(m=100, n=520, k=300, l=2, b_major=T)),
    ("swap l=2 col/row direct", C(128, 64, 64, swap_ab=True, store="direct"), GemmProblem(m=100, n=520, k=300, l=2, a_major=T, b_major=R)),
    ("swap l=2 col/row tn128", C(128, 128, 64, swap_ab=True), GemmProblem(m=100, n=520, k=300, l=2, a_major=T, b_major=R)),
    ("swap l=2 col/row m=128", C(128, 64, 64, swap_ab=True), GemmProblem(m=128, n=512, k=320, l=2, a_major=T, b_major=R)),
    ("unswapped kernel problem l=2 col/row tn64", C(128, 64, 64), GemmProblem(m=520, n=100, k=300, l=2, a_major=T, b_major=R)),
    ("unswapped l=1 col/row tn64", C(128, 64, 64), GemmProblem(m=520, n=100, k=300, a_major=T, b_major=R)),
    ("unswapped l=2 row/row tn64", C(128, 64, 64), GemmProblem(m=520, n=100, k=300, l=2, b_major=R)),
]
for name, cfg, prob in VARIANTS:
    why = check(cfg, prob)
    if why:
        print(f"{name:45s} rejected: {why}")
        continue
    try:
        runner = fam.compile(cfg, prob)
        x = make_inputs(prob, device="cuda", seed=0)
        ref = reference(prob, x)
        ok, reason = verify(runner, prob, x, ref)
        err = (x.d.float() - ref.float()).abs()
        bad = torch.nonzero(~(err < 0.05 * (ref.float().abs() + 1)))
        where = bad[:4].tolist() if bad.numel() else []
        print(f"{name:45s} ok={ok} max_err={err.nan_to_num(1e9).max().item():.3g} nbad={bad.shape[0]} first={where} {reason or ''}"[:400])
    except Exception as e:  # noqa: BLE001
        print(f"{name:45s} EXC {type(e).__name__}: {str(e)[:300]}")

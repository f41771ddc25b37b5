"""Probe: the configs two tunings picked for the large suite cases, head to head with torch.matmul
(are the picks different in speed, or is the bench's run-to-run drift bigger than the gap?).

GPU machine: python benchmarks/probes/picks_probe.py [OUT_JSON]
Protocol v1 (write flush of 2x L2 before every timed call), sides interleaved, ROUNDS rounds,
order reversed every other round; per side the median over rounds, ratio = torch / side."""

from __future__ import annotations

import json
import statistics
import sys

import torch

from autocutlass.kernels.hopper_gemm import HopperGemmConfig as C, HopperGemmFamily
from autocutlass.ops.gemm.problem import DType, Major, GemmProblem
from autocutlass.search.handlers import interleaved_rounds
from autocutlass.search.timing import time_callable
from autocutlass.ops.gemm.evaluation import make_inputs, reference, torch_baseline, verify

ROUNDS = 9
T = Major.COL
N_ = "along_n"
fam = HopperGemmFamily(cache_dir=None)
flush = 2 * torch.cuda.get_device_properties(0).L2_cache_size
OLD, NEW = "session-4 pick", "session-5 pick"
CASES = [
    ("llama8b-o", GemmProblem(m=8192, n=4096, k=4096, b_major=T), {
        OLD: C(128, 256, 64, cluster_n=2, swizzle=4), NEW: C(128, 256, 64, cluster_m=2, raster=N_, swizzle=8)}),
    ("square-4k", GemmProblem(m=4096, n=4096, k=4096), {
        OLD: C(128, 256, 64), NEW: C(128, 256, 64, cluster_m=2, raster=N_)}),
    ("llama8b-qkv", GemmProblem(m=8192, n=6144, k=4096, b_major=T), {
        OLD: C(128, 256, 64, cluster_m=2, swizzle=8), NEW: C(128, 256, 64, cluster_n=2, swizzle=2)}),
    ("square-4k-fp16", GemmProblem(m=4096, n=4096, k=4096, a_dtype=DType.FP16, b_dtype=DType.FP16, d_dtype=DType.FP16), {
        OLD: C(128, 256, 64, cluster_m=2), NEW: C(128, 256, 64, cluster_m=2, raster=N_, swizzle=8)}),
    ("llama8b-down", GemmProblem(m=8192, n=4096, k=14336, b_major=T), {
        OLD: C(128, 256, 64, cluster_m=2, raster=N_, swizzle=8), NEW: C(128, 256, 64, cluster_n=2, swizzle=4)}),
]

rows = []
for name, prob, picks in CASES:
    x = make_inputs(prob, device="cuda", seed=0)
    ref = reference(prob, x)
    sides = {"torch": torch_baseline(prob, x)}
    for label, cfg in picks.items():
        runner = fam.compile(cfg, prob)
        ok, why = verify(runner, prob, x, ref)
        assert ok, (name, label, why)
        sides[label] = lambda r=runner: x.run(r)
    per = dict(zip(sides, interleaved_rounds(
        [lambda f=f: time_callable(f, flush_bytes=flush).median_ms for f in sides.values()], ROUNDS)))
    t_torch = statistics.median(per["torch"])
    for k, v in per.items():
        ms = statistics.median(v)
        cfg = picks.get(k)
        rows.append({"case": name, "side": k, "config": cfg.short() if cfg else "torch.matmul", "ms": ms,
                     "ratio_vs_torch": t_torch / ms, "rounds_ms": v})
        print(f"{name:15s} {k:15s} {(cfg.short() if cfg else 'torch.matmul'):36s} {ms * 1e3:8.1f} us  x{t_torch / ms:.3f}",
              flush=True)
if len(sys.argv) > 1:
    with open(sys.argv[1], "w") as f:
        json.dump({"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "rounds": ROUNDS, "rows": rows}, f,
                  indent=1)

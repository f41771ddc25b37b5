"""Probe: where does stream-K's time go? Times one stream-K kernel with the grid forced to G
clusters (the runner's resident-cluster count overridden), against the data-parallel kernel of
the same tile: G that cuts no tile (each cluster owns whole tiles) shows the cost of the
stream-K loop itself; G = 132 adds the partial tiles.

GPU machine: python benchmarks/probes/streamk_grid_probe.py"""

from __future__ import annotations

import torch

from autocutlass.kernels.hopper_gemm import HopperGemmConfig as C, HopperGemmFamily
from autocutlass.ops.gemm.problem import Major, GemmProblem
from autocutlass.search.timing import time_callable
from autocutlass.ops.gemm.evaluation import make_inputs, reference, verify

fam = HopperGemmFamily(cache_dir=None)
flush = 2 * torch.cuda.get_device_properties(0).L2_cache_size
CASES = [
    ("odd 128x192", GemmProblem(m=2000, n=3000, k=1000), C(128, 192, 64), (128, 132, 64, 256)),
    ("decode128 128x128", GemmProblem(m=128, n=4096, k=14336, b_major=Major.COL), C(128, 128, 128), (32, 64, 128, 132)),
    ("decode64 64x128", GemmProblem(m=64, n=28672, k=4096, b_major=Major.COL), C(64, 128, 128), (112, 224, 132)),
]
for name, prob, cfg, grids in CASES:
    x = make_inputs(prob, device="cuda", seed=0)
    ref = reference(prob, x)
    dp = fam.compile(cfg, prob)
    assert verify(dp, prob, x, ref)[0]
    t = time_callable(lambda: x.run(dp), flush_bytes=flush).median_ms
    print(f"{name:20s} data-parallel        {t * 1e3:8.1f} us", flush=True)
    sk = fam.compile(C(**{**cfg.as_dict(), "stream_k": True}), prob)
    for g in grids:
        sk._clusters[0] = g
        ok, why = verify(sk, prob, x, ref)
        t = time_callable(lambda: x.run(sk), flush_bytes=flush).median_ms
        print(f"{name:20s} stream-K G={g:<4d}      {t * 1e3:8.1f} us  ok={ok} {why or ''}", flush=True)

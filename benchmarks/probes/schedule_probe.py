"""Probe: cooperative vs ping-pong over K (is a gap in the mainloop or per tile?).
GPU machine: python benchmarks/probes/schedule_probe.py"""

from __future__ import annotations

import torch

from autocutlass.kernels.hopper_gemm import HopperGemmConfig as C, HopperGemmFamily
from autocutlass.ops.gemm.problem import Major, GemmProblem
from autocutlass.search.timing import time_callable

fam = HopperGemmFamily(cache_dir=None)
cfgs = [C(128, 256, 64), C(128, 128, 64), C(128, 128, 64, schedule="pingpong"), C(64, 256, 64, schedule="pingpong"),
        C(64, 128, 64, schedule="pingpong"), C(128, 192, 64), C(64, 192, 64, schedule="pingpong")]
flush = 2 * torch.cuda.get_device_properties(0).L2_cache_size
rows = []
for k in (512, 2048, 8192):
    m, n = 4096, 4096
    p = GemmProblem(m=m, n=n, k=k, b_major=Major.COL)
    a = torch.randn(m, k, device="cuda").bfloat16()
    b = torch.randn(n, k, device="cuda").bfloat16().t()
    d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    tt = time_callable(lambda: torch.matmul(a, b), flush_bytes=flush).median_ms
    line = [f"K={k:5d} torch {2*m*n*k/tt/1e9:6.0f}"]
    for cfg in cfgs:
        r = fam.compile(cfg, p)
        ms = time_callable(lambda: r(a, b, d), flush_bytes=flush).median_ms
        line.append(f"{cfg.short().split(' s0')[0]}/{cfg.schedule.value[:4]} {2*m*n*k/ms/1e9:6.0f}")
    rows.append("  ".join(line))
print("\n".join(rows))

"""Probe: hardware counters of one of our kernels beside cuBLAS (what limits it?).

GPU machine (Firecracker, ncu reads counters):
    ncu --clock-control none --launch-skip 6 --launch-count 4 --section SpeedOfLight \
        --section WarpStateStats --section MemoryWorkloadAnalysis_Tables --section ComputeWorkloadAnalysis \
        python benchmarks/probes/ncu_probe.py ["{config dict}" [M N K [L]]]
(``LAYOUT=nn`` in the environment: B row-major instead of the default K-major 'nt')
The script warms up (compiles, loads), then calls ours and torch.matmul alternately; no L2 flush
kernels, so every profiled launch is one of the two GEMMs.
"""

from __future__ import annotations

import os
import sys

import torch

from autocutlass.kernels.hopper_gemm import HopperGemmConfig as C, HopperGemmFamily
from autocutlass.ops.gemm.problem import Major, GemmProblem

m, n, k, l = 8192, 6144, 4096, 1  # llama8b-qkv ('nt')
if len(sys.argv) >= 5:
    m, n, k = (int(x) for x in sys.argv[2:5])
    l = int(sys.argv[5]) if len(sys.argv) >= 6 else 1  # noqa: E741
cfg = C(256, 128, 64) if len(sys.argv) < 2 else C.from_dict(eval(sys.argv[1]))  # noqa: S307 (probe input)
fam = HopperGemmFamily(cache_dir=None)
nn = os.environ.get("LAYOUT", "nt") == "nn"  # LAYOUT=nn: B row-major (N-contiguous), as torch's a @ b
p = GemmProblem(m=m, n=n, k=k, l=l, b_major=Major.ROW if nn else Major.COL)
a = torch.randn(l, m, k, device="cuda").bfloat16()
b = torch.randn(l, k, n, device="cuda").bfloat16() if nn else torch.randn(l, n, k, device="cuda").bfloat16().transpose(-1, -2)
d = torch.empty(l, m, n, device="cuda", dtype=torch.bfloat16)
if l == 1:
    a, b, d = a[0], b[0], d[0]
run = fam.compile(cfg, p)
for _ in range(3):  # launches 0..5: warm-up
    run(a, b, d)
    torch.matmul(a, b)
torch.cuda.synchronize()
for _ in range(2):  # launches 6..9: profiled
    run(a, b, d)
    torch.matmul(a, b)
torch.cuda.synchronize()
ref = torch.matmul(a, b)
print("max abs diff", (d.float() - ref.float()).abs().max().item())

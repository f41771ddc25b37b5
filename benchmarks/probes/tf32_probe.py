"""Probe: where the tf32 time goes. square-4k fp32 through tf32, ours vs torch (cuBLAS TF32), for
B row-major ('nn': our runner copies B to K-major first) and B column-major ('nt': no copy), plus
the copy alone (torch's transposing copy_ and our transpose kernel).
GPU machine: python benchmarks/probes/tf32_probe.py"""

from __future__ import annotations

import torch

from autocutlass.kernels.hopper_gemm import HopperGemmConfig as C, HopperGemmFamily
from autocutlass.kernels.hopper_gemm.runner import k_major_copy
from autocutlass.kernels.transpose import get_transpose
from autocutlass.ops.gemm.problem import DType, Major, GemmProblem
from autocutlass.search.timing import time_callable

torch.backends.cuda.matmul.fp32_precision = "tf32"
fam = HopperGemmFamily(cache_dir=None)
tr = get_transpose(2, None)
flush = 2 * torch.cuda.get_device_properties(0).L2_cache_size
m = n = k = 4096
a = torch.randn(m, k, device="cuda")
b_nn = torch.randn(k, n, device="cuda")
b_nt = torch.randn(n, k, device="cuda").t()
d = torch.empty(m, n, device="cuda")
cfgs = [C(128, 256, 32, swizzle=8), C(128, 256, 32, cluster_m=2, raster="along_n", swizzle=8), C(256, 128, 32),
        C(128, 128, 32, schedule="pingpong", cluster_m=2), C(128, 192, 32, cluster_n=2)]
tf = lambda ms: 2 * m * n * k / ms / 1e9  # noqa: E731
rows = [f"torch nn {tf(time_callable(lambda: torch.matmul(a, b_nn), flush_bytes=flush).median_ms):6.0f}",
        f"torch nt {tf(time_callable(lambda: torch.matmul(a, b_nt), flush_bytes=flush).median_ms):6.0f}",
        (f"copy of B to K-major: torch {time_callable(lambda: k_major_copy(b_nn, False), flush_bytes=flush).median_ms * 1e3:.1f} us"
         f", ours {time_callable(lambda: k_major_copy(b_nn, False, tr), flush_bytes=flush).median_ms * 1e3:.1f} us")]
for cfg in cfgs:
    line = [cfg.short()]
    for name, bb, major in (("nn", b_nn, Major.ROW), ("nt", b_nt, Major.COL)):
        p = GemmProblem(m=m, n=n, k=k, a_dtype=DType.TF32, b_dtype=DType.TF32, d_dtype=DType.FP32, b_major=major)
        r = fam.compile(cfg, p)
        line.append(f"{name} {tf(time_callable(lambda: r(a, bb, d), flush_bytes=flush).median_ms):6.0f}")
    rows.append("  ".join(line))
print("\n".join(rows))

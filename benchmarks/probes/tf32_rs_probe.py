"""Probe: tf32 with an M-major A read through registers (``Plan.a_regs``). For square-4k fp32
'nn' (B row-major), ours swapped (A' = B^T through registers, no copy) against ours unswapped
(B copied to K-major first) and torch (cuBLAS TF32); 'tn' (A column-major) unswapped through
registers. Each result is checked against torch in float64 on a NaN-poisoned D first.
GPU machine: python benchmarks/probes/tf32_rs_probe.py [--json PATH]"""

from __future__ import annotations

import argparse
import json

import torch

from autocutlass.kernels.hopper_gemm import HopperGemmConfig as C, HopperGemmFamily
from autocutlass.ops.gemm.problem import DType, Major, GemmProblem
from autocutlass.search.timing import time_callable

ap = argparse.ArgumentParser()
ap.add_argument("--json", default=None)
args = ap.parse_args()
torch.backends.cuda.matmul.fp32_precision = "tf32"
fam = HopperGemmFamily(cache_dir=None)
flush = 2 * torch.cuda.get_device_properties(0).L2_cache_size
m = n = k = 4096
torch.manual_seed(0)
a = torch.randn(m, k, device="cuda")
a_t = torch.randn(k, m, device="cuda").t()  # column-major A
b = torch.randn(k, n, device="cuda")  # row-major B ('nn')
d = torch.empty(m, n, device="cuda")
tf = lambda ms: 2 * m * n * k / ms / 1e9  # noqa: E731
swap = [C(128, 256, 32, cluster_m=2, swap_ab=True), C(128, 256, 32, cluster_n=2, swap_ab=True),
        C(128, 256, 32, swap_ab=True), C(256, 128, 32, swap_ab=True), C(256, 128, 32, cluster_m=2, swap_ab=True),
        C(128, 192, 32, cluster_m=2, swap_ab=True), C(128, 128, 32, schedule="pingpong", cluster_m=2, swap_ab=True),
        C(128, 256, 32, cluster_m=2, raster="along_n", swizzle=8, swap_ab=True),
        C(128, 256, 64, cluster_m=2, swap_ab=True)]
plain = [C(128, 256, 32, cluster_m=2, raster="along_n", swizzle=8), C(128, 256, 32, cluster_m=2)]
rows, out = [], []


def run(tag, cfg, aa, a_major):
    p = GemmProblem(m=m, n=n, k=k, a_dtype=DType.TF32, b_dtype=DType.TF32, d_dtype=DType.FP32, a_major=a_major,
                b_major=Major.ROW if tag != "tn" else Major.COL)
    bb = b if tag != "tn" else b.t().contiguous().t()
    why = fam.check(cfg, p)
    if why:
        rows.append(f"{tag} {cfg.short():40s} infeasible: {why}")
        return
    r = fam.compile(cfg, p)
    d.fill_(float("nan"))
    r(aa, bb, d)
    torch.cuda.synchronize()
    ref = aa.double() @ bb.double()
    err = ((d.double() - ref).abs().max() / ref.abs().max()).item()
    ms = time_callable(lambda: r(aa, bb, d), flush_bytes=flush).median_ms
    rows.append(f"{tag} {cfg.short():40s} {tf(ms):6.0f} TFLOP/s  rel err {err:.1e}")
    out.append({"layout": tag, "config": cfg.as_dict(), "tflops": tf(ms), "rel_err": err})


t_nn = tf(time_callable(lambda: torch.matmul(a, b), flush_bytes=flush).median_ms)
t_tn = tf(time_callable(lambda: torch.matmul(a_t, b.t().contiguous().t()), flush_bytes=flush).median_ms)
rows += [f"torch nn {t_nn:6.0f}", f"torch tn {t_tn:6.0f}"]
for cfg in plain + swap:
    run("nn", cfg, a, Major.ROW)
for cfg in plain[:1] + [C(128, 256, 32, cluster_n=2), C(256, 128, 32, cluster_m=2)]:
    run("tn", cfg, a_t, Major.COL)
t_nn2 = tf(time_callable(lambda: torch.matmul(a, b), flush_bytes=flush).median_ms)
rows.append(f"torch nn again {t_nn2:6.0f}")
print("\n".join(rows))
if args.json:
    with open(args.json, "w") as f:
        json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "torch_nn": [t_nn, t_nn2],
                   "torch_tn": t_tn, "rows": out}, f, indent=1)

"""Probe: stream-K configs against the shipped winners and torch.matmul on the decode, odd and
square-4k cases, after checking them for correctness (NaN-poisoned D, float reference) and
bitwise determinism (two runs, same bits).

GPU machine: python benchmarks/probes/streamk_probe.py [OUT_JSON] [--timing-only NAME,...]
Protocol v1 (write flush of 2x L2 before every timed call), sides interleaved, ROUNDS rounds,
order reversed every other round; medians of the per-round medians.
"""

from __future__ import annotations

import json
import statistics
import sys

import torch

from autocutlass.kernels.hopper_gemm import HopperGemmConfig as C, HopperGemmFamily, check
from autocutlass.ops.gemm.problem import Activation, DType, Epilogue, Major, GemmProblem
from autocutlass.search.handlers import interleaved_rounds
from autocutlass.search.timing import time_callable
from autocutlass.ops.gemm.evaluation import make_inputs, reference, torch_baseline, verify

R, T = Major.ROW, Major.COL
ROUNDS = 3
fam = HopperGemmFamily(cache_dir=None)
flush = 2 * torch.cuda.get_device_properties(0).L2_cache_size

CORRECTNESS = [
    ("decode128 nt 128x256", C(128, 256, 128, stream_k=True), GemmProblem(m=128, n=4096, k=14336, b_major=T)),
    ("decode128 nt c1x2 direct", C(128, 128, 128, cluster_n=2, store="direct", stream_k=True),
     GemmProblem(m=128, n=4096, k=14336, b_major=T)),
    ("residues 257x136x1000 c2x2", C(128, 128, 64, cluster_m=2, cluster_n=2, stream_k=True), GemmProblem(m=257, n=136, k=1000)),
    ("residues col/row along_n", C(128, 128, 64, raster="along_n", stream_k=True),
     GemmProblem(m=304, n=520, k=3000, a_major=T, b_major=R)),
    ("batched L=3 C+bias+silu", C(128, 128, 64, stream_k=True),
     GemmProblem(m=200, n=136, k=2000, l=3, c_dtype=DType.BF16, epilogue=Epilogue(True, True, Activation.SILU))),
    ("K=64 one block", C(128, 128, 64, stream_k=True), GemmProblem(m=1000, n=1000, k=64)),
    ("M=1", C(64, 128, 64, stream_k=True), GemmProblem(m=1, n=4096, k=4096, b_major=T)),
    ("swap decode16", C(128, 16, 128, swap_ab=True, stream_k=True), GemmProblem(m=16, n=6144, k=4096, b_major=T)),
    ("swap c2x1 bias", C(128, 32, 64, cluster_m=2, swap_ab=True, stream_k=True),
     GemmProblem(m=20, n=2048, k=4096, b_major=T, epilogue=Epilogue(bias=True))),
    ("fp8 decode", C(128, 128, 128, stream_k=True),
     GemmProblem(m=128, n=4096, k=8192, a_dtype=DType.E4M3, b_dtype=DType.E4M3, b_major=T)),
    ("tf32 nn swapped (A in regs)", C(128, 128, 32, swap_ab=True, stream_k=True),
     GemmProblem(m=500, n=700, k=3000, a_dtype=DType.TF32, b_dtype=DType.TF32, d_dtype=DType.FP32)),
    ("fp32 D", C(128, 128, 64, stream_k=True), GemmProblem(m=333, n=512, k=5000, d_dtype=DType.FP32)),
]

NT = dict(b_major=T)
TIMING = [
    ("decode128", GemmProblem(m=128, n=4096, k=14336, **NT), [
        C(64, 64, 128, cluster_m=2, store="direct"),
        C(128, 256, 128, stream_k=True), C(128, 256, 128, cluster_n=2, stream_k=True),
        C(128, 128, 128, stream_k=True), C(128, 128, 128, cluster_n=2, stream_k=True),
        C(128, 128, 128, cluster_n=2, store="direct", stream_k=True),
        C(128, 128, 128, swap_ab=True, stream_k=True), C(128, 128, 128, cluster_m=2, swap_ab=True, stream_k=True),
    ]),
    ("decode64", GemmProblem(m=64, n=28672, k=4096, **NT), [
        C(64, 128, 128),
        C(64, 256, 128, stream_k=True), C(64, 256, 128, cluster_n=2, stream_k=True),
        C(64, 128, 128, stream_k=True), C(64, 128, 128, cluster_n=2, stream_k=True),
        C(128, 64, 128, swap_ab=True, stream_k=True),
    ]),
    ("decode16", GemmProblem(m=16, n=6144, k=4096, **NT), [
        C(64, 16, 128, cluster_m=2, store="direct", swap_ab=True),
        C(128, 16, 128, swap_ab=True, stream_k=True), C(128, 16, 128, cluster_m=2, swap_ab=True, stream_k=True),
        C(64, 16, 128, cluster_m=2, store="direct", swap_ab=True, stream_k=True),
    ]),
    ("odd", GemmProblem(m=2000, n=3000, k=1000), [
        C(128, 192, 64, cluster_n=2, raster="along_n"),
        C(128, 256, 64, stream_k=True), C(128, 192, 64, stream_k=True), C(128, 192, 64, cluster_n=2, stream_k=True),
        C(256, 128, 64, stream_k=True), C(128, 256, 64, cluster_m=2, stream_k=True),
    ]),
    ("square-4k", GemmProblem(m=4096, n=4096, k=4096), [
        C(128, 256, 64), C(128, 256, 64, stream_k=True), C(128, 256, 64, cluster_m=2, stream_k=True),
        C(256, 128, 64, cluster_n=2, stream_k=True),
    ]),
    # 144 tiles of 128x128 on 132 SMs: data-parallel runs a second wave of 12 tiles.
    ("1536x1536x8192", GemmProblem(m=1536, n=1536, k=8192), [
        C(128, 128, 64), C(128, 128, 64, cluster_m=2), C(128, 192, 64), C(128, 256, 64),
        C(128, 128, 64, stream_k=True), C(128, 128, 64, cluster_m=2, stream_k=True), C(128, 256, 64, stream_k=True),
    ]),
    ("decode128-dp", GemmProblem(m=128, n=4096, k=14336, **NT), [
        C(64, 64, 128, cluster_m=2, store="direct"), C(64, 64, 128, cluster_m=2, cluster_n=2, store="direct"),
        C(64, 64, 128, cluster_m=2, cluster_n=2), C(64, 64, 64, cluster_m=2, cluster_n=2, store="direct"),
        C(64, 64, 128, cluster_m=2, store="direct", stages=6),
    ]),
    # decode128 with less L2 traffic: all 128 tokens in one tile row, multicast along N
    ("decode128-l2", GemmProblem(m=128, n=4096, k=14336, **NT), [
        C(64, 64, 128, cluster_m=2, store="direct"), C(64, 128, 64, cluster_m=2, split_k=2),
        C(128, 64, 128, cluster_n=2, split_k=2), C(128, 64, 128, cluster_n=2, split_k=2, store="direct"),
        C(128, 64, 64, cluster_n=2, split_k=2), C(128, 64, 128, cluster_n=2, stream_k=True),
        C(128, 64, 128, cluster_n=2, store="direct", stream_k=True), C(128, 128, 128, cluster_n=2, split_k=4),
        C(128, 32, 128, cluster_n=2), C(128, 64, 128, cluster_n=2, split_k=2, split_mode="workspace"),
    ]),
    ("batched-dp", GemmProblem(m=512, n=512, k=128, l=32), [
        C(128, 128, 64, cluster_n=2, raster="along_n"), C(128, 128, 64, cluster_n=2, raster="along_n", store="direct"),
        C(128, 128, 64, store="direct"), C(128, 128, 128, store="direct"), C(128, 256, 64, store="direct"),
        C(64, 128, 64, store="direct"), C(128, 128, 64, cluster_m=2, schedule="pingpong", store="direct"),
    ]),
]
if "--timing-only" in sys.argv:
    keep = sys.argv[sys.argv.index("--timing-only") + 1].split(",")
    TIMING = [t for t in TIMING if t[0] in keep]
    CORRECTNESS = []


def correctness() -> list[dict]:
    rows = []
    for name, cfg, prob in CORRECTNESS:
        why = check(cfg, prob)
        if why:
            rows.append({"case": name, "ok": False, "why": why})
            print(f"{name:32s} REJECTED {why}", flush=True)
            continue
        runner = fam.compile(cfg, prob)
        x = make_inputs(prob, device="cuda", seed=1)
        ref = reference(prob, x)
        ok, reason = verify(runner, prob, x, ref)
        first = x.d.clone()
        ok2, _ = verify(runner, prob, x, ref)
        same = bool(torch.equal(first, x.d)) if ok2 else False
        err = (x.d.float() - ref.float()).abs().max().item()
        rows.append({"case": name, "config": cfg.short(), "ok": ok and ok2, "deterministic": same, "max_err": err,
                     "why": reason})
        print(f"{name:32s} {cfg.short():40s} ok={ok and ok2} same_bits={same} max_err={err:.3g} {reason or ''}",
              flush=True)
    return rows


def timing() -> list[dict]:
    out = []
    for name, prob, cfgs in TIMING:
        x = make_inputs(prob, device="cuda", seed=0)
        ref = reference(prob, x)
        sides = {"torch": torch_baseline(prob, x)}
        for cfg in cfgs:
            why = check(cfg, prob)
            if why:
                print(f"{name} {cfg.short()} rejected: {why}")
                continue
            runner = fam.compile(cfg, prob)
            ok, reason = verify(runner, prob, x, ref)
            if not ok:
                print(f"{name} {cfg.short()} WRONG: {reason}")
                continue
            sides[cfg.short()] = (lambda r=runner: x.run(r))
        per = dict(zip(sides, interleaved_rounds(
            [lambda f=f: time_callable(f, flush_bytes=flush).median_ms for f in sides.values()], ROUNDS)))
        t_torch = statistics.median(per["torch"])
        for k, v in per.items():
            ms = statistics.median(v)
            row = {"case": name, "side": k, "ms": ms, "tflops": 2 * prob.m * prob.n * prob.k * prob.l / ms / 1e9,
                   "ratio_vs_torch": t_torch / ms}
            out.append(row)
            print(f"{name:10s} {k:45s} {ms * 1e3:9.1f} us {row['tflops']:7.1f} TFLOP/s  x{row['ratio_vs_torch']:.3f}",
                  flush=True)
    return out


if __name__ == "__main__":
    result = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
              "correctness": correctness(), "timing": timing()}
    if len(sys.argv) > 1 and sys.argv[1].endswith(".json"):
        with open(sys.argv[1], "w") as f:
            json.dump(result, f, indent=1)

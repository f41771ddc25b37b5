"""GPU smoke test of the Hopper GEMM family: correctness over layouts/configs, then a quick
side-by-side timing against torch.matmul. Run on the GPU machine:

    python benchmarks/kernel_smoke.py [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback

import torch

from autocutlass.kernels.hopper_gemm import HopperGemmConfig, HopperGemmFamily
from autocutlass.problem import Activation, DType, Epilogue, Major, Problem

TORCH = {DType.BF16: torch.bfloat16, DType.FP16: torch.float16, DType.FP32: torch.float32}


def operand(rows: int, cols: int, l: int, major: Major, dtype: torch.dtype, rank: int) -> torch.Tensor:
    """(L, rows, cols) or (rows, cols) with the requested contiguous dim."""
    if major is Major.ROW:
        t = torch.randn(l, rows, cols, device="cuda", dtype=torch.float32).to(dtype)
    else:
        t = torch.randn(l, cols, rows, device="cuda", dtype=torch.float32).to(dtype).transpose(1, 2)
    return t[0] if rank == 2 else t


def run_case(fam: HopperGemmFamily, cfg: HopperGemmConfig, p: Problem) -> dict:
    rank = 3 if p.l > 1 else 2
    dt = TORCH[p.a_dtype]
    a = operand(p.m, p.k, p.l, p.a_major, dt, rank)
    b = operand(p.k, p.n, p.l, p.b_major, dt, rank)
    shape = (p.l, p.m, p.n) if rank == 3 else (p.m, p.n)
    d = torch.full(shape, float("nan"), device="cuda", dtype=TORCH[p.d_dtype])
    c = torch.randn(shape, device="cuda").to(TORCH[p.c_dtype]) if p.epilogue.with_c else None
    bias = torch.randn(p.n, device="cuda").to(TORCH[p.d_dtype]) if p.epilogue.bias else None
    alpha, beta = (0.5, 2.0) if p.epilogue.with_c else (1.0, 0.0)
    t0 = time.time()
    runner = fam.compile(cfg, p)
    t_compile = time.time() - t0
    runner(a, b, d, c=c, bias=bias, alpha=alpha, beta=beta)
    torch.cuda.synchronize()
    ref = alpha * torch.matmul(a.float(), b.float())
    if c is not None:
        ref = ref + beta * c.float()
    if bias is not None:
        ref = ref + bias.float()
    act = p.epilogue.activation
    if act is Activation.RELU:
        ref = torch.relu(ref)
    elif act is Activation.GELU:
        ref = torch.nn.functional.gelu(ref)
    elif act is Activation.GELU_TANH:
        ref = torch.nn.functional.gelu(ref, approximate="tanh")
    elif act is Activation.SILU:
        ref = torch.nn.functional.silu(ref)
    out = d.float()
    nan = int(torch.isnan(out).sum())
    err = float((out - ref).norm() / ref.norm().clamp_min(1e-30))
    ok = nan == 0 and err < 1e-2
    r = {"config": cfg.short(), "problem": p.describe(), "ok": ok, "nan": nan, "rel_err": err,
         "compile_s": round(t_compile, 2)}
    if not ok:  # where is it wrong? max abs error per 64x32 block of the first matrix
        e2 = (out - ref).abs().reshape(-1, p.m, p.n)[0]
        mb, nb = (p.m + 63) // 64, (p.n + 31) // 32
        grid = [[round(float(e2[i * 64:(i + 1) * 64, j * 32:(j + 1) * 32].max()), 2) for j in range(min(nb, 8))]
                for i in range(min(mb, 4))]
        r["err_blocks"] = grid
    return r


def probe_epilogue(fam: HopperGemmFamily) -> None:
    """Print D - A@B for structured C and bias (debugging aid for the epilogue's coordinates)."""
    m = n = 128
    k = 64
    a = torch.randn(m, k, device="cuda").bfloat16()
    b = torch.randn(k, n, device="cuda").bfloat16()
    ab = a.float() @ b.float()
    rows = torch.arange(m, device="cuda", dtype=torch.float32)[:, None]
    cols = torch.arange(n, device="cuda", dtype=torch.float32)[None, :]
    c = (rows * 1000 + cols).contiguous()
    p = Problem(m=m, n=n, k=k, d_dtype=DType.FP32, c_dtype=DType.FP32, epilogue=Epilogue(with_c=True))
    d = torch.full((m, n), float("nan"), device="cuda")
    fam.compile(HopperGemmConfig(128, 128, 64), p)(a, b, d, c=c, alpha=1.0, beta=1.0)
    torch.cuda.synchronize()
    diff = d - ab
    print("probe C   d-ab at [0,0],[0,1],[1,0],[5,7],[127,127]:",
          [round(float(diff[i, j]), 1) for i, j in ((0, 0), (0, 1), (1, 0), (5, 7), (127, 127))])
    p = Problem(m=m, n=n, k=k, d_dtype=DType.FP32, epilogue=Epilogue(bias=True))
    bias = torch.arange(n, device="cuda", dtype=torch.float32)
    d = torch.full((m, n), float("nan"), device="cuda")
    fam.compile(HopperGemmConfig(128, 128, 64), p)(a, b, d, bias=bias)
    torch.cuda.synchronize()
    diff = d - ab
    print("probe bias d-ab at [0,0],[0,1],[1,0],[5,7],[127,127]:",
          [round(float(diff[i, j]), 1) for i, j in ((0, 0), (0, 1), (1, 0), (5, 7), (127, 127))])


def bench(fn) -> float:
    """Median ms by the tuner's timing protocol (L2 flushed before every timed launch)."""
    from autocutlass.search.timing import time_callable

    return time_callable(fn, flush_bytes=2 * torch.cuda.get_device_properties(0).L2_cache_size).median_ms


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args()
    fam = HopperGemmFamily(cache_dir=None)
    C = HopperGemmConfig
    R, Cm = Major.ROW, Major.COL
    cases = [
        (C(128, 128, 64), Problem(m=512, n=512, k=512)),
        (C(128, 128, 64), Problem(m=257, n=312, k=200, a_major=R, b_major=Cm)),
        (C(128, 256, 64), Problem(m=1000, n=1000, k=1000, a_major=Cm, b_major=R)),
        (C(64, 128, 64), Problem(m=7, n=264, k=136, a_major=R, b_major=Cm)),
        (C(64, 64, 128), Problem(m=1, n=4096, k=4096, b_major=Cm)),
        (C(128, 128, 64, schedule="pingpong"), Problem(m=1024, n=1000, k=520)),
        (C(64, 256, 64, schedule="pingpong"), Problem(m=777, n=1024, k=1024, b_major=Cm)),
        (C(256, 128, 64, cluster_m=2), Problem(m=2048, n=2048, k=1024, b_major=Cm)),
        (C(128, 256, 64, cluster_n=2), Problem(m=2048, n=2048, k=1024)),
        (C(128, 128, 64, cluster_m=2, cluster_n=2, swizzle=4, raster="along_n"), Problem(m=1500, n=1496, k=800)),
        (C(128, 192, 128), Problem(m=512, n=960, k=1024, l=4, a_major=Cm)),
        (C(128, 208, 64), Problem(m=300, n=416, k=96, l=3, b_major=Cm)),
        (C(128, 128, 64), Problem(m=512, n=512, k=512, a_dtype=DType.FP16, b_dtype=DType.FP16, d_dtype=DType.FP16)),
        (C(128, 128, 64), Problem(m=500, n=512, k=512, d_dtype=DType.FP32, c_dtype=DType.FP32, epilogue=Epilogue(with_c=True))),
        (C(128, 128, 64), Problem(m=500, n=520, k=512, epilogue=Epilogue(bias=True, activation=Activation.GELU))),
        (C(64, 128, 64), Problem(m=64, n=512, k=512, b_major=Cm, epilogue=Epilogue(bias=True, activation=Activation.SILU))),
        (C(128, 256, 64, store="direct"), Problem(m=1000, n=1000, k=1000, a_major=Cm, b_major=R)),
        (C(128, 128, 64, schedule="pingpong", store="direct"), Problem(m=1024, n=1000, k=520)),
        (C(64, 128, 64, store="direct"), Problem(m=7, n=264, k=136, a_major=R, b_major=Cm)),
        (C(128, 192, 128, store="direct"), Problem(m=512, n=960, k=1024, l=4, a_major=Cm)),
        (C(128, 128, 64, store="direct", cluster_m=2), Problem(m=500, n=512, k=512, d_dtype=DType.FP32, c_dtype=DType.FP32, epilogue=Epilogue(with_c=True))),
        (C(128, 128, 64, store="direct"), Problem(m=500, n=520, k=512, epilogue=Epilogue(bias=True, activation=Activation.GELU_TANH))),
    ]
    probe_epilogue(fam)
    results = []
    for cfg, p in cases:
        try:
            r = run_case(fam, cfg, p)
        except Exception as e:  # noqa: BLE001 - a smoke script reports every failure and goes on
            r = {"config": cfg.short(), "problem": p.describe(), "ok": False, "error": f"{type(e).__name__}: {e}"[:600]}
            traceback.print_exc()
        print(json.dumps(r), flush=True)
        results.append(r)

    perf = []
    shapes = [
        ("llama8b-o", 8192, 4096, 4096, R, Cm),
        ("llama8b-qkv", 8192, 6144, 4096, R, Cm),
        ("square-4k", 4096, 4096, 4096, R, R),
    ]
    cfgs = [C(128, 256, 64), C(128, 256, 64, store="direct"), C(128, 256, 64, cluster_m=2),
            C(128, 256, 64, cluster_m=2, store="direct"), C(128, 128, 64, schedule="pingpong", store="direct"),
            C(256, 128, 64, cluster_m=2, store="direct")]
    for name, m, n, k, am, bm in shapes:
        p = Problem(m=m, n=n, k=k, a_major=am, b_major=bm)
        a = operand(m, k, 1, am, torch.bfloat16, 2)
        b = operand(k, n, 1, bm, torch.bfloat16, 2)
        d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        for cfg in cfgs:
            try:
                runner = fam.compile(cfg, p)
                ts, tts = [], []
                for _ in range(3):  # interleaved rounds
                    tts.append(bench(lambda: torch.matmul(a, b)))
                    ts.append(bench(lambda: runner(a, b, d)))
                t, tt = sorted(ts)[1], sorted(tts)[1]
                row = {"case": name, "config": cfg.short(), "ms": t, "torch_ms": tt,
                       "tflops": 2 * m * n * k / t / 1e9, "ratio": tt / t}
            except Exception as e:  # noqa: BLE001
                row = {"case": name, "config": cfg.short(), "error": f"{type(e).__name__}: {e}"[:300]}
            print(json.dumps(row), flush=True)
            perf.append(row)
    with open(os.path.join(args.out, "kernel_smoke.json"), "w") as f:
        json.dump({"gpu": torch.cuda.get_device_name(), "correctness": results, "perf": perf}, f, indent=1)
    print("\n== correctness")
    for r in results:
        print(("PASS " if r["ok"] else "FAIL ") + r["config"].ljust(36) + r["problem"].ljust(34),
              r.get("rel_err", r.get("error", ""))) 
    print("== perf")
    for r in perf:
        if "ms" in r:
            print(f"{r['case']:12s} {r['config']:36s} {r['tflops']:7.1f} TFLOP/s  x{r['ratio']:.3f} vs torch")
        else:
            print(r["case"], r["config"], r["error"])
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())

"""Does the order in which split-K splits walk K change how fast a small-output, long-K GEMM
streams its operands from DRAM?  (Triton, so it runs without the CuTe DSL; issue 21 / 18.)

Each program computes one (tile, split) partial of D = A @ B into an fp32 slab:
  contiguous:  split s takes K blocks s*per .. s*per + per - 1   (our kernels' order today)
  interleaved: split s takes K blocks s, s + S, s + 2S, ...       (the S splits read neighbours)
Timed with the L2 write-flush of our bench and with a read-flush, medians of interleaved rounds.
Prints GB/s of the operand bytes and the ratio interleaved / contiguous.
"""
from __future__ import annotations

import json
import os
import statistics
import sys

import torch
import triton
import triton.language as tl


@triton.jit
def splitk_kernel(a_ptr, b_ptr, ws_ptr, M, N, K, sam, sak, sbk, sbn,
                  S: tl.constexpr, INTERLEAVE: tl.constexpr,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid = tl.program_id(0)
    split = tl.program_id(1)
    tiles_n = tl.cdiv(N, BN)
    tm = pid // tiles_n
    tn = pid % tiles_n
    k_tiles = tl.cdiv(K, BK)
    rm = tm * BM + tl.arange(0, BM)
    rn = tn * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    if INTERLEAVE:
        count = (k_tiles - split + S - 1) // S
    else:
        per = (k_tiles + S - 1) // S
        count = tl.minimum(per, k_tiles - split * per)
    for i in range(0, count):
        if INTERLEAVE:
            kb = split + i * S
        else:
            kb = split * per + i
        rk = kb * BK + tl.arange(0, BK)
        a = tl.load(a_ptr + rm[:, None] * sam + rk[None, :] * sak)
        b = tl.load(b_ptr + rk[:, None] * sbk + rn[None, :] * sbn)
        acc += tl.dot(a, b)
    ws = ws_ptr + split * M * N + rm[:, None] * N + rn[None, :]
    tl.store(ws, acc)


def run_case(name, m, n, k, a_mmajor, b_kmajor, bm, bn, bk, splits, flush, rounds=15):
    dev = "cuda"
    if a_mmajor:
        a = torch.randn(k, m, device=dev, dtype=torch.bfloat16).t()  # (m, k), m contiguous
    else:
        a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
    if b_kmajor:
        b = torch.randn(n, k, device=dev, dtype=torch.bfloat16).t()  # (k, n), k contiguous
    else:
        b = torch.randn(k, n, device=dev, dtype=torch.bfloat16)
    ref = (a.float() @ b.float())
    out = {}
    fl = torch.empty(256 * 1024 * 1024 // 4, device=dev, dtype=torch.float32)
    rd = torch.empty(1, device=dev)
    tiles = triton.cdiv(m, bm) * triton.cdiv(n, bn)
    times = {}
    for S in splits:
        for inter in (False, True):
            ws = torch.full((S, m, n), float("nan"), device=dev, dtype=torch.float32)
            grid = (tiles, S)
            splitk_kernel[grid](a, b, ws, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                S=S, INTERLEAVE=inter, BM=bm, BN=bn, BK=bk, num_warps=4, num_stages=4)
            err = (ws.sum(0) - ref).abs().max().item() / ref.abs().max().item()
            assert err < 1e-2, (name, S, inter, err)
            times[(S, inter)] = (ws, grid)
    ms = {key: [] for key in times}
    mm = []
    for _ in range(rounds):
        for key, (ws, grid) in times.items():
            if flush == "write":
                fl.fill_(1.0)
            else:
                rd.copy_(fl.sum())
            s0 = torch.cuda.Event(enable_timing=True); s1 = torch.cuda.Event(enable_timing=True)
            s0.record()
            splitk_kernel[grid](a, b, ws, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                S=key[0], INTERLEAVE=key[1], BM=bm, BN=bn, BK=bk, num_warps=4, num_stages=4)
            s1.record(); torch.cuda.synchronize()
            ms[key].append(s0.elapsed_time(s1))
        if flush == "write":
            fl.fill_(1.0)
        else:
            rd.copy_(fl.sum())
        s0 = torch.cuda.Event(enable_timing=True); s1 = torch.cuda.Event(enable_timing=True)
        s0.record(); torch.matmul(a, b); s1.record(); torch.cuda.synchronize()
        mm.append(s0.elapsed_time(s1))
    nbytes = (m * k + k * n) * 2
    rows = []
    tmm = statistics.median(mm)
    for S in splits:
        c = statistics.median(ms[(S, False)]); i = statistics.median(ms[(S, True)])
        rows.append({"case": name, "flush": flush, "S": S, "ctas": tiles * S, "contig_us": c * 1e3, "inter_us": i * 1e3,
                     "contig_GBs": nbytes / c / 1e6, "inter_GBs": nbytes / i / 1e6, "ratio": c / i,
                     "torch_us": tmm * 1e3})
    return rows


def main() -> None:
    outdir = os.environ.get("OUT", ".")
    cases = [
        # name, m, n, k, A m-major, B k-major, tile, splits
        ("large-k 256x256x65536 nn", 256, 256, 65536, False, False, (64, 128, 64), (8, 16, 32)),
        ("large-k-2 512x384x32768 nn", 512, 384, 32768, False, False, (128, 128, 64), (8, 11, 16)),
        ("lk-nt 384x256x49152", 384, 256, 49152, False, True, (128, 128, 64), (8, 16, 32)),
        ("wgrad1x1 256x64x100352", 256, 64, 100352, True, False, (64, 64, 128), (12, 32, 33)),
        ("wgrad1x1 256x1024x6272", 256, 1024, 6272, True, False, (128, 128, 64), (4, 8)),
    ]
    rows = []
    for flush in ("write", "read"):
        for c in cases:
            name, m, n, k, am, bk_, (bm, bn, bkk), splits = c
            rows += run_case(name, m, n, k, am, bk_, bm, bn, bkk, splits, flush)
    torch.cuda.synchronize()
    x = torch.empty(64 * 1024 * 1024 // 2, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)
    ts = []
    for _ in range(20):
        s0 = torch.cuda.Event(enable_timing=True); s1 = torch.cuda.Event(enable_timing=True)
        s0.record(); y.copy_(x); s1.record(); torch.cuda.synchronize(); ts.append(s0.elapsed_time(s1))
    copy_gbs = 2 * x.numel() * 2 / statistics.median(ts) / 1e6
    meta = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
            "copy_GBs_64MiB": copy_gbs}
    with open(os.path.join(outdir, "split-order-probe.json"), "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)
    print(json.dumps(meta))
    print(f"{'case':30} {'flush':5} {'S':>3} {'ctas':>5} {'contig us':>9} {'inter us':>9} {'contig GB/s':>11} {'inter GB/s':>10} {'x':>6} {'torch us':>8}")
    for r in rows:
        print(f"{r['case']:30} {r['flush']:5} {r['S']:3d} {r['ctas']:5d} {r['contig_us']:9.1f} {r['inter_us']:9.1f} "
              f"{r['contig_GBs']:11.0f} {r['inter_GBs']:10.0f} {r['ratio']:6.3f} {r['torch_us']:8.1f}")


if __name__ == "__main__":
    main()

"""Probe: how much of a large compute-bound tile's time is per tile (epilogue, WGMMA drain) and
how much per K block, for the GEMM and the conv families, by timing each config at several K and
fitting time = per_tile_part + slope * K; and which schedule wins on the conv suite's large 3x3
layers that still trail cuDNN.

Each config is timed beside the vendor path (torch.matmul / F.conv2d with cudnn.benchmark on) in
interleaved rounds with the tuner's protocol (L2 write-flushed before every call, medians).
Outputs are NaN-poisoned and checked against a float32 reference before any timing.

GPU machine, from the project root:

    python benchmarks/probes/epilogue_probe.py [--cache DIR] [--json OUT] [--compile-only]

``--compile-only`` (no GPU; set CUTE_DSL_ARCH=sm_90a) fills ``--cache`` with every kernel, so the
GPU run loads them.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

from autocutlass.kernels.hopper_conv import HopperConvConfig, HopperConvFamily
from autocutlass.kernels.hopper_gemm import HopperGemmConfig, HopperGemmFamily
from autocutlass.ops.conv.problem import ConvProblem
from autocutlass.ops.gemm.problem import DType, GemmProblem, Major

PP = "pingpong"
CONFIGS = [  # (label, tile_m, tile_n, cluster_m, cluster_n, schedule, store)
    ("coop 128x256 c2x1", 128, 256, 2, 1, "cooperative", "tma"),
    ("coop 128x256 c2x1 dir", 128, 256, 2, 1, "cooperative", "direct"),
    ("coop 128x256 c1x1", 128, 256, 1, 1, "cooperative", "tma"),
    ("coop 256x128 c1x2", 256, 128, 1, 2, "cooperative", "tma"),
    ("coop 256x128 c1x2 dir", 256, 128, 1, 2, "cooperative", "direct"),
    ("pp 64x256 c2x1", 64, 256, 2, 1, PP, "tma"),
    ("pp 128x128 c1x2", 128, 128, 1, 2, PP, "tma"),
    ("pp 128x128 c2x1", 128, 128, 2, 1, PP, "tma"),
]
GEMM_MN = (4096, 4096)
GEMM_K = (1024, 2048, 4096, 8192)
CONV_C = (128, 256, 512)  # vae-256@512's geometry at three channel counts (K_gemm = 9 C)
LAYERS = {  # the conv suite's large 3x3 layers below 1.0 in some run (N, H, W, C, K)
    "vae-256@512": (1, 512, 512, 256, 256),
    "vae-512@128": (4, 128, 128, 512, 512),
    "rn50-l4-3x3-b256": (256, 7, 7, 512, 512),
    "rn50-l3-3x3-b128": (128, 14, 14, 256, 256),
}


def conv_problem(n: int, h: int, w: int, c: int, k: int) -> ConvProblem:
    return ConvProblem(
        direction="fprop", n=n, h=h, w=w, c=c, k=k, r=3, s=3, stride_h=1, stride_w=1, pad_h=1, pad_w=1,
        dil_h=1, dil_w=1, x_dtype=DType.BF16, w_dtype=DType.BF16, y_dtype=DType.BF16,
    )  # fmt: skip


def gemm_problem(k: int) -> GemmProblem:
    return GemmProblem(m=GEMM_MN[0], n=GEMM_MN[1], k=k, b_major=Major.COL)


def rel_error(y: torch.Tensor, ref: torch.Tensor) -> float:
    if not bool(torch.isfinite(y).all()):
        return math.inf
    return float(torch.linalg.vector_norm(y.float() - ref) / max(float(torch.linalg.vector_norm(ref)), 1e-30))


def fit(ks: list[float], ts: list[float]) -> tuple[float, float]:
    """Least-squares (intercept, slope) of ts over ks."""
    mk, mt = statistics.fmean(ks), statistics.fmean(ts)
    slope = sum((k - mk) * (t - mt) for k, t in zip(ks, ts)) / sum((k - mk) ** 2 for k in ks)
    return mt - slope * mk, slope


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", type=Path, default=Path(".probecache"))
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--compile-only", action="store_true")
    args = ap.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    gfam, cfam = HopperGemmFamily(cache_dir=args.cache), HopperConvFamily(cache_dir=args.cache)
    gcfgs = {lab: HopperGemmConfig(tm, tn, 64, cm, cn, schedule=sch, store=st) for lab, tm, tn, cm, cn, sch, st in CONFIGS}
    ccfgs = {lab: HopperConvConfig(tm, tn, 64, cm, cn, schedule=sch, store=st) for lab, tm, tn, cm, cn, sch, st in CONFIGS}
    if args.compile_only:
        t0 = time.time()
        for lab in gcfgs:
            gfam.compile(gcfgs[lab], gemm_problem(GEMM_K[0]))
            cfam.compile(ccfgs[lab], conv_problem(*LAYERS["vae-256@512"]))
            print(f"compiled {lab} ({time.time() - t0:.0f}s)", flush=True)
        return 0
    if not torch.cuda.is_available():
        print("no CUDA GPU", file=sys.stderr)
        return 2
    from autocutlass.search.timing import time_callable

    torch.backends.cudnn.benchmark = True
    props = torch.cuda.get_device_properties(0)
    flush = 2 * int(getattr(props, "L2_cache_size", 50 * 2**20))
    head = f"# {props.name}, torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}"
    print(head, flush=True)
    out: dict = {"device": props.name, "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
                 "gemm": {}, "conv_k": {}, "layers": {}}  # fmt: skip

    def run_set(timers: dict, flops: float) -> dict[str, float]:
        meds: dict[str, list[float]] = {lab: [] for lab in timers}
        for r in range(args.rounds):
            order = list(timers.items()) if r % 2 == 0 else list(timers.items())[::-1]
            for lab, fn in order:
                meds[lab].append(time_callable(fn, flush_bytes=flush).median_ms)
        return {lab: statistics.median(v) for lab, v in meds.items()}

    def add_verified(timers: dict, label: str, where: str, call: Callable[[], object], out_t: torch.Tensor,
                     ref: torch.Tensor) -> None:  # fmt: skip
        """Run ``call`` once into the NaN-poisoned ``out_t``; time it as ``label`` only if it matches ``ref``."""
        out_t.fill_(float("nan"))
        call()
        torch.cuda.synchronize()
        err = rel_error(out_t, ref)
        if err < 1e-2:
            timers[label] = call
        else:
            print(f"{where} {label}: WRONG rel err {err:.2e}", flush=True)

    gen = torch.Generator(device="cuda").manual_seed(0)
    # ---- GEMM over K
    for k in GEMM_K:
        m, n = GEMM_MN
        prob = gemm_problem(k)
        a = torch.randn(m, k, device="cuda", generator=gen).bfloat16()
        b = torch.randn(n, k, device="cuda", generator=gen).bfloat16().t()
        d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        ref = a.float() @ b.float()
        timers = {"torch": lambda a=a, b=b: torch.matmul(a, b)}
        for lab, cfg in gcfgs.items():
            add_verified(timers, lab, f"gemm K={k}", lambda r=gfam.compile(cfg, prob), a=a, b=b, d=d: r(a, b, d), d, ref)
        res = run_set(timers, 2 * m * n * k)
        out["gemm"][k] = res
        print(f"gemm {m}x{n}x{k}: " + "; ".join(f"{lab} {ms * 1e3:.1f}us {2 * m * n * k / ms / 1e9:.0f}TF"
                                                for lab, ms in res.items()), flush=True)  # fmt: skip
        del a, b, d, ref

    def conv_set(n: int, h: int, w: int, c: int, k: int) -> dict[str, float]:
        prob = conv_problem(n, h, w, c, k)
        cl = torch.channels_last
        x = torch.randn(n, c, h, w, device="cuda", generator=gen).bfloat16().to(memory_format=cl)
        wt = (torch.randn(k, c, 3, 3, device="cuda", generator=gen) / math.sqrt(9 * c)).bfloat16().to(memory_format=cl)
        y = torch.empty(n, k, h, w, device="cuda", dtype=torch.bfloat16).to(memory_format=cl)
        ref = F.conv2d(x.float(), wt.float(), None, padding=1)
        timers = {"cudnn": lambda x=x, wt=wt: F.conv2d(x, wt, None, padding=1)}
        for lab, cfg in ccfgs.items():
            if cfam.check(cfg, prob) is None:
                call = lambda r=cfam.compile(cfg, prob), x=x, wt=wt, y=y: r(x, wt, y)  # noqa: E731
                add_verified(timers, lab, f"conv {n}x{h}x{w}x{c} k{k}", call, y, ref)
        return run_set(timers, prob.flops), prob.flops

    # ---- conv over K (vae-256@512's geometry)
    for c in CONV_C:
        res, flops = conv_set(1, 512, 512, c, 256)
        out["conv_k"][c] = res
        print(f"conv 1x512x512x{c} k256: " + "; ".join(f"{lab} {ms * 1e3:.1f}us {flops / ms / 1e9:.0f}TF"
                                                      for lab, ms in res.items()), flush=True)  # fmt: skip
    # ---- the large layers
    for name, dims in LAYERS.items():
        if name == "vae-256@512":
            res, flops = out["conv_k"][256], conv_problem(*dims).flops
        else:
            res, flops = conv_set(*dims)
        out["layers"][name] = {"ms": res, "flops": flops}

    # ---- table
    lines = [head, "", "per-tile part and per-K slope (fit of time over K):"]
    for kind, data, ks in (("gemm 4096x4096", out["gemm"], GEMM_K), ("conv vae geometry", out["conv_k"], [9 * c for c in CONV_C])):
        for lab in data[next(iter(data))]:
            ts = [data[k0][lab] * 1e3 for k0 in data if lab in data[k0]]
            if len(ts) != len(ks):
                continue
            a0, s0 = fit([float(k) for k in ks], ts)
            share = a0 / ts[len(ts) // 2]
            lines.append(f"  {kind:18s} {lab:20s} intercept {a0:7.1f} us  slope {s0 * 1e3:7.2f} us/1k K  "
                         f"intercept share at mid K {share:5.1%}")  # fmt: skip
    lines += ["", f"{'layer':18s} {'kernel':20s} {'us':>8s} {'TF/s':>6s} {'x vendor':>8s}"]
    for name, d in out["layers"].items():
        base = d["ms"]["cudnn"]
        for lab, ms in d["ms"].items():
            lines.append(f"{name:18s} {lab:20s} {ms * 1e3:8.1f} {d['flops'] / ms / 1e9:6.0f} {base / ms:8.3f}")
    for k, res in out["gemm"].items():
        base = res["torch"]
        best = min((ms, lab) for lab, ms in res.items() if lab != "torch")
        lines.append(f"gemm K={k:<5d} best {best[1]:20s} x{base / best[0]:.3f} vs torch")
    print("\n".join(lines))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1, default=str))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())

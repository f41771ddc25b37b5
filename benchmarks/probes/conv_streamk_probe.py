"""Probe: hopper_conv's stream-K configs against the config the shipped database chose for the
layer and against cuDNN (benchmark mode), on the layers whose output tiles fill the SMs in a
fractional number of waves (ResNet-50's 14x14 and 7x7 stages at batch 32-256, Stable Diffusion's
16x16 stage).

For each layer (3x3, stride 1, pad 1, bf16, channels_last; a C = K layer's dgrad runs this very
forward problem on hopper_conv, so one row serves both directions): the shipped database's best
hopper_conv config for this GPU (whatever kernel-source hash it was tuned under: it is the last
winner), ``STREAM_CONFIGS``, and the family's stream-K seed. Every config is compiled first, in
parallel child processes into one temporary kernel cache (one compiled kernel serves every layer
of its class), then verified against F.conv2d in float32 on a NaN-poisoned output, then timed in
interleaved rounds (``autocutlass.search.timing.time_callable``, L2 flushed before every call);
medians of the rounds, TFLOP/s and the ratio to cuDNN (> 1: ours faster).

    python benchmarks/probes/conv_streamk_probe.py [--rounds 3] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
LAYERS = [  # (name, N, H, W, C = K)
    ("rn50-l1-b128", 128, 56, 56, 64),
    ("rn50-l2-b128", 128, 28, 28, 128),
    ("rn50-l3-b128", 128, 14, 14, 256),
    ("rn50-l3-b32", 32, 14, 14, 256),
    ("rn50-l4-b128", 128, 7, 7, 512),
    ("rn50-l4-b256", 256, 7, 7, 512),
    ("rn50-l4-b32", 32, 7, 7, 512),
    ("sd-1280@16", 8, 16, 16, 1280),
    ("sd-640@32", 8, 32, 32, 640),
]
STREAM_CONFIGS = [  # HopperConvConfig keyword sets, all stream-K
    {"tile_m": 128, "tile_n": 256},
    {"tile_m": 256, "tile_n": 128},
    {"tile_m": 128, "tile_n": 128},
    {"tile_m": 128, "tile_n": 192},
    {"tile_m": 128, "tile_n": 256, "cluster_m": 2},
    {"tile_m": 128, "tile_n": 256, "raster": "along_n"},
    {"tile_m": 128, "tile_n": 128, "cluster_n": 2},
]


def problem(n: int, h: int, w: int, c: int) -> Any:
    from autocutlass.ops.conv.problem import ConvProblem

    return ConvProblem(direction="fprop", n=n, h=h, w=w, c=c, k=c, r=3, s=3, pad_h=1, pad_w=1)


def shipped_config(gpu: str, n: int, h: int, w: int, c: int) -> dict[str, Any] | None:
    """The hopper_conv best of this fprop layer in the shipped database of ``gpu`` (any source hash)."""
    path = ROOT / "tuning_dbs" / (gpu.replace(" ", "-") + ".sqlite")
    if not path.is_file():
        return None
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = con.execute(
            "select b.config, p.problem from best b join problems p on p.id = b.problem_id "
            "where b.family = 'hopper_conv'"
        ).fetchall()
    finally:
        con.close()
    for cfg, prob in rows:
        d = json.loads(prob)
        if (d.get("direction"), d.get("n"), d.get("h"), d.get("w"), d.get("c"), d.get("k"), d.get("r"),
                d.get("stride_h"), d.get("pad_h"), d.get("x_dtype")) == ("fprop", n, h, w, c, c, 3, 1, 1, "bf16"):  # fmt: skip
            return json.loads(cfg)
    return None


def _compile_one(args: tuple[dict[str, Any], tuple[int, int, int, int], str]) -> str:
    os.environ.setdefault("CUTE_DSL_ARCH", "sm_90a")
    from autocutlass.kernels.hopper_conv.compile import get_compiled
    from autocutlass.kernels.hopper_conv.config import HopperConvConfig

    cfg_d, dims, cache = args
    t0 = time.time()
    try:
        get_compiled(HopperConvConfig.from_dict(cfg_d), problem(*dims), Path(cache))
    except Exception as e:  # noqa: BLE001 - a probe reports and goes on
        return f"compile failed: {type(e).__name__}: {str(e)[:200]}"
    return f"compiled in {time.time() - t0:.1f}s"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tol", type=float, default=1e-2, help="relative Frobenius tolerance (bf16)")
    ap.add_argument("--workers", type=int, default=8, help="parallel compile processes")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    import torch
    import torch.nn.functional as F

    from autocutlass.kernels.hopper_conv import HopperConvFamily, check, modelled_stream_k
    from autocutlass.kernels.hopper_conv.config import HopperConvConfig
    from autocutlass.search.timing import time_callable

    if not torch.cuda.is_available():
        print("no CUDA GPU", file=sys.stderr)
        return 2
    torch.backends.cudnn.benchmark = True
    props = torch.cuda.get_device_properties(0)
    flush = 2 * int(getattr(props, "L2_cache_size", 50 * 2**20))
    print(f"# {props.name}, torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}", flush=True)
    cache = Path(tempfile.mkdtemp(prefix="conv-streamk-"))
    fam = HopperConvFamily(cache_dir=cache)

    plan: list[tuple[str, tuple[int, int, int, int], list[tuple[str, HopperConvConfig]]]] = []
    for name, n, h, w, c in LAYERS:
        prob = problem(n, h, w, c)
        cands: list[tuple[str, HopperConvConfig]] = []
        shipped = shipped_config(props.name, n, h, w, c)
        if shipped is not None:
            cands.append(("shipped", HopperConvConfig.from_dict(shipped)))
        modelled = modelled_stream_k(prob)
        if modelled is not None:
            cands.append(("model" + (" (leads)" if modelled[0] else ""), modelled[1]))
        cands += [("stream", HopperConvConfig(tile_k=64, stream_k=True, **kw)) for kw in STREAM_CONFIGS]  # type: ignore[arg-type]
        seen: set[HopperConvConfig] = set()
        kept = []
        for tag, cfg in cands:
            why = check(cfg, prob)
            if why is None and cfg not in seen:
                seen.add(cfg)
                kept.append((tag, cfg))
            elif why is not None:
                print(f"{name} {cfg.short()}: {why}", flush=True)
        plan.append((name, (n, h, w, c), kept))

    jobs = {(json.dumps(cfg.as_dict(), sort_keys=True), dims): (cfg.as_dict(), dims, str(cache))
            for _, dims, kept in plan for _, cfg in kept}  # fmt: skip
    t0 = time.time()
    with ProcessPoolExecutor(max_workers=args.workers, mp_context=get_context("spawn")) as pool:
        for (key, _), msg in zip(jobs, pool.map(_compile_one, jobs.values()), strict=True):
            if not msg.startswith("compiled"):
                print(f"{key}: {msg}", flush=True)
    print(f"# {len(jobs)} compiles in {time.time() - t0:.0f}s", flush=True)

    rows: list[dict[str, Any]] = []
    cl = torch.channels_last
    for name, (n, h, w, c), kept in plan:
        prob = problem(n, h, w, c)
        gen = torch.Generator(device="cuda").manual_seed(0)
        x = torch.randn(n, c, h, w, device="cuda", generator=gen).to(torch.bfloat16).to(memory_format=cl)
        wt = (torch.randn(c, c, 3, 3, device="cuda", generator=gen) / math.sqrt(9 * c)).to(torch.bfloat16)
        wt = wt.to(memory_format=cl)
        y = torch.empty(n, c, h, w, device="cuda", dtype=torch.bfloat16).to(memory_format=cl)
        with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
            ref = F.conv2d(x.float(), wt.float(), None, padding=1)

        def cudnn_call(x: Any = x, wt: Any = wt) -> None:
            F.conv2d(x, wt, None, padding=1)

        timers: list[tuple[str, str, Any]] = [("cudnn", "cudnn (benchmark=True)", cudnn_call)]
        for tag, cfg in kept:
            try:
                runner = fam.compile(cfg, prob)
            except Exception as e:  # noqa: BLE001
                print(f"{name} {cfg.short()}: {type(e).__name__}: {str(e)[:200]}", flush=True)
                continue
            y.fill_(float("nan"))
            runner(x, wt, y)
            torch.cuda.synchronize()
            err = float(torch.linalg.vector_norm(y.float() - ref) / torch.linalg.vector_norm(ref))
            if not (math.isfinite(err) and err < args.tol):
                print(f"{name} {cfg.short()}: WRONG, rel err {err:.3e}", flush=True)
                rows.append({"layer": name, "tag": tag, "config": cfg.short(), "wrong": True, "rel_err": err})
                continue

            def ours(runner: Any = runner, x: Any = x, wt: Any = wt, y: Any = y) -> None:
                runner(x, wt, y)

            timers.append((tag, cfg.short(), ours))
        medians: dict[str, list[float]] = {label: [] for _, label, _ in timers}
        for r in range(args.rounds):
            for _, label, fn in timers if r % 2 == 0 else timers[::-1]:
                medians[label].append(time_callable(fn, flush_bytes=flush).median_ms)
        base = statistics.median(medians["cudnn (benchmark=True)"])
        for tag, label, _ in timers:
            ms = statistics.median(medians[label])
            rows.append({"layer": name, "tag": tag, "config": label, "us": ms * 1e3,
                         "tflops": prob.flops / (ms * 1e-3) / 1e12, "x_cudnn": base / ms})  # fmt: skip
        print(f"{name}: done at {time.time() - t0:.0f}s", flush=True)

    print()
    print(f"{'layer':14s} {'tag':14s} {'config':34s} {'us':>8s} {'TFLOP/s':>8s} {'x cudnn':>8s}")
    for r in rows:
        if r.get("wrong"):
            print(f"{r['layer']:14s} {r['tag']:14s} {r['config']:34s} WRONG rel err {r['rel_err']:.2e}")
        else:
            print(f"{r['layer']:14s} {r['tag']:14s} {r['config']:34s} {r['us']:8.1f} {r['tflops']:8.1f} {r['x_cudnn']:8.3f}")
    if args.json is not None:
        args.json.write_text(json.dumps({
            "what": "hopper_conv stream-K configs vs the shipped database's config and cuDNN benchmark mode, "
                    "3x3 s1 p1 bf16 channels_last fprop (C = K: the same problem as the layer's dgrad)",
            "gpu": props.name, "date": time.strftime("%Y-%m-%d"), "torch": torch.__version__,
            "cudnn": torch.backends.cudnn.version(), "rounds": args.rounds, "rows": rows,
        }, indent=1))  # fmt: skip
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())

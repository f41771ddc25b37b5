"""Probe: hopper_conv_wgrad configs against the config the shipped database chose for the layer and
against cuDNN (benchmark mode), on the conv suite's wgrad layers: several taps per tile
(``tap_channels``) and workspace split-K for the narrow layers (C = 64 or 128), whose one-tap
tiles lose to cuDNN, and tiles across the taps in 64-channel boxes for wider layers whose C the
tile width does not divide (C = 320, 640, 1280).

Per layer (``--layers``, the suite's names): the shipped database's hopper_conv_wgrad best for
this GPU (whatever kernel-source hash it was tuned under: the last winner), the family's first
``--seeds`` seeds, and for a 64- or 128-channel layer ``extra_configs`` (several taps per tile
with workspace splits and stream-K). Every config is compiled first, in parallel child processes
into one temporary kernel cache, then verified against a float32 wgrad on a NaN-poisoned dw, then
timed in interleaved rounds (``autocutlass.search.timing.time_callable``, L2 flushed before every
call) with cuDNN's wgrad (``aten.convolution_backward`` with dW alone in its mask,
``cudnn.benchmark`` on); medians of the rounds, TFLOP/s and the ratio to cuDNN (> 1: ours faster).

    python benchmarks/probes/conv_wgrad_probe.py [--layers rn50-l1-3x3,...] [--rounds 3] [--shipped-only]
        [--config JSON]... [--json FILE]
"""

from __future__ import annotations

import argparse
from dataclasses import replace
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
SHAPES = ROOT / "benchmarks" / "shapes-conv.json"
DEFAULT_LAYERS = ",".join([
    "rn50-l1-3x3", "rn50-b8-3x3-64", "rn50-l2-3x3", "rn50-l2-3x3-s2", "rn50-l3-3x3", "rn50-l3-3x3-b128", "rn50-l4-3x3",
    "rn50-l4-3x3-b256", "sd-320@64", "sd-640@32", "sd-1280@16", "sdxl-640@64", "vae-512@128", "vae-256@512",
    "sd-640@32-fp16", "rn50-l1-1x1-up", "rn50-l3-1x1",
])


def problem_of(case: dict[str, Any]) -> Any:
    from autocutlass.ops.conv.problem import ConvProblem
    from autocutlass.ops.gemm.problem import DType

    dt = DType(case["dtype"])
    return ConvProblem(
        direction="wgrad", n=case["N"], h=case["H"], w=case["W"], c=case["C"], k=case["K"], r=case["R"],
        s=case["S"], stride_h=case["stride"][0], stride_w=case["stride"][1], pad_h=case["pad"][0],
        pad_w=case["pad"][1], dil_h=case["dilation"][0], dil_w=case["dilation"][1], x_dtype=dt, w_dtype=dt, y_dtype=dt,
    )  # fmt: skip


def shipped_config(gpu: str, problem: Any) -> dict[str, Any] | None:
    """The hopper_conv_wgrad best of ``problem`` in the shipped database of ``gpu`` (any source hash)."""
    path = ROOT / "tuning_dbs" / (gpu.replace(" ", "-") + ".sqlite")
    if not path.is_file():
        return None
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = con.execute(
            "select b.config, p.problem from best b join problems p on p.id = b.problem_id "
            "where b.family = 'hopper_conv_wgrad'"
        ).fetchall()
    finally:
        con.close()
    fields = ("direction", "n", "h", "w", "c", "k", "r", "s", "stride_h", "stride_w", "pad_h", "pad_w", "dil_h",
              "dil_w", "x_dtype")  # fmt: skip
    for cfg, prob in rows:
        d = json.loads(prob)
        if all(d.get(f) == _field(problem, f) for f in fields):
            return json.loads(cfg)
    return None


def _field(problem: Any, name: str) -> Any:
    v = getattr(problem, name)
    return getattr(v, "value", v)


def extra_configs(problem: Any) -> list[Any]:
    """Workspace split-K for every layer (one tap per tile, 128x128 and 128x256 tiles, 2-16 splits)
    and, for a 64- or 128-channel layer, several taps per tile (every width that holds 2-4 taps,
    tile_m 64 for K = 64, else 128) with 8-48 workspace splits."""
    from autocutlass.kernels.hopper_conv_wgrad.config import HopperConvWgradConfig as W

    out = [W(128, tn, 64, split_k=sk, split_mode="workspace") for tn in (128, 256) for sk in (2, 4, 8, 16)]
    if problem.c % 64 == 0 and problem.c not in (64, 128):
        # tiles across the taps in 64-channel boxes, for the widths that do not divide C
        for tn in (128, 192, 256):
            if problem.c % tn:
                out += [W(128, tn, 64, tap_channels=64), W(128, tn, 64, tap_channels=64, split_k=2),
                        W(128, tn, 64, tap_channels=64, stream_k=True),
                        W(128, tn, 64, tap_channels=64, split_k=4, split_mode="workspace")]
                if problem.k % 128:
                    out += [W(64, tn, 64, tap_channels=64, split_k=4, split_mode="workspace"),
                            W(64, tn, 64, tap_channels=64, stream_k=True)]
    if problem.c not in (64, 128):
        return out
    tm = 64 if problem.k <= 64 else 128
    for tn in (128, 192, 256):
        if tn % problem.c == 0 and tn > problem.c:
            out += [W(tm, tn, 64, tap_channels=problem.c, split_k=sk, split_mode="workspace") for sk in (8, 16, 24, 32, 48)]
    return out


def _compile_one(args: tuple[dict[str, Any], dict[str, Any], str]) -> str:
    os.environ.setdefault("CUTE_DSL_ARCH", "sm_90a")
    from autocutlass.kernels.hopper_conv_wgrad.compile import get_compiled
    from autocutlass.kernels.hopper_conv_wgrad.config import HopperConvWgradConfig

    cfg_d, case, cache = args
    t0 = time.time()
    try:
        get_compiled(HopperConvWgradConfig.from_dict(cfg_d), problem_of(case), Path(cache))
    except Exception as e:  # noqa: BLE001 - a probe reports and goes on
        return f"compile failed: {type(e).__name__}: {str(e)[:300]}"
    return f"compiled in {time.time() - t0:.1f}s"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", default=DEFAULT_LAYERS)
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tol", type=float, default=2e-2, help="relative Frobenius tolerance (bf16)")
    ap.add_argument("--workers", type=int, default=12, help="parallel compile processes")
    ap.add_argument("--shipped-only", action="store_true",
                    help="time the shipped database's config of each layer alone (no seeds, no extra configs)")
    ap.add_argument("--config", action="append", default=[], metavar="JSON",
                    help="a config (its dict as JSON) also timed on every layer whose check it passes (repeatable; "
                         "with --shipped-only too)")
    ap.add_argument("--interleave", action="store_true",
                    help="time every split config also with its splits' pixel blocks interleaved (``interleave``)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    import torch

    from autocutlass.kernels.hopper_conv_wgrad import HopperConvWgradFamily
    from autocutlass.kernels.hopper_conv_wgrad.config import HopperConvWgradConfig
    from autocutlass.search.timing import time_callable

    if not torch.cuda.is_available():
        print("no CUDA GPU", file=sys.stderr)
        return 2
    torch.backends.cudnn.benchmark = True
    props = torch.cuda.get_device_properties(0)
    flush = 2 * int(getattr(props, "L2_cache_size", 50 * 2**20))
    print(f"# {props.name}, torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}", flush=True)
    cache = Path(tempfile.mkdtemp(prefix="conv-wgrad-"))
    fam = HopperConvWgradFamily(cache_dir=cache, enabled=True)
    cases = {c["name"]: c for c in json.loads(SHAPES.read_text())["cases"]}

    plan: list[tuple[str, dict[str, Any], list[tuple[str, Any]]]] = []
    for name in [n for n in args.layers.split(",") if n]:
        case = cases[name]
        prob = problem_of(case)
        if fam.supports(prob) is not None:
            print(f"{name}: {fam.supports(prob)}", flush=True)
            continue
        cands: list[tuple[str, Any]] = []
        shipped = shipped_config(props.name, prob)
        if shipped is not None:
            cands.append(("shipped", HopperConvWgradConfig.from_dict(shipped)))
        if not args.shipped_only:
            cands += [("seed", cfg) for cfg in list(fam.seeds(prob))[: args.seeds]]
            cands += [("taps", cfg) for cfg in extra_configs(prob)]
        cands += [("extra", HopperConvWgradConfig.from_dict(json.loads(c))) for c in args.config]
        if args.interleave:
            cands = [v for tag, cfg in cands for v in ((tag, cfg), (tag + "-i", replace(cfg, interleave=True)))
                     if v[0] == tag or (cfg.split_k > 1 and not cfg.interleave)]
        kept, seen = [], set()
        for tag, cfg in cands:
            why = fam.check(cfg, prob)
            if why is None and cfg not in seen:
                seen.add(cfg)
                kept.append((tag, cfg))
            elif why is not None:
                print(f"{name} {cfg.short()}: {why}", flush=True)
        plan.append((name, case, kept))

    jobs = {(json.dumps(cfg.as_dict(), sort_keys=True), name): (cfg.as_dict(), case, str(cache))
            for name, case, kept in plan for _, cfg in kept}  # fmt: skip
    t0 = time.time()
    with ProcessPoolExecutor(max_workers=args.workers, mp_context=get_context("spawn")) as pool:
        for (key, name), msg in zip(jobs, pool.map(_compile_one, jobs.values()), strict=True):
            if not msg.startswith("compiled"):
                print(f"{name} {key}: {msg}", flush=True)
    print(f"# {len(jobs)} compiles in {time.time() - t0:.0f}s", flush=True)

    rows: list[dict[str, Any]] = []
    cl = torch.channels_last
    for name, case, kept in plan:
        prob = problem_of(case)
        dt = torch.bfloat16 if case["dtype"] == "bf16" else torch.float16
        gen = torch.Generator(device="cuda").manual_seed(0)
        x = torch.randn(prob.n, prob.c, prob.h, prob.w, device="cuda", generator=gen).to(dt).to(memory_format=cl)
        w = torch.randn(prob.k, prob.c, prob.r, prob.s, device="cuda", generator=gen).to(dt).to(memory_format=cl)
        geom = dict(stride=[prob.stride_h, prob.stride_w], padding=[prob.pad_h, prob.pad_w],
                    dilation=[prob.dil_h, prob.dil_w])  # fmt: skip
        y = torch.nn.functional.conv2d(x, w, None, **geom)
        dy = torch.randn(y.shape, device="cuda", generator=gen).to(dt).to(memory_format=cl)
        dw = torch.empty_like(w)

        def cudnn_call(dy: Any = dy, x: Any = x, w: Any = w, geom: dict[str, Any] = geom) -> None:
            torch.ops.aten.convolution_backward(dy, x, w, None, geom["stride"], geom["padding"], geom["dilation"],
                                                False, [0, 0], 1, [False, True, False])  # fmt: skip

        with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
            ref = torch.ops.aten.convolution_backward(
                dy.float(), x.float(), w.float(), None, geom["stride"], geom["padding"], geom["dilation"], False,
                [0, 0], 1, [False, True, False],
            )[1]  # fmt: skip
        timers: list[tuple[str, str, Any]] = [("cudnn", "cudnn (benchmark=True)", cudnn_call)]
        for tag, cfg in kept:
            try:
                runner = fam.compile(cfg, prob)
            except Exception as e:  # noqa: BLE001
                print(f"{name} {cfg.short()}: {type(e).__name__}: {str(e)[:200]}", flush=True)
                continue
            dw.fill_(float("nan"))
            runner(dy, x, dw)
            torch.cuda.synchronize()
            err = float(torch.linalg.vector_norm(dw.float() - ref) / torch.linalg.vector_norm(ref))
            if not (math.isfinite(err) and err < args.tol):
                print(f"{name} {cfg.short()}: WRONG, rel err {err:.3e}", flush=True)
                rows.append({"layer": name, "tag": tag, "config": cfg.short(), "wrong": True, "rel_err": err})
                continue

            def ours(runner: Any = runner, dy: Any = dy, x: Any = x, dw: Any = dw) -> None:
                runner(dy, x, dw)

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
    print(f"{'layer':16s} {'tag':8s} {'config':44s} {'us':>8s} {'TFLOP/s':>8s} {'x cudnn':>8s}")
    for r in rows:
        if r.get("wrong"):
            print(f"{r['layer']:16s} {r['tag']:8s} {r['config']:44s} WRONG rel err {r['rel_err']:.2e}")
        else:
            print(f"{r['layer']:16s} {r['tag']:8s} {r['config']:44s} {r['us']:8.1f} {r['tflops']:8.1f} {r['x_cudnn']:8.3f}")
    best: dict[str, tuple[float, str]] = {}
    for r in rows:
        if not r.get("wrong") and r["tag"] != "cudnn":
            best[r["layer"]] = max(best.get(r["layer"], (0.0, "")), (r["x_cudnn"], r["config"]))
    print()
    for layer, (ratio, cfg) in best.items():
        print(f"best {layer:16s} x{ratio:.3f} {cfg}")
    if args.json is not None:
        args.json.write_text(json.dumps({
            "what": "hopper_conv_wgrad configs (several taps per tile, workspace split-K) vs the shipped database's "
                    "config and cuDNN benchmark mode, conv suite wgrad layers",
            "gpu": props.name, "date": time.strftime("%Y-%m-%d"), "torch": torch.__version__,
            "cudnn": torch.backends.cudnn.version(), "rounds": args.rounds, "rows": rows,
        }, indent=1))  # fmt: skip
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())

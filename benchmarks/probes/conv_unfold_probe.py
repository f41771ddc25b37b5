"""Probe: the unfolded convolutions (``hopper_conv_unfold``, ``hopper_conv_wgrad_unfold``) on
layers whose input channels are not whole 16-byte units, against cuDNN in benchmark mode and in its
default heuristic mode, with the unfolding's own share of the time.

Per layer (the ResNet-50 stem at batch 32 and 128, a 3x3 image layer, a latent's 4 channels) and
direction (fprop, wgrad): the family's first ``--seeds`` seeds, each verified against the float32
reference on a NaN-poisoned output and then timed in interleaved rounds with cuDNN
(``autocutlass.search.timing.time_callable``, L2 flushed before every call); and the input unfold
alone (the unfolding kernel for each T, and ``lowering.unfold_input``'s torch ops for T = 1). Medians of the rounds, TFLOP/s, ratios (> 1: ours faster).

    python benchmarks/probes/conv_unfold_probe.py [--seeds 4] [--rounds 3] [--json FILE]

Its cuDNN default-mode column runs on the thread that ran benchmark mode first, so it reads benchmark
mode's plans (PyTorch caches cuDNN's plans per thread, keyed without ``cudnn.benchmark``; session 42,
``benchmarks/probes/cudnn_plan_cache.py``); ``autocutlass bench`` times each mode on a thread of its own.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from typing import Any

LAYERS = {
    "rn50-stem-b32": dict(n=32, h=224, w=224, c=3, k=64, r=7, s=7, stride_h=2, stride_w=2, pad_h=3, pad_w=3),
    "rn50-stem-b128": dict(n=128, h=224, w=224, c=3, k=64, r=7, s=7, stride_h=2, stride_w=2, pad_h=3, pad_w=3),
    "vae-in-3x3@512": dict(n=1, h=512, w=512, c=3, k=128, r=3, s=3, pad_h=1, pad_w=1),
    "unet-in-4ch@64": dict(n=8, h=64, w=64, c=4, k=320, r=3, s=3, pad_h=1, pad_w=1),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--layers", default=",".join(LAYERS))
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    import torch

    from autocutlass.kernels.hopper_conv_unfold import HopperConvUnfoldFamily, HopperConvWgradUnfoldFamily
    from autocutlass.kernels.hopper_conv_unfold.lowering import unfold_input, unfold_rows, unfolded_channels
    from autocutlass.kernels.hopper_conv_unfold.runner import _Unfolding
    from autocutlass.ops.conv import evaluation as ev
    from autocutlass.ops.conv.problem import ConvProblem
    from autocutlass.search.timing import time_callable

    dev = torch.device("cuda")
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    fams = {"fprop": HopperConvUnfoldFamily(), "wgrad": HopperConvWgradUnfoldFamily()}
    rows: list[dict[str, Any]] = []
    print(f"# {torch.cuda.get_device_name(0)}, torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}",
          file=sys.stderr)
    for name in args.layers.split(","):
        for direction, fam in fams.items():
            p = ConvProblem(direction=direction, align_x=2, align_w=2, **LAYERS[name])  # type: ignore[arg-type]
            inputs = ev.make_inputs(p, device=dev, seed=1)
            ref = ev.reference(p, inputs)
            cands: dict[str, Any] = {}
            for cfg in fam.seeds(p)[: args.seeds]:
                runner = fam.compile(cfg, p)
                ok, why = ev.verify(runner, p, inputs, ref)
                if not ok:
                    print(f"{name}/{direction} {cfg.short()}: WRONG {why}", file=sys.stderr)
                    continue
                cands[cfg.short()] = (lambda r=runner: inputs.run(r))
            x = inputs.x
            cp = unfolded_channels(p)
            cands["unfold-input-only (torch ops, T=1)"] = lambda: unfold_input(x, p.s, p.stride_w, p.pad_w, p.dil_w, cp)
            for t in unfold_rows(p):  # the unfolding kernel alone, each T
                cands[f"unfold kernel T={t}"] = (lambda u=_Unfolding(p, t, None): u.input(x))
            base = ev.torch_baseline(p, inputs)
            times: dict[str, list[float]] = {k: [] for k in (*cands, "cudnn-bench", "cudnn-default")}
            for rnd in range(args.rounds):
                order = list(cands.items())
                if rnd % 2:
                    order.reverse()
                with torch.backends.cudnn.flags(enabled=True, benchmark=True):
                    times["cudnn-bench"].append(time_callable(base, flush_bytes=2 * l2).median_ms)
                for k, fn in order:
                    times[k].append(time_callable(fn, flush_bytes=2 * l2).median_ms)
                with torch.backends.cudnn.flags(enabled=True, benchmark=False):
                    times["cudnn-default"].append(time_callable(base, flush_bytes=2 * l2).median_ms)
            med = {k: statistics.median(v) for k, v in times.items()}
            bench = med["cudnn-bench"]
            for k, ms in med.items():
                rows.append({"layer": name, "direction": direction, "problem": p.describe(), "candidate": k,
                             "ms": ms, "tflops": p.flops / ms / 1e9, "x_cudnn_bench": bench / ms,
                             "x_cudnn_default": med["cudnn-default"] / ms})
    print(f"{'layer':16} {'dir':6} {'candidate':44} {'us':>9} {'TF/s':>7} {'x bench':>8} {'x default':>9}")
    for r in rows:
        print(f"{r['layer']:16} {r['direction']:6} {r['candidate'][:44]:44} {r['ms'] * 1e3:9.1f} {r['tflops']:7.1f} "
              f"{r['x_cudnn_bench']:8.3f} {r['x_cudnn_default']:9.3f}")
    if args.json:
        meta = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "cudnn": torch.backends.cudnn.version()}
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

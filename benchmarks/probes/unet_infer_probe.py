"""Probe: inference (no grad) of conv_train_probe's UNet-style stack (Stable Diffusion resnet blocks:
GroupNorm, SiLU, 3x3 convs, strided downsamples, 1x1 projections; 13 of its 18 convs take a
GroupNorm's NCHW output) with its convs swapped to ``autocutlass.nn.Conv2d``, against the same model
in torch with ``cudnn.benchmark`` on; with an NCHW input of a channels_last conv made channels_last
for our kernels (``ops.conv.frontend.channels_last_input``, ``on``) and without (``off``: torch
serves those calls). Interleaved rounds of CUDA-event-timed forwards, medians; outputs compared.

GPU machine: python benchmarks/probes/unet_infer_probe.py [--batch 8] [--rounds 7] [--json OUT]
(policy and database from the environment, e.g. AUTOCUTLASS_POLICY=cached)
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--iters", type=int, default=10, help="forwards per timed round")
    ap.add_argument("--json", default=None)
    ns = ap.parse_args()
    os.environ.setdefault("AUTOCUTLASS_POLICY", "cached")

    import torch
    from torch import nn

    import autocutlass
    from autocutlass.ops.conv import frontend
    from conv_train_probe import _unet  # type: ignore[import-not-found]

    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    ref = _unet(nn).to(device="cuda", dtype=torch.bfloat16, memory_format=torch.channels_last).eval()
    ours_on = autocutlass.swap_conv2d_(copy.deepcopy(ref))
    ours_off = autocutlass.swap_conv2d_(copy.deepcopy(ref))  # its own conv sites, made without the copy
    x = torch.randn(ns.batch, 8, 64, 64, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    real_is_cuda = frontend._is_cuda

    def copy_on(on: bool) -> None:
        frontend._is_cuda = real_is_cuda if on else (lambda t: False)  # type: ignore[assignment]

    def timed(model: Any, on: bool) -> float:
        copy_on(on)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.no_grad():
            start.record()
            for _ in range(ns.iters):
                model(x)
            end.record()
        end.synchronize()
        return start.elapsed_time(end) / ns.iters

    sides = {"torch": (ref, True), "ours nchw-copy on": (ours_on, True), "ours nchw-copy off": (ours_off, False)}
    with torch.no_grad():
        want = ref(x).float()
        errs = {}
        for name, (m, on) in sides.items():
            copy_on(on)
            for _ in range(3):  # warm-up: loads, compiles, cuDNN's benchmark
                y = m(x)
            errs[name] = float((y.float() - want).norm() / want.norm())
    ms: dict[str, list[float]] = {k: [] for k in sides}
    for r in range(ns.rounds):
        order = list(sides) if r % 2 == 0 else list(sides)[::-1]
        for k in order:
            ms[k].append(timed(*sides[k]))
    copy_on(True)
    med = {k: statistics.median(v) for k, v in ms.items()}
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
           "batch": ns.batch, "ms_per_forward": med, "rounds_ms": ms, "rel_err_vs_torch": errs,
           "speedup_vs_torch": {k: med["torch"] / v for k, v in med.items() if k != "torch"},
           "stats": autocutlass.stats().as_dict()}  # fmt: skip
    print(json.dumps(out, indent=1))
    if ns.json:
        Path(ns.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Where a ResNet-50 training step on autocutlass spends host time (GPU machine).

The profiled b128 step of session 12 showed ours at 34.4 ms of GPU kernel time against torch's 32.7
but 45.4 ms of wall time against 34.4: the GPU waits on the host. This probe runs ``--steps``
steps of the swapped model (policy ``cached``) under (a) cProfile, printing the costliest Python
functions by own and cumulative time, and (b) torch.profiler's CPU view, printing the CUDA runtime
calls (synchronisations, allocations, copies) by count and time, each per step, then the wall time
per step with and without a ``torch.cuda.synchronize`` fence.

GPU machine: python benchmarks/probes/conv_train_host_probe.py [--model resnet50|unet] [--batch 128] [--steps 3]
(``unet``: conv_train_probe's UNet-style block stack, ``--batch`` 8 by default there.)
"""

from __future__ import annotations

import argparse
import copy
import cProfile
import io
import os
import pstats
import sys
import time
from pathlib import Path
from typing import Any


def training_pair(model: str, batch: int = 0) -> tuple[Any, int]:
    """(step, batch): ``step(side)`` runs one SGD training step of ``model`` ('resnet50' or 'unet',
    conv_train_probe's, bf16 channels_last, ``batch`` 0: 128 / 8) on side 'autocutlass' (every conv
    of 16-byte channel rows swapped) or 'torch' (cudnn.benchmark on), each side warmed up by three."""
    import torch
    from conv_train_probe import _resnet50, _unet  # type: ignore[import-not-found]
    from torch import nn

    import autocutlass

    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    build, shape = (_resnet50, (3, 224, 224)) if model == "resnet50" else (_unet, (8, 64, 64))
    batch = batch or (128 if model == "resnet50" else 8)
    ref = build(nn).to(device="cuda", dtype=torch.bfloat16, memory_format=torch.channels_last)

    def keep(m: object, fqn: str) -> bool:
        return isinstance(m, nn.Conv2d) and m.groups == 1 and m.in_channels % 8 == 0 and m.out_channels % 8 == 0

    ours = autocutlass.swap_conv2d_(copy.deepcopy(ref), keep)
    x = torch.randn(batch, *shape, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    sides = {"autocutlass": ours, "torch": ref}
    opts = {k: torch.optim.SGD(m.parameters(), lr=1e-3, momentum=0.9) for k, m in sides.items()}

    def step(k: str) -> None:
        opts[k].zero_grad(set_to_none=True)
        sides[k](x).float().square().mean().backward()
        opts[k].step()

    for k in sides:
        for _ in range(3):
            step(k)
    return step, batch


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=["resnet50", "unet"], default="resnet50")
    ap.add_argument("--batch", type=int, default=0, help="default 128 (resnet50) / 8 (unet)")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--top", type=int, default=35)
    ap.add_argument("--mixed-sites", choices=["ours", "torch"], default=None,
                    help="as conv_train_probe's: the conv sites' training rule to compare (default: the library's)")
    ap.add_argument("--no-cprofile", action="store_true", help="only the host and wall times per step")
    ns = ap.parse_args()
    os.environ.setdefault("AUTOCUTLASS_POLICY", "cached")
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import torch
    from torch.profiler import ProfilerActivity, profile

    import autocutlass

    if ns.mixed_sites is not None:
        from conv_train_probe import _site_rule  # type: ignore[import-not-found]

        _site_rule(ns.mixed_sites)

    step, _ = training_pair(ns.model, ns.batch)
    sides = ("autocutlass", "torch")
    torch.cuda.synchronize()
    for k in sides:
        t0 = time.perf_counter()
        for _ in range(ns.steps):
            step(k)
        host = time.perf_counter() - t0
        torch.cuda.synchronize()
        wall = time.perf_counter() - t0
        print(f"{k}: host {host / ns.steps * 1e3:.1f} ms per step (until the last launch), wall {wall / ns.steps * 1e3:.1f} ms")

    if ns.no_cprofile:
        print(autocutlass.stats().as_dict())
        return 0
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(ns.steps):
        step("autocutlass")
    torch.cuda.synchronize()
    prof.disable()
    for key in ("tottime", "cumulative"):
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats(key).print_stats(ns.top)
        print(f"# cProfile, {ns.steps} steps, by {key}")
        print("\n".join(line[:190] for line in s.getvalue().splitlines()[6:]))

    for k in sides:
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as tp:
            for _ in range(ns.steps):
                step(k)
            torch.cuda.synchronize()
        rows = [e for e in tp.key_averages() if e.key.startswith("cuda") or e.key.startswith("cu")]
        rows.sort(key=lambda e: -e.cpu_time_total)
        print(f"# {k}: CUDA runtime/driver calls per step (count, host ms)")
        for e in rows[:15]:
            print(f"  {e.count / ns.steps:8.1f} {e.cpu_time_total / 1e3 / ns.steps:8.3f}  {e.key}")
    print(autocutlass.stats().as_dict())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

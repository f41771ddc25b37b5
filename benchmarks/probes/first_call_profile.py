"""Probe: where a fresh process's first forward spends its time, from the shipped databases.

torchvision ResNet-50 (random init, bf16, channels_last, batch ``--batch``), every servable conv
swapped (``swap_conv2d_``), policy ``cached``; the first forward runs under cProfile and the
functions with the most cumulative time are printed (database lookups, planning, runner
construction, the kernels' loads through TVM-FFI, their first launches). Run it twice: the first
process fills the kernel cache (objects from the shipped archive, linked), the second shows a
warm cache's first call.

GPU machine: python benchmarks/probes/first_call_profile.py [--batch 128] [--top 40]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--top", type=int, default=40)
    ns = ap.parse_args()
    import torch
    import torchvision

    import autocutlass

    with torch.device("cuda"):
        model = torchvision.models.resnet50(weights=None).to(torch.bfloat16).to(memory_format=torch.channels_last).eval()
    autocutlass.swap_conv2d_(model)
    x = torch.randn(ns.batch, 3, 224, 224, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    torch.cuda.synchronize()
    prof = cProfile.Profile()
    t = time.perf_counter()
    with torch.no_grad():
        prof.enable()
        model(x)
        torch.cuda.synchronize()
        prof.disable()
    first = time.perf_counter() - t
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(ns.top)
    print(f"first forward {first:.3f} s (under cProfile); stats {autocutlass.stats().as_dict()}")
    print("\n".join(s.getvalue().splitlines()[: ns.top + 12]))
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(15)
    print("\n".join(s.getvalue().splitlines()[:30]))
    return 0


if __name__ == "__main__":
    sys.exit(main())

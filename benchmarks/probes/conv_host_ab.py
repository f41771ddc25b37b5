"""Host cost of a convnet training step on autocutlass, conv sites on and off (GPU machine).

At a small batch (ResNet-50 b2, the UNet-style stack b1) a training step's GPU work is short and the
step's wall time is its host time. One process times, interleaved: torch (``cudnn.benchmark``), ours
with the modules' conv sites (``autocutlass.nn.conv_site``), and ours with every module call going
through ``autocutlass.conv2d`` (sites off: the class method swapped between rounds), ``--rounds``
rounds of ``--steps`` steps each (forward, backward, SGD), CUDA-synchronised per round, medians.
The same models and policy as ``conv_train_probe.py`` (``cached``: the shipped database; these
small batches are untuned problems, so most directions fall back to torch or run the default
config: the host paths of both kinds).

    python benchmarks/probes/conv_host_ab.py [--json OUT.json]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--steps", type=int, default=10)
    ns = ap.parse_args()
    os.environ.setdefault("AUTOCUTLASS_POLICY", "cached")
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import torch
    from conv_train_probe import _resnet50, _unet  # type: ignore[import-not-found]
    from torch import nn

    import autocutlass
    from autocutlass.nn import conv_site

    torch.backends.cudnn.benchmark = True
    with_sites = conv_site.ConvHits.conv2d

    def without_sites(self: Any, x: Any, w: Any, b: Any, *conv: Any) -> Any:
        return autocutlass.conv2d(x, w, b, *conv)

    def keep(m: object, fqn: str) -> bool:
        return isinstance(m, nn.Conv2d) and m.groups == 1 and m.in_channels % 8 == 0 and m.out_channels % 8 == 0

    out: dict[str, Any] = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "models": {}}
    for name, build, shape in (("resnet50", _resnet50, (2, 3, 224, 224)), ("unet", _unet, (1, 8, 64, 64))):
        torch.manual_seed(0)
        ref = build(nn).to(device="cuda", dtype=torch.bfloat16, memory_format=torch.channels_last)
        ours = autocutlass.swap_conv2d_(copy.deepcopy(ref), keep)
        x = torch.randn(shape, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
        models = {"torch": ref, "sites": ours, "no sites": ours}
        opts = {k: torch.optim.SGD(m.parameters(), lr=1e-4, momentum=0.9) for k, m in models.items()}

        def step(k: str) -> None:
            conv_site.ConvHits.conv2d = without_sites if k == "no sites" else with_sites  # type: ignore[method-assign]
            opts[k].zero_grad(set_to_none=True)
            models[k](x).float().square().mean().backward()
            opts[k].step()

        for k in models:
            for _ in range(5):
                step(k)
        torch.cuda.synchronize()
        times: dict[str, list[float]] = {k: [] for k in models}
        order = list(models)
        for r in range(ns.rounds):
            for k in order if r % 2 == 0 else order[::-1]:
                t0 = time.perf_counter()
                for _ in range(ns.steps):
                    step(k)
                torch.cuda.synchronize()
                times[k].append((time.perf_counter() - t0) / ns.steps * 1e3)
        conv_site.ConvHits.conv2d = with_sites  # type: ignore[method-assign]
        med = {k: statistics.median(v) for k, v in times.items()}
        out["models"][name] = {"input": list(shape), "ms_per_step": med, "rounds_ms": times}
        print(f"{name} {shape}: " + "  ".join(f"{k} {v:.2f} ms" for k, v in med.items())
              + f"  (sites: x{med['torch'] / med['sites']:.3f} vs torch, no sites x{med['torch'] / med['no sites']:.3f})")
    out["stats"] = autocutlass.stats().as_dict()
    if ns.json:
        Path(ns.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Probe (no GPU): host time of an ``autocutlass.nn.Conv2d`` training call (forward + backward) and
inference call against ``nn.Conv2d``, on the test rig's dispatcher (``tests/_dispatch_fakes``).

Two cases, each bf16 channels_last, batch 1, 4x4 pixels (the convolution itself costs little):

* ``kernel``: a 1x1 conv with 64 channels, which the rig's fake family serves in all three
  directions (pointwise GEMM lowerings) with a runner that launches nothing: our route's host cost;
* ``torch``: a 3x3 conv, which no fake family serves: every direction falls back to torch;
* ``mixed``: the 1x1 conv with the fake family serving the forward only (torch computes the
  backward), timed with our forward kept in the site's Python autograd Function (``site``: a
  vendor margin above ``conv_site.NODE_HOST_MS``) and run as ``F.conv2d`` (``site-torch``: below
  it): what the site's node costs the host beyond torch's own, the basis of ``NODE_HOST_MS``.

Each is timed through the module (its conv site, ``autocutlass.nn.conv_site``) and through
``autocutlass.conv2d`` (the call the module made before conv sites), interleaved with
``nn.Conv2d``, medians of 7 rounds.

    python benchmarks/probes/conv_host_cpu_probe.py
"""

from __future__ import annotations

import copy
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
from _dispatch_fakes import make_rig  # noqa: E402
from nn_host_cpu_probe import bench  # noqa: E402  (warm-up, then microseconds per call)

import autocutlass  # noqa: E402
from autocutlass import api  # noqa: E402
from autocutlass.settings import Policy  # noqa: E402


def nop_gemm(a: Any, b: Any, d: Any, **_: Any) -> None:
    return None


def main() -> int:
    rig = make_rig(Policy.TUNE)

    def compile_nop(config: Any, problem: Any) -> Any:
        lowering = getattr(problem, "gemm_lowering", None)
        return lowering().runner(nop_gemm) if lowering is not None else nop_gemm

    rig.family.compile = compile_nop
    api._default = rig.dispatcher
    cl = torch.channels_last
    from autocutlass.nn import conv_site
    from autocutlass.ops.conv.problem import ConvDirection

    serves_all = rig.family.supports

    def fprop_only(problem: Any) -> str | None:
        if getattr(problem, "direction", ConvDirection.FPROP) is not ConvDirection.FPROP:
            return "fprop only (the probe's mixed case)"
        return serves_all(problem)

    for case, (c, r) in {"kernel": (64, 1), "torch": (8, 3), "mixed": (64, 1)}.items():
        rig.family.supports = fprop_only if case == "mixed" else serves_all
        rig.dispatcher.clear()
        torch.manual_seed(0)
        ref = nn.Conv2d(c, c, r, padding=r // 2, bias=True).to(torch.bfloat16).to(memory_format=cl)
        mod = autocutlass.nn.Conv2d.from_conv2d(copy.deepcopy(ref))
        x = torch.randn(1, c, 4, 4, dtype=torch.bfloat16).to(memory_format=cl).requires_grad_()
        gy = torch.randn(1, c, 4, 4, dtype=torch.bfloat16).to(memory_format=cl)

        def via_api(x: Any, m: Any = mod) -> Any:
            return autocutlass.conv2d(x, m.weight, m.bias, m.stride, m.padding, m.dilation, m.groups)

        sides: dict[str, Any] = {"nn.Conv2d": ref, "site": mod, "conv2d": via_api}
        if case == "mixed":
            twin = autocutlass.nn.Conv2d.from_conv2d(copy.deepcopy(ref))
            margins = {id(mod): 1.0, id(twin): 0.0}  # ms: above and below NODE_HOST_MS

            def sided(m: Any, margin: float) -> Any:
                def call(x: Any) -> Any:
                    conv_site.vendor_margin_of = lambda entry: margin  # read when the site is made
                    return m(x)

                return call

            sides = {"nn.Conv2d": ref, "site": sided(mod, margins[id(mod)]), "site-torch": sided(twin, margins[id(twin)])}
        for label, grad in (("train", True), ("infer", False)):
            res: dict[str, list[float]] = {k: [] for k in sides}

            def step(f: Any, grad: bool = grad) -> None:
                if grad:
                    f(x).backward(gy)
                else:
                    with torch.no_grad():
                        f(x)

            for rnd in range(7):
                for k, f in list(sides.items())[:: 1 if rnd % 2 == 0 else -1]:
                    res[k].append(bench(lambda f=f: step(f), 1500))
            med = {k: statistics.median(v) for k, v in res.items()}
            base = med["nn.Conv2d"]
            print(f"{case:6s} {label}: " + "  ".join(f"{k} {v:6.1f} us (+{v - base:5.1f})" for k, v in med.items()))
    print(autocutlass.stats().as_dict())
    return 0


if __name__ == "__main__":
    sys.exit(main())

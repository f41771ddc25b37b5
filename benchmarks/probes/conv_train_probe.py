"""Training steps of convnets with every convolution through autocutlass (forward, dgrad, wgrad)
against the same model in torch with ``torch.backends.cudnn.benchmark = True``.

Models (random init, bf16, channels_last, built on the GPU; no torchvision needed):

* ``resnet50``: ResNet-50 v1.5 (torchvision's layout: 7x7 stem, bottlenecks [3, 4, 6, 3] with the
  stride on the 3x3, BatchNorm, ReLU), batch ``--batch`` (128) x 3 x 224 x 224, a 1000-way head;
* ``unet``: a UNet-style stack of Stable Diffusion resnet blocks (GroupNorm, SiLU, 3x3 conv,
  residual; 320 channels at 64x64, 640 at 32x32, 1280 at 16x16, with 3x3 stride-2 downsamplers and
  1x1 channel projections), batch ``--unet-batch`` (8).

``ours`` is a deep copy with every ``nn.Conv2d`` of 16-byte channel rows and one group swapped
for ``autocutlass.nn.Conv2d`` (``--swap pointwise`` swaps only the pointwise ones, the library's
default filter); the stem (3 input channels) is swapped too (its forward and weight gradient run on
the unfolded convolution families, ``kernels.hopper_conv_unfold``) unless ``--stem torch``.

(a) **Gradients** of one step (the same input and loss), ours against torch: the relative
Frobenius error of every parameter's gradient (the largest and the median are reported).
(b) **Time per training step** (forward, backward, SGD with momentum), ``--rounds`` interleaved
rounds of ``--steps`` steps each (the order reversed every other round), CUDA-event timed,
medians; images/s and the ratio.

The miss policy is ``AUTOCUTLASS_POLICY`` (default here ``cached``: no tuning inside the timed
steps; tune the suite first, or run once with ``tune``); the JSON records the dispatcher's
counters (database hits, misses recorded, compiles, fallbacks) and the fallbacks' reasons, so a
layer direction served by cuDNN is visible. ``AUTOCUTLASS_CONV_WGRAD=1`` turns the implicit-GEMM
wgrad kernel on.

``--compile reduce-overhead`` times both sides' steps through ``torch.compile`` with CUDA graphs
(the gradient check stays eager): neither side's host time shows, so a host-bound small batch reads
its GPU time.

GPU machine:
    AUTOCUTLASS_POLICY=cached python benchmarks/probes/conv_train_probe.py --json OUT.json
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import os
import statistics
import sys
import time
from typing import Any


def _resnet50(nn: Any) -> Any:
    class Bottleneck(nn.Module):
        def __init__(self, cin: int, width: int, stride: int) -> None:
            super().__init__()
            cout = width * 4
            self.conv1, self.bn1 = nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width)
            self.conv2, self.bn2 = nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width)
            self.conv3, self.bn3 = nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout)
            self.relu = nn.ReLU(inplace=True)
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x: Any) -> Any:
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.relu(self.bn2(self.conv2(out)))
            out = self.bn3(self.conv3(out))
            return self.relu(out + (x if self.down is None else self.down(x)))

    layers: list[Any] = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
                         nn.MaxPool2d(3, 2, 1)]  # fmt: skip
    cin = 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for i in range(blocks):
            layers.append(Bottleneck(cin, width, stride if i == 0 else 1))
            cin = width * 4
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, 1000)]
    return nn.Sequential(*layers)


def _unet(nn: Any) -> Any:
    class ResBlock(nn.Module):
        def __init__(self, cin: int, cout: int) -> None:
            super().__init__()
            self.n1, self.c1 = nn.GroupNorm(32, cin), nn.Conv2d(cin, cout, 3, padding=1)
            self.n2, self.c2 = nn.GroupNorm(32, cout), nn.Conv2d(cout, cout, 3, padding=1)
            self.act = nn.SiLU()
            self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else None

        def forward(self, x: Any) -> Any:
            h = self.c1(self.act(self.n1(x)))
            h = self.c2(self.act(self.n2(h)))
            return h + (x if self.skip is None else self.skip(x))

    return nn.Sequential(
        nn.Conv2d(8, 320, 3, padding=1), ResBlock(320, 320), ResBlock(320, 320),
        nn.Conv2d(320, 320, 3, 2, 1), ResBlock(320, 640), ResBlock(640, 640),
        nn.Conv2d(640, 640, 3, 2, 1), ResBlock(640, 1280), ResBlock(1280, 1280),
        nn.GroupNorm(32, 1280), nn.SiLU(), nn.Conv2d(1280, 8, 3, padding=1),
    )  # fmt: skip


def _node_host_ms() -> float:
    from autocutlass.nn import conv_site

    return conv_site.NODE_HOST_MS


def _site_rule(mode: str) -> None:
    """The conv sites' training rule for a comparison: 'ours' the rule before session 22 (our
    kernels wherever they serve: no vendor margins read, so only layers torch serves whole run
    F.conv2d), 'torch' every site whose kernels have vendor margins on F.conv2d (NODE_HOST_MS
    infinite); otherwise the library's (margins summed against NODE_HOST_MS)."""
    import math

    from autocutlass import torch_ops
    from autocutlass.nn import conv_site

    if mode == "ours":
        torch_ops.vendor_margin_of = lambda entry: None  # type: ignore[assignment]
    elif mode == "torch":
        conv_site.NODE_HOST_MS = math.inf


def _profile(torch: Any, run: Any, top: int, steps: int) -> list[dict[str, Any]]:
    """One call of ``run`` (``--steps`` training steps) under torch.profiler: the GPU time per kernel
    name, per step, costliest first, after a TOTAL row."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        run()
    torch.cuda.synchronize()
    per: dict[str, list[float]] = {}
    for ev in prof.key_averages():
        t = getattr(ev, "device_time_total", None) or getattr(ev, "cuda_time_total", 0.0)
        if t and ev.count:
            per[ev.key] = [t / 1e3, ev.count]
    rows = sorted(per.items(), key=lambda kv: -kv[1][0])
    total = sum(v[0] for _, v in rows)
    out = [{"kernel": "TOTAL", "ms": round(total / steps, 3), "calls": sum(int(v[1]) for _, v in rows) // steps}]
    out += [{"kernel": k, "ms": round(v[0] / steps, 3), "calls": int(v[1]) // steps} for k, v in rows[:top]]
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--models", default="resnet50,unet")
    ap.add_argument("--batch", type=int, default=128, help="ResNet-50 batch")
    ap.add_argument("--unet-batch", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=5, help="training steps per timed round")
    ap.add_argument("--swap", choices=["all", "pointwise"], default="all")
    ap.add_argument("--stem", choices=["ours", "torch"], default="ours",
                    help="with --swap all: swap the 3-channel stem too (ours) or leave it on cuDNN (torch)")
    ap.add_argument("--sites", choices=["on", "off"], default="on",
                    help="off: the modules call autocutlass.conv2d each time (no conv sites, autocutlass.nn.conv_site)")
    ap.add_argument("--torch-wgrad-layers", choices=["torch", "split"], default="torch",
                    help="a site whose forward and wgrad torch serves: 'torch' runs F.conv2d (the default since "
                         "session 21); 'split' keeps our dgrad beside torch's wgrad (before)")
    ap.add_argument("--mixed-sites", choices=["ours", "torch"], default=None,
                    help="conv sites in training: 'ours' runs our kernels wherever they serve (the rule before "
                         "session 22), 'torch' runs F.conv2d wherever our kernels have vendor margins; default: "
                         "the library's rule (their margins summed against conv_site.NODE_HOST_MS)")
    ap.add_argument("--nchw-copy", choices=["on", "off"], default="on",
                    help="off: an NCHW input of a channels_last conv is not made channels_last for our kernels "
                         "(ops.conv.frontend.channels_last_input; torch serves such calls, the rule before session 31)")
    ap.add_argument("--compile", choices=["off", "default", "reduce-overhead"], default="off",
                    help="time the steps of torch.compile'd models (both sides; 'reduce-overhead': CUDA graphs, "
                         "so that neither side's host time shows); the gradient check stays eager")
    ap.add_argument("--no-gc", action="store_true", help="disable Python's garbage collector during the timed rounds")
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="after timing, profile one step per side and print its N costliest GPU kernels")
    ns = ap.parse_args()
    os.environ.setdefault("AUTOCUTLASS_POLICY", "cached")

    import torch
    from torch import nn

    import autocutlass
    from autocutlass import settings
    from autocutlass.kernels import source_hashes

    torch.backends.cudnn.benchmark = True
    if ns.sites == "off":
        from autocutlass.nn import conv_site

        def plain(self: Any, x: Any, w: Any, b: Any, *conv: Any) -> Any:
            return autocutlass.conv2d(x, w, b, *conv)

        conv_site.ConvHits.conv2d = plain  # type: ignore[method-assign]
    if ns.mixed_sites is not None:
        _site_rule(ns.mixed_sites)
    if ns.nchw_copy == "off":
        from autocutlass.ops.conv import frontend

        frontend._is_cuda = lambda t: False  # type: ignore[assignment]
    if ns.torch_wgrad_layers == "split":
        from autocutlass import torch_ops
        from autocutlass.dispatch import torch_served

        def every_direction(dgrad: Any, wgrad: Any) -> bool:  # the rule before session 21: torch serves every wanted direction
            return all(torch_served(e) is not None for e in (dgrad, wgrad) if e is not None)

        torch_ops.torch_computes_backward = every_direction  # type: ignore[assignment]
    messages: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            messages.append(record.getMessage())

    logging.getLogger("autocutlass").addHandler(Collect(logging.WARNING))
    s = settings.current()
    result: dict[str, Any] = {
        "device": torch.cuda.get_device_name(), "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
        "policy": s.policy.value, "db": str(s.db_url), "conv_wgrad_kernel": s.conv_wgrad_kernel,
        "kernel_source_hashes": source_hashes(), "swap": ns.swap, "stem": ns.stem, "sites": ns.sites,
        "torch_wgrad_layers": ns.torch_wgrad_layers, "nchw_copy": ns.nchw_copy, "compile": ns.compile, "site_node_host_ms": _node_host_ms(), "models": {},
    }  # fmt: skip

    def keep(m: Any, fqn: str) -> bool:
        if ns.swap == "pointwise":
            return autocutlass.nn.servable_conv2d(m, fqn)
        if isinstance(m, nn.Conv2d) and m.in_channels % 8 and ns.stem == "ours":
            return autocutlass.nn.servable_conv2d(m, fqn)  # the stem, through its row-unfolded input
        return isinstance(m, nn.Conv2d) and m.groups == 1 and m.in_channels % 8 == 0 and m.out_channels % 8 == 0

    for name in ns.models.split(","):
        torch.manual_seed(0)
        if name == "resnet50":
            ref = _resnet50(nn)
            shape, batch = (ns.batch, 3, 224, 224), ns.batch
        else:
            ref = _unet(nn)
            shape, batch = (ns.unet_batch, 8, 64, 64), ns.unet_batch
        ref = ref.to(device="cuda", dtype=torch.bfloat16, memory_format=torch.channels_last)
        ours = autocutlass.swap_conv2d_(copy.deepcopy(ref), keep)
        swapped = sum(type(m) is autocutlass.nn.Conv2d for m in ours.modules())
        x = torch.randn(shape, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)

        def loss_of(model: Any, x: Any = x) -> Any:
            return model(x).float().square().mean()

        # (a) gradients of one step (warm-up: compiles and loads our kernels)
        before = autocutlass.stats().as_dict()
        t0 = time.perf_counter()
        loss_of(ours).backward()
        torch.cuda.synchronize()
        first_s = time.perf_counter() - t0
        loss_of(ref).backward()
        errs = []
        for (pname, p), q in zip(ours.named_parameters(), ref.parameters(), strict=True):
            if p.grad is not None and q.grad is not None:
                e = float((p.grad.float() - q.grad.float()).norm() / q.grad.float().norm().clamp_min(1e-30))
                errs.append((e, pname))
        errs.sort()
        # the same step in float32 (torch): how far each bf16 side is from it, per parameter
        ref32 = copy.deepcopy(ref).float()
        ref32.zero_grad(set_to_none=True)
        loss_of(ref32, x.float()).backward()
        vs32: dict[str, list[float]] = {"ours": [], "torch": []}
        for (pname, p), q, r in zip(ours.named_parameters(), ref.parameters(), ref32.parameters(), strict=True):
            if p.grad is None or q.grad is None or r.grad is None:
                continue
            g = r.grad.float()
            for side, t in (("ours", p.grad), ("torch", q.grad)):
                vs32[side].append(float((t.float() - g).norm() / g.norm().clamp_min(1e-30)))
        del ref32
        torch.cuda.empty_cache()
        after_warmup = autocutlass.stats().as_dict()

        # (b) time per step
        def stepper(model: Any) -> Any:
            opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
            forward = model if ns.compile == "off" else torch.compile(model, mode=ns.compile)

            def run() -> float:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                t0 = time.perf_counter()
                for _ in range(ns.steps):
                    opt.zero_grad(set_to_none=True)
                    loss_of(forward).backward()
                    opt.step()
                end.record()
                host_ms[id(model)].append((time.perf_counter() - t0) * 1e3 / ns.steps)  # enqueue time, no sync
                end.synchronize()
                return start.elapsed_time(end) / ns.steps

            return run

        host_ms: dict[int, list[float]] = {id(ours): [], id(ref): []}
        sides = {"autocutlass": stepper(ours), "torch": stepper(ref)}
        for f in sides.values():
            f()  # warm-up: the optimizer's state, cuDNN's benchmark of the new shapes
            if ns.compile != "off":
                f()  # cudagraph trees record on a later call than the first
        ms: dict[str, list[float]] = {k: [] for k in sides}
        mem_keys = ("num_device_alloc", "num_device_free", "num_alloc_retries")
        mem: dict[str, dict[str, int]] = {k: dict.fromkeys(mem_keys, 0) for k in sides}
        if ns.no_gc:
            import gc

            gc.collect()
            gc.disable()
        for r in range(ns.rounds):
            order = list(sides) if r % 2 == 0 else list(sides)[::-1]
            for k in order:
                m0 = torch.cuda.memory_stats()
                ms[k].append(sides[k]())
                m1 = torch.cuda.memory_stats()
                for key in mem_keys:  # cudaMalloc / cudaFree inside timed steps stall the stream
                    mem[k][key] += int(m1.get(key, 0) - m0.get(key, 0))
        print(f"# {name}: allocator calls inside the timed steps {mem}; peak reserved "
              f"{torch.cuda.max_memory_reserved() / 2**30:.1f} GiB", file=sys.stderr)  # fmt: skip
        med = {k: statistics.median(v) for k, v in ms.items()}
        profiles = {k: _profile(torch, f, ns.profile, ns.steps) for k, f in sides.items()} if ns.profile else {}
        result["models"][name] = {
            "batch": batch, "input": list(shape), "convs_swapped": swapped,
            "grad_rel_err_max": errs[-1] if errs else None, "grad_rel_err_median": errs[len(errs) // 2][0] if errs else None,
            "grad_rel_err_vs_fp32": {k: {"max": max(v), "median": statistics.median(v)} for k, v in vs32.items() if v},
            "first_step_s": first_s, "ms_per_step": med, "rounds_ms": ms,
            "host_ms_per_step": {k: statistics.median(host_ms[id(m)][1:]) for k, m in (("autocutlass", ours), ("torch", ref))},
            "images_per_s": {k: batch / (v * 1e-3) for k, v in med.items()},
            "speedup_vs_torch": med["torch"] / med["autocutlass"],
            "stats_warmup": {k: after_warmup[k] - before[k] for k in before},
            "stats_after": autocutlass.stats().as_dict(), "profile": profiles, "allocator": mem,
        }  # fmt: skip
        for side, rows in profiles.items():
            print(f"# {name} {side}: GPU kernels of one step, costliest first (ms, calls)", file=sys.stderr)
            for row in rows:
                print(f"  {row['ms']:8.3f} {row['calls']:5d}  {row['kernel'][:150]}", file=sys.stderr)
        print(f"{name}: {med['autocutlass']:.1f} ms vs torch {med['torch']:.1f} ms per step "
              f"(x{med['torch'] / med['autocutlass']:.3f}); worst grad rel err {errs[-1] if errs else None}; "
              f"vs float32: {result['models'][name]['grad_rel_err_vs_fp32']}", file=sys.stderr)  # fmt: skip
        del ours, ref, x
        torch.cuda.empty_cache()
    result["fallback_reasons"] = sorted({m for m in messages if "served by torch" in m})
    text = json.dumps(result, indent=1, default=str)
    if ns.json:
        with open(ns.json, "w") as fh:
            fh.write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

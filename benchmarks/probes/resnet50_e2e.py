"""torchvision ResNet-50 inference with its convolutions on autocutlass (``swap_conv2d_``), against
the same model in torch with ``cudnn.benchmark = True`` (and, reported too, PyTorch's default
heuristic mode).

The model: ``torchvision.models.resnet50(weights=None)`` (random init, no download), bf16,
channels_last, eval, batch ``--batch`` (128) of 224x224 images. ``ours`` is a deep copy with every
``nn.Conv2d`` that ``autocutlass.nn.servable_conv2d`` accepts swapped (the stem, 3 input channels,
among them since session 27: its forward runs on ``hopper_conv_unfold``, through its row-unfolded
input). Measured:

* logits of ours against torch's (relative Frobenius error; the same weights and input);
* images/s: ``--rounds`` interleaved rounds of ``--iters`` forwards each (order reversed every other
  round), CUDA events, medians; torch with cudnn.benchmark on (after its search) and off;
* the first forward of a fresh process (``--first-call``): a child process that imports torch (and
  autocutlass), builds the model and times its first forward, for ours (database warm, kernel
  cache as it is) and for torch with cudnn.benchmark on (its per-process search) and off.

With ``--fuse-bn`` two more variants run: ``ours-fused`` (``autocutlass.nn.fuse_conv_bn``: BatchNorm
folded into the convolutions, the residual adds and ReLUs in their epilogues) and ``torch-fused``
(torch's own eval folding, ``torch.fx.experimental.optimization.fuse``: conv+BN folded, the adds and
ReLUs separate), with ratios against both. ``--tune-misses N`` then tunes the problems the warm-up
missed (``autocutlass tune --pending --trials N`` on the same database, e.g. the fused
convolutions' epilogues) before timing.

The miss policy is ``AUTOCUTLASS_POLICY`` (default here ``cached``: a miss is served by the nearest
stored record or the family's default config and recorded for ``autocutlass tune --pending``).
GPU machine: ``python benchmarks/probes/resnet50_e2e.py --json OUT.json``
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def _rel(x: Any, ref: Any) -> float:
    ref = ref.float()
    return float((x.float() - ref).norm() / ref.norm().clamp_min(1e-30))


def build(torch: Any, batch: int) -> tuple[Any, Any]:
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet50(weights=None).to(device="cuda", dtype=torch.bfloat16)
    model = model.to(memory_format=torch.channels_last).eval()
    x = torch.randn(batch, 3, 224, 224, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    return model, x


def first_call(which: str, batch: int) -> dict[str, Any]:
    """In this (fresh) process: imports, model build and the first forward, timed."""
    t0 = time.perf_counter()
    import torch

    t_torch = time.perf_counter()
    if which == "ours":
        import autocutlass
    t_import = time.perf_counter()
    torch.backends.cudnn.benchmark = which == "cudnn-benchmark"
    model, x = build(torch, batch)
    if which == "ours":
        model = autocutlass.swap_conv2d_(model)
    torch.cuda.synchronize()
    t1 = time.perf_counter()
    with torch.no_grad():
        model(x)
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    with torch.no_grad():
        model(x)
    torch.cuda.synchronize()
    t3 = time.perf_counter()
    out = {"which": which, "import_torch_s": round(t_torch - t0, 3), "import_autocutlass_s": round(t_import - t_torch, 3),
           "first_forward_s": round(t2 - t1, 3), "second_forward_s": round(t3 - t2, 4)}  # fmt: skip
    if which == "ours":
        out["stats"] = autocutlass.stats().as_dict()
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--first-call", action="store_true", help="also time the first forward of fresh processes")
    ap.add_argument("--fuse-bn", action="store_true", help="also time fuse_conv_bn and torch's own conv-BN folding")
    ap.add_argument("--tune-misses", type=int, default=0, metavar="N",
                    help="tune the warm-up's misses (N trials each) before timing")  # fmt: skip
    ap.add_argument("--child", choices=["ours", "cudnn-benchmark", "cudnn-default"], help=argparse.SUPPRESS)
    ns = ap.parse_args()
    os.environ.setdefault("AUTOCUTLASS_POLICY", "cached")
    if ns.child:
        print(json.dumps(first_call(ns.child, ns.batch)))
        return 0

    import torch
    import torchvision

    import autocutlass
    from autocutlass import settings

    s = settings.current()
    res: dict[str, Any] = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                           "torchvision": torchvision.__version__, "policy": s.policy.value, "db": str(s.db_url),
                           "batch": ns.batch, "date": time.strftime("%Y-%m-%d")}  # fmt: skip
    ref, x = build(torch, ns.batch)
    ours = autocutlass.swap_conv2d_(copy.deepcopy(ref))
    convs = [m for m in ref.modules() if isinstance(m, torch.nn.Conv2d)]
    swapped = sum(type(m) is autocutlass.nn.Conv2d for m in ours.modules())
    res["convs"], res["swapped"] = len(convs), swapped
    print(f"# {res['device']}: {swapped} of {len(convs)} convs swapped; policy {res['policy']}", flush=True)

    torch.backends.cudnn.benchmark = True
    with torch.no_grad():
        out_ref = ref(x)
        out = ours(x)  # the first call serves (and records misses)
        out = ours(x)
        res["rel_err_logits"] = _rel(out, out_ref)
        res["finite"] = bool(torch.isfinite(out).all())
    runs = {"ours": (ours, True), "torch-benchmark": (ref, True), "torch-default": (ref, False)}
    if ns.fuse_bn:
        from torch.fx.experimental.optimization import fuse as torch_fuse

        fused, torch_fused = autocutlass.nn.fuse_conv_bn(ref), torch_fuse(copy.deepcopy(ref))
        with torch.no_grad():
            fused(x)
            res["rel_err_logits_fused"] = _rel(fused(x), out_ref)
            res["rel_err_logits_torch_fused"] = _rel(torch_fused(x), out_ref)
        runs.update({"ours-fused": (fused, True), "torch-fused": (torch_fused, True)})
    res["stats_after_warmup"] = autocutlass.stats().as_dict()
    if ns.tune_misses:
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, "-m", "autocutlass.cli", "tune", "--pending", "--trials", str(ns.tune_misses)],
                           capture_output=True, text=True, check=False, timeout=1800)  # fmt: skip
        res["tune_misses"] = {"rc": p.returncode, "s": round(time.perf_counter() - t0, 1), "tail": p.stdout[-1500:]}
        print(f"# tune --pending: rc {p.returncode}, {res['tune_misses']['s']} s", flush=True)
        autocutlass.reset()  # look the problems up again
        with torch.no_grad():
            for m, _ in runs.values():
                m(x)

    def timed(model: Any, bench: bool) -> float:
        torch.backends.cudnn.benchmark = bench
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.no_grad():
            start.record()
            for _ in range(ns.iters):
                model(x)
            end.record()
        end.synchronize()
        return start.elapsed_time(end) / ns.iters

    with torch.no_grad():  # warm every variant (cudnn.benchmark's search happens here)
        for m, bench in runs.values():
            timed(m, bench)
    samples: dict[str, list[float]] = {k: [] for k in runs}
    for r in range(ns.rounds):
        order = list(runs) if r % 2 == 0 else list(reversed(runs))
        for k in order:
            samples[k].append(timed(*runs[k]))
    med = {k: statistics.median(v) for k, v in samples.items()}
    res["ms_per_batch"] = {k: round(v, 3) for k, v in med.items()}
    res["images_per_s"] = {k: round(ns.batch / (v / 1e3), 1) for k, v in med.items()}
    res["ratio_vs_benchmark"] = round(med["torch-benchmark"] / med["ours"], 4)
    res["ratio_vs_default"] = round(med["torch-default"] / med["ours"], 4)
    if ns.fuse_bn:
        res["fused_ratio_vs_benchmark"] = round(med["torch-benchmark"] / med["ours-fused"], 4)
        res["fused_ratio_vs_torch_fused"] = round(med["torch-fused"] / med["ours-fused"], 4)
        print(f"fused: ours {res['images_per_s']['ours-fused']} img/s, torch-fused {res['images_per_s']['torch-fused']}; "
              f"x{res['fused_ratio_vs_benchmark']} vs torch (cudnn.benchmark, unfused), "
              f"x{res['fused_ratio_vs_torch_fused']} vs torch's own folding", flush=True)  # fmt: skip
    res["stats"] = autocutlass.stats().as_dict()
    print(f"ResNet-50 b{ns.batch}: ours {res['images_per_s']['ours']} img/s, cudnn.benchmark "
          f"{res['images_per_s']['torch-benchmark']}, default {res['images_per_s']['torch-default']}; "
          f"x{res['ratio_vs_benchmark']} vs benchmark, x{res['ratio_vs_default']} vs default; "
          f"logits rel err {res['rel_err_logits']:.4f}", flush=True)  # fmt: skip

    if ns.first_call:
        res["first_call"] = {}
        for which in ("ours", "cudnn-benchmark", "cudnn-default"):
            p = subprocess.run([sys.executable, __file__, "--child", which, "--batch", str(ns.batch)],
                               capture_output=True, text=True, check=False, timeout=300)  # fmt: skip
            line = (p.stdout.strip().splitlines() or [""])[-1]
            try:
                res["first_call"][which] = json.loads(line)
            except json.JSONDecodeError:
                res["first_call"][which] = {"error": (p.stderr or p.stdout)[-1500:]}
            print(f"first call {which}: {res['first_call'][which]}", flush=True)
    if ns.json:
        Path(ns.json).write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

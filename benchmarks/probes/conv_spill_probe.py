"""Probe (no GPU): registers and spills of conv kernel configs, from ptxas on the DSL's PTX.

Compiles each case's ``hopper_conv`` kernel for sm_90a with ``CUTE_DSL_KEEP=ptx`` (the PTX is kept on
the compiled function's artifacts), assembles it with the local ``ptxas -v`` (a CUDA 13.0 ptxas reads
DSL 4.8.1's PTX once its ``.version 9.4`` line reads 9.0) and prints the registers per thread at launch
and the spill bytes. The basis of ``hopper_conv.check.N_SPLIT_ACC_REGS`` (session 44: the 192-row
tiles). ``ptxas`` must be on PATH.

    python benchmarks/probes/conv_spill_probe.py [--out FILE.txt]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile

os.environ.setdefault("CUTE_DSL_ARCH", "sm_90a")
os.environ["CUTE_DSL_KEEP"] = "ptx"
os.environ.setdefault("CUTE_DSL_DUMP_DIR", tempfile.mkdtemp(prefix="conv-spill-"))  # not the working directory

from autocutlass.kernels.hopper_conv import HopperConvConfig as C  # noqa: E402
from autocutlass.kernels.hopper_conv.compile import _compile  # noqa: E402
from autocutlass.kernels.hopper_conv.plan import make_plan  # noqa: E402
from autocutlass.ops.conv.problem import ConvProblem  # noqa: E402
from autocutlass.ops.gemm.problem import Activation, Epilogue  # noqa: E402


def layer(n: int, c: int, hw: int, epilogue: Epilogue | None = None) -> ConvProblem:
    return ConvProblem(direction="fprop", n=n, h=hw, w=hw, c=c, k=c, r=3, s=3, pad_h=1, pad_w=1,
                       epilogue=epilogue or Epilogue())  # fmt: skip


L3, L4 = (128, 256, 14), (256, 512, 7)
BIAS_RELU = Epilogue(bias=True, activation=Activation.RELU)
CASES = [
    (C(128, 128, 64, cluster_n=2, schedule="pingpong"), layer(*L4)),  # a shipped record's config, for reference
    (C(192, 128, 64), layer(*L4)),
    (C(192, 256, 64), layer(*L3)),
    (C(192, 256, 64, cluster_n=2), layer(*L4)),
    (C(192, 256, 64, cluster_m=2), layer(*L3, BIAS_RELU)),
    (C(192, 224, 64), layer(*L3)),
    (C(192, 256, 64, store="direct"), layer(*L3)),
    (C(192, 256, 64), layer(*L3, Epilogue(activation=Activation.GELU))),
    (C(192, 256, 64), layer(*L3, Epilogue(with_c=True, bias=True, activation=Activation.RELU))),  # refused: spills
    (C(192, 128, 64), layer(*L3, Epilogue(with_c=True, bias=True, activation=Activation.RELU))),
]


def ptxas_report(ptx: str) -> tuple[str, str]:
    """(registers per thread, 'stores/loads' spill bytes) of the PTX's kernel."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "k.ptx")
        with open(path, "w") as f:
            f.write(re.sub(r"^\.version 9\.\d+", ".version 9.0", ptx, count=1, flags=re.M))
        r = subprocess.run(["ptxas", "-arch=sm_90a", "-v", path, "-o", os.devnull], capture_output=True, text=True,
                           check=False)  # fmt: skip
    out = r.stdout + r.stderr
    regs = re.findall(r"Used (\d+) registers", out)
    spill = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", out)
    if r.returncode or not regs or not spill:
        raise RuntimeError(f"ptxas failed: {out[-800:]}")
    return regs[-1], f"{spill[-1][0]}/{spill[-1][1]}"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ns = ap.parse_args()
    lines = [f"{'config':34s} {'epilogue':28s} {'regs':>4s}  spill stores/loads (bytes)"]
    for cfg, prob in CASES:
        ep = prob.epilogue
        label = "+".join(x for x in ("C" if ep.with_c else "", "bias" if ep.bias else "", ep.activation.value
                                     if ep.activation is not Activation.NONE else "") if x) or "plain"  # fmt: skip
        regs, spill = ptxas_report(_compile(make_plan(cfg, prob)).artifacts.PTX)
        lines.append(f"{cfg.short():34s} {label:28s} {regs:>4s}  {spill}")
        print(lines[-1], flush=True)
    if ns.out:
        with open(ns.out, "w") as f:
            f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

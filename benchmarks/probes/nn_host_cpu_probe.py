"""Probe (no GPU): host time of the eager module calls on the hit path, with a no-op compiled function.

A small model with an ``autocutlass.nn.Linear``, a ``GatedMLP`` (packed SwiGLU) and a packed q/k/v
attention stand-in, dispatched by the test rig (``tests/_dispatch_fakes.make_rig``) whose runner
offers the direct launch of ``tvm_ffi.testing.nop``: everything a decode step's module call does on
the host except the CUDA launch itself. Compares the parameter and submodule look-ups of
``autocutlass.nn.attrs`` with plain ``getattr`` (``nn.Module.__getattr__``), interleaved in one
process, medians of 8 rounds of 5000 calls each.

    python benchmarks/probes/nn_host_cpu_probe.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import tvm_ffi.testing  # noqa: E402
from _dispatch_fakes import make_rig  # noqa: E402

import autocutlass  # noqa: E402
from autocutlass import api  # noqa: E402
from autocutlass.nn import gated, modules, packed  # noqa: E402
from autocutlass.settings import Policy  # noqa: E402

NOP = tvm_ffi.testing.nop


class NopRunner:
    swaps_operands = False

    def direct_launch(self, rank: int, device_index: int, m: int, n: int, l: int) -> Any:  # noqa: E741
        return (NOP, 1, None) if rank == 2 else None

    def __call__(self, a: Any, b: Any, d: Any, *, c: Any = None, bias: Any = None, alpha: float = 1.0,
                 beta: float = 0.0, **_: Any) -> None:  # fmt: skip
        NOP(a, b, d, c, bias, None, None, None, None, alpha, beta, 1)


class MLP(nn.Module):
    def __init__(self, h: int, i: int) -> None:
        super().__init__()
        self.gate_proj, self.up_proj = nn.Linear(h, i, bias=False), nn.Linear(h, i, bias=False)
        self.down_proj, self.act_fn = nn.Linear(i, h, bias=False), nn.SiLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class Attn(nn.Module):
    def __init__(self, h: int) -> None:
        super().__init__()
        self.q_proj, self.k_proj, self.v_proj = nn.Linear(h, h, bias=False), nn.Linear(h, h // 4, bias=False), \
            nn.Linear(h, h // 4, bias=False)  # fmt: skip

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return self.q_proj(x), self.k_proj(x), self.v_proj(x)


def bench(f: Any, n: int) -> float:
    for _ in range(300):
        f()
    t = time.perf_counter()
    for _ in range(n):
        f()
    return (time.perf_counter() - t) / n * 1e6


def main() -> int:
    rig = make_rig(Policy.TUNE)
    rig.family.compile = lambda config, problem: NopRunner()
    api._default = rig.dispatcher
    h = 256
    root = nn.Module()
    root.mlp, root.attn, root.o = MLP(h, 2 * h), Attn(h), nn.Linear(h, h, bias=False)
    root = root.to(torch.bfloat16)
    autocutlass.swap_linear_(root)
    autocutlass.swap_gated_mlp_(root)
    autocutlass.swap_qkv_(root)
    x = torch.randn(1, 1, h, dtype=torch.bfloat16)
    fast = (modules.param, packed.param, gated.child)
    plain = (lambda m, n: getattr(m, n),) * 3

    def use(v: tuple[Any, ...]) -> None:
        modules.param, packed.param, gated.child = v

    calls = {"Linear": lambda: root.o(x), "GatedMLP": lambda: root.mlp(x), "packed q/k/v": lambda: root.attn(x)}
    res: dict[str, dict[str, list[float]]] = {k: {"getattr": [], "attrs": []} for k in calls}
    with torch.no_grad():
        for r in range(8):
            for label, v in (("getattr", plain), ("attrs", fast))[:: 1 if r % 2 == 0 else -1]:
                use(v)
                for k, f in calls.items():
                    res[k][label].append(bench(f, 5000))
    use(fast)
    for k, d in res.items():
        a, b = statistics.median(d["getattr"]), statistics.median(d["attrs"])
        print(f"{k:13s} getattr {a:6.2f} us  attrs {b:6.2f} us  ({(1 - b / a) * 100:4.1f}% less)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

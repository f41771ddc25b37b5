"""The callable a compiled Hopper grouped GEMM becomes: torch tensors in, one launch on the
current stream.

Calling convention (``ops.grouped.frontend``): ``runner(x, w, offs, out, *, bias=None)`` with
torch CUDA tensors: x (T, K) K-contiguous, w (E, K, N) N- or K-contiguous (the class's
``w_major``), offs (E,) int32 cumulative row ends (read by the kernel on the device, never by
the host), out (T, N) row-major (written, never read; rows past ``offs[-1]`` become zeros), bias
(E, N) contiguous (required exactly when the class's epilogue has one). Launches on
``torch.cuda.current_stream()``; never synchronises, never allocates: a call can be captured in a
CUDA graph and replayed with other values in ``offs``.

One runner serves every T, N, K and E of its kernel class: the function is compiled per table
capacity (``plan.table_entries(E)``: 64, 256 or 1024 groups), picked at each call by E.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autocutlass.kernels.hopper_gemm.runner import max_active_clusters
from autocutlass.kernels.hopper_grouped.compile import get_compiled
from autocutlass.kernels.hopper_grouped.config import HopperGroupedConfig
from autocutlass.kernels.hopper_grouped.plan import table_entries
from autocutlass.ops.grouped.problem import GroupedGemmProblem


class HopperGroupedRunner:
    """Grouped runner for one (config, kernel class); see the module docstring."""

    def __init__(self, config: HopperGroupedConfig, problem: GroupedGemmProblem, cache_dir: Path | None) -> None:
        self.config = config
        self.problem = problem
        self._bias = problem.epilogue.bias
        self._cache_dir = cache_dir
        self._fns: dict[int, Any] = {}
        self._by_experts: dict[int, Any] = {}
        self._clusters: dict[int, int] = {}
        self.prepare(problem.experts)

    def prepare(self, experts: int) -> Any:
        """The compiled function for ``experts`` experts (compiled or loaded on first use)."""
        fn = self._by_experts.get(experts)
        if fn is None:
            entries = table_entries(experts)
            fn = self._fns.get(entries)
            if fn is None:
                fn = get_compiled(self.config, self.problem, entries, self._cache_dir)
                self._fns[entries] = fn
            self._by_experts[experts] = fn
        return fn

    def __call__(self, x: Any, w: Any, offs: Any, out: Any, *, bias: Any | None = None) -> None:
        if self._bias and bias is None:
            raise ValueError("this grouped kernel's epilogue adds a per-expert bias: pass bias=")
        t, n = out.shape
        if x.shape[0] != t or w.shape[-1] != n or w.shape[-2] != x.shape[1] or offs.shape[0] != w.shape[0]:
            raise ValueError(f"grouped runner: x {tuple(x.shape)}, w {tuple(w.shape)}, offs {tuple(offs.shape)} and "
                             f"out {tuple(out.shape)} do not fit together")  # fmt: skip
        if t == 0 or n == 0:
            return
        experts = w.shape[0]
        fn = self._by_experts.get(experts) or self.prepare(experts)
        unit = 16 // w.element_size()
        if experts == 1 and w.stride(0) % unit:  # a stride that addresses nothing: give it the TMA unit
            w = w.as_strided(w.shape, (unit, w.stride(1), w.stride(2)))
        dev = out.get_device()
        clusters = self._clusters.get(dev)
        if clusters is None:
            clusters = max_active_clusters(max(dev, 0), self.config.cluster_m)
            self._clusters[dev] = clusters
        if offs.stride(0) != 1:  # the kernel reads offs as a dense (E,) vector
            offs = offs.contiguous()
        fn(x, w, offs, out, bias if self._bias else None, clusters)

"""The callable a compiled Hopper GEMM becomes: torch tensors in, one launch on the current stream."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from autocutlass.kernels import budgets
from autocutlass.kernels.hopper_gemm.compile import get_compiled
from autocutlass.kernels.hopper_gemm.config import HopperGemmConfig
from autocutlass.problem import Problem

_clusters_lock = threading.Lock()
_max_clusters: dict[tuple[int, int], int] = {}


def max_active_clusters(device_index: int, cluster_size: int) -> int:
    """Clusters of ``cluster_size`` CTAs (one per SM) that can be resident at once, from the
    driver's occupancy API; read once per (device, cluster size)."""
    key = (device_index, cluster_size)
    got = _max_clusters.get(key)
    if got is not None:
        return got
    with _clusters_lock:
        if key not in _max_clusters:
            try:
                import cutlass.utils

                n = int(cutlass.utils.HardwareInfo(device_index).get_max_active_clusters(cluster_size))
            except (RuntimeError, ValueError, AttributeError):
                n = 0
            if n <= 0:
                n = budgets.SM_COUNT_SM90 // cluster_size
            _max_clusters[key] = n
        return _max_clusters[key]


class SplitKWorkspace:
    """Split-K scratch of one runner: an fp32 partial-sum buffer and zeroed int32 turnstiles,
    per (device, stream), grown on demand and reused across calls (never allocated per call).
    The kernel leaves every turnstile at zero when it finishes."""

    def __init__(self) -> None:
        self._bufs: dict[tuple[int, int], tuple[Any, Any]] = {}

    def get(self, device: Any, tiles: int, tile_elems: int) -> tuple[Any, Any]:
        import torch

        key = (device.index or 0, torch.cuda.current_stream(device).cuda_stream)
        have = self._bufs.get(key)
        if have is None or have[1].numel() < tiles:
            work = torch.empty(tiles * tile_elems, dtype=torch.float32, device=device)
            count = torch.zeros(tiles, dtype=torch.int32, device=device)
            have = (work, count)
            self._bufs[key] = have
        return have


class HopperGemmRunner:
    """GemmRunner for one (config, kernel class). See ``autocutlass.kernels.base`` for the
    calling convention. Operands of rank 2 and 3 are served by separately compiled functions."""

    def __init__(self, config: HopperGemmConfig, problem: Problem, cache_dir: Path | None) -> None:
        self.config = config
        self.problem = problem
        self._cache_dir = cache_dir
        self._fns: dict[int, Any] = {}
        self._clusters: dict[int, int] = {}
        self._workspace = SplitKWorkspace() if config.split_k > 1 else None
        self.prepare(3 if problem.l > 1 else 2)

    def prepare(self, rank: int) -> Any:
        fn = self._fns.get(rank)
        if fn is None:
            fn = get_compiled(self.config, self.problem, rank, self._cache_dir)
            self._fns[rank] = fn
        return fn

    def __call__(
        self,
        a: Any,
        b: Any,
        d: Any,
        *,
        c: Any | None = None,
        bias: Any | None = None,
        alpha: float = 1.0,
        beta: float = 0.0,
    ) -> None:
        fn = self._fns.get(a.dim()) or self.prepare(a.dim())
        dev = d.get_device()
        clusters = self._clusters.get(dev)
        if clusters is None:
            clusters = max_active_clusters(max(dev, 0), self.config.cluster_size)
            self._clusters[dev] = clusters
        if self._workspace is None:
            fn(a, b, d, c, bias, None, None, alpha, beta, clusters)
            return
        cfg = self.config
        m, n = d.shape[-2], d.shape[-1]
        l = d.shape[0] if d.dim() == 3 else 1  # noqa: E741
        # Output tiles padded to whole clusters, as the kernel numbers them.
        tiles = (
            -(-m // (cfg.tile_m * cfg.cluster_m)) * cfg.cluster_m * -(-n // (cfg.tile_n * cfg.cluster_n)) * cfg.cluster_n * l
        )
        work, count = self._workspace.get(d.device, tiles, cfg.tile_m * cfg.tile_n)
        fn(a, b, d, c, bias, work, count, alpha, beta, clusters)

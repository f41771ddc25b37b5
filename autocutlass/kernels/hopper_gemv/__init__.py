"""Decode GEMV family: a handful of token rows times a weight, on CUDA cores, every SM streaming.

Serves bf16/fp16 ``GemmProblem``s with M <= 16 rows (``check.MAX_M``), A row-major and B K-major (``F.linear``'s
``x @ W.T``), unbatched, with any additive epilogue (alpha, C, bias, activation): the GEMMs of an
LLM's decode step. Such a GEMM reads the weight once and little else; a tensor-core tile kernel
pads the rows to its tile and, for a weight of a few thousand rows, has few output tiles for 132
SMs (split-K then adds a reduction). Here each CTA streams a few weight rows with 16-byte loads,
multiplied with CUDA-core FMAs (``kind="simt"``, M <= 8) or warp-level ``mma.sync`` (``"mma"``),
every SM busy (see ``kernel``).

Modules: ``config`` (``GemvConfig``: rows per warp, warps along N and K, loads in flight,
m_tile), ``check``, ``plan``, ``kernel`` (CuTe DSL), ``compile`` (caches), ``runner``, ``sources``.

It comes after ``hopper_gemm`` in the registry, but a miss of at most ``PREFER_MAX_M`` rows is
tuned under this family (``prefers``), a larger one under ``hopper_gemm``; ``autocutlass tune
--family`` tunes either. A problem with records of both (same rank, same problem) is served by
the faster (``dispatch``). ``AUTOCUTLASS_GEMV_KERNELS=0`` switches it off.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from autocutlass.errors import CantImplement
from autocutlass.kernels import budgets
from autocutlass.kernels.base import KernelFamily
from autocutlass.kernels.hopper_gemv import sources
from autocutlass.kernels.hopper_gemv.check import check, problem_supported
from autocutlass.kernels.hopper_gemv.check import SIMT_MAX_M
from autocutlass.kernels.hopper_gemv.config import (
    M_TILES,
    MAX_WARPS,
    MMA_M_TILES,
    MMA_ROWS,
    ROWS,
    UNROLL,
    WARPS,
    GemvConfig,
)
from autocutlass.ops.gemm.problem import GemmProblem

__all__ = ["GemvConfig", "HopperGemvFamily"]

PREFER_MAX_M = 4
"""A miss of at most this many rows is tuned under this family first (``prefers``). Measured in the
shipped databases' records of Llama-3-8B's decode GEMMs (2026-11-25), our GEMV's time over
hopper_gemm's: 1 row x1.01-1.62 faster on both GPUs, 4 rows x0.94-1.51 (all but an H200 lm_head
within 2%), 8 and 16 rows x0.91-1.49, most of the large weights slower."""
WARPS_PER_SM = 8
"""Resident warps per SM the seeds aim for (each with ``rows * unroll`` 512-byte loads in flight)."""


def m_tile_for(m: int) -> int:
    """The smallest ``M_TILES`` entry holding ``m`` rows."""
    return next(t for t in M_TILES if t >= m)


class HopperGemvFamily(KernelFamily[GemvConfig]):
    name = "hopper_gemv"
    SOURCE_FILES = sources.SOURCE_FILES

    def __init__(self, cache_dir: Path | None = None) -> None:
        self._cache_dir = cache_dir

    def source_hash(self) -> str:
        return sources.source_hash()

    def supports(self, problem: Any) -> str | None:
        if not isinstance(problem, GemmProblem):
            return f"{problem.describe()} is not a GEMM"
        return problem_supported(problem)

    def prefers(self, problem: Any) -> bool:
        return isinstance(problem, GemmProblem) and problem.m <= PREFER_MAX_M  # a problem it serves

    def space(self, problem: Any) -> Sequence[GemvConfig]:
        """The simt kernel's configs of the smallest m_tile holding M (M <= 8; a larger m_tile only
        adds idle accumulators), and the mma kernel's of the smallest of its m_tiles."""
        m = min(max(problem.m, 1), max(M_TILES))
        warps = [(wn, wk) for wn, wk in itertools.product(WARPS, WARPS) if 2 <= wn * wk <= MAX_WARPS]
        out: list[GemvConfig] = []
        if m <= SIMT_MAX_M:
            out += [GemvConfig(m_tile_for(m), r, wn, wk, u) for r, (wn, wk), u in itertools.product(ROWS, warps, UNROLL)
                    if wn * wk <= 8]  # fmt: skip
        mt = next(t for t in MMA_M_TILES if t >= m)
        out += [GemvConfig(mt, r, wn, wk, u, kind="mma")
                for r, (wn, wk), u in itertools.product(MMA_ROWS, warps, UNROLL)]  # fmt: skip
        return out

    def check(self, config: GemvConfig, problem: Any) -> str | None:
        if not isinstance(problem, GemmProblem):
            return f"{problem.describe()} is not a GEMM"
        return check(config, problem)

    def seeds(self, problem: Any) -> Sequence[GemvConfig]:
        """Configs that keep about ``WARPS_PER_SM`` warps per SM busy with whole steps of K, best
        guess first."""
        if not isinstance(problem, GemmProblem) or self.supports(problem) is not None:
            return []
        target = budgets.SM_COUNT_SM90 * WARPS_PER_SM
        chunks = max(problem.k // 8, 1)

        def score(c: GemvConfig) -> tuple[float, ...]:
            ctas = -(-problem.n // c.rows_per_cta)
            fill = min(ctas * c.warps / target, 1.0)  # share of the wanted warps present
            steps = chunks / (32 * c.warps_k * c.unroll)  # steps of K per lane
            tail = (steps - int(steps)) / max(int(steps) + 1, 1)  # share of a lane's steps partly empty
            loads = 2 * (c.rows // 16) * c.unroll if c.kind == "mma" else c.rows * c.unroll  # per lane in flight
            return (-(fill - tail), abs(loads - 8), abs(c.warps - 4), c.rows * c.m_tile)

        feasible = sorted((c for c in self.space(problem) if check(c, problem) is None), key=score)
        mma = [c for c in feasible if c.kind == "mma"][:3]
        simt = [c for c in feasible if c.kind == "simt"][:2]
        return self.feasible_seeds([*mma, *simt] if problem.m > 2 else [*simt, *mma], problem)

    def config_to_dict(self, config: GemvConfig) -> dict[str, Any]:
        return config.as_dict()

    def config_from_dict(self, d: dict[str, Any]) -> GemvConfig:
        return GemvConfig.from_dict(d)

    def compile(self, config: GemvConfig, problem: Any) -> Any:
        from autocutlass.kernels.hopper_gemv.runner import GemvRunner

        if not isinstance(problem, GemmProblem):
            raise CantImplement(f"hopper_gemv does not serve {problem.describe()}")
        why = check(config, problem)
        if why is not None:
            raise CantImplement(why)
        return GemvRunner(config, problem, self._cache_dir)

    def simplicity(self, config: GemvConfig) -> tuple[int, ...]:
        return (int(config.kind == "mma"), config.warps, config.unroll, config.rows)

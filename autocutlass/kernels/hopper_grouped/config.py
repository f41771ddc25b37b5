"""The Hopper grouped-GEMM family's config: one frozen dataclass, its axes, and canonical
(de)serialisation.

A config picks the CTA tile (rows of one expert x output columns x K block), the order in which
the persistent CTAs walk an expert's tiles and the consumers' schedule. Every tile belongs to one
expert: a tile of ``tile_m`` rows starts at a multiple of ``tile_m`` rows past its expert's first
row, so small experts want 64-row tiles. COOPERATIVE: one consumer warpgroup per 64 rows of each
tile; PINGPONG: two consumer warpgroups own alternate tiles of the CTA, so that one's epilogue
runs while the other's WGMMAs keep the tensor cores busy. A cluster of two CTAs shares one
operand tile (``CLUSTERS``): 2x1 pairs two adjacent row tiles of one expert's column tile (the
weight tile), 1x2 two adjacent column tiles of one row tile (the tokens' tile); each CTA loads
half of the shared tile and multicasts it to both. 1x1 runs CTAs alone. The stage count is as
many as fit. The store (``store``) goes from registers to global memory (rows past the
expert's end are never stored), or, for TMA, through shared memory and TMA stores wherever a
tile's rows all belong to its expert (the others still from registers).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from autocutlass.kernels.hopper_gemm.config import (
    HopperGemmConfig,
    Raster,
    Schedule,
    SplitMode,
    Store,
)

__all__ = ["CLUSTERS", "TILE_K", "TILE_M", "TILE_N", "HopperGroupedConfig", "Raster", "Schedule", "Store"]

TILE_M = (64, 128)
"""Rows per tile, all of one expert: 64 (one consumer warpgroup) or 128 (two)."""
TILE_N = (64, 96, 128, 160, 192, 224, 256)
"""Output columns per tile."""
TILE_K = (64, 128)
"""K block in elements (16-bit inputs: one or two 128-byte swizzle rows)."""
CLUSTERS = ((1, 1), (2, 1), (1, 2))
"""(cluster_m, cluster_n): CTAs per cluster along the rows of one expert (sharing the weight
tile) and along the output columns (sharing the tokens' tile)."""


@dataclass(frozen=True, order=True)
class HopperGroupedConfig:
    tile_m: int = 128
    tile_n: int = 128
    tile_k: int = 64
    raster: Raster = Raster.ALONG_M
    """The order of an expert's tiles in the persistent walk: ALONG_M visits the row tiles of one
    column tile first (consecutive CTAs share the weight tile), ALONG_N the column tiles of one row
    tile (consecutive CTAs share the tokens)."""
    schedule: Schedule = Schedule.COOPERATIVE
    """COOPERATIVE: the consumer warpgroups split each tile's rows; PINGPONG: two consumer
    warpgroups own alternate tiles (each up to 128 accumulator registers per thread)."""
    cluster_m: int = 1
    """CTAs per cluster along M (``CLUSTERS``): 2 runs two adjacent row tiles of one expert's
    column tile together, the weight tile loaded once (half by each CTA) and multicast to both.
    The second CTA of an expert's last pair may hold no rows of it (an odd row-tile count): it
    still loads and computes, and stores nothing."""
    cluster_n: int = 1
    """CTAs per cluster along N: 2 runs two adjacent column tiles of one row tile together, the
    tokens' tile multicast to both (past N, the second CTA of the last pair stores nothing)."""
    store: Store = Store.DIRECT
    """DIRECT: every tile from registers straight to global memory. TMA: tiles whose rows all
    belong to the expert are staged in shared memory (stmatrix) and written by TMA stores, in
    column chunks, as the GEMM family's epilogue (fewer, wider writes; the buffers take shared
    memory from the ring); tiles that end the expert are still stored from registers."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "raster", Raster(self.raster))
        object.__setattr__(self, "schedule", Schedule(self.schedule))
        object.__setattr__(self, "store", Store(self.store))
        for name in ("tile_m", "tile_n", "tile_k", "cluster_m", "cluster_n"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool):
                raise TypeError(f"HopperGroupedConfig.{name} must be int, got {v!r}")

    @property
    def consumers(self) -> int:
        """Consumer warpgroups: one per 64 rows (cooperative), two (ping-pong)."""
        return 2 if self.schedule is Schedule.PINGPONG else self.tile_m // 64

    def gemm_config(self) -> HopperGemmConfig:
        """The GEMM family's config of the same tile: its plan's stage arithmetic, register
        budgets and WGMMA layouts are reused (this schedule, cluster and store)."""
        return HopperGemmConfig(
            tile_m=self.tile_m, tile_n=self.tile_n, tile_k=self.tile_k, cluster_m=self.cluster_m,
            cluster_n=self.cluster_n, stages=0,
            schedule=self.schedule, raster=self.raster, swizzle=1, split_k=1, store=self.store,
            split_mode=SplitMode.SERIAL,
        )  # fmt: skip

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["raster"] = self.raster.value
        d["schedule"] = self.schedule.value
        d["store"] = self.store.value
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> HopperGroupedConfig:
        known = {f: d[f] for f in cls.__dataclass_fields__ if f in d}
        return cls(**known)

    def short(self) -> str:
        """Compact label: '128x128x64 m', '64x256x64 n pp', '128x256x64 m c1x2 tma'."""
        pp = " pp" if self.schedule is Schedule.PINGPONG else ""
        pp += f" c{self.cluster_m}x{self.cluster_n}" if self.cluster_m * self.cluster_n != 1 else ""
        pp += " tma" if self.store is Store.TMA else ""
        return f"{self.tile_m}x{self.tile_n}x{self.tile_k} {'m' if self.raster is Raster.ALONG_M else 'n'}{pp}"

"""The Hopper grouped-GEMM family's config: one frozen dataclass, its axes, and canonical
(de)serialisation.

A config picks the CTA tile (rows of one expert x output columns x K block), the order in which
the persistent CTAs walk an expert's tiles and the consumers' schedule. Every tile belongs to one
expert: a tile of ``tile_m`` rows starts at a multiple of ``tile_m`` rows past its expert's first
row, so small experts want 64-row tiles. COOPERATIVE: one consumer warpgroup per 64 rows of each
tile; PINGPONG: two consumer warpgroups own alternate tiles of the CTA, so that one's epilogue
runs while the other's WGMMAs keep the tensor cores busy. The cluster is 1x1, the stage count as
many as fit; the store goes from registers to global memory (rows past the expert's end are
never stored).
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

__all__ = ["TILE_K", "TILE_M", "TILE_N", "HopperGroupedConfig", "Raster", "Schedule"]

TILE_M = (64, 128)
"""Rows per tile, all of one expert: 64 (one consumer warpgroup) or 128 (two)."""
TILE_N = (64, 96, 128, 160, 192, 224, 256)
"""Output columns per tile."""
TILE_K = (64, 128)
"""K block in elements (16-bit inputs: one or two 128-byte swizzle rows)."""


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

    def __post_init__(self) -> None:
        object.__setattr__(self, "raster", Raster(self.raster))
        object.__setattr__(self, "schedule", Schedule(self.schedule))
        for name in ("tile_m", "tile_n", "tile_k"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool):
                raise TypeError(f"HopperGroupedConfig.{name} must be int, got {v!r}")

    @property
    def consumers(self) -> int:
        """Consumer warpgroups: one per 64 rows (cooperative), two (ping-pong)."""
        return 2 if self.schedule is Schedule.PINGPONG else self.tile_m // 64

    def gemm_config(self) -> HopperGemmConfig:
        """The GEMM family's config of the same tile: its plan's stage arithmetic, register
        budgets and WGMMA layouts are reused (this schedule, cluster 1, direct store)."""
        return HopperGemmConfig(
            tile_m=self.tile_m, tile_n=self.tile_n, tile_k=self.tile_k, cluster_m=1, cluster_n=1, stages=0,
            schedule=self.schedule, raster=self.raster, swizzle=1, split_k=1, store=Store.DIRECT,
            split_mode=SplitMode.SERIAL,
        )  # fmt: skip

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["raster"] = self.raster.value
        d["schedule"] = self.schedule.value
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> HopperGroupedConfig:
        known = {f: d[f] for f in cls.__dataclass_fields__ if f in d}
        return cls(**known)

    def short(self) -> str:
        """Compact label: '128x128x64 m', '64x256x64 n pp'."""
        pp = " pp" if self.schedule is Schedule.PINGPONG else ""
        return f"{self.tile_m}x{self.tile_n}x{self.tile_k} {'m' if self.raster is Raster.ALONG_M else 'n'}{pp}"

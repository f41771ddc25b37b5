"""The Hopper implicit-GEMM conv2d family's config: one frozen dataclass, its axes, and canonical
(de)serialisation.

The axes mean what they mean in the GEMM family (``hopper_gemm.config``), applied to the
implicit GEMM of a forward convolution: M = N*P*Q output pixels, N = K output channels,
K = C*R*S (channel blocks of ``tile_k`` inside each filter tap). The schedule, raster, store
enums are the GEMM family's own.
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

__all__ = [
    "CLUSTERS", "SPLIT_K", "STAGES", "SWIZZLE", "TILE_K", "TILE_M", "TILE_N", "HopperConvConfig", "Raster", "Schedule",
    "SplitMode", "Store",
]  # fmt: skip

TILE_M = (64, 128, 192, 256)
"""Output pixels per CTA tile (rows of the implicit GEMM). 192 rows: the GEMM family's N-split
cooperative tile (``HopperGemmConfig.n_split``: the two consumers split the tile along N, each
accumulating all 192 rows of half the columns), which fits pixel counts whose 128- and 256-row
tilings leave the last wave part-empty (ResNet-50's 14x14 layer at batch 128: 25088 pixels in 131
tiles of 192 rows by 256 channels, one wave of 132 SMs)."""
TILE_N = (64, 96, 128, 160, 192, 208, 224, 256)
"""Output channels per CTA tile."""
TILE_K = (64, 128)
"""Input channels per K block, in elements (16-bit inputs: one or two 128-byte swizzle rows). One
K block covers one filter tap; the K loop walks channel blocks inside each tap, then the taps."""
CLUSTERS = ((1, 1), (2, 1), (1, 2), (2, 2))
"""(cluster_m, cluster_n): cluster_n > 1 multicasts the im2col activation tile to the CTAs of
one cluster row, cluster_m > 1 the filter tile to the CTAs of one cluster column."""
STAGES = (0, 2, 3, 4, 5, 6, 7, 8)
"""0 means: as many as fit in shared memory."""
SWIZZLE = (1, 2, 4, 8)
SPLIT_K = (1, 2, 3, 4)
"""The implicit GEMM's K loop (taps x channel blocks) split among this many CTAs per output
tile, summed in split order (bitwise deterministic): serially through a turnstile, or through
the workspace (``split_mode``)."""


@dataclass(frozen=True, order=True)
class HopperConvConfig:
    tile_m: int = 128
    tile_n: int = 128
    tile_k: int = 64
    cluster_m: int = 1
    cluster_n: int = 1
    stages: int = 0
    schedule: Schedule = Schedule.COOPERATIVE
    raster: Raster = Raster.ALONG_M
    swizzle: int = 1
    split_k: int = 1
    store: Store = Store.TMA
    split_mode: SplitMode = SplitMode.SERIAL
    """How the splits of one output tile are summed (the GEMM family's ``SplitMode``). SERIAL: in
    the conv kernel, through a per-tile turnstile. WORKSPACE: every split writes its raw fp32
    partial to a slab of its own without waiting, and the GEMM family's reduce kernel (launched
    after, as a programmatic dependent) sums the slabs in split order and runs the epilogue
    (``hopper_gemm.reduce``). Left out of ``as_dict`` when SERIAL, so configs from before it
    keep their dict form."""
    stream_k: bool = False
    """Stream-K (the GEMM family's ``stream_k``): every cluster of the grid takes the same share of
    the layer's (output tile, K block) iterations, a tile cut between clusters summed in K order
    through the workspace (bitwise deterministic). For layers whose tiles leave the last wave
    part-empty (ResNet-50's 7x7 and 14x14 stages, Stable Diffusion's 16x16 layers): the activation
    and filter of such a layer sit in L2, so the scattered K offsets of the clusters cost little.
    Left out of ``as_dict`` when False, so configs from before it keep their dict form."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "split_mode", SplitMode(self.split_mode))
        object.__setattr__(self, "schedule", Schedule(self.schedule))
        object.__setattr__(self, "raster", Raster(self.raster))
        object.__setattr__(self, "store", Store(self.store))
        for name in ("tile_m", "tile_n", "tile_k", "cluster_m", "cluster_n", "stages", "swizzle", "split_k"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool):
                raise TypeError(f"HopperConvConfig.{name} must be int, got {v!r}")
        if not isinstance(self.stream_k, bool):
            raise TypeError(f"HopperConvConfig.stream_k must be bool, got {self.stream_k!r}")

    @property
    def cluster_size(self) -> int:
        return self.cluster_m * self.cluster_n

    def gemm_config(self) -> HopperGemmConfig:
        """The GEMM family's config with the same parameters: the conv kernel reuses the GEMM
        kernel's consumers, epilogue and stage arithmetic, which read it."""
        return HopperGemmConfig(
            tile_m=self.tile_m, tile_n=self.tile_n, tile_k=self.tile_k, cluster_m=self.cluster_m,
            cluster_n=self.cluster_n, stages=self.stages, schedule=self.schedule, raster=self.raster,
            swizzle=self.swizzle, split_k=self.split_k, store=self.store, split_mode=self.split_mode,
            stream_k=self.stream_k,
        )  # fmt: skip

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["schedule"] = self.schedule.value
        d["raster"] = self.raster.value
        d["store"] = self.store.value
        if self.split_mode is SplitMode.SERIAL:
            del d["split_mode"]
        else:
            d["split_mode"] = self.split_mode.value
        if not self.stream_k:
            del d["stream_k"]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> HopperConvConfig:
        known = {f: d[f] for f in cls.__dataclass_fields__ if f in d}
        return cls(**known)

    def short(self) -> str:
        """Compact label: '128x256x64 c2x1 s0 coop m/1'."""
        sched = "coop" if self.schedule is Schedule.COOPERATIVE else "pp"
        ras = "m" if self.raster is Raster.ALONG_M else "n"
        sk = f" sk{self.split_k}" if self.split_k != 1 else ""
        if self.split_mode is SplitMode.WORKSPACE:
            sk += "w"
        sk += " streamk" if self.stream_k else ""
        st = " direct" if self.store is Store.DIRECT else ""
        return (
            f"{self.tile_m}x{self.tile_n}x{self.tile_k} c{self.cluster_m}x{self.cluster_n}"
            f" s{self.stages} {sched} {ras}/{self.swizzle}{sk}{st}"
        )

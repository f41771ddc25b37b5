"""The Hopper implicit-GEMM conv2d wgrad family's config: one frozen dataclass, its axes, and
canonical (de)serialisation.

The axes mean what they mean in the GEMM family (``hopper_gemm.config``), applied to the
implicit GEMM of a weight gradient, batched over the filter taps: per tap (r, s), M = K output
channels, N = C input channels, K = N*P*Q output pixels (``plan.implicit_gemm``). ``tile_k`` is
pixels per K block. The reduction over pixels is long and the output tiles are few, so it is
split: ``split_k`` serial splits (summed in split order through a turnstile) or ``stream_k``
(every CTA the same share of (tile, K block) iterations, cut tiles summed in K order); both are
bitwise deterministic.
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
    "CLUSTERS", "SERIAL_SPLIT_MAX", "SLAB_GROUPS", "SPLIT_K", "SPLIT_MAX", "SplitMode", "SWIZZLE", "TAP_CHANNELS", "TILE_K", "TILE_M", "TILE_N", "HopperConvWgradConfig", "Raster", "Schedule",
    "Store",
]  # fmt: skip

TILE_M = (64, 128, 256)
"""Output channels (K) per CTA tile."""
TILE_N = (64, 128, 192, 256)
"""Input channels (C) of one filter tap per CTA tile: whole 64-channel (128-byte) im2col boxes."""
TILE_K = (64, 128)
"""Output pixels per K block."""
CLUSTERS = ((1, 1), (2, 1), (1, 2), (2, 2))
"""(cluster_m, cluster_n): cluster_n > 1 multicasts the dy tile to the CTAs of one cluster row,
cluster_m > 1 the im2col activation tile to the CTAs of one cluster column."""
SWIZZLE = (1, 2, 4, 8)
SPLIT_K = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)
"""The pixel loop split among this many CTAs per output tile (serial, in split order, up to
``SERIAL_SPLIT_MAX``; or each to its own workspace slab)."""
SPLIT_MAX = 132
"""The most splits a config may take (the slab sum's limit): ``SPLIT_K``'s counts, and above them
the count that fills one wave of a 132-SM GPU with a layer's one or two output tiles (a stem's
wgrad lowered to a single 64x256 tile of dw; ``hopper_conv_wgrad.wave_split``)."""
SLAB_GROUPS = (1, 4)
"""Slab groups of the workspace slab sum (``HopperConvWgradConfig.slab_groups``; two slabs per
group at least, so 4 groups take 8 splits and more)."""
SERIAL_SPLIT_MAX = 16
"""The most splits the space offers in SERIAL mode (a turnstile chain that long already costs more
than it saves); WORKSPACE mode goes on to ``max(SPLIT_K)``, for the narrow layers whose few
output tiles need that many CTAs each to fill the GPU."""
TAP_CHANNELS = (0, 64, 128)
"""0: each output tile holds one filter tap's channels (``tile_n`` of C). 64 or 128: the tiles
span the taps (dw as one (K, R*S*C) matrix), ``tile_n // tap_channels`` im2col boxes of that many
channels each per K block; C must be a multiple. For a layer of exactly that many input channels
each box is one tap, so that a narrow layer still gets a wide tile (a 64-channel tile per tap reads
twice the bytes per MAC of a 128-wide one); for a wider C, a box is one 64-channel block of a tap,
so that a tile width that does not divide C (192 for 320 channels) wastes no columns per tap."""


@dataclass(frozen=True, order=True)
class HopperConvWgradConfig:
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
    stream_k: bool = False
    store: Store = Store.TMA
    tap_channels: int = 0
    split_mode: SplitMode = SplitMode.SERIAL
    """With ``split_k`` > 1: SERIAL sums the splits' partial tiles through a turnstile, in split
    order, and the last split runs the epilogue; WORKSPACE stores each split's raw fp32 partial
    to its own slab and the GEMM family's reduce kernel sums the slabs in split order after the
    kernel (no serial chain; both bitwise deterministic)."""
    slab_groups: int = 1
    """WORKSPACE mode: the slab sum adds each output's slabs in one chain per thread (1) or in
    ``SLAB_GROUPS``' other count of consecutive groups, one warp each, then the group sums in
    order (``slab_sum.GroupedSlabSumKernel``: more loads in flight for few outputs and many
    slabs). Left out of the dict form when 1, so the configs from before it keep their keys."""
    interleave: bool = False
    """Split-K: split s of S takes the pixel blocks s, s + S, s + 2S, ... instead of one
    contiguous run (``HopperGemmConfig.interleave``: the splits read neighbouring rows of dy and
    x at the same time). Left out of the dict form when False."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "schedule", Schedule(self.schedule))
        object.__setattr__(self, "raster", Raster(self.raster))
        object.__setattr__(self, "store", Store(self.store))
        object.__setattr__(self, "split_mode", SplitMode(self.split_mode))
        for name in ("tile_m", "tile_n", "tile_k", "cluster_m", "cluster_n", "stages", "swizzle", "split_k",
                     "tap_channels", "slab_groups"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool):
                raise TypeError(f"HopperConvWgradConfig.{name} must be int, got {v!r}")
        for name in ("stream_k", "interleave"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"HopperConvWgradConfig.{name} must be bool, got {getattr(self, name)!r}")

    @property
    def cluster_size(self) -> int:
        return self.cluster_m * self.cluster_n

    def gemm_config(self) -> HopperGemmConfig:
        """The GEMM family's config with the same parameters: the wgrad kernel reuses the GEMM
        kernel's consumers, split-K, stream-K and epilogue, which read it."""
        return HopperGemmConfig(
            tile_m=self.tile_m, tile_n=self.tile_n, tile_k=self.tile_k, cluster_m=self.cluster_m,
            cluster_n=self.cluster_n, stages=self.stages, schedule=self.schedule, raster=self.raster,
            swizzle=self.swizzle, split_k=self.split_k, store=self.store, split_mode=self.split_mode,
            stream_k=self.stream_k, interleave=self.interleave,
        )  # fmt: skip

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["schedule"] = self.schedule.value
        d["raster"] = self.raster.value
        d["store"] = self.store.value
        d["split_mode"] = self.split_mode.value
        if self.slab_groups == 1:
            del d["slab_groups"]
        if not self.interleave:
            del d["interleave"]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> HopperConvWgradConfig:
        known = {f: d[f] for f in cls.__dataclass_fields__ if f in d}
        return cls(**known)

    def short(self) -> str:
        """Compact label: '128x128x64 c2x1 s0 coop m/1 sk8'."""
        sched = "coop" if self.schedule is Schedule.COOPERATIVE else "pp"
        ras = "m" if self.raster is Raster.ALONG_M else "n"
        sk = f" sk{self.split_k}" if self.split_k != 1 else ""
        if self.split_mode is SplitMode.WORKSPACE:
            sk += "w" if self.slab_groups == 1 else f"w/g{self.slab_groups}"
        if self.interleave:
            sk += "i"
        sk += " streamk" if self.stream_k else ""
        st = " direct" if self.store is Store.DIRECT else ""
        taps = f" {self.tile_n // self.tap_channels}taps" if self.tap_channels else ""
        return (
            f"{self.tile_m}x{self.tile_n}x{self.tile_k} c{self.cluster_m}x{self.cluster_n}"
            f" s{self.stages} {sched} {ras}/{self.swizzle}{sk}{st}{taps}"
        )

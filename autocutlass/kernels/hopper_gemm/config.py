"""The Hopper GEMM family's config: one frozen dataclass, its axes, and canonical (de)serialisation."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any


class Schedule(StrEnum):
    """How consumer warpgroups share a CTA's work.

    COOPERATIVE: all consumer warpgroups work on one output tile (split along M) and run the
    epilogue together. PINGPONG: two consumer warpgroups own alternate tiles, so one runs its
    epilogue while the other's WGMMAs keep the tensor cores busy.
    """

    COOPERATIVE = "cooperative"
    PINGPONG = "pingpong"


class Store(StrEnum):
    """How the epilogue writes D.

    TMA: registers -> shared memory (stmatrix) -> global memory by TMA, in column chunks.
    DIRECT: registers -> global memory with vectorised stores straight from the accumulator
    fragment; no shared memory and no barriers, so the next tile's mainloop starts at once.
    """

    TMA = "tma"
    DIRECT = "direct"


class SplitMode(StrEnum):
    """How the K splits of one output tile (split_k > 1) are summed.

    SERIAL: in the GEMM kernel, through a per-tile turnstile in global memory: split s waits for
    s - 1, adds its partial sum in an fp32 workspace, and the last split runs the epilogue.
    WORKSPACE: every split writes its raw fp32 partial tile to its own slab of a workspace
    (S, L, M, N) without waiting; a second kernel (``reduce``) sums the slabs in split order and
    runs the epilogue. Both are bitwise deterministic.
    """

    SERIAL = "serial"
    WORKSPACE = "workspace"


class Raster(StrEnum):
    """Order in which the persistent scheduler walks output tiles (within a swizzle group)."""

    ALONG_M = "along_m"
    ALONG_N = "along_n"


TILE_M = (64, 128, 192, 256)
"""192 rows: the cooperative consumers split N instead of M (``HopperGemmConfig.n_split``)."""
TILE_N = (16, 32, 64, 96, 128, 160, 192, 208, 224, 256)
"""16 and 32 are for narrow outputs, chiefly the swapped decode GEMM (``swap_ab``), whose N is
the token count."""
TILE_K = (32, 64, 128, 256)
"""In elements: 64 or 128 for 16-bit inputs, 32 or 64 for tf32, 128 or 256 for fp8 (``check``
enforces which): one or two 128-byte swizzle rows."""
CLUSTERS = ((1, 1), (2, 1), (1, 2), (2, 2))
STAGES = (0, 2, 3, 4, 5, 6, 7, 8)
"""0 means: as many as fit in shared memory."""
SWIZZLE = (1, 2, 4, 8)
SPLIT_K = tuple(range(1, 17))
"""K split among this many CTAs per output tile, summed in split order (``SplitMode``): bitwise
deterministic."""
TUNED_SPLIT_K = (1, 2, 3, 4, 8)
"""The split counts the search space offers (only for problems with few output tiles)."""


@dataclass(frozen=True, order=True)
class HopperGemmConfig:
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
    swap_ab: bool = False
    """Run D^T = B^T A^T: the kernel's M is the problem's N (a decode GEMM's weight rows fill
    WGMMA's 64-row side; the few tokens become the kernel's N) and D is written column-major.
    Tiles, clusters and split-K then refer to the swapped problem."""
    stream_k: bool = False
    """Stream-K: the persistent grid's clusters share the problem's (output tile, K block)
    iterations evenly, so every SM gets the same work whatever the tile count. A tile cut
    between clusters is finished by the cluster that ran its first K block: it adds the partial
    sums the others left in a workspace, in K order (bitwise deterministic), and runs the
    epilogue. Needs split_k = 1, the cooperative schedule and swizzle 1."""
    interleave: bool = False
    """Split-K (``split_k`` = S > 1): split s takes the K blocks s, s + S, s + 2S, ... instead of
    one contiguous run of about K / S blocks, so the S splits of a tile read neighbouring K
    blocks at the same time (a few DRAM pages) rather than S regions far apart. The splits' sums
    are added in split order as before (bitwise deterministic; other bits than the contiguous
    order's). Left out of the dict form when False, so the configs from before it keep their keys."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "split_mode", SplitMode(self.split_mode))
        object.__setattr__(self, "schedule", Schedule(self.schedule))
        object.__setattr__(self, "store", Store(self.store))
        object.__setattr__(self, "raster", Raster(self.raster))
        for name in ("tile_m", "tile_n", "tile_k", "cluster_m", "cluster_n", "stages", "swizzle", "split_k"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool):
                raise TypeError(f"HopperGemmConfig.{name} must be int, got {v!r}")
        for name in ("swap_ab", "stream_k", "interleave"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"HopperGemmConfig.{name} must be bool, got {getattr(self, name)!r}")

    @property
    def cluster_size(self) -> int:
        return self.cluster_m * self.cluster_n

    @property
    def num_consumer_wgs(self) -> int:
        """Consumer (MMA) warpgroups: 1 for a cooperative 64-row tile, else 2."""
        if self.schedule is Schedule.PINGPONG:
            return 2
        return 1 if self.tile_m == 64 else 2

    @property
    def n_split(self) -> bool:
        """A cooperative 192-row tile: the two consumer warpgroups split it along N (each
        accumulates all 192 rows of half the columns, three 64-row WGMMA blocks) and each runs the
        epilogue of its half, as cuBLAS's "coopB" kernels do. 192-row tiles fit an M a few rows past
        a multiple of 128 in fewer wasted rows with a large tile's operand reuse (2049 rows: 11
        tiles of 192, 2112 rows, against 17 of 128, 2176)."""
        return self.schedule is Schedule.COOPERATIVE and self.tile_m == 192

    @property
    def wg_tile_m(self) -> int:
        """Rows of the output tile one consumer warpgroup accumulates."""
        if self.schedule is Schedule.PINGPONG or self.n_split:
            return self.tile_m
        return self.tile_m // self.num_consumer_wgs

    @property
    def wg_tile_n(self) -> int:
        """Columns of the output tile one consumer warpgroup accumulates."""
        return self.tile_n // 2 if self.n_split else self.tile_n

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["schedule"] = self.schedule.value
        d["raster"] = self.raster.value
        d["store"] = self.store.value
        d["split_mode"] = self.split_mode.value
        if not self.interleave:
            del d["interleave"]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> HopperGemmConfig:
        known = {f: d[f] for f in cls.__dataclass_fields__ if f in d}
        return cls(**known)

    def short(self) -> str:
        """Compact label: '128x256x64 c2x1 s0 coop m/1'."""
        sched = "coop" if self.schedule is Schedule.COOPERATIVE else "pp"
        ras = "m" if self.raster is Raster.ALONG_M else "n"
        sk = f" sk{self.split_k}" if self.split_k != 1 else ""
        if self.split_mode is SplitMode.WORKSPACE:
            sk += "w"
        if self.interleave:
            sk += "i"
        st = " direct" if self.store is Store.DIRECT else ""
        sw = " swap" if self.swap_ab else ""
        sw += " streamk" if self.stream_k else ""
        return (
            f"{self.tile_m}x{self.tile_n}x{self.tile_k} c{self.cluster_m}x{self.cluster_n}"
            f" s{self.stages} {sched} {ras}/{self.swizzle}{sk}{st}{sw}"
        )


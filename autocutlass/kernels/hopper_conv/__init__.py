"""Hopper (sm_90a) implicit-GEMM conv2d fprop family: activations loaded by the im2col TMA.

Modules: ``config`` (the frozen config and its axes), ``plan`` (the implicit GEMM and the
compile-time plan), ``check`` (feasibility with reasons, im2col TMA limits included), ``kernel``
(the CuTe DSL kernel: the GEMM kernel's consumers and epilogue behind an im2col TMA producer),
``compile`` (symbolic-shape compile, in-process and on-disk caches), ``runner`` (the callable, in
the conv runner convention), ``sources`` (the files the family's hash covers). Only ``kernel``, ``compile`` and ``runner`` touch the DSL, and only
when used.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autocutlass.kernels import budgets, waves
from autocutlass.kernels.base import KernelFamily
from autocutlass.kernels.hopper_conv.check import SERIAL_SPLIT_MAX, check, problem_supported
from autocutlass.kernels.hopper_conv.config import (
    CLUSTERS,
    SWIZZLE,
    TILE_K,
    TILE_M,
    TILE_N,
    HopperConvConfig,
    Raster,
    Schedule,
    SplitMode,
    Store,
)
from autocutlass.kernels.hopper_conv.plan import implicit_gemm
from autocutlass.kernels.hopper_conv.sources import SOURCE_FILES
from autocutlass.kernels.hopper_gemm.picks import modelled_configs

if TYPE_CHECKING:
    from autocutlass.ops.conv.problem import ConvProblem

__all__ = ["HopperConvConfig", "HopperConvFamily", "check", "n_split_seeds"]

SMALL_M_DIRECT_STORE = 256
"""Implicit GEMMs with at most this many output pixels also get the direct (registers to global)
store, as in the GEMM family."""
SPLIT_K_MAX_OUTPUT = 2048 * 1024
"""Output elements (N*P*Q * K) up to which the space offers split-K: layers whose output tiles
alone leave SMs idle (e.g. the 7x7 ResNet stage at batch 32: 1568 x 512 outputs)."""
SPLIT_K_MIN_K = 1024
"""...and whose K loop (C*R*S) is at least this long."""
TUNED_SPLIT_K = (2, 3, 4)
"""The split counts the space offers every split layer; ``layer_splits`` adds the one that fills a
wave with the layer's tiles."""
SPLIT_MIN_BLOCKS = 4
"""The fewest K blocks (tile_k channels of one tap) a wave-filling split leaves each split."""
STREAM_K_MAX_OUTPUT = 4 * budgets.SM_COUNT_SM90 * 128 * 128
"""Output elements (N*P*Q * K) up to which the space offers stream-K (with a K loop of at least
``SPLIT_K_MIN_K``): layers whose 128x128 tiles fill at most four waves, where a part-empty last
wave costs the most (ResNet-50's 3x3 layers of stages 3 and 4 at batch 128-256: 196 tiles of
128x256 are 1.48 waves), and whose activation and filter fit in L2, so that the clusters'
scattered K offsets cost little (on a 4096 x 4096 GEMM, whose operands do not, stream-K lost
12-30%: ``benchmarks/results/2026-11-22-h200-streamk-probe.txt``). Measured on an H100
(``benchmarks/results/2026-11-28-h100-s32-{a-conv-streamk-probe,b-tune-sd}.*``): stream-K tiles
in a 2-CTA cluster reached x1.07-1.09 of cuDNN on those two ResNet-50 layers, still behind their
records' ping-pong and 64x256 tiles (x1.15-1.18), and lost to 128x160 tiles on Stable
Diffusion's 16x16 layer (102 against 85 us); unclustered ones ran 8-35% slower."""
TUNED_STAGES = (0,)
"""Stages stay at 'as many as fit' in the search, as in the GEMM family."""


def fitting_tile_n(k: int) -> int:
    """The tile width (64..256) that covers K output channels with the fewest padded columns,
    the widest among equals: 160 for K = 640, 256 for 512 or 1280, 128 for 128."""
    return min(TILE_N, key=lambda t: (-(-k // t) * t - k, -t))


def layer_splits(problem: ConvProblem, tile_m: int, tile_n: int, tile_k: int) -> tuple[int, ...]:
    """The split counts (above 1) the space offers a tile shape of a split layer: ``TUNED_SPLIT_K``,
    then the count whose work units fill one wave of the GPU (``kernels.waves.wave_splits``, up to
    ``SERIAL_SPLIT_MAX``), when ``TUNED_SPLIT_K`` lacks it (rn50-l4-3x3: 26 tiles of 128x256 split
    5 ways take 130 of 132 SMs)."""
    gm = implicit_gemm(problem)
    tiles = -(-gm.m // tile_m) * -(-gm.n // tile_n)
    extra = waves.wave_splits(tiles, -(-gm.k // tile_k), most=SERIAL_SPLIT_MAX, min_blocks=SPLIT_MIN_BLOCKS)
    return (*TUNED_SPLIT_K, *(s for s in extra if s not in TUNED_SPLIT_K))


def modelled_pick(problem: ConvProblem, mode: SplitMode | None = None) -> HopperConvConfig | None:
    """The cost model's cheapest cooperative config (``kernels.waves.predicted_cost``) among the
    tile shapes whose width does not exceed K rounded up to 64, data-parallel or split by
    ``layer_splits`` (serially or through the workspace; with ``mode``: split configs of that mode
    only), tile_k 64, no cluster; None for a layer without split-K in its space."""
    if not _splits_layer(problem):
        return None
    gm = implicit_gemm(problem)
    k_blocks = -(-gm.k // 64)
    modes = tuple(SplitMode) if mode is None else (mode,)
    best: tuple[float, int, HopperConvConfig] | None = None
    for tm, tn in itertools.product(TILE_M, TILE_N):
        if tn > -(-gm.n // 64) * 64:
            continue
        tiles = -(-gm.m // tm) * -(-gm.n // tn)
        units = [] if mode is not None else [(1, SplitMode.SERIAL)]
        units += [(sp, md) for sp in layer_splits(problem, tm, tn, 64) for md in modes]
        for split, md in units:
            workspace = md is SplitMode.WORKSPACE
            cost = waves.predicted_cost(tiles, k_blocks, tm, tn, 64, split=split, workspace=workspace)
            cfg = HopperConvConfig(tm, tn, 64, split_k=split, split_mode=md)
            if check(cfg, problem) is None and (best is None or (cost, split) < best[:2]):
                best = (cost, split, cfg)
    return None if best is None else best[2]


NARROW_SPLIT_TILES = ((128, 2), (256, 1))
"""(tile_m, cluster_n) of the 64-column tiles ``narrow_split_seeds`` offers, each split through the
workspace into the count that fills a wave."""
NARROW_SPLIT_FILL = 0.85
"""The least share of the SMs a narrow seed's split units must fill (in one wave)."""


def narrow_split_seeds(problem: ConvProblem) -> list[HopperConvConfig]:
    """Seeds of 64-column tiles (two 64x64 consumer warpgroups in a 128-row tile, or two 128x64 in a
    256-row one) whose K loop is split through the workspace into the count whose units fill one
    wave of the GPU best (``kernels.waves.wave_splits`` with ``NARROW_SPLIT_FILL`` in place of its
    0.95, each split left ``SPLIT_MIN_BLOCKS`` K blocks or more), for a split layer (``_splits_layer``). Measured on an H100
    (``benchmarks/results/2026-11-28-h100-s33-c-grid-narrow.*``, every config of the grid timed):
    the fastest configs of the small-batch few-tile layers, which the cost model ranks low (it
    rates a 64-column tile at half an SM): rn50-l4-3x3-b8 128x64 1x2-cluster in 4 slabs 14.7 us
    against cuDNN's 15.8 and the record's 16.2; sd-1280@16-b2 256x64 in 3 slabs 39.8 us against
    cuDNN's 41.3 and the record's 42.8. They lost on the batch-32 layers (rn50-l4-3x3: x0.93)."""
    if not _splits_layer(problem):
        return []
    gm = implicit_gemm(problem)
    out = []
    for tile_m, cluster_n in NARROW_SPLIT_TILES:
        tiles = -(-gm.m // tile_m) * -(-gm.n // 64)
        for split in waves.wave_splits(tiles, -(-gm.k // 64), most=SERIAL_SPLIT_MAX, min_blocks=SPLIT_MIN_BLOCKS,
                                       fill=NARROW_SPLIT_FILL):  # fmt: skip
            cfg = HopperConvConfig(tile_m, 64, 64, cluster_n=cluster_n, split_k=split, split_mode=SplitMode.WORKSPACE)
            if check(cfg, problem) is None:
                out.append(cfg)
    return out


N_SPLIT_TILES = ((192, 256), (192, 224))
"""The 192-row tiles (the GEMM kernel's N-split consumers, ``config.TILE_M``) ``n_split_seeds``
weighs: the two the GEMM family measured (``hopper_gemm.picks.GEMM_TILE_RATES``: 192x256 0.96,
192x224 0.94 of the best tile's TFLOP/s), the 192-row shapes its cost model ranks."""
N_SPLIT_GAIN = 0.97
"""A 192-row seed is offered when the cost model puts it below this share of the best 64-, 128-
or 256-row tiling's cost: a layer whose pixel count those leave a part-empty last wave for and 192
rows do not (ResNet-50's 3x3 layers of stages 3 and 4 at batch 128-256: 131 and 132 tiles of
192x256, one wave of 132 SMs, against 392 tiles of 128x128 or 196 of 128x256)."""


def n_split_seeds(problem: ConvProblem) -> list[HopperConvConfig]:
    """Seeds of 192-row tiles (``N_SPLIT_TILES``, unclustered and, where the layer has two or more
    tile columns, in a 1x2 cluster that multicasts the im2col tile) when the GEMM family's cost
    model of the implicit GEMM (``hopper_gemm.picks.modelled_configs``: ``kernels.waves`` with its
    measured tile rates, tile_k 64), data-parallel, puts the cheaper of them below ``N_SPLIT_GAIN``
    of its best other tiling; else none."""
    gm = implicit_gemm(problem)
    ranked = [(cost, cfg) for cost, cfg in modelled_configs(gm) if cfg.split_k == 1]
    base = min((cost for cost, cfg in ranked if cfg.tile_m != 192), default=None)
    wide = [(cost, cfg.tile_n) for cost, cfg in ranked if (cfg.tile_m, cfg.tile_n) in N_SPLIT_TILES]
    if base is None or not wide or min(wide)[0] >= N_SPLIT_GAIN * base:
        return []
    tn = min(wide)[1]
    out = [HopperConvConfig(192, tn, 64)]
    if -(-gm.n // tn) >= 2:
        out.append(HopperConvConfig(192, tn, 64, cluster_n=2))
    return [cfg for cfg in out if check(cfg, problem) is None]


def _streams_layer(problem: ConvProblem) -> bool:
    """Whether the space offers the layer stream-K (``STREAM_K_MAX_OUTPUT``, ``SPLIT_K_MIN_K``)."""
    gm = implicit_gemm(problem)
    return gm.m * gm.n <= STREAM_K_MAX_OUTPUT and gm.k >= SPLIT_K_MIN_K


def _splits_layer(problem: ConvProblem) -> bool:
    """Whether the space offers the layer split-K: its output tiles alone leave SMs idle and its K
    loop is long (``SPLIT_K_MAX_OUTPUT``, ``SPLIT_K_MIN_K``)."""
    gm = implicit_gemm(problem)
    return gm.m * gm.n <= SPLIT_K_MAX_OUTPUT and gm.k >= SPLIT_K_MIN_K


class HopperConvFamily(KernelFamily[HopperConvConfig]):
    name = "hopper_conv"
    SOURCE_FILES = SOURCE_FILES
    """Files (relative to ``autocutlass/kernels``) whose code decides the generated kernel."""

    def __init__(self, cache_dir: Path | None = None) -> None:
        self._cache_dir = cache_dir

    def supports(self, problem: ConvProblem) -> str | None:
        return problem_supported(problem)

    def space(self, problem: ConvProblem) -> Sequence[HopperConvConfig]:
        """Tiles x clusters x schedules x raster/swizzle at stages = as many as fit (the TMA
        store; the direct store too for tiny outputs). Split-K (cooperative, ``layer_splits``, summed
        serially or through the workspace and the reduce kernel) joins where the output tiles
        cannot fill the GPU and the K loop is long; stream-K (cooperative, swizzle 1) where the
        output fills at most a few waves (``STREAM_K_MAX_OUTPUT``) and the K loop is long."""
        gm = implicit_gemm(problem)
        stores = tuple(Store) if gm.m <= SMALL_M_DIRECT_STORE else (Store.TMA,)
        out = [
            HopperConvConfig(tm, tn, tk, cm, cn, st, sch, ras, sw, 1, sto)
            for tm, tn, tk, (cm, cn), st, sch, ras, sw, sto in itertools.product(
                TILE_M, TILE_N, TILE_K, CLUSTERS, TUNED_STAGES, tuple(Schedule), tuple(Raster), SWIZZLE, stores
            )
        ]
        if _splits_layer(problem):
            out += [
                HopperConvConfig(tm, tn, tk, cm, cn, st, Schedule.COOPERATIVE, ras, 1, sk, Store.TMA, mode)
                for tm, tn, tk in itertools.product(TILE_M, TILE_N, TILE_K)
                for sk in layer_splits(problem, tm, tn, tk)
                for (cm, cn), st, ras, mode in itertools.product(CLUSTERS, TUNED_STAGES, tuple(Raster), tuple(SplitMode))
            ]
        if _streams_layer(problem):
            out += [
                HopperConvConfig(tm, tn, tk, cm, cn, st, Schedule.COOPERATIVE, ras, 1, 1, Store.TMA, stream_k=True)
                for tm, tn, tk, (cm, cn), st, ras in itertools.product(
                    TILE_M, TILE_N, TILE_K, CLUSTERS, TUNED_STAGES, tuple(Raster)
                )
            ]
        return out

    def check(self, config: HopperConvConfig, problem: ConvProblem) -> str | None:
        return check(config, problem)

    def seeds(self, problem: ConvProblem) -> Sequence[HopperConvConfig]:
        """First guesses by layer shape, best guess first, from probe sweeps on an H100
        (benchmarks/probes/conv_probe.py --sweep 16, 2026-11-23: the fastest configs of seven ResNet-50
        and Stable Diffusion layers). Tiles whose width divides K (``fitting_tile_n``) walked along
        N with a wide swizzle won the large layers (sd-640@32: 128x160x64 n/8, 1.18-1.33x cuDNN), a
        narrow ping-pong tile the K = 64 layers (rn50-l1-3x3, 1.15x), 128x128 tiles with im2col
        multicast the few-tile layers (rn50-l3-3x3, 1.13x) and 64-row tiles those with fewer
        128x128 tiles than half the SMs (rn50-l4-3x3, 0.89x). A few-tile layer's second guess is the
        cost model's (``modelled_pick``), which may split the K loop so that its units fill a wave; a
        small-batch one's also 64-column tiles in workspace slabs (``narrow_split_seeds``). Any layer's
        second guesses are 192-row tiles where the cost model says they fill the last wave better
        than the 64-, 128- and 256-row tiles (``n_split_seeds``; session 44, not yet measured).
        Stream-K is in the space, not in the seeds: on an H100 it beat neither the records nor the
        seeds of the suite's few-wave layers (``STREAM_K_MAX_OUTPUT``)."""
        c = HopperConvConfig
        pp, n_ = Schedule.PINGPONG, Raster.ALONG_N
        gm = implicit_gemm(problem)
        fit = fitting_tile_n(gm.n)
        if gm.n <= 64:  # few output channels: one narrow tile column, long pixel runs
            guesses = [c(128, 64, 64, schedule=pp), c(256, 64, 64), c(128, 64, 64, cluster_m=2)]
        elif gm.m * gm.n <= SPLIT_K_MAX_OUTPUT:  # few tiles: small tiles, split-K for long K
            guesses = [
                c(128, 128, 64, cluster_n=2, raster=n_), c(64, 128, 128, raster=n_, swizzle=4),
                c(128, 128, 64, schedule=pp), c(128, 128, 64, cluster_m=2),
            ]
            if -(-gm.m // 128) * -(-gm.n // 128) < budgets.SM_COUNT_SM90 // 2:  # 64-row tiles fill more SMs
                guesses[:2] = guesses[1::-1]
            if gm.k >= SPLIT_K_MIN_K:
                guesses.insert(2, c(128, 128, 64, split_k=2))
            pick = modelled_pick(problem)
            if pick is not None and pick not in guesses:
                guesses.insert(1, pick)
            slabs = modelled_pick(problem, SplitMode.WORKSPACE)
            if slabs is not None and slabs not in guesses:
                guesses.insert(2, slabs)
            for narrow in reversed(narrow_split_seeds(problem)):
                if narrow not in guesses:
                    guesses.insert(3, narrow)
        else:  # large: tiles that fit K, walked along N (the im2col tile stays in L2 across them)
            guesses = [
                c(128, fit, 64, raster=n_, swizzle=8), c(128, fit, 64, cluster_m=2, raster=n_, swizzle=8),
                c(128, 128, 64, cluster_m=2, schedule=pp), c(128, 256, 64, cluster_m=2), c(256, 128, 64, cluster_n=2),
            ]
        for wide in reversed(n_split_seeds(problem)):  # 192-row tiles where they fill the last wave
            if wide not in guesses:
                guesses.insert(1, wide)
        guesses += [c(128, 128, 64), c(64, 128, 64), c(64, 64, 64)]
        return self.feasible_seeds(guesses, problem)

    def config_to_dict(self, config: HopperConvConfig) -> dict[str, Any]:
        return config.as_dict()

    def config_from_dict(self, d: dict[str, Any]) -> HopperConvConfig:
        return HopperConvConfig.from_dict(d)

    def compile(self, config: HopperConvConfig, problem: ConvProblem) -> Any:
        """A runner in the conv convention ``runner(x, w, y, *, bias, residual, alpha, beta)``
        (``hopper_conv.runner``), not a ``GemmRunner``."""
        from autocutlass.kernels.hopper_conv.runner import HopperConvRunner

        return HopperConvRunner(config, problem, self._cache_dir)

    def simplicity(self, config: HopperConvConfig) -> tuple[int, ...]:
        return (
            config.cluster_size,
            int(config.schedule is Schedule.PINGPONG),
            config.swizzle,
            int(config.raster is Raster.ALONG_N),
            int(config.stages != 0),
            config.tile_k,
            int(config.store is Store.DIRECT),
            config.split_k,
            int(config.split_mode is SplitMode.WORKSPACE),
            int(config.stream_k),
        )

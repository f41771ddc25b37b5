"""Hopper (sm_90a) implicit-GEMM conv2d wgrad family: dw = dy^T x im2col(x), batched over the
filter taps, the activation loaded by Hopper's im2col TMA.

Modules: ``config`` (the frozen config and its axes), ``plan`` (the implicit GEMM and the
compile-time plan), ``check`` (feasibility with reasons), ``kernel`` (the CuTe DSL kernel: the
GEMM kernel's consumers, split-K, stream-K and epilogue behind a dy TMA + x im2col TMA
producer), ``compile`` (symbolic-shape compile, in-process and on-disk caches), ``runner`` (the
callable, in the conv wgrad convention ``runner(dy, x, dw)``), ``sources`` (the files the
family's hash covers). Only ``kernel``, ``compile`` and ``runner`` touch the DSL, and only when
used.

**Tuned-only, on by default** (``Settings.conv_wgrad_kernel``; ``AUTOCUTLASS_CONV_WGRAD=0``
switches it off, and ``supports`` then answers every problem with ``GATE_REASON``): a wgrad
problem this GPU has a record of (or of its bucket) runs the record's kernel, or cuDNN where its
tuning measured cuDNN faster (vendor verdicts, of the cuDNN mode torch would run); any other runs cuDNN
(``TUNED_ONLY``: no nearest-neighbour, sibling or default config stands in), since an untuned
config can lose to cuDNN by far (the default config of a 64-channel layer: x0.08).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autocutlass.kernels import budgets, waves
from autocutlass.kernels.base import KernelFamily
from autocutlass.kernels.hopper_conv_wgrad.check import check, problem_supported
from autocutlass.kernels.hopper_conv_wgrad.config import (
    CLUSTERS,
    SERIAL_SPLIT_MAX,
    SLAB_GROUPS,
    SPLIT_K,
    SPLIT_MAX,
    SWIZZLE,
    TAP_CHANNELS,
    TILE_K,
    TILE_M,
    TILE_N,
    HopperConvWgradConfig,
    Raster,
    Schedule,
    SplitMode,
    Store,
)
from autocutlass.kernels.hopper_conv_wgrad.plan import implicit_gemm
from autocutlass.kernels.hopper_conv_wgrad.sources import SOURCE_FILES

if TYPE_CHECKING:
    from autocutlass.ops.conv.problem import ConvProblem

__all__ = ["GATE_REASON", "HopperConvWgradConfig", "HopperConvWgradFamily", "check"]

GATE_REASON = "hopper_conv_wgrad is switched off (AUTOCUTLASS_CONV_WGRAD=0)"
SMALL_OUTPUT_DIRECT_STORE = 64 * 64 * 9
"""Filters with at most this many elements (K*C*R*S) also get the direct store."""


def output_tiles(problem: ConvProblem, tile_m: int, tile_n: int, tap_channels: int = 0) -> int:
    """Output tiles of the implicit GEMM: K tiles x C tiles x taps, or with several taps per tile
    (``tap_channels``) K tiles x tiles of the R*S*C columns."""
    if tap_channels:
        return -(-problem.k // tile_m) * -(-(problem.r * problem.s * problem.c) // tile_n)
    return -(-problem.k // tile_m) * -(-problem.c // tile_n) * problem.r * problem.s


def tile_widths(problem: ConvProblem) -> list[tuple[int, int]]:
    """(tile_n, tap_channels) of the space: every ``TILE_N`` with one tap per tile; for a layer of
    exactly 64 or 128 input channels (``TAP_CHANNELS``) the widths that hold two or more of its
    taps side by side; and for a layer whose C is a multiple of 64, the widths that do not divide C,
    as tiles across the taps in 64-channel boxes (a 320-channel layer's 192-wide tiles: 15 over its
    2880 columns instead of 2 per tap, a sixth of theirs past C)."""
    out = [(tn, 0) for tn in TILE_N]
    if problem.c in TAP_CHANNELS[1:]:
        out += [(tn, problem.c) for tn in TILE_N if tn % problem.c == 0 and tn > problem.c]
    box = TAP_CHANNELS[1]
    if problem.c % box == 0 and problem.r * problem.s > 1:
        out += [(tn, box) for tn in TILE_N if tn > box and tn % box == 0 and problem.c % tn and (tn, problem.c) not in out]
    return out


MODEL_TILE_K = 64
"""The pixels per K block of the configs the cost model ranks (``modelled_configs``)."""

MIN_SPLIT_BLOCKS = 4
"""The fewest K blocks a split of the pixel loop is left with, in the model's configs and the
wave-filling split (``layer_splits``)."""

def wave_split(problem: ConvProblem, tile_m: int, tile_n: int, tap_channels: int, tile_k: int) -> tuple[int, ...]:
    """The split count that fills a wave with this tile shape's work units
    (``kernels.waves.wave_splits``), when ``SPLIT_K`` lacks it: ``(s,)`` or ``()``."""
    k_blocks = -(-implicit_gemm(problem).k // tile_k)
    tiles = output_tiles(problem, tile_m, tile_n, tap_channels)
    extra = waves.wave_splits(tiles, k_blocks, most=SPLIT_MAX, min_blocks=MIN_SPLIT_BLOCKS)
    return tuple(s for s in extra if s not in SPLIT_K)


def layer_splits(problem: ConvProblem, tile_m: int, tile_n: int, tap_channels: int, tile_k: int) -> tuple[int, ...]:
    """The split counts (above 1) the space and the model offer a tile shape: ``SPLIT_K``'s, then
    its ``wave_split``."""
    return (*SPLIT_K[1:], *wave_split(problem, tile_m, tile_n, tap_channels, tile_k))


def modelled_configs(problem: ConvProblem) -> list[tuple[float, HopperConvWgradConfig]]:
    """Every (tile_m, tile_n) of the family's axes with each way of sharing the pixel loop
    (data-parallel, each serial split of ``layer_splits`` leaving at least ``MIN_SPLIT_BLOCKS`` K
    blocks per split, the same in workspace mode, stream-K), cooperative, no cluster,
    ``MODEL_TILE_K`` pixels per K block, with the cost ``kernels.waves.predicted_cost`` predicts
    for it, cheapest first (ties: the simpler)."""
    c = HopperConvWgradConfig
    k_blocks = -(-implicit_gemm(problem).k // MODEL_TILE_K)
    out: list[tuple[float, HopperConvWgradConfig]] = []
    for tm, (tn, taps) in itertools.product(TILE_M, tile_widths(problem)):
        tiles = output_tiles(problem, tm, tn, taps)
        out.append((waves.predicted_cost(tiles, k_blocks, tm, tn, MODEL_TILE_K), c(tm, tn, MODEL_TILE_K, tap_channels=taps)))
        for split in layer_splits(problem, tm, tn, taps, MODEL_TILE_K):
            if k_blocks < MIN_SPLIT_BLOCKS * split:
                continue
            if split <= SERIAL_SPLIT_MAX:
                cost = waves.predicted_cost(tiles, k_blocks, tm, tn, MODEL_TILE_K, split=split)
                out.append((cost, c(tm, tn, MODEL_TILE_K, split_k=split, tap_channels=taps)))
            cost = waves.predicted_cost(tiles, k_blocks, tm, tn, MODEL_TILE_K, split=split, workspace=True)
            out.append((cost, c(tm, tn, MODEL_TILE_K, split_k=split, tap_channels=taps,
                                split_mode=SplitMode.WORKSPACE)))
        cost = waves.predicted_cost(tiles, k_blocks, tm, tn, MODEL_TILE_K, stream_k=True)
        out.append((cost, c(tm, tn, MODEL_TILE_K, stream_k=True, tap_channels=taps)))
    out.sort(key=lambda pair: (pair[0], pair[1].split_k, pair[1].stream_k, pair[1].split_mode is SplitMode.WORKSPACE))
    return out


SHARINGS = ("workspace", "split", "data", "stream")
"""The ways a config shares the pixel loop among CTAs (``sharing``)."""


def sharing(config: HopperConvWgradConfig) -> str:
    """How ``config`` shares the pixel loop: workspace slabs, a serial split, data-parallel tiles
    or stream-K (``SHARINGS``)."""
    if config.stream_k:
        return "stream"
    if config.split_k > 1:
        return "workspace" if config.split_mode is SplitMode.WORKSPACE else "split"
    return "data"


def cheapest_per_sharing(ranked: Sequence[HopperConvWgradConfig]) -> dict[str, HopperConvWgradConfig | None]:
    """The first config of each way of sharing the pixel loop in ``ranked`` (cheapest first), None
    for a way it has none of."""
    return {k: next((cfg for cfg in ranked if sharing(cfg) == k), None) for k in SHARINGS}


class HopperConvWgradFamily(KernelFamily[HopperConvWgradConfig]):
    name = "hopper_conv_wgrad"
    TUNED_ONLY = True
    SOURCE_FILES = SOURCE_FILES
    """Files (relative to ``autocutlass/kernels``) whose code decides the generated kernel."""

    def __init__(self, cache_dir: Path | None = None, *, enabled: bool | None = None) -> None:
        self._cache_dir = cache_dir
        self._enabled = enabled

    def enabled(self) -> bool:
        """Whether the family serves problems: ``enabled`` when given, else the setting now."""
        if self._enabled is not None:
            return self._enabled
        from autocutlass.settings import current

        return current().conv_wgrad_kernel

    def supports(self, problem: ConvProblem) -> str | None:
        reason = problem_supported(problem)
        if reason is None and not self.enabled():
            return GATE_REASON
        return reason

    def space(self, problem: ConvProblem) -> Sequence[HopperConvWgradConfig]:
        """Tiles x clusters x schedules x raster/swizzle at stages = as many as fit (the TMA store;
        the direct store too for small filters), then the cooperative tiles with the pixel loop
        split (``SPLIT_K``, serially up to ``SERIAL_SPLIT_MAX`` and to workspace slabs; then each
        tile shape's ``wave_split``), each split also with its pixel blocks interleaved among the
        splits (``interleave``), and with stream-K: a wgrad's output tiles
        are few and its pixel loop long, so most layers want one of these. The interleaved order is
        in the space, not in the seeds: the suite's shipped split records ran within 1% of it
        either way on an H200 (benchmarks/results/2026-11-28-h200-s34-c-wgrad-interleave.txt; rn50-l1-1x1-up's 33
        slabs 29.7 -> 29.2 us)."""
        c = HopperConvWgradConfig
        small = problem.k * problem.c * problem.r * problem.s <= SMALL_OUTPUT_DIRECT_STORE
        stores = tuple(Store) if small else (Store.TMA,)
        widths = tile_widths(problem)
        out = [
            c(tm, tn, tk, cm, cn, 0, sch, ras, sw, 1, False, sto, taps)
            for tm, (tn, taps), tk, (cm, cn), sch, ras, sw, sto in itertools.product(
                TILE_M, widths, TILE_K, CLUSTERS, tuple(Schedule), tuple(Raster), SWIZZLE, stores
            )
        ]
        coop = Schedule.COOPERATIVE
        serial = tuple(sk for sk in SPLIT_K[1:] if sk <= SERIAL_SPLIT_MAX)
        out += [
            c(tm, tn, tk, cm, cn, 0, coop, ras, 1, sk, False, Store.TMA, taps)
            for tm, (tn, taps), tk, (cm, cn), ras, sk in itertools.product(TILE_M, widths, TILE_K, CLUSTERS,
                                                                           tuple(Raster), serial)
        ]
        out += [
            c(tm, tn, tk, cm, cn, 0, coop, ras, 1, sk, False, Store.TMA, taps, SplitMode.WORKSPACE)
            for tm, (tn, taps), tk, (cm, cn), ras, sk in itertools.product(TILE_M, widths, TILE_K, CLUSTERS,
                                                                           tuple(Raster), SPLIT_K[1:])
        ]
        out += [
            c(tm, tn, tk, cm, cn, 0, coop, ras, 1, sk, False, Store.TMA, taps, mode)
            for tm, (tn, taps), tk in itertools.product(TILE_M, widths, TILE_K)
            for sk in wave_split(problem, tm, tn, taps, tk)
            for mode in (SplitMode.SERIAL, SplitMode.WORKSPACE)
            if mode is SplitMode.WORKSPACE or sk <= SERIAL_SPLIT_MAX
            for (cm, cn), ras in itertools.product(CLUSTERS, tuple(Raster))
        ]
        out += [
            dataclasses.replace(cfg, slab_groups=g)
            for cfg in out if cfg.split_mode is SplitMode.WORKSPACE
            for g in SLAB_GROUPS[1:] if cfg.split_k >= 2 * g
        ]
        out += [dataclasses.replace(cfg, interleave=True) for cfg in out if cfg.split_k > 1]
        out += [
            c(tm, tn, tk, cm, cn, 0, coop, ras, 1, 1, True, Store.TMA, taps)
            for tm, (tn, taps), tk, (cm, cn), ras in itertools.product(TILE_M, widths, TILE_K, CLUSTERS, tuple(Raster))
        ]
        return out

    def check(self, config: HopperConvWgradConfig, problem: ConvProblem) -> str | None:
        reason = check(config, problem)
        if reason is None and not self.enabled():
            return GATE_REASON
        return reason

    def seeds(self, problem: ConvProblem) -> Sequence[HopperConvWgradConfig]:
        """First guesses, best first. The cost model's (``modelled_configs``, feasible ones only):
        its best config and the best of each way of sharing the pixel loop (workspace slabs, a
        serial split, data-parallel tiles), cheapest first, since which wins turns on how the
        layer's few output tiles fill the SMs; then its best stream-K config, last of the model's:
        on an H100 (``conv_wgrad_probe``, 2026-11-27) the model's stream-K picks lost to a split or
        data-parallel config on every suite layer, up to 1.7x on the large ones: their CTAs walk
        each tile's pixel loop at scattered offsets, so the tiles that read one pixel block (9 taps
        and more) read it at different times and miss the L2, which the model does not see. Then the
        model's best workspace split with its slabs summed in groups (``slab_groups``: the slab sum of
        many slabs is latency-bound in one chain per output); then the
        best data-parallel config in a 2x1 cluster and as ping-pong, the large and small tiles, and
        a 256x128 stream-K tile in a 1x2 cluster (the dy tile multicast): the one stream-K config
        that won in that probe, on two 512-channel layers (rn50-l4-3x3-b256 x1.039 against x0.974 for
        the best other, vae-512@128 x0.961 against x0.923); and its transpose, 128x256 in a 2x1
        cluster (the im2col tile multicast), which a 40-trial tune found for rn50-l4-3x3-b256 (x1.017,
        2026-11-27, session 26) where the 16-trial record read x0.934."""
        c = HopperConvWgradConfig
        ranked = [cfg for _, cfg in modelled_configs(problem) if self.check(cfg, problem) is None]
        if not ranked:
            return []
        firsts = cheapest_per_sharing(ranked)
        order = {cfg: i for i, cfg in enumerate(ranked)}
        cheapest = next((cfg for cfg in ranked if not cfg.stream_k), None)
        picks = {cfg for cfg in (cheapest, firsts["workspace"], firsts["split"], firsts["data"]) if cfg is not None}
        guesses = sorted(picks, key=order.__getitem__)
        if firsts["stream"] is not None:
            guesses.append(firsts["stream"])
        if firsts["workspace"] is not None:  # its slabs summed in groups (feasible_seeds drops too few)
            guesses.append(dataclasses.replace(firsts["workspace"], slab_groups=SLAB_GROUPS[-1]))
        data = firsts["data"]
        if data is not None:
            guesses += [dataclasses.replace(data, cluster_m=2), dataclasses.replace(data, schedule=Schedule.PINGPONG)]
        guesses += [c(128, 256, 64), c(256, 128, 64), c(128, 128, 64), c(128, 64, 64), c(64, 64, 64),
                    c(256, 128, 64, cluster_n=2, stream_k=True), c(128, 256, 64, cluster_m=2, stream_k=True)]
        return self.feasible_seeds(guesses, problem)

    def config_to_dict(self, config: HopperConvWgradConfig) -> dict[str, Any]:
        return config.as_dict()

    def config_from_dict(self, d: dict[str, Any]) -> HopperConvWgradConfig:
        return HopperConvWgradConfig.from_dict(d)

    def compile(self, config: HopperConvWgradConfig, problem: ConvProblem) -> Any:
        """A runner in the conv wgrad convention ``runner(dy, x, dw)`` (``hopper_conv_wgrad.runner``)."""
        from autocutlass.errors import CantImplement
        from autocutlass.kernels.hopper_conv_wgrad.runner import HopperConvWgradRunner

        if not self.enabled():
            raise CantImplement(GATE_REASON)
        return HopperConvWgradRunner(config, problem, self._cache_dir)

    def simplicity(self, config: HopperConvWgradConfig) -> tuple[int, ...]:
        return (
            config.cluster_size,
            int(config.schedule is Schedule.PINGPONG),
            config.swizzle,
            int(config.raster is Raster.ALONG_N),
            int(config.stages != 0),
            config.tile_k,
            int(config.store is Store.DIRECT),
            config.split_k,
            int(config.stream_k),
            int(config.tap_channels > 0),
            int(config.interleave),
        )

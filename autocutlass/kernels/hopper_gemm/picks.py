"""The Hopper GEMM family's first guesses: the wave cost model's ranking of tile shapes and
K splits (``modelled_configs``, ``model_picks``) and the seeds by problem class (``seeds``), which
the search measures first. Pure arithmetic, no GPU; the space they pick from is ``space``'s."""

from __future__ import annotations

import dataclasses
import functools

from autocutlass.kernels import budgets, waves
from autocutlass.kernels.hopper_gemm.check import TILE_N_FITTED, check, kernel_problem, swapped
from autocutlass.kernels.hopper_gemm.config import SPLIT_K, TUNED_SPLIT_K, HopperGemmConfig, Raster, Schedule, SplitMode, Store
from autocutlass.kernels.hopper_gemm.space import (
    SPLIT_K_MAX_OUTPUT,
    SPLIT_K_MIN_K,
    SWAP_AB_MAX_M,
    split_counts,
    swap_candidate,
    swap_dp_candidate,
    swap_split_candidate,
    swap_tile_ns,
    tf32_swap_saves_copy,
)
from autocutlass.ops.gemm.problem import DType, GemmProblem, Major

LONG_K_MIN = 4096
LONG_K_RATIO = 16
"""``reduction_heavy``'s thresholds."""


def _tiles_128(problem: GemmProblem) -> int:
    return -(-problem.m // 128) * -(-problem.n // 128) * problem.l


def reduction_heavy(problem: GemmProblem) -> bool:
    """Fewer 128x128 output tiles than half the SMs and K >= LONG_K_MIN, with M > 128 or K at least
    LONG_K_RATIO times M and N (a pointwise convolution's wgrad, K = N*H*W pixels; not a decode
    GEMM, whose own seeds split K): its seeds start with stream-K and workspace split-K."""
    if _tiles_128(problem) >= budgets.SM_COUNT_SM90 // 2 or problem.k < LONG_K_MIN:
        return False
    return problem.m > 128 or problem.k >= LONG_K_RATIO * max(problem.m, problem.n)


MODEL_TILE_K = 64
"""The K block (16-bit elements) the cost model ranks tile shapes with."""

GEMM_TILE_RATES: dict[tuple[int, int], float] = {
    (64, 64): 0.42, (64, 128): 0.61, (64, 192): 0.63, (64, 208): 0.71, (64, 224): 0.74, (64, 256): 0.86,
    (128, 64): 0.73, (128, 96): 0.78, (128, 128): 0.91, (128, 160): 0.92, (128, 192): 0.91, (128, 208): 0.96,
    (128, 224): 0.92, (128, 256): 1.0, (256, 96): 0.86, (256, 128): 1.0,
    # the fitted widths (check.TILE_N_FITTED), interpolated between their neighbours
    (128, 112): 0.84, (128, 144): 0.91, (128, 176): 0.91, (128, 240): 0.96,
    # the wide cooperative tile (check.ACC_REGS_WIDE), measured on an H200 (747 TFLOP/s on
    # 3072x6144x4096 'nt', benchmarks/results/2026-11-28-h200-s38-a-wide-tiles.txt)
    (256, 192): 1.0,
    # the 192-row tile whose consumers split N (HopperGemmConfig.n_split), measured on an H200
    # (TFLOP/s over wave fill over 773): 718 and 734 TFLOP/s on 2049x6144x4096 'nn' and
    # 6200x4096x4096 'nt' (benchmarks/results/2026-11-28-h200-s39-b-tune-nsplit.txt). 192x192
    # (668 on 1100x8192x4096 'nt', one shape: 2026-11-28-h200-s39-d-probe-cublas-tiles.txt) is left
    # out until measured on more, 192x128 lost on every shape probed
    (192, 256): 0.96,
    # 192x224 measured swapped on an H100 (TFLOP/s over wave fill and the tiles' useful share, over
    # 773): 680 and 688 TFLOP/s in one wave on 4608x1152x4096 and 1300x4096x4096 'nt'
    # (benchmarks/results/2026-12-07-h100-s41-a-probe-swapped.txt)
    (192, 224): 0.94,
}  # fmt: skip
"""This family's main-loop efficiency per (tile_m, tile_n), for the cost model: the best bf16
TFLOP/s any config of the tile shape reached on the shipped H100 database's problems of M, N, K
>= 4096 (no split, no stream-K, no swap), over the best tile's (773 TFLOP/s, 128x256 and 256x128;
2026-11-25). Higher than the conv wgrad table of ``kernels.waves`` for the narrow tiles (64x256:
0.86 here, 0.6 there). The 128-row tiles of the fitted widths (``check.TILE_N_FITTED``) are
interpolated from their neighbours, not measured; 128x80 and the fitted 64- and 256-row tiles are
left out, so the model never picks them (the search space still has them)."""


N_MAJOR_B_TILE_N = 64
"""With an N-contiguous B the model ranks only tile widths of whole 128-byte swizzle atoms (64
16-bit elements): the table's rates were measured on any layout, and on 'nn' GEMMs narrower atoms
ran far below them (H100, 2026-11-27, benchmarks/results/2026-11-27-h100-s23-fitted-widths-probe.txt:
6144x2304x4096 in 128x224 tiles x0.75 of torch, in 128x144 x0.51-0.57, where 128x256 in a 2x1
cluster reached x0.88; 2049x6144x4096's 16-trial search, seeded with the model's 128x208, found
x0.83 where the shipped 64x256 record reads x0.97)."""


def modelled_configs(problem: GemmProblem) -> list[tuple[float, HopperGemmConfig]]:
    """The configs the cost model ranks (``kernels.waves.predicted_cost`` with ``GEMM_TILE_RATES``),
    cheapest first (ties: the simpler): every tile shape of the table, data-parallel, and where
    the space offers split-K (few output tiles, long K) split ``split_counts`` ways (through the
    workspace; fp8 serially, its reduce kernel applying no scales) keeping at least 4 K blocks per
    split; cooperative, no cluster. Not stream-K: this family's stream-K measured 1.2-1.5x slower
    than the best data-parallel tile where the model favoured it (H100, 2026-11-25: 1536x1536x8192
    100.5 vs 66.5 us, 2049x6144x4096 216.9 vs 180.0 us; benchmarks/results/
    2026-11-25-h100-s14-tune-classes-streamk-picks-trials.json). Empty for decode GEMMs (M <=
    SWAP_AB_MAX_M), whose own seeds split K."""
    if problem.m <= SWAP_AB_MAX_M:
        return []
    c = HopperGemmConfig
    mode = SplitMode.SERIAL if problem.a_dtype is DType.E4M3 else SplitMode.WORKSPACE
    k_blocks = -(-problem.k // MODEL_TILE_K)
    splitting = problem.m * problem.n * problem.l <= SPLIT_K_MAX_OUTPUT and problem.k >= SPLIT_K_MIN_K
    n_major_b = kernel_problem(problem, c()).b_major is Major.ROW
    out: list[tuple[float, HopperGemmConfig]] = []
    for (tm, tn), rate in GEMM_TILE_RATES.items():
        if n_major_b and tn % N_MAJOR_B_TILE_N:
            continue
        tiles = -(-problem.m // tm) * -(-problem.n // tn) * problem.l
        out.append((waves.predicted_cost(tiles, k_blocks, tm, tn, MODEL_TILE_K, rate=rate), c(tm, tn, MODEL_TILE_K)))
        for split in split_counts(problem.m, problem.n, problem.l, tm, tn) if splitting else ():
            if k_blocks >= 4 * split:
                cost = waves.predicted_cost(tiles, k_blocks, tm, tn, MODEL_TILE_K, split=split, rate=rate,
                                            workspace=mode is SplitMode.WORKSPACE)
                out.append((cost, c(tm, tn, MODEL_TILE_K, split_k=split, split_mode=mode)))
    out.sort(key=lambda pair: (pair[0], pair[1].split_k))
    return out


SWAPPED_DP_PICKS = 2
"""Tile shapes of the swapped orientation's data-parallel configs ``model_picks`` offers (where the
model ranks them cheaper than the unswapped pick): the model's rates are the unswapped kernel's, and
swapped the same tile can run slower (H100, benchmarks/results/2026-12-07-h100-s41-a-probe-swapped.txt:
4608x1152x4096 in 128x160 tiles, the model's cheapest, 553 TFLOP/s in two whole waves, where its
second, 192x224, ran 680 in one wave)."""


def _swapped_picks(problem: GemmProblem) -> tuple[tuple[float, HopperGemmConfig] | None, list[tuple[float, HopperGemmConfig]]]:
    """The cost model's cheapest workspace split (for a ``swap_split_candidate``; else None) and
    cheapest data-parallel configs of ``SWAPPED_DP_PICKS`` tile shapes (for a ``swap_dp_candidate``;
    else none) of the swapped problem, each as a ``swap_ab`` config of ``problem`` that ``check``
    accepts, with its modelled cost."""
    want_split, want_dp = swap_split_candidate(problem), swap_dp_candidate(problem)
    split: tuple[float, HopperGemmConfig] | None = None
    dps: list[tuple[float, HopperGemmConfig]] = []
    if want_split or want_dp:
        for cost, cfg in modelled_configs(swapped(problem)):
            if cfg.split_k > 1 and want_split and split is None:
                pick = dataclasses.replace(cfg, swap_ab=True, split_mode=SplitMode.WORKSPACE)
                split = (cost, pick) if check(pick, problem) is None else None
            elif cfg.split_k == 1 and want_dp and len(dps) < SWAPPED_DP_PICKS:
                pick = dataclasses.replace(cfg, swap_ab=True)
                if check(pick, problem) is None:
                    dps.append((cost, pick))
    return split, dps


SPLIT_PICKS = 3
"""Tile shapes whose cheapest split ``model_picks`` offers when a split ranks cheapest of all: the
model ranks them by the waves their work units fill and the tile's main-loop rate, not by the
operand traffic and partial sums that also decide a long-K GEMM, so the search measures the
three cheapest (H100, benchmarks/results/2026-11-27-h100-s24-split-probe.txt: the best of six
few-tile, long-K GEMMs was the model's first split shape on three, its fourth on one)."""


def model_picks(problem: GemmProblem) -> list[HopperGemmConfig]:
    """The cost model's cheapest feasible data-parallel config (``modelled_configs``), preceded,
    when a split ranks cheapest of all, by the cheapest splits of ``SPLIT_PICKS`` tile shapes, each
    in 2-CTA clusters and alone like the data-parallel pick (on the H100 a cluster made the model's
    split 4-7% faster on four of five few-tile, long-K GEMMs and 20% slower on one; 256x256x65536
    x0.870 -> x0.931 of torch in 128x64 tiles split 16 ways,
    benchmarks/results/2026-11-27-h100-s24-split-probe.txt): which tile shape fills the SMs in whole
    waves (2049 rows: 33 tiles of 64 rows, not 17 of 128 that leave a fourth wave 9% full) and
    which split count fills them when the tiles are few (256x256x65536: 8 tiles of 128x64, 16
    ways), what a 16-trial search rarely samples. The data-parallel pick comes in 2-CTA clusters
    and alone (``_clustered``), walking along N on a tall tile grid (``_rastered``); when it has a
    fitted width (``check.TILE_N_FITTED``), the cheapest of
    ``config.TILE_N``'s widths follows, clustered too (the fitted width won 3 of 5 few-tile 'nt'
    GEMMs by 2-6% and lost one by 8%, H100, benchmarks/results/2026-11-27-h100-s23-fitted-widths-probe.txt:
    the search measures both)."""
    costed = [(cost, cfg) for cost, cfg in modelled_configs(problem) if check(cfg, problem) is None]
    if not costed:
        return []
    ranked = [cfg for _, cfg in costed]
    data = next((cfg for cfg in ranked if cfg.split_k == 1), None)
    if data is None:
        return [ranked[0]]
    out: list[HopperGemmConfig] = []
    swap_split, swap_dps = _swapped_picks(problem)
    if ranked[0] is not data:
        shapes: dict[tuple[int, int], HopperGemmConfig] = {}
        for cfg in ranked:
            if cfg.split_k > 1 and len(shapes) < SPLIT_PICKS:
                shapes.setdefault((cfg.tile_m, cfg.tile_n), cfg)
        groups = [_clustered(cfg, problem) for cfg in shapes.values()]
        if swap_split is not None:  # first if the model ranks it cheaper, else after the cheapest split shape
            groups.insert(0 if swap_split[0] < costed[0][0] else 1, _clustered(swap_split[1], problem))
        out = [c for group in groups for c in group]
        # The cheapest split pick with its K blocks interleaved among the splits too (``interleave``).
        # On an H200 (benchmarks/results/2026-11-28-h200-s34-b-split-order-gemm.txt) the interleaved
        # order ran 256x256x65536 'nn' 2.7-7.6% faster in four split configs and five other few-tile,
        # long-K GEMMs -1.2 to +1.8%; the search measures both.
        if out[0].split_k > 1:
            out.insert(1, dataclasses.replace(out[0], interleave=True))
    out += _clustered(_rastered(data, problem), problem)
    data_cost = next(cost for cost, cfg in costed if cfg is data)
    for cost, pick in swap_dps:
        if cost < data_cost:
            out += _clustered(_rastered(pick, problem), problem)
    if data.tile_n in TILE_N_FITTED:
        old = next(cfg for cfg in ranked if cfg.split_k == 1 and cfg.tile_n not in TILE_N_FITTED)
        out += _clustered(_rastered(old, problem), problem)[:2]
    return list(dict.fromkeys(out))


RASTER_ALONG_N_RATIO = 4
"""A data-parallel pick whose tiles along M number at least this many times those along N walks
along N (``_rastered``)."""


def _rastered(cfg: HopperGemmConfig, problem: GemmProblem) -> HopperGemmConfig:
    """``cfg`` walking along N where the tile grid is tall (``RASTER_ALONG_N_RATIO``), so that a
    wave reads each A tile once for the few tile columns, not all of A once per column. On the H100
    (benchmarks/results/2026-11-27-h100-s23-raster-probe.txt) 128x256 tiles in raster along M read
    x0.80-0.82 of torch on 16896x512/1024x4096 and 32768x768x2048, along N x0.99-1.03; swizzle 8
    there x0.11-0.36. Short, wide grids keep raster along M (x0.98-1.07 against x0.79-0.89)."""
    m, n = (problem.n, problem.m) if cfg.swap_ab else (problem.m, problem.n)
    tiles_m, tiles_n = -(-m // cfg.tile_m), -(-n // cfg.tile_n)
    if tiles_m >= RASTER_ALONG_N_RATIO * tiles_n:
        return dataclasses.replace(cfg, raster=Raster.ALONG_N)
    return cfg


def _clustered(cfg: HopperGemmConfig, problem: GemmProblem) -> list[HopperGemmConfig]:
    """``cfg`` in a 2x1 and a 1x2 cluster, those that are feasible, then alone. On the H100
    (benchmarks/results/2026-11-27-h100-s23-fitted-widths-probe.txt and the session-23 tunings) a
    2-CTA cluster beat no cluster by 8-45% on five few-tile 'nt' GEMMs; which of the two shapes
    wins depends on the layout (2x1 on 'nt' and 'tn', 1x2 on 'nn': 2049x6144x4096 in 64x256 tiles
    0.147 ms in 1x2, 0.205 in 2x1, 0.220 alone); on tall grids walked along N no cluster won two of
    three (-raster-probe.txt).

    A cluster whose tile grid must be padded to whole clusters (3 tiles along M in 2x1 clusters
    run as 4) joins only where the padded work units need no more waves of the SMs than ``cfg``'s:
    on an H200 (benchmarks/results/2026-11-28-h200-s34-b-split-order-gemm.txt) 384x384x49152 'nt'
    in 128x128 tiles split 14 ways ran 56.9 us in a 2x1 cluster (12 padded tiles x 14 = 168 units,
    two waves) against 42.3 alone (126 units), and 768x768x16384 'nn' in 128x256 tiles split 7 ways
    69.7 us in a 1x2 cluster against 41.5 alone."""
    both = [dataclasses.replace(cfg, cluster_m=2), dataclasses.replace(cfg, cluster_n=2)]
    waves = cluster_waves(cfg, problem)
    return [c for c in both if check(c, problem) is None and cluster_waves(c, problem) <= waves] + [cfg]


def cluster_tiles(cfg: HopperGemmConfig, problem: GemmProblem) -> int:
    """Output tiles ``cfg`` runs on ``problem`` (swapped for ``swap_ab``), the tile grid padded to
    whole clusters: the persistent scheduler walks whole clusters."""
    m, n = (problem.n, problem.m) if cfg.swap_ab else (problem.m, problem.n)
    tiles_m = -(-m // (cfg.tile_m * cfg.cluster_m)) * cfg.cluster_m
    tiles_n = -(-n // (cfg.tile_n * cfg.cluster_n)) * cfg.cluster_n
    return tiles_m * tiles_n * problem.l


def cluster_waves(cfg: HopperGemmConfig, problem: GemmProblem, sms: int = budgets.SM_COUNT_SM90) -> int:
    """Waves of ``sms`` CTAs that ``cfg``'s work units take (``cluster_tiles``, each tile split
    ``split_k`` ways)."""
    return -(-(cluster_tiles(cfg, problem) * cfg.split_k) // sms)


def seeds(problem: GemmProblem) -> list[HopperGemmConfig]:
    """Good first guesses by problem class, best guess first: the winners of the best-of-space
    sweeps on an H200 (benchmarks/results/2026-11-21-h200-hopper-gemm-sweep-*.json)."""
    c = HopperGemmConfig
    pp, n_ = Schedule.PINGPONG, Raster.ALONG_N
    if problem.m <= 128:  # decode: stream the weight with many small tiles
        guesses = [
            c(64, 128, 128), c(64, 96, 64, cluster_n=2, raster=n_), c(64, 64, 128, cluster_m=2),
            c(64, 96, 128, cluster_n=2), c(64, 128, 64, split_k=2), c(64, 64, 128, split_k=2),
            c(64, 128, 64), c(64, 256, 64, schedule=pp),
        ]
    elif problem.m * problem.n * problem.l <= 2048 * 4096 or problem.k <= 512:  # few tiles or short K
        guesses = [
            c(128, 128, 64, cluster_m=2, schedule=pp), c(128, 128, 64, cluster_n=2, schedule=pp, raster=n_, swizzle=8),
            c(128, 192, 64, cluster_n=2, raster=n_), c(64, 256, 64, cluster_m=2, schedule=pp),
            c(128, 128, 64), c(128, 256, 64, cluster_n=2), c(256, 128, 64, cluster_m=2),
        ]
    else:  # large: the cooperative 128x256 / 256x128 family with 2-CTA clusters
        guesses = [
            c(128, 256, 64, cluster_m=2, raster=n_, swizzle=8), c(128, 256, 64, cluster_n=2, swizzle=2),
            # the wide tile (check.ACC_REGS_WIDE): the H200's best of 11 probed large GEMMs
            # in 3 (benchmarks/results/2026-11-28-h200-s38-a-wide-tiles.txt)
            c(256, 192, 64, cluster_n=2),
            # 192 rows split along N (HopperGemmConfig.n_split): M a few rows past a multiple
            # of 128 in fewer wasted rows; x1.040 of torch on 2049x6144x4096 'nn' where the
            # shipped record read x0.983, while 192x128 lost on all 7 probed shapes
            # (benchmarks/results/2026-11-28-h200-s39-a-nsplit-probe.txt)
            c(192, 256, 64),
            c(256, 128, 64), c(256, 128, 64, cluster_m=2, swizzle=4), c(256, 128, 64, cluster_n=2, swizzle=4),
            c(128, 256, 64), c(128, 256, 64, cluster_n=2), c(128, 128, 64, schedule=pp, cluster_m=2),
        ]
    if reduction_heavy(problem):
        # Reduction-heavy with few output tiles (a pointwise convolution's wgrad: K = N*H*W
        # pixels, e.g. 256 x 64 outputs over 100352 pixels): the tiles alone leave most SMs
        # idle, so the K loop is shared: stream-K (every SM the same share), then split-K
        # through the workspace (deterministic either way).
        splits = max(2, min(max(SPLIT_K), budgets.SM_COUNT_SM90 // _tiles_128(problem)))
        guesses = [c(128, 128, 64, stream_k=True), c(128, 64, 64, stream_k=True),
                   c(128, 128, 64, split_k=splits, split_mode=SplitMode.WORKSPACE),
                   c(128, 128, 64, split_k=splits, split_mode=SplitMode.WORKSPACE, interleave=True)] + guesses  # fmt: skip
    if 64 < problem.m <= 128:
        # 128 tokens: 64x64 tiles in 2x1 clusters (two token halves share each weight tile by
        # multicast; 128 CTAs) storing straight from registers. The H200 winner on
        # decode128-down (43.7 us vs cuBLAS 46.1, benchmarks/results/2026-11-22-h200-decode128-probe.txt),
        # which a 64-trial search does not always sample.
        guesses.insert(1, c(64, 64, 128, cluster_m=2, store=Store.DIRECT))
    if swap_candidate(problem):
        # The swapped kernel: weight rows on WGMMA's M side, tokens as a narrow tile_n; with
        # the split count that fills whole waves, and with the tokens multicast (cluster_m 2).
        tn = swap_tile_ns(problem.m)[0]
        balanced = split_counts(problem.n, problem.m, problem.l, 64, tn)[len(TUNED_SPLIT_K) - 1:]
        swaps = [c(128, tn, 128, swap_ab=True), c(128, tn, 128, cluster_m=2, swap_ab=True)]
        if balanced and problem.k >= SPLIT_K_MIN_K:
            swaps.insert(1, c(64, tn, 128, split_k=balanced[0], swap_ab=True))
        guesses = guesses[:1] + swaps + guesses[1:]
    modelled = model_picks(problem)
    if modelled:
        # The tile shape (and, for few tiles and a long K loop, the split) whose work units
        # fill whole waves of the SMs, which the wave model predicts (``model_picks``).
        guesses = guesses[:1] + [g for g in modelled if g not in guesses[:1]] + guesses[1:]
    guesses += [c(128, 128, 64), c(64, 128, 64), c(64, 64, 64)]
    if problem.a_dtype.bytes != 2:  # tf32 / fp8: the same shapes with the same bytes per stage row
        scale = {4: 0.5, 1: 2}[problem.a_dtype.bytes]
        guesses = [dataclasses.replace(g, tile_k=int(g.tile_k * scale)) for g in guesses]
    if tf32_swap_saves_copy(problem):
        # The swapped kernel reads the N-major operand through registers and copies nothing.
        guesses = [v for g in guesses[:4] for v in (dataclasses.replace(g, swap_ab=True), g)] + guesses[4:]
    return guesses


BUCKET_FIT_TOLERANCE = 0.10
"""How much worse, relative to the cost model's cheapest config of each problem, a config tuned
for one problem may be modelled on another of its bucket before it no longer ``fits`` there."""


def config_cost(config: HopperGemmConfig, problem: GemmProblem) -> float:
    """The wave model's predicted time of ``config`` on ``problem`` (``kernels.waves.predicted_cost``,
    MAC units; comparable only between configs of one problem): its tile grid padded to whole
    clusters (``cluster_tiles``), split, stream-K or data-parallel as the config says, at the
    tile's ``GEMM_TILE_RATES`` rate (``waves.DEFAULT_RATE`` for a shape the table lacks)."""
    return waves.predicted_cost(
        cluster_tiles(config, problem), -(-problem.k // MODEL_TILE_K), config.tile_m, config.tile_n, MODEL_TILE_K,
        split=config.split_k, stream_k=config.stream_k, workspace=config.split_mode is SplitMode.WORKSPACE,
        rate=GEMM_TILE_RATES.get((config.tile_m, config.tile_n), waves.DEFAULT_RATE),
    )  # fmt: skip


@functools.lru_cache(maxsize=1024)
def modelled_best(problem: GemmProblem) -> float | None:
    """The cost model's cheapest predicted time for ``problem`` (``modelled_configs``), or None
    where the model ranks nothing (decode GEMMs). Not the swapped orientation's data-parallel pick
    (``_swapped_picks``): unmeasured, it must not make every record of an M residue a misfit."""
    ranked = modelled_configs(problem)
    return ranked[0][0] if ranked else None


def fits(config: HopperGemmConfig, tuned: GemmProblem, problem: GemmProblem) -> bool:
    """Whether ``config``, the winner of ``tuned``, is expected to serve ``problem`` (another GEMM
    of its bucket: the same N, K and layouts, another M) about as well: False where the cost model
    predicts it more than ``BUCKET_FIT_TOLERANCE`` further from the model's cheapest config on
    ``problem`` than on ``tuned``, i.e. where ``problem``'s M leaves its tiles a worse wave fill
    (2304x3072x4096's 128x224 tiles in a 1x2 cluster: 18 x 14 = 252 tiles in two waves of 132 SMs
    at M = 2304, 20 x 14 = 280 in three at M = 2560). The tile's main-loop rate cancels out of the
    comparison; the ping-pong schedule (two tiles in flight per SM, which the model does not
    describe) and problems the model ranks nothing for (decode GEMMs) always fit."""
    if config.schedule is Schedule.PINGPONG or tuned == problem:
        return True
    best_tuned, best_here = modelled_best(tuned), modelled_best(problem)
    if best_tuned is None or best_here is None:
        return True
    ratio_tuned = config_cost(config, tuned) / best_tuned
    return config_cost(config, problem) / best_here <= ratio_tuned * (1 + BUCKET_FIT_TOLERANCE)

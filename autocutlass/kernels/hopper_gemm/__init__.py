"""Hopper (sm_90a) warp-specialised persistent GEMM family.

Modules: ``config`` (the frozen config and its axes), ``plan`` (derived compile-time plan and
the shared-memory arithmetic), ``check`` (feasibility with reasons), ``kernel`` (the CuTe DSL
kernel), ``compile`` (symbolic-shape compile, in-process and on-disk caches), ``runner`` (the
callable), ``sources`` (the files the family's hash covers). ``kernel`` and ``reduce`` import the
DSL when imported, ``compile`` only to compile; a runner served from the kernel cache never
imports it (see ``runner``).

The family serves ``GemmProblem``s and any other op's problem that is a GEMM in disguise: a
problem with a ``gemm_lowering()`` returning a lowering (``.gemm``, the GEMM it is, and
``.runner(gemm_runner)``, the GEMM runner adapted to the op's calling convention), e.g. a
pointwise NHWC convolution (``ops.conv.problem.GemmLowering``). Space, check and seeds are those
of the lowered GEMM; records stay keyed by the op's own problem.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from autocutlass.errors import CantImplement
from autocutlass.kernels import budgets, waves
from autocutlass.kernels.base import KernelFamily
from autocutlass.kernels.hopper_gemm import sources
from autocutlass.kernels.hopper_gemm.check import (
    TILE_N_ALL,
    TILE_N_FITTED,
    acc_regs,
    check,
    copied_operands,
    kernel_problem,
    problem_supported,
    swapped,
    tile_ks,
)
from autocutlass.kernels.hopper_gemm.config import (
    CLUSTERS,
    SPLIT_K,
    SWIZZLE,
    TILE_M,
    TUNED_SPLIT_K,
    HopperGemmConfig,
    Raster,
    Schedule,
    SplitMode,
    Store,
)
from autocutlass.ops.gemm.problem import DType, GemmProblem, Major

__all__ = ["HopperGemmConfig", "HopperGemmFamily", "Raster", "Schedule", "SplitMode", "Store", "check"]

SMALL_M_DIRECT_STORE = 256
SPLIT_K_MAX_OUTPUT = 4096 * 4096
"""Output elements (M * N * L) up to which the space offers split-K."""
SPLIT_K_MIN_K = 1024
TILE_N_WIDE = tuple(t for t in TILE_N_ALL if t >= 64)
TILE_N_NARROW = tuple(t for t in TILE_N_ALL if t < 64)
NARROW_N = 64
"""Problems with N up to this also get the narrow tiles (TILE_N_NARROW)."""
SWAP_AB_MAX_M = 128
SWAP_AB_MIN_N = 256
"""Decode GEMMs (M <= SWAP_AB_MAX_M tokens, N >= SWAP_AB_MIN_N) also get ``swap_ab`` configs."""
STREAM_K_MIN_K = 512
"""Problems with at least this K (and few output tiles, as for split-K) also get stream-K
configs: with fewer K blocks per tile, the partial sums cost as much as the tiles."""
LONG_K_MIN = 4096
LONG_K_RATIO = 16
"""``reduction_heavy``'s thresholds."""
BALANCED_SPLITS_MAX = 2
BALANCE_MIN = 0.95


def _tiles_128(problem: GemmProblem) -> int:
    return -(-problem.m // 128) * -(-problem.n // 128) * problem.l


def data_parallel_only(tile_m: int, tile_n: int) -> bool:
    """Tiles the space and the cost model offer without split-K or stream-K: the wide ones
    (``wide_tile``) and the 192-row tiles whose consumers split N (``HopperGemmConfig.n_split``,
    which ``check`` runs data-parallel only)."""
    return HopperGemmConfig(tile_m, tile_n).n_split or wide_tile(tile_m, tile_n)


def wide_tile(tile_m: int, tile_n: int) -> bool:
    """A cooperative tile of more fp32 accumulator registers per consumer thread than
    ``budgets.ACC_REGS_MAX`` (``check.ACC_REGS_WIDE``: 256x144 to 256x192). The space and the
    cost model offer it data-parallel only (``split_counts`` gives it none, stream-K leaves it
    out): split and stream-K, it lost to the shipped records on every few-tile, long-K GEMM probed
    (H200, x0.11-0.94 of torch against the records' x0.93-1.01:
    benchmarks/results/2026-11-28-h200-s38-e-wide-split-probe.txt)."""
    return acc_regs(HopperGemmConfig(tile_m, tile_n)) > budgets.ACC_REGS_MAX


def reduction_heavy(problem: GemmProblem) -> bool:
    """Fewer 128x128 output tiles than half the SMs and K >= LONG_K_MIN, with M > 128 or K at least
    LONG_K_RATIO times M and N (a pointwise convolution's wgrad, K = N*H*W pixels; not a decode
    GEMM, whose own seeds split K): its seeds start with stream-K and workspace split-K."""
    if _tiles_128(problem) >= budgets.SM_COUNT_SM90 // 2 or problem.k < LONG_K_MIN:
        return False
    return problem.m > 128 or problem.k >= LONG_K_RATIO * max(problem.m, problem.n)


def swap_candidate(problem: GemmProblem) -> bool:
    """Decode GEMMs of 16-bit or fp8 inputs get ``swap_ab`` configs (tf32 ones are served
    through K-major copies instead)."""
    return problem.m <= SWAP_AB_MAX_M and problem.n >= SWAP_AB_MIN_N and problem.a_dtype.bytes in (1, 2)


def tf32_swap_saves_copy(problem: GemmProblem) -> bool:
    """tf32 problems whose swapped kernel copies fewer operands than the unswapped one (an
    N-major B becomes an M-major A', read through registers): they get the swapped mirror of the
    (unsplit) space, e.g. 'nn', where the swapped kernel copies nothing."""
    if problem.a_dtype is not DType.TF32:
        return False
    plain, swap = HopperGemmConfig(64, 64, 32), HopperGemmConfig(64, 64, 32, swap_ab=True)
    return sum(copied_operands(problem, swap)) < sum(copied_operands(problem, plain))


def swap_tile_ns(tokens: int) -> tuple[int, ...]:
    """tile_n of a swapped decode GEMM: the narrowest of 16, 32, 64, 128 that holds every token,
    and half of it (two tile columns) when that is at least 16."""
    full = next((t for t in (16, 32, 64, 128) if t >= tokens), 128)
    return (full, full // 2) if full >= 32 else (full,)


def split_counts(m: int, n: int, l: int, tile_m: int, tile_n: int, sms: int = budgets.SM_COUNT_SM90) -> tuple[int, ...]:  # noqa: E741
    """Split-K counts for a tile shape: TUNED_SPLIT_K (without 1), plus up to BALANCED_SPLITS_MAX
    other counts up to 16 whose work units (tiles x splits) fill whole waves of ``sms`` CTAs to at
    least BALANCE_MIN (``kernels.waves.wave_fill``), e.g. 48 tiles x 11 splits = 4 waves of 132
    exactly. The convolution families take one wave only (``kernels.waves.wave_splits``). None for
    a wide or 192-row tile (``data_parallel_only``)."""
    if data_parallel_only(tile_m, tile_n):
        return ()
    tiles = -(-m // tile_m) * -(-n // tile_n) * l
    extra = []
    for s in SPLIT_K:
        if s in TUNED_SPLIT_K or s == 1:
            continue
        if waves.wave_fill(tiles * s, sms) >= BALANCE_MIN:
            extra.append(s)
        if len(extra) == BALANCED_SPLITS_MAX:
            break
    return tuple(TUNED_SPLIT_K[1:]) + tuple(extra)


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


SWAP_SPLIT_ROWS = 128
"""A split-K GEMM whose M is not a multiple of this many rows (its last 128-row tile partly empty)
also gets the swapped kernel with workspace split-K (``swap_ab``: N on the 64-row WGMMA side, M as
tile_n, which fits M's residue in widths of 16): ``swapped_split_configs`` in the space,
``model_picks``'s swapped split first where the model ranks it cheaper."""


def space_tile_ns(n: int) -> tuple[int, ...]:
    """The space's tile widths for an output of ``n`` columns: the wide ones, and the narrow ones
    (16, 32) for narrow outputs."""
    return TILE_N_WIDE + (TILE_N_NARROW if n <= NARROW_N else ())


def swap_dp_candidate(problem: GemmProblem) -> bool:
    """A 16-bit GEMM that is not a decode GEMM: the cost model also ranks its swapped orientation
    data-parallel (``swap_ab``: the problem's N on the kernel's M side, M on tile_n in widths of 16),
    and the space has the swapped mirror of its data-parallel cooperative configs
    (``swapped_dp_configs``). An M a few rows past a tile multiple wastes most of a row of tiles
    and often a partial wave; swapped, it wastes at most 15 columns of a tile row. cuBLAS's kernels
    on such shapes fit whole waves that way (H200, session 39: 128x160 on 4608x1152x4096 in 9 x 29 =
    261 tiles, two waves, only transposed; 128x168 on 1300x4096x4096 in 32 x 8 = 256)."""
    return problem.a_dtype in (DType.BF16, DType.FP16) and problem.m > SWAP_AB_MAX_M


def swap_split_candidate(problem: GemmProblem) -> bool:
    """A 16-bit split-K GEMM (few output tiles, long K) with an M residue (``SWAP_SPLIT_ROWS``)
    that is not a decode GEMM (those have their own swapped space)."""
    return (problem.a_dtype in (DType.BF16, DType.FP16) and problem.m % SWAP_SPLIT_ROWS != 0
            and problem.m > SWAP_AB_MAX_M and problem.m * problem.n * problem.l <= SPLIT_K_MAX_OUTPUT
            and problem.k >= SPLIT_K_MIN_K)  # fmt: skip


def _swapped_picks(problem: GemmProblem) -> tuple[tuple[float, HopperGemmConfig] | None, ...]:
    """The cost model's cheapest workspace split (for a ``swap_split_candidate``) and cheapest
    data-parallel config (for a ``swap_dp_candidate``) of the swapped problem, each as a
    ``swap_ab`` config of ``problem`` that ``check`` accepts, with its modelled cost, or None."""
    want_split, want_dp = swap_split_candidate(problem), swap_dp_candidate(problem)
    split = dp = None
    if want_split or want_dp:
        for cost, cfg in modelled_configs(swapped(problem)):
            if cfg.split_k > 1 and want_split and split is None:
                pick = dataclasses.replace(cfg, swap_ab=True, split_mode=SplitMode.WORKSPACE)
                split = (cost, pick) if check(pick, problem) is None else None
            elif cfg.split_k == 1 and want_dp and dp is None:
                pick = dataclasses.replace(cfg, swap_ab=True)
                dp = (cost, pick) if check(pick, problem) is None else None
    return split, dp


SPLIT_PICKS = 3
"""Tile shapes whose cheapest split ``model_picks`` offers when a split ranks cheapest of all: the
model ranks them by the waves their work units fill and the tile's main-loop rate, not by the
operand traffic and partial sums that also decide a long-K GEMM, so the search measures the
three cheapest (H100, benchmarks/results/2026-11-27-h100-s24-split-probe.txt: the best of six
few-tile, long-K GEMMs was the model's first split shape on three, its fourth on one)."""


def swapped_split_configs(problem: GemmProblem, tks: tuple[int, ...]) -> list[HopperGemmConfig]:
    """The ``swap_ab`` workspace split-K configs of a ``swap_split_candidate``: every tile of the
    swapped problem (N rows on tile_m, M columns on tile_n) with its ``split_counts``, cooperative,
    TMA store (the slabs go to the workspace either way), swizzle 1."""
    sp = swapped(problem)
    out = []
    for tm, tn in itertools.product(TILE_M, space_tile_ns(sp.n)):
        for tk, (cm, cn), ras, sk in itertools.product(tks, CLUSTERS, tuple(Raster), split_counts(sp.m, sp.n, sp.l, tm, tn)):
            out.append(HopperGemmConfig(tm, tn, tk, cm, cn, 0, Schedule.COOPERATIVE, ras, 1, sk, Store.TMA,
                                        SplitMode.WORKSPACE, swap_ab=True))  # fmt: skip
    return out


def swapped_dp_configs(problem: GemmProblem, tks: tuple[int, ...]) -> list[HopperGemmConfig]:
    """The data-parallel ``swap_ab`` configs of a ``swap_dp_candidate``: every tile of the swapped
    problem (N rows on tile_m, M columns on tile_n), cooperative, TMA store, swizzle 1, each
    cluster and raster order."""
    sp = swapped(problem)
    return [
        HopperGemmConfig(tm, tn, tk, cm, cn, 0, Schedule.COOPERATIVE, ras, 1, 1, Store.TMA, swap_ab=True)
        for tm, tn, tk, (cm, cn), ras in itertools.product(TILE_M, space_tile_ns(sp.n), tks, CLUSTERS, tuple(Raster))
    ]


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
    swap_split, swap_dp = _swapped_picks(problem)
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
    if swap_dp is not None and swap_dp[0] < next(cost for cost, cfg in costed if cfg is data):
        out += _clustered(_rastered(swap_dp[1], problem), problem)
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


def cluster_waves(cfg: HopperGemmConfig, problem: GemmProblem, sms: int = budgets.SM_COUNT_SM90) -> int:
    """Waves of ``sms`` CTAs that ``cfg``'s work units take, the tile grid padded to whole clusters
    (the persistent scheduler walks whole clusters) and each tile split ``split_k`` ways."""
    m, n = (problem.n, problem.m) if cfg.swap_ab else (problem.m, problem.n)
    tiles_m = -(-m // (cfg.tile_m * cfg.cluster_m)) * cfg.cluster_m
    tiles_n = -(-n // (cfg.tile_n * cfg.cluster_n)) * cfg.cluster_n
    return -(-(tiles_m * tiles_n * problem.l * cfg.split_k) // sms)


TUNED_STAGES = (0,)
"""The search space keeps stages at 'as many as fit': with one CTA per SM a deeper ring is never
slower; explicit stage counts remain valid configs for users and tests."""


def as_gemm(problem: Any) -> GemmProblem | None:
    """``problem`` itself if it is a GEMM, the GEMM it lowers to, or None."""
    if isinstance(problem, GemmProblem):
        return problem
    lower = getattr(problem, "gemm_lowering", None)
    lowering = lower() if lower is not None else None
    return None if lowering is None else lowering.gemm


def _gemm(problem: Any) -> GemmProblem:
    g = as_gemm(problem)
    if g is None:
        raise ValueError(f"hopper_gemm does not serve {problem.describe()}: it is not a GEMM")
    return g


class HopperGemmFamily(KernelFamily[HopperGemmConfig]):
    name = "hopper_gemm"
    SOURCE_FILES = sources.SOURCE_FILES

    def __init__(self, cache_dir: Path | None = None) -> None:
        self._cache_dir = cache_dir

    def source_hash(self) -> str:
        return sources.source_hash()

    def supports(self, problem: Any) -> str | None:
        g = as_gemm(problem)
        if g is None:
            return f"{problem.describe()} is not a GEMM (only pointwise stride-1 unpadded NHWC convolutions are)"
        return problem_supported(g)

    def space(self, problem: Any) -> Sequence[HopperGemmConfig]:
        return self._space(_gemm(problem))

    def _space(self, problem: GemmProblem) -> Sequence[HopperGemmConfig]:
        """Tiles x clusters x schedules x raster/swizzle at stages = as many as fit. The direct
        (shared-memory-free) store joins only for small M, where the epilogue is a small part of
        the time and its missing barriers can pay; on large problems the TMA store measured
        8-10% faster (H200, 2026-11-21). Narrow tiles (tile_n 16, 32) join for narrow outputs.

        Split-K joins where output tiles alone cannot fill the GPU (decode shapes, long K): the
        cooperative configs again, with the K loop split ``split_counts`` ways, serial (either
        store) or through the workspace and the reduce kernel, each with its splits' K blocks
        contiguous and interleaved (``interleave``). Decode GEMMs (M <= 128, 16-bit)
        also get the swapped kernel (``swap_ab``: the weight's rows on WGMMA's 64-row side, the
        tokens as a narrow tile_n), with and without serial split-K.

        Stream-K (every SM gets the same share of (tile, K block) iterations) joins for the
        same few-tile problems, with K >= STREAM_K_MIN_K: the cooperative unsplit configs at
        swizzle 1, swapped too for decode GEMMs. It is in the space, not in the seeds: on the
        H200 it beat the data-parallel kernel of the same tile where the tiles leave a second
        wave nearly empty (1536x1536x8192 in 128x128 tiles: 67.5 vs 87.8 us), but no suite case,
        where another tile shape or split-K does better
        (benchmarks/results/2026-11-22-h200-streamk-probe.txt)."""
        stores = tuple(Store) if problem.m <= SMALL_M_DIRECT_STORE else (Store.TMA,)
        tks = tile_ks(problem.a_dtype)
        tile_ns = space_tile_ns(problem.n)
        out = [
            HopperGemmConfig(tm, tn, tk, cm, cn, st, sch, ras, sw, 1, sto)
            for tm, tn, tk, (cm, cn), st, sch, ras, sw, sto in itertools.product(
                TILE_M, tile_ns, tks, CLUSTERS, TUNED_STAGES, tuple(Schedule), tuple(Raster), SWIZZLE, stores
            )
        ]
        if problem.m * problem.n * problem.l <= SPLIT_K_MAX_OUTPUT and problem.k >= SPLIT_K_MIN_K:
            modes = [(sto, SplitMode.SERIAL) for sto in stores]
            if problem.a_dtype is not DType.E4M3:  # the reduce kernel applies no fp8 scales
                modes.append((Store.TMA, SplitMode.WORKSPACE))
            for tm, tn in itertools.product(TILE_M, tile_ns):
                splits = split_counts(problem.m, problem.n, problem.l, tm, tn)
                out += [
                    HopperGemmConfig(tm, tn, tk, cm, cn, st, Schedule.COOPERATIVE, ras, 1, sk, sto, mode)
                    for tk, (cm, cn), st, ras, sk, (sto, mode) in itertools.product(
                        tks, CLUSTERS, TUNED_STAGES, tuple(Raster), splits, modes
                    )
                ]
        if swap_candidate(problem):
            out += self._swapped_space(problem, stores, tks)
        if swap_split_candidate(problem):
            out += swapped_split_configs(problem, tks)
        if swap_dp_candidate(problem):
            out += swapped_dp_configs(problem, tks)
        out += [dataclasses.replace(cfg, interleave=True) for cfg in out if cfg.split_k > 1]
        if problem.m * problem.n * problem.l <= SPLIT_K_MAX_OUTPUT and problem.k >= STREAM_K_MIN_K:
            out += [
                dataclasses.replace(c, stream_k=True)
                for c in out
                if c.split_k == 1 and c.schedule is Schedule.COOPERATIVE and c.swizzle == 1
                and not data_parallel_only(c.tile_m, c.tile_n)
            ]
        if tf32_swap_saves_copy(problem):
            out += [dataclasses.replace(c, swap_ab=True) for c in out if not c.swap_ab and c.split_k == 1]
        return out

    @staticmethod
    def _swapped_space(problem: GemmProblem, stores: tuple[Store, ...], tks: tuple[int, ...]) -> list[HopperGemmConfig]:
        """The ``swap_ab`` configs of a decode GEMM: kernel M = the problem's N (tile_m 64 or
        128), kernel N = the token count (the narrowest tile_n that holds it, and half of that);
        one raster order (the swapped problem has one or two tile columns)."""
        m_k, n_k = problem.n, problem.m  # the swapped problem's M and N
        out: list[HopperGemmConfig] = []
        for tm, tn in itertools.product((64, 128), swap_tile_ns(n_k)):
            splits = (1,)
            if problem.k >= SPLIT_K_MIN_K:
                splits += split_counts(m_k, n_k, problem.l, tm, tn)
            for tk, (cm, cn), sto, sk in itertools.product(tks, CLUSTERS, stores, splits):
                out.append(HopperGemmConfig(tm, tn, tk, cm, cn, 0, Schedule.COOPERATIVE, Raster.ALONG_M, 1, sk, sto,
                                            SplitMode.SERIAL, swap_ab=True))  # fmt: skip
                if sk == 1 and tm == 128:
                    out.append(HopperGemmConfig(tm // 2, tn, tk, cm, cn, 0, Schedule.PINGPONG, Raster.ALONG_M, 1, 1,
                                                sto, swap_ab=True))  # fmt: skip
        return list(dict.fromkeys(out))

    def check(self, config: HopperGemmConfig, problem: Any) -> str | None:
        g = as_gemm(problem)
        return check(config, g) if g is not None else f"{problem.describe()} is not a GEMM"

    def seeds(self, problem: Any) -> Sequence[HopperGemmConfig]:
        return self._seeds(_gemm(problem))

    def _seeds(self, problem: GemmProblem) -> Sequence[HopperGemmConfig]:
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
        return self.feasible_seeds(guesses, problem)

    def config_to_dict(self, config: HopperGemmConfig) -> dict[str, Any]:
        return config.as_dict()

    def config_from_dict(self, d: dict[str, Any]) -> HopperGemmConfig:
        return HopperGemmConfig.from_dict(d)

    def compile(self, config: HopperGemmConfig, problem: Any) -> Any:
        """A ``GemmRunner`` for a GEMM; for a lowered problem, the lowering's adapter around one."""
        from autocutlass.kernels.hopper_gemm.runner import HopperGemmRunner

        if isinstance(problem, GemmProblem):
            return HopperGemmRunner(config, problem, self._cache_dir)
        lowering = problem.gemm_lowering()
        if lowering is None:
            raise CantImplement(f"hopper_gemm does not serve {problem.describe()}: it is not a GEMM")
        return lowering.runner(HopperGemmRunner(config, lowering.gemm, self._cache_dir))

    def simplicity(self, config: HopperGemmConfig) -> tuple[int, ...]:
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
            int(config.swap_ab),
            int(config.stream_k),
            int(config.interleave),
        )

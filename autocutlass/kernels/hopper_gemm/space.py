"""The Hopper GEMM family's search space: the configs a problem gets (``space``) and the rules
that decide which (split-K and stream-K for few output tiles, the swapped orientation for decode
GEMMs, M residues and tf32 layouts). Pure Python; the family (``hopper_gemm``) serves it and
``picks`` ranks within it."""

from __future__ import annotations

import dataclasses
import itertools

from autocutlass.kernels import budgets, waves
from autocutlass.kernels.hopper_gemm.check import TILE_N_ALL, acc_regs, copied_operands, swapped, tile_ks
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
from autocutlass.ops.gemm.problem import DType, GemmProblem

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
BALANCED_SPLITS_MAX = 2
BALANCE_MIN = 0.95


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


TUNED_STAGES = (0,)
"""The search space keeps stages at 'as many as fit': with one CTA per SM a deeper ring is never
slower; explicit stage counts remain valid configs for users and tests."""


def space(problem: GemmProblem) -> list[HopperGemmConfig]:
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
        out += swapped_decode_space(problem, stores, tks)
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


def swapped_decode_space(problem: GemmProblem, stores: tuple[Store, ...], tks: tuple[int, ...]) -> list[HopperGemmConfig]:
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

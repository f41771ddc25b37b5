"""The persistent-GEMM cost model that ranks seed configs (``autocutlass.kernels.waves``): wave
quantisation, split-K and stream-K trade-offs, tile efficiency."""

from __future__ import annotations

import dataclasses

import pytest

from autocutlass.kernels.waves import DEFAULT_RATE, REDUCE_LAUNCH_COST, predicted_cost, tile_rate


def test_a_tile_past_a_whole_wave_costs_a_second_wave() -> None:
    one = predicted_cost(132, 64, 128, 128, 64, sms=132)
    assert predicted_cost(133, 64, 128, 128, 64, sms=132) == pytest.approx(2 * one)
    assert predicted_cost(100, 64, 128, 128, 64, sms=132) == pytest.approx(one)  # idle SMs cost as much


def test_stream_k_wins_a_part_filled_wave_and_loses_a_full_one() -> None:
    # 69 tiles with a long K loop: data-parallel leaves 63 of 132 SMs idle
    assert predicted_cost(69, 512, 128, 128, 64, stream_k=True) < 0.6 * predicted_cost(69, 512, 128, 128, 64)
    # exactly one wave: nothing to balance, stream-K only adds its fix-up
    assert predicted_cost(132, 64, 128, 128, 64, stream_k=True) > predicted_cost(132, 64, 128, 128, 64)


def test_split_k_pays_off_for_few_tiles_and_long_k_only() -> None:
    few_long = [predicted_cost(9, 1568, 64, 64, 64, split=s) for s in (1, 4, 12)]
    assert few_long[0] > few_long[1] > few_long[2]
    many_short = [predicted_cost(900, 32, 128, 128, 64, split=s) for s in (1, 2)]
    assert many_short[1] > many_short[0]


def test_workspace_splits_reduce_in_parallel() -> None:
    # 5 tiles, 1568 K blocks: a serial split's chain of partials grows with the splits, workspace
    # slabs are summed by a second kernel spread over the GPU
    serial = [predicted_cost(5, 1568, 64, 128, 64, split=s) for s in (8, 16)]
    work = [predicted_cost(5, 1568, 64, 128, 64, split=s, workspace=True) for s in (8, 16, 24)]
    assert work[0] < serial[0] and work[1] < serial[1]
    assert work[0] > work[1] > work[2]  # 40, 80, 120 CTAs: more of the 132 SMs busy
    # a one-wave layer gains nothing but pays the second launch
    assert predicted_cost(132, 64, 128, 128, 64, split=2, workspace=True) > predicted_cost(132, 64, 128, 128, 64)
    assert predicted_cost(1, 8, 64, 64, 64, split=2, workspace=True) > REDUCE_LAUNCH_COST


def test_larger_tiles_run_nearer_the_peak() -> None:
    assert tile_rate(64, 64) < tile_rate(64, 128) < tile_rate(128, 128) < tile_rate(128, 256) == 1.0
    assert tile_rate(96, 96) == DEFAULT_RATE
    # the same work in 128x256 tiles is cheaper than in 64x64 tiles when both fill whole waves
    assert predicted_cost(132, 64, 128, 256, 64) < predicted_cost(132 * 8, 64, 64, 64, 64)


def test_empty_and_bad_arguments() -> None:
    assert predicted_cost(0, 10, 128, 128, 64) == 0.0 == predicted_cost(10, 0, 128, 128, 64)
    with pytest.raises(ValueError, match="split=0"):
        predicted_cost(1, 1, 128, 128, 64, split=0)


def test_gemm_seeds_start_with_the_tiles_that_fill_whole_waves() -> None:
    """The GEMM family's seeds put the cost model's picks (``model_picks``) right after the first
    guess: the data-parallel tile shape that fills whole waves of the SMs (M just above a tile
    multiple: 64-row or 208-wide tiles, not 17 rows of 128 that leave a fourth wave nearly empty),
    preceded, for few tiles and a long K loop, by the splits of the three cheapest tile shapes (the
    cheapest's work units fill most SMs), each in 2-CTA clusters and alone; never
    stream-K (measured slower than the data-parallel tiles in this family); none for decode."""
    from autocutlass.kernels.hopper_gemm import (
        GEMM_TILE_RATES, HopperGemmFamily, cluster_waves, model_picks, modelled_configs,
    )
    from autocutlass.kernels.hopper_gemm.check import TILE_N_FITTED, check
    from autocutlass.ops.gemm.problem import GemmProblem, Major

    fam = HopperGemmFamily()
    sms = 132

    def waves_of(cfg, p):  # noqa: ANN001, ANN202 - (waves, last wave's fill)
        units = -(-p.m // cfg.tile_m) * -(-p.n // cfg.tile_n) * p.l * cfg.split_k
        return -(-units // sms), units / sms

    for p in (GemmProblem(m=256, n=256, k=65536), GemmProblem(m=512, n=384, k=32768)):
        seeds = fam.seeds(p)
        assert all(check(s, p) is None for s in seeds)
        picks = model_picks(p)
        splits = [c for c in picks if c.split_k > 1]
        split, data = splits[0], picks[len(splits)]
        assert picks[: len(splits)] == splits and all(c.split_k == 1 for c in picks[len(splits):]), p.describe()
        assert waves_of(split, p)[1] >= 0.9 and (split.cluster_m, split.cluster_n) != (1, 1), p.describe()
        # the three cheapest split tile shapes, each in the 2-CTA clusters check allows and alone
        shapes = list(dict.fromkeys((c.tile_m, c.tile_n) for c in splits))
        assert len(shapes) == 3, p.describe()
        for shape in shapes:
            group = [(c.cluster_m, c.cluster_n) for c in splits if (c.tile_m, c.tile_n) == shape and not c.interleave]
            assert len(group) >= 2 and group[-1] == (1, 1) and len(set(group)) == len(group), (shape, group)
        # the cheapest split comes next with its K blocks interleaved among the splits, no other
        assert splits[1] == dataclasses.replace(split, interleave=True), p.describe()
        assert [c for c in splits if c.interleave] == [splits[1]], p.describe()
        assert seeds[1 : 1 + len(picks)] == picks, (p.describe(), [s.short() for s in seeds[:4]])
    residue = GemmProblem(m=2049, n=6144, k=4096)  # 17 x 24 tiles of 128x256: 4 waves for 3.1 of work
    pick = model_picks(residue)[0]
    full, fill = waves_of(pick, residue)
    assert (pick.tile_m, pick.tile_n) != (128, 256) and fill / full > 0.9 and fam.seeds(residue)[1] == pick
    # N-contiguous B ('nn'): only whole 128-byte swizzle atoms (tile_n a multiple of 64) are ranked,
    # not 17 x 30 of 128x208 (x0.83 on the H100); 11 x 24 tiles of 192x256 (2 waves exactly; x1.040
    # of torch on an H200 where 64x256's record read x0.983) before 33 x 24 of 64x256 (6 waves)
    assert all(c.tile_n % 64 == 0 for c in model_picks(residue)) and (pick.tile_m, pick.tile_n) == (192, 256)
    ranked = [(c.tile_m, c.tile_n) for _, c in modelled_configs(residue) if check(c, residue) is None]
    assert ranked.index((192, 256)) < ranked.index((64, 256)) < ranked.index((128, 256))
    nt = GemmProblem(m=2049, n=6144, k=4096, b_major=Major.COL)
    # K-major B: any width the table rates, 128x208 (17 x 30 tiles, 3.9 waves) among them
    ranked_nt = [(c.tile_m, c.tile_n) for _, c in modelled_configs(nt) if check(c, nt) is None]
    assert ranked_nt[:2] == [(192, 256), (128, 208)], ranked_nt[:4]
    for m, n, k in ((1536, 1536, 8192), (6144, 2304, 4096)):
        # 12 x 12 (48 x 18) tiles of 128x128 leave a last wave 9% (55%) full; 128x144 tiles (a
        # fitted width) make 132 (48 x 16 = 768: 5.8 waves), and no width of config.TILE_N does.
        # K-major B ('nt'): the fitted pick in 2x1 and 1x2 clusters and alone, then the best of
        # TILE_N's widths in both clusters, right after the first guess; a cluster that pads the
        # tile grid into another wave is left out (1536 x 1536: 12 x 11 tiles of 128x144, one wave
        # exactly, 12 x 12 = 144 in 1x2 clusters)
        few = GemmProblem(m=m, n=n, k=k, b_major=Major.COL)
        picks = model_picks(few)
        fitted = [(2, 1), (1, 1)] if m == 1536 else [(2, 1), (1, 2), (1, 1)]
        assert [(c.tile_n, c.cluster_m, c.cluster_n) for c in picks[:len(fitted)]] == [(144, *cl) for cl in fitted], picks
        rest = picks[len(fitted):]
        assert len(rest) == 2 and rest[0].tile_n == rest[1].tile_n and rest[0].tile_n not in TILE_N_FITTED
        assert (rest[0].cluster_m, rest[0].cluster_n) == (2, 1) and fam.seeds(few)[1:1 + len(picks)] == picks
        alone = [dataclasses.replace(c, cluster_m=1, cluster_n=1) for c in picks]
        assert all(cluster_waves(c, few) <= cluster_waves(a, few) for c, a in zip(picks, alone, strict=True))
        # N-contiguous B ('nn'): fitted widths are infeasible (measured 1.5-2.3x slower), never picked
        # unswapped (swapped, B' = A^T is K-major: ``test_swapped_orientation_joins_where_it_fills_the_waves``)
        nn = GemmProblem(m=m, n=n, k=k)
        assert all(c.tile_n not in TILE_N_FITTED for c in model_picks(nn) if not c.swap_ab) and model_picks(nn)
        assert "fitted width" in (check(picks[1], nn) or "")
    few = GemmProblem(m=1536, n=1536, k=8192, b_major=Major.COL)
    assert waves_of(model_picks(few)[0], few) == (1, 1.0)
    for p in (GemmProblem(m=4096, n=4096, k=4096), GemmProblem(m=8192, n=8192, k=8192)):
        assert {(c.tile_m, c.tile_n, c.split_k) for c in model_picks(p)} in ({(128, 256, 1)}, {(256, 128, 1)})
    assert model_picks(GemmProblem(m=16, n=6144, k=4096)) == []  # decode: its own swapped split seeds
    assert all((c.tile_m, c.tile_n) in GEMM_TILE_RATES and not c.stream_k
               for p in (GemmProblem(m=1024, n=2048, k=8192), GemmProblem(m=256, n=64, k=100352))
               for c in model_picks(p))  # fmt: skip


def test_split_picks_leave_out_clusters_whose_padding_costs_a_wave() -> None:
    """A 2-CTA cluster pads an odd tile count to whole clusters; where the padded work units need
    another wave, the model's picks drop that cluster (H200, session 34: 384x384x49152 'nt' in
    128x128 tiles split 14 ways, 9 tiles padded to 12 in 2x1: 56.9 us against 42.3 alone; H100,
    session 25: 320x640x40960 in 128x128 tiles split 8 ways, 15 tiles padded to 18-20 in either
    cluster: x0.60 of torch against x0.80 alone)."""
    from autocutlass.kernels.hopper_gemm import HopperGemmConfig as C, cluster_waves, model_picks
    from autocutlass.ops.gemm.problem import GemmProblem, Major

    p = GemmProblem(m=384, n=384, k=49152, b_major=Major.COL)
    assert cluster_waves(C(128, 128, 64, split_k=14), p) == 1
    assert cluster_waves(C(128, 128, 64, cluster_m=2, split_k=14), p) == 2
    assert cluster_waves(C(128, 128, 64, cluster_n=2, split_k=14), p) == 2
    assert cluster_waves(C(64, 128, 64, cluster_m=2, split_k=7), p) == 1  # 6 x 3 tiles: no padding
    picks = model_picks(p)
    assert picks and all(cluster_waves(c, p) <= cluster_waves(dataclasses.replace(c, cluster_m=1, cluster_n=1), p)
                         for c in picks)
    assert (128, 128, 1, 1, 14) in [(c.tile_m, c.tile_n, c.cluster_m, c.cluster_n, c.split_k) for c in picks]
    assert not any((c.tile_m, c.tile_n, c.split_k) == (128, 128, 14) and c.cluster_size > 1 for c in picks)
    # swapped: the kernel's M is the problem's N (640 = 5 tiles of 128), so 2x1 pads, 1x2 does not
    sw = GemmProblem(m=320, n=640, k=40960)
    assert cluster_waves(C(128, 160, 64, cluster_m=2, split_k=13, swap_ab=True), sw) == 2
    assert cluster_waves(C(128, 160, 64, cluster_n=2, split_k=13, swap_ab=True), sw) == 1


def test_m_residue_long_k_gets_the_swapped_workspace_split() -> None:
    """320 rows are 2.5 tiles of 128: the space adds swap_ab workspace splits (640 columns on the
    64-row side, the 320 rows in tile_n 160) and model_picks offers the swapped split, in its
    clusters, first where the model ranks it cheaper (H100: 128x160 swapped split 13 ways x0.929 of
    torch against x0.802 unswapped, benchmarks/results/2026-11-27-h100-s25-swap-split-probe.txt).
    M a multiple of 128, decode GEMMs and fp8 get none."""
    from autocutlass.kernels.hopper_gemm import HopperGemmFamily, SplitMode, check, model_picks, swap_split_candidate
    from autocutlass.ops.gemm.problem import DType, GemmProblem

    fam = HopperGemmFamily()
    p = GemmProblem(m=320, n=640, k=40960)
    assert swap_split_candidate(p)
    swaps = [c for c in fam.space(p) if c.swap_ab and c.split_k > 1]  # (unsplit: swap_dp_candidate)
    assert swaps and all(c.split_mode is SplitMode.WORKSPACE for c in swaps)
    assert any(check(c, p) is None and (c.tile_m, c.tile_n) == (128, 160) for c in swaps)
    picks = model_picks(p)
    # 5 x 2 swapped tiles split 13 ways fill one wave (130 units); a 2x1 cluster pads them to 6 x 2
    # (156 units, two waves: x0.674 of torch in that probe, where 1x2 read x0.929), so it is left out
    assert [(c.swap_ab, c.tile_n, c.cluster_m, c.cluster_n, c.interleave) for c in picks[:3]] == [
        (True, 160, 1, 2, False), (True, 160, 1, 2, True), (True, 160, 1, 1, False)]
    assert any(not c.swap_ab and c.split_k > 1 for c in picks) and all(check(c, p) is None for c in picks)
    assert picks[0] in fam.seeds(p)
    for other in (GemmProblem(m=256, n=256, k=65536), GemmProblem(m=16, n=6144, k=4096),
                  GemmProblem(m=320, n=640, k=40960, a_dtype=DType.E4M3, b_dtype=DType.E4M3)):
        assert not swap_split_candidate(other)
        assert not any(c.swap_ab and c.split_mode is SplitMode.WORKSPACE and c.split_k > 1 for c in fam.space(other))


def test_swapped_orientation_joins_where_it_fills_the_waves() -> None:
    """A 16-bit GEMM that is no decode GEMM gets the swapped orientation data-parallel (swap_ab: M on
    the kernel's N side, in widths of 16): the space holds its cooperative configs, and the model's
    cheapest swapped tile shapes (two) join the picks, clustered and alone, after the unswapped pick,
    where the model ranks them cheaper. 4608 x 1152: 9 x 29 tiles of 128x160 swapped are two waves of 132
    (cuBLAS's own tiling of it, H200 session 39), unswapped 36 x 8 are three; square GEMMs, decode
    GEMMs and fp8 get none."""
    from autocutlass.kernels.hopper_gemm import HopperGemmFamily, check, cluster_waves, model_picks, swap_dp_candidate
    from autocutlass.ops.gemm.problem import DType, GemmProblem, Major

    fam = HopperGemmFamily()
    p = GemmProblem(m=4608, n=1152, k=4096, b_major=Major.COL)
    assert swap_dp_candidate(p)
    swaps = [c for c in fam.space(p) if c.swap_ab]
    assert swaps and all(c.split_k == 1 and c.schedule.value == "cooperative" for c in swaps)  # stream-K too
    assert any(check(c, p) is None and (c.tile_m, c.tile_n) == (128, 160) for c in swaps)
    picks = model_picks(p)
    first_swap = next(i for i, c in enumerate(picks) if c.swap_ab)
    assert not any(c.swap_ab for c in picks[:first_swap]) and first_swap > 0
    swapped_picks = [c for c in picks if c.swap_ab]
    # the model's two cheapest swapped tile shapes (SWAPPED_DP_PICKS), both cheaper than the unswapped
    # pick: 128x160, whose 9 x 29 tiles fill two waves (a 2-CTA cluster pads them into a third, so it
    # runs alone), then 192x224 (measured faster swapped on an H100), whose 6 x 21 fill one
    assert [(c.tile_m, c.tile_n) for c in swapped_picks if c.cluster_size == 1] == [(128, 160), (192, 224)]
    assert [(c.cluster_m, c.cluster_n) for c in swapped_picks if c.tile_m == 128] == [(1, 1)]
    assert cluster_waves(swapped_picks[0], p) == 2
    assert [cluster_waves(c, p) for c in swapped_picks if c.tile_m == 192] == [1] * sum(c.tile_m == 192 for c in swapped_picks)
    assert all(check(c, p) is None for c in picks) and all(c in fam.seeds(p) for c in swapped_picks)
    for other in (GemmProblem(m=4096, n=4096, k=4096), GemmProblem(m=8192, n=8192, k=8192, b_major=Major.COL)):
        assert not any(c.swap_ab for c in model_picks(other)), other.describe()  # the same tiles either way
    for other in (GemmProblem(m=16, n=6144, k=4096),
                  GemmProblem(m=4608, n=1152, k=4096, a_dtype=DType.E4M3, b_dtype=DType.E4M3, b_major=Major.COL)):
        assert not swap_dp_candidate(other)
        assert not any(c.swap_ab and c.split_k == 1 and c.tile_m >= 128 and c.tile_n >= 64 for c in model_picks(other))


def test_gemm_model_picks_walk_along_n_on_tall_tile_grids() -> None:
    """A data-parallel pick whose tiles along M are at least RASTER_ALONG_N_RATIO times those along N
    walks along N (a wave then reads each A tile once for the few tile columns; raster along M
    read x0.80 of torch on the H100 where along N read x0.99-1.03), swizzle 1; short, wide and
    square grids keep raster along M."""
    from autocutlass.kernels.hopper_gemm import RASTER_ALONG_N_RATIO, Raster, model_picks
    from autocutlass.ops.gemm.problem import GemmProblem, Major

    for tall in (GemmProblem(m=16896, n=512, k=4096, b_major=Major.COL), GemmProblem(m=32768, n=768, k=2048)):
        picks = [c for c in model_picks(tall) if c.split_k == 1]
        assert picks and all(c.raster is Raster.ALONG_N and c.swizzle == 1 for c in picks), picks
        c = picks[0]
        assert -(-tall.m // c.tile_m) >= RASTER_ALONG_N_RATIO * -(-tall.n // c.tile_n)
    for other in (GemmProblem(m=512, n=16896, k=4096, b_major=Major.COL), GemmProblem(m=4096, n=4096, k=4096)):
        assert all(c.raster is Raster.ALONG_M for c in model_picks(other)), model_picks(other)

"""The persistent-GEMM cost model that ranks seed configs (``autocutlass.kernels.waves``): wave
quantisation, split-K and stream-K trade-offs, tile efficiency."""

from __future__ import annotations

import pytest

from autocutlass.kernels.waves import DEFAULT_RATE, predicted_cost, tile_rate


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


def test_larger_tiles_run_nearer_the_peak() -> None:
    assert tile_rate(64, 64) < tile_rate(64, 128) < tile_rate(128, 128) < tile_rate(128, 256) == 1.0
    assert tile_rate(96, 96) == DEFAULT_RATE
    # the same work in 128x256 tiles is cheaper than in 64x64 tiles when both fill whole waves
    assert predicted_cost(132, 64, 128, 256, 64) < predicted_cost(132 * 8, 64, 64, 64, 64)


def test_empty_and_bad_arguments() -> None:
    assert predicted_cost(0, 10, 128, 128, 64) == 0.0 == predicted_cost(10, 0, 128, 128, 64)
    with pytest.raises(ValueError, match="split=0"):
        predicted_cost(1, 1, 128, 128, 64, split=0)

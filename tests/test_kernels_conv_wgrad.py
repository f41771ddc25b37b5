"""The Hopper implicit-GEMM conv2d wgrad family without a GPU: the batched implicit GEMM it runs
(checked numerically against torch's weight gradient), its gate (off by default), reasons, space,
seeds, config round trips, plan, compile key and source hash; and (marker ``compile``) sampled
configs compiled with CUTE_DSL_ARCH=sm_90a."""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from _conv_helpers import dsl_available
from autocutlass.device import KERNELS_DIR, source_hash
from autocutlass.kernels import families_for, get_family, source_hashes
from autocutlass.kernels.hopper_conv_wgrad import (
    GATE_REASON,
    HopperConvWgradFamily,
    layer_splits,
    modelled_configs,
    output_tiles,
    tile_widths,
)
from autocutlass.kernels.hopper_conv_wgrad.config import SPLIT_K
from autocutlass.kernels.waves import wave_splits
from autocutlass.kernels.hopper_conv_wgrad import HopperConvWgradConfig as C
from autocutlass.kernels.hopper_conv_wgrad.check import check
from autocutlass.kernels.hopper_conv_wgrad.compile import compile_key
from autocutlass.kernels.hopper_conv_wgrad.plan import implicit_gemm, make_plan
from autocutlass.kernels.hopper_conv_wgrad.sources import SOURCE_FILES
from autocutlass.ops.conv.problem import ConvProblem
from autocutlass.ops.gemm.problem import Major
from autocutlass.ops.types import DType, Epilogue

SHAPES_CONV = Path(__file__).resolve().parents[1] / "benchmarks" / "shapes-conv.json"
ON = HopperConvWgradFamily(enabled=True)


def wgrad(**kw: object) -> ConvProblem:
    base: dict[str, object] = {"direction": "wgrad", "n": 32, "h": 56, "w": 56, "c": 64, "k": 64, "r": 3, "s": 3,
                               "pad_h": 1, "pad_w": 1}  # fmt: skip
    base.update(kw)
    return ConvProblem(**base)  # type: ignore[arg-type]


# ---- the implicit GEMM -------------------------------------------------------------------------
def test_implicit_gemm_dimensions() -> None:
    g = implicit_gemm(wgrad(n=2, h=9, w=7, c=24, k=40, r=3, s=5, stride_h=2, pad_h=1, pad_w=2))
    assert (g.m, g.n, g.k, g.l) == (40, 24, 2 * 5 * 7, 15) and (g.a_major, g.b_major) == (Major.COL, Major.ROW)


@pytest.mark.parametrize("geo", [
    {"r": 3, "s": 3, "pad_h": 1, "pad_w": 1},
    {"r": 3, "s": 3, "stride_h": 2, "stride_w": 2, "pad_h": 1, "pad_w": 1},
    {"r": 5, "s": 3, "pad_h": 4, "pad_w": 2, "dil_h": 2, "dil_w": 2},
    {"r": 1, "s": 7, "pad_h": 0, "pad_w": 3},
    {"r": 3, "s": 2, "stride_w": 3, "pad_h": 0, "pad_w": 1},
])  # fmt: skip
def test_the_batched_gemm_over_taps_is_the_weight_gradient(geo: dict[str, int]) -> None:
    """dw[k, r, s, c] = sum over output pixels i of dy[i, k] * im2col_(r, s)(x)[i, c]: each tap's
    (pixels x C) operand is the box of x the im2col TMA loads at that filter offset."""
    p = wgrad(n=2, h=11, w=9, c=8, k=6, **geo)
    x = torch.randn(p.n, p.c, p.h, p.w, dtype=torch.float64)
    dy = torch.randn(p.n, p.k, p.p, p.q, dtype=torch.float64)
    cols = F.unfold(x, (p.r, p.s), dilation=(p.dil_h, p.dil_w), padding=(p.pad_h, p.pad_w),
                    stride=(p.stride_h, p.stride_w))  # (N, C*R*S, P*Q)  # fmt: skip
    g = implicit_gemm(p)
    taps = cols.view(p.n, p.c, p.r * p.s, p.p * p.q).permute(2, 0, 3, 1).reshape(g.l, g.k, g.n)  # (RS, NPQ, C)
    a = dy.permute(1, 0, 2, 3).reshape(g.m, g.k)  # dy^T (K, NPQ)
    d = torch.einsum("mk,lkn->lmn", a, taps)  # (RS, K, C)
    dw = d.permute(1, 0, 2).reshape(p.k, p.r, p.s, p.c).permute(0, 3, 1, 2)  # (K, C, R, S)
    want = torch.nn.grad.conv2d_weight(x, (p.k, p.c, p.r, p.s), dy, (p.stride_h, p.stride_w), (p.pad_h, p.pad_w),
                                       (p.dil_h, p.dil_w))  # fmt: skip
    torch.testing.assert_close(dw, want)


# ---- the gate --------------------------------------------------------------------------------------
def test_on_by_default_tuned_only_and_off_with_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOCUTLASS_CONV_WGRAD", "0")
    p = wgrad()
    fam = get_family("hopper_conv_wgrad")
    assert fam.supports(p) == GATE_REASON and fam.check(C(64, 64, 64), p) == GATE_REASON and fam.seeds(p) == []
    assert [f.name for f in families_for(p)] == []
    assert [f.name for f in families_for(wgrad(r=1, s=1, pad_h=0, pad_w=0))] == ["hopper_gemm"]
    monkeypatch.delenv("AUTOCUTLASS_CONV_WGRAD")  # on by default
    assert fam.TUNED_ONLY and not get_family("hopper_gemm").TUNED_ONLY
    assert fam.supports(p) is None and fam.check(C(64, 64, 64), p) is None and fam.seeds(p)
    assert [f.name for f in families_for(p)] == ["hopper_conv_wgrad"]
    assert [f.name for f in families_for(wgrad(r=1, s=1, pad_h=0, pad_w=0))] == ["hopper_gemm", "hopper_conv_wgrad"]
    assert ON.supports(wgrad(c=3)) is not None and "GPU" not in (ON.supports(wgrad(c=3)) or "")


# ---- reasons -------------------------------------------------------------------------------------
@pytest.mark.parametrize("problem,needle", [
    (wgrad(direction="fprop"), "wgrad only"),
    (wgrad(direction="dgrad"), "wgrad only"),
    (wgrad(epilogue=Epilogue(bias=True)), "no epilogue"),
    (wgrad(x_dtype=DType.TF32, w_dtype=DType.TF32, y_dtype=DType.FP32), "only 16-bit WGMMA"),
    (wgrad(w_dtype=DType.FP16), "differ"),
    (wgrad(groups=2), "groups=2"),
    (wgrad(c=3, align_x=2, align_w=2), "2-byte aligned"),
    (wgrad(c=36), "C=36"),
    (wgrad(k=12), "K=12"),
    (wgrad(stride_h=9), "traversal stride"),
    (wgrad(pad_h=129, h=300), "lower corner"),
])  # fmt: skip
def test_problem_reasons(problem: ConvProblem, needle: str) -> None:
    reason = ON.supports(problem)
    assert reason is not None and needle in reason, reason
    assert ON.seeds(problem) == []


@pytest.mark.parametrize("config,needle", [
    (C(128, 96, 64), "tile_n=96"),
    (C(128, 64, 32), "tile_k=32"),
    (C(128, 64, 64, split_k=0), "split_k=0 is not one of range(1, 133)"),
    (C(128, 128, 64), "tile_n=128 > C=64"),
    (C(128, 64, 64, split_k=2, stream_k=True), "stream_k divides"),
    (C(128, 64, 64, split_k=2, schedule="pingpong"), "cooperative"),
    (C(64, 64, 64, cluster_n=2), "A multicast"),
    (C(256, 64, 64, schedule="pingpong"), "ping-pong tile_m=256"),
    (C(64, 128, 64, tap_channels=32), "tap_channels=32"),
    (C(64, 64, 64, tap_channels=64), "two or more boxes"),
    (C(64, 192, 64, tap_channels=128), "not a multiple"),
    (C(64, 64, 64, split_k=24), "serial split-K chains at most 16"),
    (C(64, 64, 64, split_k=133, split_mode="workspace"), "split_k=133"),
    (C(128, 64, 64, split_k=2, split_mode="workspace", store="direct"), "store=direct"),
])  # fmt: skip
def test_config_reasons(config: C, needle: str) -> None:
    reason = check(config, wgrad())
    assert reason is not None and needle in reason, reason


SUITE = [json.loads(SHAPES_CONV.read_text())["cases"][i] for i in (1, 2, 3, 5, 8, 12, 16)]


def _suite_wgrad(case: dict[str, object]) -> ConvProblem:
    return ConvProblem("wgrad", n=case["N"], h=case["H"], w=case["W"], c=case["C"], k=case["K"], r=case["R"],  # type: ignore[arg-type]
                       s=case["S"], stride_h=case["stride"][0], stride_w=case["stride"][1], pad_h=case["pad"][0],  # type: ignore[index]
                       pad_w=case["pad"][1])  # type: ignore[index]  # fmt: skip


@pytest.mark.parametrize("case", SUITE, ids=[c["name"] for c in SUITE])
def test_suite_layers_have_feasible_spaces_and_seeds(case: dict[str, object]) -> None:
    p = _suite_wgrad(case)
    assert ON.supports(p) is None
    space = ON.space(p)
    feasible = [c for c in space if ON.check(c, p) is None]
    assert len(feasible) > 100 and len(set(space)) == len(space)
    seeds = ON.seeds(p)
    assert seeds and all(ON.check(s, p) is None for s in seeds) and len(set(seeds)) == len(seeds)
    assert any(c.stream_k for c in feasible) and any(c.split_k > 1 for c in feasible)


def test_few_tile_layers_start_with_a_split_pixel_loop() -> None:
    rn50_l1 = ON.seeds(wgrad())  # 64x64 filter, 9 taps: 5 tiles of 64x128 (two taps each) for 132 SMs
    assert rn50_l1[0].split_mode.value == "workspace" and rn50_l1[0].split_k > 16 and rn50_l1[0].tap_channels == 64
    assert rn50_l1[1].split_k > 1
    assert all(s.tile_m == 64 for s in rn50_l1[:2])  # K = 64 output channels: no half-empty 128-row tiles


def test_narrow_layers_get_tiles_of_several_taps() -> None:
    assert tile_widths(wgrad()) == [(64, 0), (128, 0), (192, 0), (256, 0), (128, 64), (192, 64), (256, 64)]
    assert tile_widths(wgrad(c=128, k=128)) == [(64, 0), (128, 0), (192, 0), (256, 0), (256, 128), (192, 64)]
    assert tile_widths(wgrad(c=256, k=256)) == [(64, 0), (128, 0), (192, 0), (256, 0), (192, 64)]
    assert tile_widths(wgrad(c=256, k=256, r=1, s=1)) == [(64, 0), (128, 0), (192, 0), (256, 0)]  # one tap
    p = wgrad()
    taps = [c for c in ON.space(p) if c.tap_channels]
    reasons = [ON.check(c, p) for c in taps]
    assert sum(r is None for r in reasons) > 100
    # none is refused for holding several taps (the rules of tap_channels and of zero channels)
    assert not [r for r in reasons if r is not None and ("tap_channels" in r or "zero channels" in r)]
    assert not any(c.tap_channels for c in ON.space(wgrad(c=72, k=64)))
    # one GEMM of R*S*C columns: a 3x3 filter of 64 channels is 576 columns, 5 tiles of 128
    g = implicit_gemm(p, 64)
    assert (g.m, g.n, g.l) == (64, 576, 1)
    assert check(C(64, 128, 64, tap_channels=64), wgrad(c=128, k=128)) is not None


def test_wide_layers_get_tiles_across_the_taps() -> None:
    """C = 320: per tap, tiles of 128, 192 or 256 columns leave 64, 64 or 192 of every tap's past
    C; across the taps (64-channel boxes, five per tap) the 2880 columns take 23, 15 and 12 tiles."""
    p = wgrad(n=8, h=64, w=64, c=320, k=320)
    assert tile_widths(p) == [(64, 0), (128, 0), (192, 0), (256, 0), (128, 64), (192, 64), (256, 64)]
    assert [output_tiles(p, 128, tn, 64) for tn in (128, 192, 256)] == [3 * 23, 3 * 15, 3 * 12]
    assert output_tiles(p, 128, 192) == 3 * 2 * 9
    g = implicit_gemm(p, 64)
    assert (g.m, g.n, g.l) == (320, 2880, 1)
    cfg = C(128, 192, 64, split_k=2, tap_channels=64)
    assert check(cfg, p) is None and cfg in ON.space(p)
    plan = make_plan(cfg, p)
    assert (plan.tap_channels, plan.channel_blocks) == (64, 5)
    assert make_plan(C(64, 192, 64, tap_channels=64), wgrad()).channel_blocks == 1  # C = 64: a box is a tap
    # the C of such a kernel is compile-time: another C is another class, and another kernel
    assert compile_key(plan) != compile_key(make_plan(cfg, dataclasses.replace(p, c=640, k=640)))
    # a tile width that divides C gains nothing from boxes: refused
    reason = check(C(128, 128, 64, tap_channels=64), wgrad(c=256, k=256))
    assert reason is not None and "divides C=256" in reason


def test_wave_splits_fill_the_gpus_waves() -> None:
    """132 SMs: 18 tiles fill one wave with 7 splits (126 units), where 6 leaves 24 SMs idle; 9
    tiles with 14; 3 tiles (of several taps) with 44. 36 or 108 tiles fill no one wave well enough
    with any split. A split keeps min_blocks K blocks; at most ``most`` splits."""
    assert wave_splits(18, 4096, most=64) == (7,)
    assert wave_splits(9, 4096, most=64) == (14,)
    assert wave_splits(3, 4096, most=64) == (44,)
    assert wave_splits(3, 4096, most=16) == ()
    assert wave_splits(36, 4096, most=64) == wave_splits(108, 196, most=64) == ()
    assert wave_splits(9, 40, most=64) == ()  # 10 splits at most
    assert wave_splits(9, 40, most=64, min_blocks=2) == (14,)
    assert wave_splits(0, 100, most=64) == wave_splits(18, 0, most=64) == ()
    for tiles in range(1, 300):
        for s in wave_splits(tiles, 1 << 20, most=64):
            assert 2 <= s <= 64 and 0.95 * 132 <= tiles * s <= 132
    assert wave_splits(26, 72, most=16, sms=132) == (5,)  # rn50-l4-3x3 fprop, 128x256: 130 units


def test_a_three_by_three_layer_gets_wave_filling_splits_in_its_space_and_seeds() -> None:
    """vae-256@512's wgrad: 18 tiles of 128x256 and a pixel loop of 4096 K blocks. The listed splits'
    best, 6, fills 108 of 132 SMs; the space has 7 (serial and workspace), and the model's first
    seed is a wave-filling split."""
    p = wgrad(n=1, h=512, w=512, c=256, k=256)
    assert layer_splits(p, 128, 256, 0, 64) == (*SPLIT_K[1:], 7)
    assert layer_splits(p, 64, 64, 0, 64) == SPLIT_K[1:]  # 4 x 4 x 9 = 144 tiles: more than a wave
    space = set(ON.space(p))
    for mode in ("serial", "workspace"):
        cfg = C(128, 256, 64, split_k=7, split_mode=mode)
        assert cfg in space and ON.check(cfg, p) is None, (mode, ON.check(cfg, p))
    assert C(128, 256, 64, split_k=5) not in space
    assert "64 MiB" in (ON.check(C(128, 256, 64, split_k=29, split_mode="workspace"), p) or "")  # 29 slabs: 65 MiB
    first = ON.seeds(p)[0]
    tiles = output_tiles(p, first.tile_m, first.tile_n, first.tap_channels)
    assert tiles * first.split_k >= 0.95 * 132 and first.split_k not in SPLIT_K, first.short()


def test_large_layers_seed_both_clustered_stream_k_tiles() -> None:
    """The two stream-K configs that won on the 512-channel layers (256x128 in a 1x2 cluster,
    128x256 in a 2x1 cluster) are among the seeds of such a layer, feasible."""
    p = wgrad(n=256, h=7, w=7, c=512, k=512)
    seeds = ON.seeds(p)
    for cfg in (C(256, 128, 64, cluster_n=2, stream_k=True), C(128, 256, 64, cluster_m=2, stream_k=True)):
        assert cfg in seeds and ON.check(cfg, p) is None


def test_workspace_slabs_are_capped() -> None:
    big = wgrad(n=1, h=512, w=512, c=256, k=256)  # 9 taps of 256x256: 2.25 MiB of fp32 per slab
    assert "MiB" in (check(C(128, 256, 64, split_k=64, split_mode="workspace"), big) or "")
    assert check(C(128, 256, 64, split_k=16, split_mode="workspace"), big) is None


def _kind(cfg: C) -> str:
    if cfg.stream_k:
        return "stream"
    if cfg.split_k > 1:
        return "workspace" if cfg.split_mode.value == "workspace" else "split"
    return "data"


@pytest.mark.parametrize("kw", [
    {"n": 8, "h": 64, "w": 64, "c": 320, "k": 320},  # 81 tiles of 128x128 on 132 SMs: 61% of one wave
    {"n": 8, "h": 32, "w": 32, "c": 640, "k": 640},
    {"n": 256, "h": 7, "w": 7, "c": 512, "k": 512},
    {"n": 32, "h": 56, "w": 56, "c": 128, "k": 128, "stride_h": 2, "stride_w": 2},
])  # fmt: skip
def test_seeds_start_with_the_cost_models_best_of_each_way_to_share_the_pixel_loop(kw: dict[str, int]) -> None:
    """The first seeds are the model's cheapest feasible config other than stream-K and the
    cheapest workspace split, serial split and data-parallel ones, cheapest first (which wins
    depends on how the output tiles fill the SMs, so each is measured early); then its cheapest
    stream-K config (it lost to a split on every suite layer on an H100)."""
    p = wgrad(**kw)
    ranked = [cfg for _, cfg in modelled_configs(p) if ON.check(cfg, p) is None]
    seeds = ON.seeds(p)
    firsts = {k: next(c for c in ranked if _kind(c) == k) for k in ("workspace", "split", "data", "stream")}
    n = len({firsts["workspace"], firsts["split"], firsts["data"]})
    head = seeds[:n]
    assert head[0] == next(c for c in ranked if not c.stream_k)
    assert {_kind(s) for s in head} == {"workspace", "split", "data"}
    assert [ranked.index(s) for s in head] == sorted(ranked.index(s) for s in head)
    assert seeds[n] == firsts["stream"]


def test_the_cost_model_ranks_stream_k_first_when_the_tiles_fill_part_of_a_wave() -> None:
    """sd-320@64's wgrad: 81 tiles of 128x128 leave 51 of 132 SMs idle in its one wave (the
    data-parallel config the session-12 tuning settled on, x0.52 of cuDNN); the model prefers
    sharing the pixel loop, and for a layer with many tiles a data-parallel or stream-K tile of
    the large shapes."""
    best = modelled_configs(wgrad(n=8, h=64, w=64, c=320, k=320))[0][1]
    assert best.stream_k or best.split_k > 1
    many = modelled_configs(wgrad(n=8, h=16, w=16, c=1280, k=1280))[0][1]  # 450 tiles of 128x256
    assert many.split_k == 1 and (many.tile_m, many.tile_n) in ((128, 256), (256, 128))


def test_config_round_trip_and_gemm_config() -> None:
    cfg = C(256, 128, 128, 2, 1, 4, "cooperative", "along_n", 1, 1, True, "tma")
    assert C.from_dict(json.loads(json.dumps(cfg.as_dict()))) == cfg == ON.config_from_dict(ON.config_to_dict(cfg))
    g = cfg.gemm_config()
    assert (g.tile_m, g.tile_n, g.tile_k, g.cluster_m, g.stages, g.stream_k, g.split_k) == (256, 128, 128, 2, 4, True, 1)
    assert cfg.short() == "256x128x128 c2x1 s4 coop n/1 streamk"
    with pytest.raises(TypeError):
        C(stream_k=1)  # type: ignore[arg-type]
    taps = C(64, 192, 64, split_k=24, split_mode="workspace", tap_channels=64)
    assert C.from_dict(json.loads(json.dumps(taps.as_dict()))) == taps
    assert taps.short() == "64x192x64 c1x1 s0 coop m/1 sk24w 3taps"
    assert taps.gemm_config().split_mode.value == "workspace"
    # a record stored before these fields existed reads back as one tap per tile, serial splits
    old = {k: v for k, v in C(64, 64, 64, split_k=12).as_dict().items() if k not in ("tap_channels", "split_mode")}
    assert C.from_dict(old) == C(64, 64, 64, split_k=12)
    with pytest.raises(TypeError):
        C(tap_channels=64.0)  # type: ignore[arg-type]


def test_plan_and_compile_key_follow_the_class_not_the_run_time_sizes() -> None:
    p = wgrad(r=5, s=3, pad_h=2)
    plan = make_plan(C(128, 64, 64, split_k=4), p)
    assert (plan.r, plan.s, plan.gemm.split_k, plan.gemm.a_major, plan.gemm.b_major) == (5, 3, 4, Major.COL, Major.ROW)
    same_class = dataclasses.replace(p, n=7, h=30, w=31, c=128, k=256, stride_h=2, dil_w=2)
    assert compile_key(plan) == compile_key(make_plan(C(128, 64, 64, split_k=4), same_class))
    assert compile_key(plan) != compile_key(make_plan(C(128, 64, 64, split_k=4), dataclasses.replace(p, s=5, pad_w=2)))
    assert compile_key(plan) != compile_key(make_plan(C(128, 64, 64, split_k=8), p))


def test_source_files_and_hash() -> None:
    for rel in SOURCE_FILES:
        assert (KERNELS_DIR / rel).is_file(), rel
    assert ON.source_hash() == source_hash(SOURCE_FILES) == source_hashes()["hopper_conv_wgrad"]
    assert "hopper_conv/kernel.py" not in SOURCE_FILES  # fprop's tuning records stay keyed by their own sources


def test_runner_refuses_operands_that_are_not_channels_last() -> None:
    from autocutlass.kernels.hopper_conv_wgrad import runner as runner_mod

    r = object.__new__(runner_mod.HopperConvWgradRunner)
    r.config, r._geometry, r._clusters, r._workspace = C(64, 64, 64), (1, 1, 1, 1, 1, 1), {}, None
    r._fn = lambda *a: None
    x = torch.randn(1, 8, 5, 5).contiguous(memory_format=torch.channels_last)
    dw = torch.empty(8, 8, 3, 3).contiguous(memory_format=torch.channels_last)
    with pytest.raises(ValueError, match="dy must be channels_last"):
        r(torch.randn(1, 8, 5, 5), x, dw)
    with pytest.raises(ValueError, match="do not make a convolution"):
        r(torch.randn(1, 8, 4, 4).contiguous(memory_format=torch.channels_last), x, dw)


# ---- compile (no GPU) ----------------------------------------------------------------------------


COMPILE_CASES = [
    # rn50 stage 1: 64x64 tiles, stream-K; serial split-K 12; the im2col tile multicast (2x1)
    (C(64, 64, 64, stream_k=True), wgrad()),
    (C(64, 64, 64, split_k=12), wgrad()),
    (C(128, 128, 64, cluster_m=2), wgrad(c=128, k=128, stride_h=2, stride_w=2)),
    # dy multicast (1x2), ping-pong, tile_k 128, 5x3 dilated, fp16
    (C(128, 128, 128, cluster_n=2, schedule="pingpong"), wgrad(c=256, k=256, r=5, s=3, pad_h=4, pad_w=2, dil_h=2,
                                                               dil_w=2, x_dtype=DType.FP16, w_dtype=DType.FP16,
                                                               y_dtype=DType.FP16)),
    # 256x128 in a 2x2 cluster with split-K; direct store of a small filter
    (C(256, 128, 64, cluster_m=2, cluster_n=2, split_k=4), wgrad(c=256, k=512)),
    (C(64, 64, 64, store="direct"), wgrad(r=1, s=7, pad_h=0, pad_w=3)),
    # several taps per tile: 3 taps into 48 workspace slabs; 2 taps of 128 channels, im2col multicast,
    # stream-K; one tap per tile into workspace slabs
    (C(64, 192, 64, split_k=48, split_mode="workspace", tap_channels=64), wgrad()),
    # tiles across the taps of a 320-channel layer (five 64-channel boxes per tap), serial split-K
    (C(128, 192, 64, split_k=2, tap_channels=64), wgrad(c=320, k=320)),
    (C(128, 256, 64, cluster_m=2, stream_k=True, tap_channels=128), wgrad(c=128, k=128)),
    (C(128, 128, 64, split_k=6, split_mode="workspace"), wgrad(c=256, k=128)),
    # wave-filling split counts (wave_splits): 7 serial, 22 workspace slabs
    (C(128, 256, 64, split_k=7), wgrad(n=1, h=512, w=512, c=256, k=256)),
    (C(128, 256, 64, split_k=22, split_mode="workspace"), wgrad(n=1, h=512, w=512, c=256, k=256)),
    # interleaved splits: a pointwise dw's workspace slabs, serial splits across the taps
    (C(128, 64, 64, split_k=12, split_mode="workspace", interleave=True), wgrad(c=64, k=256, r=1, s=1, pad_h=0, pad_w=0)),
    (C(64, 192, 64, split_k=7, tap_channels=64, interleave=True), wgrad(c=320, k=320)),
]  # fmt: skip


@pytest.mark.compile
@pytest.mark.parametrize("cfg,prob", COMPILE_CASES, ids=[f"{c.short()}|{p.describe()}" for c, p in COMPILE_CASES])
def test_config_compiles(cfg: C, prob: ConvProblem) -> None:
    if not dsl_available():
        pytest.skip("nvidia-cutlass-dsl is not installed")
    from autocutlass.kernels.hopper_conv_wgrad.compile import _compile

    assert check(cfg, prob) is None, check(cfg, prob)
    assert _compile(make_plan(cfg, prob)) is not None


@pytest.mark.compile
def test_sampled_space_configs_compile() -> None:
    if not dsl_available():
        pytest.skip("nvidia-cutlass-dsl is not installed")
    from autocutlass.kernels.hopper_conv_wgrad.compile import _compile

    prob = wgrad(c=128, k=128, stride_h=2, stride_w=2)
    feasible = [c for c in ON.space(prob) if ON.check(c, prob) is None]
    for cfg in random.Random(2026).sample(feasible, 3):
        assert _compile(make_plan(cfg, prob)) is not None, cfg.short()


# ---- the slab sum of workspace split-K ----------------------------------------------------------
def test_slab_sum_classes_and_keys() -> None:
    from autocutlass.kernels.hopper_conv_wgrad.slab_sum import MAX_SPLITS, SlabSum, slab_sum_key

    keys = {slab_sum_key(SlabSum(s, d, r)) for s in (2, 24, MAX_SPLITS) for d in (DType.BF16, DType.FP16) for r in (2, 3)}
    assert len(keys) == 12
    assert SlabSum(8, "fp16", 3).vec == 8
    for bad, needle in (((1, DType.BF16, 2), "splits=1"), ((MAX_SPLITS + 1, DType.BF16, 2), f"splits={MAX_SPLITS + 1}"),
                        ((8, DType.FP32, 2), "fp32"), ((8, DType.BF16, 4), "rank=4"), ((True, DType.BF16, 2), "True")):
        with pytest.raises(ValueError, match=needle):
            SlabSum(*bad)  # type: ignore[arg-type]


def test_importing_the_slab_sum_does_not_load_the_dsl() -> None:
    import subprocess
    import sys

    code = ("import sys; import autocutlass.kernels.hopper_conv_wgrad.slab_sum as m; "
            "m.slab_sum_key(m.SlabSum(8, 'bf16', 2)); print('cutlass' in sys.modules)")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.compile
@pytest.mark.parametrize("splits,dtype,rank,groups", [(48, DType.BF16, 3, 1), (5, DType.FP16, 2, 1),
                                                      (64, DType.BF16, 2, 4), (9, DType.FP16, 3, 4)])
def test_slab_sum_compiles(splits: int, dtype: DType, rank: int, groups: int) -> None:
    if not dsl_available():
        pytest.skip("nvidia-cutlass-dsl is not installed")
    from autocutlass.kernels.hopper_conv_wgrad.slab_sum import SlabSum, _compile

    assert _compile(SlabSum(splits, dtype, rank, groups)) is not None


def test_grouped_slab_sums_keys_plan_and_config_axis() -> None:
    """slab_groups: the slab sum in 4 groups of consecutive slabs (4 warps per 32 outputs), offered
    for workspace splits of 8 and more; a config of 1 group keeps its dict form (and so the key of
    every config from before the axis); each group's slabs in order, all of them once."""
    from autocutlass.kernels.hopper_conv_wgrad.slab_sum import SlabSum, slab_sum_key

    assert slab_sum_key(SlabSum(8, "bf16", 2, 4)) != slab_sum_key(SlabSum(8, "bf16", 2))
    for bad in ((8, "bf16", 2, 3), (7, "bf16", 2, 4)):
        with pytest.raises(ValueError, match="groups"):
            SlabSum(*bad)  # type: ignore[arg-type]
    if dsl_available():
        from autocutlass.kernels.hopper_conv_wgrad.slab_sum_kernel import GroupedSlabSumKernel

        plan = GroupedSlabSumKernel(22, None, 2, 8, 8, 4).plan
        assert [first for first, _ in plan] == [0, 5, 11, 16]
        covered = [s for first, chunks in plan for s in [first, *(x for lo, hi in chunks for x in range(lo, hi))]]
        assert covered == list(range(22))
    ws = C(128, 64, 64, split_k=64, split_mode="workspace")
    grouped = dataclasses.replace(ws, slab_groups=4)
    assert "slab_groups" not in ws.as_dict() and grouped.as_dict()["slab_groups"] == 4
    assert C.from_dict(grouped.as_dict()) == grouped and C.from_dict(ws.as_dict()) == ws
    assert grouped.short().endswith("sk64w/g4")
    p = wgrad(n=8, h=28, w=28, c=64, k=256, r=1, s=1, pad_h=0, pad_w=0)
    assert ON.check(grouped, p) is None
    assert "split_k >= 8" in (ON.check(dataclasses.replace(grouped, split_k=4), p) or "")
    assert "split_mode=workspace" in (ON.check(dataclasses.replace(grouped, split_mode="serial", split_k=8), p) or "")
    assert "one of" in (ON.check(dataclasses.replace(ws, slab_groups=2), p) or "")
    space = ON.space(p)
    groups = [c for c in space if c.slab_groups != 1]
    assert groups and all(c.split_mode.value == "workspace" and c.split_k >= 8 for c in groups)
    assert grouped in space and any(c.slab_groups == 4 for c in ON.seeds(p))


def test_interleave_axis_of_the_wgrad_family() -> None:
    """``interleave``: the splits' pixel blocks interleaved; passed to the GEMM config the kernel
    reads, left out of the dict form when False, only with split-K, in the space (both orders of
    every split config), not in the seeds."""
    ws = C(128, 64, 64, split_k=12, split_mode="workspace")
    il = dataclasses.replace(ws, interleave=True)
    assert "interleave" not in ws.as_dict() and il.as_dict()["interleave"] is True
    assert C.from_dict(il.as_dict()) == il and il.short().endswith("sk12wi")
    assert il.gemm_config().interleave and not ws.gemm_config().interleave
    p = wgrad(n=8, h=28, w=28, c=64, k=256, r=1, s=1, pad_h=0, pad_w=0)
    assert ON.check(il, p) is None
    assert "split_k > 1" in (ON.check(C(128, 64, 64, interleave=True), p) or "")
    space = set(ON.space(p))
    assert il in space and ws in space
    assert not any(c.interleave for c in space if c.split_k == 1)
    assert not any(c.interleave for c in ON.seeds(p))


def test_scratch_slots_count_the_kernels_tiles() -> None:
    from autocutlass.kernels.hopper_gemm.runner import scratch_slots

    # one per output tile, padded to whole clusters: 72 x 576 in 64x128 tiles (2 x 5), or per tap
    assert scratch_slots(C(64, 128, 64, split_k=4, tap_channels=64), 72, 576, 1, 132) == 2 * 5
    assert scratch_slots(C(64, 64, 64, split_k=4), 72, 64, 9, 132) == 2 * 1 * 9
    assert scratch_slots(C(64, 64, 64, split_k=4, cluster_m=2), 72, 64, 9, 132) == 2 * 1 * 9
    assert scratch_slots(C(64, 64, 64, split_k=4, cluster_m=2), 130, 64, 1, 132) == 4
    assert scratch_slots(C(128, 64, 64, stream_k=True, cluster_m=2), 72, 64, 9, 66) == 132  # one per CTA

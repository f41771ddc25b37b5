"""The Hopper implicit-GEMM conv2d family without a GPU: feasibility reasons (im2col TMA limits
included), the search space and seeds, config round trips, the plan and compile key; and (marker
``compile``) sampled configs compiled with CUTE_DSL_ARCH=sm_90a."""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path

import pytest

from _conv_helpers import dsl_available
from autocutlass.device import KERNELS_DIR
from autocutlass.kernels.hopper_conv import HopperConvConfig as C
from autocutlass.kernels.hopper_conv import (
    HopperConvFamily,
    check,
    layer_splits,
    modelled_pick,
    n_split_seeds,
    narrow_split_seeds,
)
from autocutlass.kernels.hopper_conv.check import problem_supported
from autocutlass.kernels.hopper_conv.compile import compile_key
from autocutlass.kernels.hopper_conv.config import Schedule, SplitMode
from autocutlass.kernels.hopper_conv.plan import implicit_gemm, make_plan, output_size
from autocutlass.kernels.hopper_conv.sources import SOURCE_FILES, source_hash
from autocutlass.ops.conv.problem import ConvProblem
from autocutlass.ops.gemm.problem import Activation, DType, Epilogue

SHAPES_CONV = Path(__file__).resolve().parents[1] / "benchmarks" / "shapes-conv.json"


def conv(**kw: object) -> ConvProblem:
    base: dict[str, object] = {"direction": "fprop", "n": 32, "h": 56, "w": 56, "c": 64, "k": 64, "r": 3, "s": 3,
                               "pad_h": 1, "pad_w": 1}  # fmt: skip
    base.update(kw)
    return ConvProblem(**base)  # type: ignore[arg-type]


SUITE = [
    conv(n=32, h=224, w=224, c=3, k=64, r=7, s=7, stride_h=2, stride_w=2, pad_h=3, pad_w=3),  # rn50-stem (C=3)
    conv(),  # rn50-l1-3x3
    conv(k=256, r=1, s=1, pad_h=0, pad_w=0),  # rn50-l1-1x1-up
    conv(c=128, k=128, stride_h=2, stride_w=2),  # rn50-l2-3x3-s2
    conv(c=512, k=512, h=7, w=7),  # rn50-l4-3x3
    conv(n=8, c=640, k=640, h=32, w=32),  # sd-640@32
    conv(n=1, c=256, k=256, h=512, w=512),  # vae-256@512
]


# ---- feasibility reasons -------------------------------------------------------------------------
@pytest.mark.parametrize(
    "problem,needle",
    [
        (conv(direction="dgrad"), "fprop only"),
        (conv(direction="wgrad"), "fprop only"),
        (conv(groups=2), "groups=2"),
        (conv(c=3), "C=3"),
        (conv(c=36), "multiple of 8"),
        (conv(k=12), "K=12"),
        (conv(x_dtype=DType.FP32, w_dtype=DType.FP32, y_dtype=DType.FP32), "x dtype fp32"),
        (conv(w_dtype=DType.FP16), "dtypes differ"),
        (conv(align_x=8), "x is only 8-byte aligned"),
        (conv(stride_h=9), "traversal stride"),
        (conv(dil_w=128, w=300), "(S-1)*dil_w = 256"),
        (conv(r=86, dil_h=3, pad_h=1, h=300), "(R-1)*dil_h = 255"),
        (conv(pad_h=129, h=8), "lower corner along H is -129"),
        (conv(r=5, dil_h=40, pad_h=0, h=200), "upper corner along H is -160"),
        (conv(h=2, pad_h=0), "output is empty"),
    ],
)
def test_problem_reasons(problem: ConvProblem, needle: str) -> None:
    reason = problem_supported(problem)
    assert reason is not None and needle in reason, reason
    assert check(C(), problem) == reason


def test_corners_at_the_limits_are_accepted() -> None:
    # lower corner -128, upper corner 127 - ... : the extremes of a 4-D im2col descriptor
    assert problem_supported(conv(pad_h=128, pad_w=127, h=8, w=8)) is None
    assert problem_supported(conv(r=3, dil_h=127, pad_h=126, h=300)) is None  # upper corner -128
    assert problem_supported(conv(stride_h=8, stride_w=8)) is None


@pytest.mark.parametrize(
    "config,problem,needle",
    [
        (C(tile_n=512), conv(), "tile_n=512"),
        (C(tile_k=32), conv(), "tile_k=32"),
        (C(cluster_m=4), conv(), "cluster 4x1"),
        (C(split_k=17), conv(), "split_k=17 is not one of range(1, 17)"),
        (C(tile_k=128), conv(c=64), "tile_k=128 > C=64"),
        (C(tile_k=128), conv(c=8), "tile_k=128 > C=8"),
        (C(256, 128, 64, schedule="pingpong"), conv(), "ping-pong tile_m=256"),
        (C(256, 256, 64), conv(k=256), "accumulator registers"),
        # the GEMM family's wide cooperative tile stays out of the conv kernel (check.ACC_REGS_WIDE)
        (C(256, 192, 64), conv(k=256), "192 fp32 accumulator registers per thread (128x192 per consumer warpgroup) exceed 128"),
        (C(128, 128, 64, split_k=2, schedule="pingpong"), conv(), "split_k > 1 needs the cooperative"),
        (C(128, 256, 128, stages=3), conv(c=128, k=256), "shared memory"),
        (C(128, 128, 64, split_k=2, stream_k=True), conv(), "stream_k divides K"),
        (C(128, 128, 64, schedule="pingpong", stream_k=True), conv(), "stream_k needs the cooperative"),
        (C(128, 128, 64, swizzle=4, stream_k=True), conv(), "use swizzle=1"),
        # 192-row tiles (the GEMM kernel's N-split consumers): cooperative, data-parallel, whole
        # 16-column halves, and no residual beyond 128 accumulator registers (it spills)
        (C(192, 256, 64, schedule="pingpong"), conv(c=256, k=256), "ping-pong tile_m=192"),
        (C(192, 256, 64, split_k=2), conv(c=256, k=256), "data-parallel only"),
        (C(192, 256, 64, stream_k=True), conv(c=256, k=256), "data-parallel only"),
        (C(192, 208, 64), conv(c=256, k=256), "multiple of 32"),
        (C(192, 256, 64), conv(c=256, k=256, epilogue=Epilogue(with_c=True)), "reads C spill"),
        # the wide registers are the 192-row tile's alone: a 256x192 conv tile stays refused
        (C(256, 192, 64), conv(c=256, k=256), "exceed 128"),
    ],
)
def test_config_reasons(config: C, problem: ConvProblem, needle: str) -> None:
    reason = check(config, problem)
    assert reason is not None and needle in reason, reason


def test_192_row_tiles_pass_where_the_n_split_allows_them() -> None:
    big = conv(n=128, c=256, k=256, h=14, w=14)
    for cfg in (C(192, 256, 64), C(192, 256, 64, cluster_n=2), C(192, 224, 64, cluster_m=2), C(192, 128, 64)):
        assert check(cfg, big) is None, (cfg.short(), check(cfg, big))
    assert cfg.gemm_config().n_split
    # 96 accumulator registers per thread: a residual is fine there
    assert check(C(192, 128, 64), conv(c=256, k=256, epilogue=Epilogue(with_c=True, bias=True))) is None


def test_n_split_seeds_go_to_layers_whose_last_wave_192_rows_fill() -> None:
    # ResNet-50 stage 3 at batch 128: 25088 pixels, 131 tiles of 192x256 (one wave) against 392 of
    # 128x128 or 196 of 128x256; stage 4 at batch 256: 132 tiles of 192x256
    l3 = conv(n=128, c=256, k=256, h=14, w=14)
    l4 = conv(n=256, c=512, k=512, h=7, w=7)
    assert n_split_seeds(l3) == [C(192, 256, 64)]  # one tile column: no multicast partner
    assert n_split_seeds(l4) == [C(192, 256, 64), C(192, 256, 64, cluster_n=2)]
    fam = HopperConvFamily()
    for layer in (l3, l4):
        assert fam.seeds(layer)[1] == C(192, 256, 64)
    # layers whose 128/256-row tilings already fill their waves, or few-tile ones, get none
    for layer in (conv(n=8, c=640, k=640, h=32, w=32), conv(c=512, k=512, h=7, w=7), conv(), conv(n=1, c=256,
                  k=256, h=512, w=512)):  # fmt: skip
        assert n_split_seeds(layer) == []
        assert all(s.tile_m != 192 for s in fam.seeds(layer))


def test_space_offers_192_row_tiles_only_as_the_n_split_builds_them() -> None:
    prob = conv(n=128, c=256, k=256, h=14, w=14)
    wide = [c for c in HopperConvFamily().space(prob) if c.tile_m == 192 and check(c, prob) is None]
    assert wide
    assert all(c.schedule is Schedule.COOPERATIVE and c.split_k == 1 and not c.stream_k for c in wide)
    assert {c.tile_n for c in wide} == {64, 96, 128, 160, 192, 224, 256}


def test_channel_tile_rule_allows_a_partial_last_block() -> None:
    assert check(C(tile_k=128), conv(c=72)) is None  # 72 channels: one block of 128, 56 zero
    assert check(C(tile_k=64), conv(c=72)) is None  # two blocks of 64, the second with 8


# ---- space, seeds, round trips -------------------------------------------------------------------
@pytest.mark.parametrize("problem", SUITE[1:], ids=lambda p: p.describe())
def test_space_has_feasible_configs_and_seeds_pass_check(problem: ConvProblem) -> None:
    fam = HopperConvFamily()
    assert fam.supports(problem) is None
    space = fam.space(problem)
    assert len(space) == len(set(space))
    reasons = [check(c, problem) for c in space]
    assert all(r is None or isinstance(r, str) for r in reasons)
    assert sum(r is None for r in reasons) >= 100
    seeds = fam.seeds(problem)
    assert seeds and all(check(s, problem) is None for s in seeds)
    assert len(seeds) == len(set(seeds))


def test_unsupported_layer_has_a_reason_and_no_seeds() -> None:
    fam = HopperConvFamily()
    stem = SUITE[0]
    assert "C=3" in (fam.supports(stem) or "")
    assert fam.seeds(stem) == []


def test_split_k_joins_the_space_for_few_tile_layers_only() -> None:
    fam = HopperConvFamily()
    small = conv(c=512, k=512, h=7, w=7)  # 1568 x 512 outputs, K = 4608
    large = conv(n=8, c=640, k=640, h=32, w=32)
    assert any(c.split_k > 1 for c in fam.space(small))
    assert not any(c.split_k > 1 for c in fam.space(large))


def test_few_tile_layers_get_the_split_that_fills_a_wave() -> None:
    """rn50-l4-3x3 (1568 x 512 outputs, K = 4608: 72 blocks of 64): 26 tiles of 128x256 split 5
    ways take 130 of 132 SMs; the listed 2-4 take at most 104. 128x128 tiles (52) fill a wave with
    no split count. The cost model's pick is a feasible cooperative config of the space."""
    fam = HopperConvFamily()
    small = conv(c=512, k=512, h=7, w=7)
    assert layer_splits(small, 128, 256, 64) == (2, 3, 4, 5)
    assert layer_splits(small, 128, 128, 64) == (2, 3, 4)
    space = set(fam.space(small))
    assert C(128, 256, 64, split_k=5) in space and check(C(128, 256, 64, split_k=5), small) is None
    assert C(128, 128, 64, split_k=5) not in space
    pick = modelled_pick(small)
    assert pick is not None and pick in space and check(pick, small) is None and pick in fam.seeds(small)
    assert modelled_pick(conv(n=8, c=640, k=640, h=32, w=32)) is None  # no split-K: no model pick


def test_few_tile_layers_get_workspace_splits_in_space_and_seeds() -> None:
    """Every split config of a few-tile layer comes summed serially and through the workspace;
    the seeds carry the model's cheapest workspace split (rn50-l4-3x3: 26 tiles of 128x256 in 5
    slabs, one wave); a large layer gets neither."""
    fam = HopperConvFamily()
    small = conv(c=512, k=512, h=7, w=7)
    space = fam.space(small)
    serial = {c for c in space if c.split_k > 1 and c.split_mode is SplitMode.SERIAL}
    slabs = {c for c in space if c.split_mode is SplitMode.WORKSPACE}
    assert serial and {dataclasses.replace(c, split_mode=SplitMode.WORKSPACE) for c in serial} == slabs
    assert all(c.split_k > 1 and c.schedule is Schedule.COOPERATIVE for c in slabs)
    pick = modelled_pick(small, SplitMode.WORKSPACE)
    assert pick == C(128, 256, 64, split_k=5, split_mode="workspace")
    assert pick in fam.seeds(small) and check(pick, small) is None
    assert modelled_pick(small, SplitMode.SERIAL).split_mode is SplitMode.SERIAL
    large = conv(n=8, c=640, k=640, h=32, w=32)
    assert not any(c.split_mode is SplitMode.WORKSPACE for c in [*fam.space(large), *fam.seeds(large)])


def test_small_batch_few_tile_layers_get_narrow_workspace_split_seeds() -> None:
    """A small-batch few-tile layer's first seeds carry 64-column tiles split through the workspace
    into the most splits one wave holds (rn50-l4-3x3 at batch 8: 32 tiles of 128x64 in a 1x2 cluster
    x 4 slabs, 16 of 256x64 x 8; Stable Diffusion's 16x16 layer at batch 2: 40 tiles of 256x64 x 3,
    where 128x64's 80 tiles take no split); each is in the space and feasible. At batch 32 (104
    tiles of 128x64, 52 of 256x64) no split fills 85% of a wave, and a large layer splits nothing."""
    fam = HopperConvFamily()
    b8 = conv(n=8, c=512, k=512, h=7, w=7)
    narrow = narrow_split_seeds(b8)
    assert narrow == [C(128, 64, 64, cluster_n=2, split_k=4, split_mode="workspace"),
                      C(256, 64, 64, split_k=8, split_mode="workspace")]  # fmt: skip
    seeds, space = fam.seeds(b8), set(fam.space(b8))
    assert all(c in seeds[:5] and c in space and check(c, b8) is None for c in narrow)
    sd16 = conv(n=2, c=1280, k=1280, h=16, w=16)
    assert narrow_split_seeds(sd16) == [C(256, 64, 64, split_k=3, split_mode="workspace")]
    assert narrow_split_seeds(sd16)[0] in fam.seeds(sd16)[:5]
    b32 = conv(c=512, k=512, h=7, w=7)
    assert narrow_split_seeds(b32) == []  # 104 tiles of 128x64; 52 of 256x64 x 2 fill 104 SMs, below 85%
    assert narrow_split_seeds(conv(n=8, c=640, k=640, h=32, w=32)) == []


def test_stream_k_joins_the_space_of_few_wave_layers_only() -> None:
    """Layers whose 128x128 tiles fill at most four waves and whose K loop is long get stream-K
    (cooperative, swizzle 1, unsplit, every tile and cluster) in the space (ResNet-50 stage 4 at
    batch 256: 196 tiles of 128x256 are 1.48 waves, 72 K blocks), not in the seeds. A layer of
    many waves, or of a short K loop, gets none."""
    fam = HopperConvFamily()
    b256 = conv(n=256, c=512, k=512, h=7, w=7)
    streamed = [c for c in fam.space(b256) if c.stream_k]
    assert all(c.schedule is Schedule.COOPERATIVE and c.swizzle == 1 and c.split_k == 1 for c in streamed)
    assert {(c.tile_m, c.tile_n, c.cluster_m, c.cluster_n) for c in streamed} >= {(128, 256, 2, 1), (256, 128, 1, 2)}
    assert check(C(128, 256, 64, cluster_m=2, stream_k=True), b256) is None
    assert not any(c.stream_k for c in fam.seeds(b256))
    large = conv(n=4, c=512, k=512, h=128, w=128)  # 65536 x 512 outputs: 16 waves of 128x128
    short_k = conv(n=32, c=64, k=64)  # K = 576
    for layer in (large, short_k):
        assert not any(c.stream_k for c in fam.space(layer))


def test_stream_k_configs_keep_their_dict_form_and_reach_the_gemm_config() -> None:
    cfg = C(128, 256, 64, stream_k=True)
    assert cfg.as_dict()["stream_k"] is True and C.from_dict(cfg.as_dict()) == cfg
    assert "stream_k" not in C(128, 256, 64).as_dict()  # the records before stream-K keep their keys
    assert cfg.short() == "128x256x64 c1x1 s0 coop m/1 streamk"
    assert cfg.gemm_config().stream_k and not C().gemm_config().stream_k
    with pytest.raises(TypeError):
        C(stream_k=1)  # type: ignore[arg-type]
    fam = HopperConvFamily()
    assert fam.simplicity(C(128, 256, 64)) < fam.simplicity(cfg)


def test_workspace_split_needs_splits_and_the_tma_store() -> None:
    small = conv(c=512, k=512, h=7, w=7)
    assert "split_k > 1" in (check(C(128, 128, 64, split_mode="workspace"), small) or "")
    assert "store" in (check(C(128, 128, 64, split_k=2, store="direct", split_mode="workspace"), small) or "")


def test_suite_file_layers_are_served_except_the_stem() -> None:
    fam = HopperConvFamily()
    for case in json.loads(SHAPES_CONV.read_text())["cases"]:
        dt = DType(case["dtype"])
        p = ConvProblem(
            direction="fprop", n=case["N"], h=case["H"], w=case["W"], c=case["C"], k=case["K"], r=case["R"],
            s=case["S"], stride_h=case["stride"][0], stride_w=case["stride"][1], pad_h=case["pad"][0],
            pad_w=case["pad"][1], dil_h=case["dilation"][0], dil_w=case["dilation"][1], x_dtype=dt, w_dtype=dt,
            y_dtype=dt,
        )  # fmt: skip
        reason = fam.supports(p)
        if case["C"] % 8:
            assert reason is not None and "C=" in reason
        else:
            assert reason is None, (case["name"], reason)
            assert fam.seeds(p), case["name"]


def test_config_round_trip() -> None:
    fam = HopperConvFamily()
    for cfg in fam.space(conv(c=512, k=512, h=7, w=7))[::97]:
        d = fam.config_to_dict(cfg)
        assert json.loads(json.dumps(d)) == d
        assert fam.config_from_dict(d) == cfg
    cfg = C(256, 128, 128, 2, 1, 4, "cooperative", "along_n", 8, 3, "direct")
    assert C.from_dict(cfg.as_dict()) == cfg
    assert C.from_dict({**cfg.as_dict(), "unknown_future_field": 1}) == cfg
    assert cfg.short() == "256x128x128 c2x1 s4 coop n/8 sk3 direct"
    # serial configs keep the dict form they had before split_mode (their stored records' keys)
    assert "split_mode" not in cfg.as_dict()
    ws = C(128, 256, 64, split_k=5, split_mode="workspace")
    assert ws.as_dict()["split_mode"] == "workspace" and C.from_dict(ws.as_dict()) == ws
    assert ws.short() == "128x256x64 c1x1 s0 coop m/1 sk5w"
    with pytest.raises(TypeError):
        C(tile_m=128.0)  # type: ignore[arg-type]


def test_gemm_config_mirrors_the_conv_config() -> None:
    cfg = C(128, 256, 64, 2, 1, 0, "pingpong", "along_n", 4, 1, "tma")
    g = cfg.gemm_config()
    for f in ("tile_m", "tile_n", "tile_k", "cluster_m", "cluster_n", "stages", "schedule", "raster", "swizzle",
              "split_k", "store", "split_mode"):  # fmt: skip
        assert getattr(g, f) == getattr(cfg, f)
    assert C(split_k=3, split_mode="workspace").gemm_config().split_mode is SplitMode.WORKSPACE
    assert not g.swap_ab and not g.stream_k


def test_simplicity_prefers_small_clusters() -> None:
    fam = HopperConvFamily()
    assert fam.simplicity(C()) < fam.simplicity(C(cluster_m=2))


# ---- plan, compile key, source files -------------------------------------------------------------
def test_implicit_gemm_dimensions() -> None:
    p = conv(n=3, h=29, w=31, c=72, k=136, stride_h=2, stride_w=3)
    assert output_size(p) == (p.p, p.q) == (15, 11)
    g = implicit_gemm(p)
    assert (g.m, g.n, g.k) == (3 * 15 * 11, 136, 72 * 9)
    assert implicit_gemm(p, tile_k=64).k == 128 * 9
    e = implicit_gemm(conv(epilogue=Epilogue(with_c=True, bias=True), y_dtype=DType.FP32))
    assert e.c_dtype is DType.FP32 and e.epilogue.with_c


def test_plan_is_the_gemm_plan_plus_the_filter() -> None:
    plan = make_plan(C(128, 128, 64, cluster_m=2), conv(r=1, s=7, pad_h=0, pad_w=3))
    assert (plan.r, plan.s) == (1, 7)
    assert plan.gemm.tile_m == 128 and plan.gemm.cluster_m == 2 and plan.gemm.stages >= 2
    assert plan.gemm.smem_bytes <= 232_448


def test_compile_key_follows_the_class_not_the_run_time_sizes() -> None:
    cfg = C()
    base = compile_key(make_plan(cfg, conv()))
    # N, H, W, C, K, stride, padding and dilation are run-time: the same compiled kernel.
    for other in (conv(n=7, h=13, w=99), conv(c=256, k=512), conv(stride_h=2, pad_w=0, dil_h=2)):
        assert compile_key(make_plan(cfg, other)) == base
    # R, S, dtypes, epilogue and the config are compile-time.
    for other in (conv(r=1, s=1, pad_h=0, pad_w=0), conv(y_dtype=DType.FP32), conv(epilogue=Epilogue(bias=True))):
        assert compile_key(make_plan(cfg, other)) != base
    assert compile_key(make_plan(dataclasses.replace(cfg, tile_n=256), conv())) != base


def test_source_files_exist() -> None:
    assert HopperConvFamily.SOURCE_FILES == SOURCE_FILES
    for rel in SOURCE_FILES:
        assert (KERNELS_DIR / rel).is_file(), rel
    assert "hopper_conv/kernel.py" in SOURCE_FILES and "hopper_gemm/kernel.py" in SOURCE_FILES
    assert len(source_hash()) == 16


def test_importing_the_family_does_not_load_the_dsl() -> None:
    import subprocess
    import sys

    code = (
        "import sys, autocutlass.kernels.hopper_conv as f, autocutlass.kernels.hopper_conv.check, "
        "autocutlass.kernels.hopper_conv.plan, autocutlass.kernels.hopper_conv.compile; "
        "print(any(m == 'cutlass' or m.startswith('cutlass.') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


# ---- compile (no GPU) ----------------------------------------------------------------------------


COMPILE_CASES = [
    # 3x3, stride 1, pad 1 (ResNet stage 1), two configs: ping-pong with a narrow tile, and a
    # 2x1 cluster (filter multicast)
    (C(128, 64, 64, schedule="pingpong"), conv()),
    (C(128, 128, 64, cluster_m=2), conv(c=128, k=128)),
    # stride 2 with im2col multicast (cluster_n = 2) and tile_k 128
    (C(128, 128, 128, cluster_n=2), conv(c=128, k=128, stride_h=2, stride_w=2)),
    # 1x7 with residual + bias + GELU into fp32, 2x2 cluster, tile_m 256, split-K
    (C(256, 128, 64, cluster_m=2, cluster_n=2, split_k=2), conv(
        r=1, s=7, pad_h=0, pad_w=3, c=128, k=128, y_dtype=DType.FP32,
        epilogue=Epilogue(with_c=True, bias=True, activation=Activation.GELU))),
    # a wave-filling split count (layer_splits): 26 tiles of 128x256 split 5 ways
    (C(128, 256, 64, split_k=5), conv(c=512, k=512, h=7, w=7)),
    # the same through the workspace (no turnstiles); and with residual + bias + ReLU (run by the reduce)
    (C(128, 256, 64, split_k=5, split_mode="workspace"), conv(c=512, k=512, h=7, w=7)),
    (C(64, 128, 64, split_k=3, cluster_m=2, split_mode="workspace"), conv(
        c=256, k=256, h=7, w=7, epilogue=Epilogue(with_c=True, bias=True, activation=Activation.RELU))),
    # stream-K: a big tile on ResNet-50 stage 4 at batch 256; a 2-CTA cluster with residual + bias + ReLU
    (C(128, 256, 64, stream_k=True), conv(n=256, c=512, k=512, h=7, w=7)),
    (C(128, 128, 64, cluster_n=2, stream_k=True), conv(
        c=256, k=256, h=14, w=14, epilogue=Epilogue(with_c=True, bias=True, activation=Activation.RELU))),
    # 192-row tiles (the consumers split N): ResNet-50 stage 4 at batch 256 in a 1x2 cluster, and
    # stage 3 at batch 128 with bias + ReLU; 192x128 with a residual (96 registers)
    (C(192, 256, 64, cluster_n=2), conv(n=256, c=512, k=512, h=7, w=7)),
    (C(192, 256, 64), conv(n=128, c=256, k=256, h=14, w=14, epilogue=Epilogue(bias=True, activation=Activation.RELU))),
    (C(192, 128, 64, cluster_m=2), conv(c=256, k=256, h=14, w=14, epilogue=Epilogue(with_c=True, bias=True))),
    # fp16, direct store, 5x3 (R != S), dilation 2
    (C(64, 128, 64, store="direct"), conv(r=5, s=3, pad_h=4, pad_w=2, dil_h=2, dil_w=2, x_dtype=DType.FP16,
                                          w_dtype=DType.FP16, y_dtype=DType.FP16,
                                          epilogue=Epilogue(bias=True, activation=Activation.SILU))),
]


@pytest.mark.compile
@pytest.mark.parametrize("cfg,prob", COMPILE_CASES, ids=[f"{c.short()}|{p.describe()}" for c, p in COMPILE_CASES])
def test_config_compiles(cfg: C, prob: ConvProblem) -> None:
    if not dsl_available():
        pytest.skip("nvidia-cutlass-dsl is not installed")
    from autocutlass.kernels.hopper_conv.compile import _compile

    assert check(cfg, prob) is None, check(cfg, prob)
    assert _compile(make_plan(cfg, prob)) is not None


@pytest.mark.compile
def test_sampled_space_configs_compile() -> None:
    if not dsl_available():
        pytest.skip("nvidia-cutlass-dsl is not installed")
    from autocutlass.kernels.hopper_conv.compile import _compile

    prob = conv(c=128, k=128, stride_h=2, stride_w=2)
    feasible = [c for c in HopperConvFamily().space(prob) if check(c, prob) is None]
    for cfg in random.Random(2026).sample(feasible, 2):
        assert _compile(make_plan(cfg, prob)) is not None, cfg.short()

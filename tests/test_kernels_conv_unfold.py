"""The unfolded convolutions (``hopper_conv_unfold``, ``hopper_conv_wgrad_unfold``) without a GPU:
the row unfolding checked numerically against torch (forward and weight gradient, over stems,
strides, dilations, paddings and odd widths), the lowered problem, the reasons, the registry's
choice, space/seeds/check as the inner family's on the lowered layer, the source hashes, the
runners' tensor handling (through fake inner runners), and (marker ``compile``) the lowered stem's
seeds compiled with CUTE_DSL_ARCH=sm_90a."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from _conv_helpers import dsl_available
from autocutlass.device import KERNELS_DIR, source_hash
from autocutlass.kernels import families_for, get_family, source_hashes
from autocutlass.kernels.hopper_conv import HopperConvFamily
from autocutlass.kernels.hopper_conv.sources import SOURCE_FILES as FPROP_SOURCES
from autocutlass.kernels.hopper_conv_unfold import ASSEMBLE, HopperConvUnfoldFamily, HopperConvWgradUnfoldFamily, sources
from autocutlass.kernels.hopper_conv_unfold.config import UnfoldedConfig
from autocutlass.kernels.hopper_conv_unfold.lowering import (
    MAX_UNFOLDED_CHANNELS,
    WIDE_CHANNELS,
    fold_weight_grad,
    unfold_input,
    row_step,
    unfold_rows,
    unfold_weight,
    unfolded_channels,
    unfolded_problem,
    unsupported,
)
from autocutlass.kernels.hopper_conv_unfold.unfold import (
    MAX_COLUMNS,
    STAGING_BYTES,
    RowUnfold,
    columns_per_cta,
    staged_elements,
    unfold_key,
)
from autocutlass.kernels.hopper_conv_wgrad import HopperConvWgradConfig, HopperConvWgradFamily
from autocutlass.kernels.hopper_conv_wgrad.sources import SOURCE_FILES as WGRAD_SOURCES
from autocutlass.ops.conv.problem import ConvDirection, ConvProblem
from autocutlass.ops.types import Activation, DType, Epilogue

CL = torch.channels_last
FPROP = HopperConvUnfoldFamily()
WGRAD = HopperConvWgradUnfoldFamily()


def stem(**kw: object) -> ConvProblem:
    base: dict[str, object] = {"direction": "fprop", "n": 32, "h": 224, "w": 224, "c": 3, "k": 64, "r": 7, "s": 7,
                               "stride_h": 2, "stride_w": 2, "pad_h": 3, "pad_w": 3, "align_x": 2, "align_w": 2}  # fmt: skip
    base.update(kw)
    return ConvProblem(**base)  # type: ignore[arg-type]


# (N, C, H, W, K, R, S, stride, pad, dilation): the ResNet stem, a 3x3 image conv, a latent's 4
# channels, 5 channels under a 1x7 filter, dilation and stride 3 along W, an odd width, no padding
GEOMETRIES = [
    (2, 3, 23, 29, 8, 7, 7, (2, 2), (3, 3), (1, 1)),
    (1, 3, 17, 19, 16, 3, 3, (1, 1), (1, 1), (1, 1)),
    (2, 4, 9, 11, 8, 3, 3, (1, 1), (1, 1), (1, 1)),
    (1, 5, 8, 21, 8, 1, 7, (1, 1), (0, 3), (1, 1)),
    (1, 3, 13, 25, 8, 3, 3, (2, 3), (2, 2), (1, 2)),
    (2, 6, 7, 7, 8, 2, 2, (1, 1), (0, 0), (1, 1)),
    (1, 3, 21, 17, 8, 5, 3, (2, 1), (2, 1), (2, 1)),  # stride 2, dilation 2: g = 2 for T = 2 and 3
    (1, 3, 19, 16, 8, 7, 3, (3, 1), (3, 1), (1, 1)),  # stride 3: g = 3 for T = 3
]


def _problem(geo: tuple) -> ConvProblem:
    n, c, h, w, k, r, s, stride, pad, dil = geo
    return ConvProblem(direction="fprop", n=n, h=h, w=w, c=c, k=k, r=r, s=s, stride_h=stride[0], stride_w=stride[1],
                       pad_h=pad[0], pad_w=pad[1], dil_h=dil[0], dil_w=dil[1], align_x=2, align_w=2)  # fmt: skip


def _lowered(geo: tuple, rows: int, multiple: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, ConvProblem, dict]:
    """x, w, x' and the lowered problem of T = ``rows`` (C' rounded to ``multiple``), and the lowered
    layer's F.conv2d geometry."""
    n, c, h, w, k, r, s, stride, pad, dil = geo
    gen = torch.Generator().manual_seed(7)
    x = torch.randn(n, c, h, w, generator=gen, dtype=torch.float64).contiguous(memory_format=CL)
    wt = torch.randn(k, c, r, s, generator=gen, dtype=torch.float64).contiguous(memory_format=CL)
    p = _problem(geo)
    low = unfolded_problem(p, rows, multiple)
    xp = unfold_input(x, s, stride[1], pad[1], dil[1], low.c, rows=rows, height=low.h, pad_h=pad[0], dil_h=dil[0],
                      step=row_step(p, rows))
    geom = {"stride": (low.stride_h, 1), "padding": (low.pad_h, 0), "dilation": (low.dil_h, 1)}
    return x, wt, xp, low, geom


CASES = [(g, t, 0) for g in GEOMETRIES for t in unfold_rows(_problem(g))]
CASES += [(g, t, WIDE_CHANNELS) for g in GEOMETRIES[:3] for t in unfold_rows(_problem(g))]  # C' padded to 64
IDS = [f"c{g[1]}-{g[5]}x{g[6]}-s{g[7][1]}-p{g[8][1]}-d{g[9][1]}-rows{t}" + (f"-c'{m}x" if m else "") for g, t, m in CASES]


def test_unfolded_channels_round_to_16_bytes_or_to_a_multiple() -> None:
    p = _problem(GEOMETRIES[0])  # the stem: S*C = 21 per filter row, bf16 (8-channel units)
    assert [unfolded_channels(p, t) for t in (1, 2, 3)] == [24, 48, 64]
    assert [unfolded_channels(p, t, WIDE_CHANNELS) for t in (1, 2, 3)] == [64, 64, 64]
    assert unfolded_channels(p, 2, 6) == 48  # a multiple rounded up to whole 16-byte units first (8 channels)
    low = unfolded_problem(p, 2, WIDE_CHANNELS)
    assert low.c == 64 and low.r == 4 and (low.h, low.w) == (unfolded_problem(p, 2).h, unfolded_problem(p, 2).w)


def test_each_geometry_offers_several_rows() -> None:
    assert unfold_rows(_problem(GEOMETRIES[0])) == (1, 2, 3)  # the stem: 7, 4 and 3 filter rows of 24, 48, 64 channels
    assert all(len(unfold_rows(_problem(g))) >= 2 for g in GEOMETRIES if g[5] > 1)
    assert unfold_rows(_problem(GEOMETRIES[3])) == (1,)  # a 1x7 filter has one row


@pytest.mark.parametrize("geo,rows,multiple", CASES, ids=IDS)
def test_the_unfolded_layer_computes_the_layers_output(geo: tuple, rows: int, multiple: int) -> None:
    x, wt, xp, low, geom = _lowered(geo, rows, multiple)
    _, c, _, _, _, r, s, stride, pad, dil = geo
    want = F.conv2d(x, wt, None, stride, pad, dil)
    wp = unfold_weight(wt, low.c, rows)
    assert xp.shape[1:] == (low.c, low.h, low.w) and wp.shape[1:] == (low.c, low.r, 1)
    assert xp.is_contiguous(memory_format=CL) and wp.is_contiguous(memory_format=CL)
    got = F.conv2d(xp, wp, None, **geom)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)
    # the padded channels are zeros in both operands (a stray value there would be multiplied in)
    assert not xp[:, rows * s * c:].any() and not wp[:, rows * s * c:].any()


@pytest.mark.parametrize("geo,rows,multiple", CASES, ids=IDS)
def test_the_unfolded_layers_weight_gradient_folds_into_the_layers(geo: tuple, rows: int, multiple: int) -> None:
    x, wt, xp, low, geom = _lowered(geo, rows, multiple)
    _, _, _, _, _, r, s, stride, pad, dil = geo
    y = F.conv2d(x, wt, None, stride, pad, dil)
    dy = torch.randn(y.shape, dtype=torch.float64).contiguous(memory_format=CL)
    want = torch.ops.aten.convolution_backward(dy, x, wt, None, list(stride), list(pad), list(dil), False, [0, 0], 1,
                                               [False, True, False])[1]  # fmt: skip
    wp0 = torch.zeros(wt.shape[0], low.c, low.r, 1, dtype=torch.float64).contiguous(memory_format=CL)
    dwp = torch.ops.aten.convolution_backward(dy, xp, wp0, None, list(geom["stride"]), list(geom["padding"]),
                                              list(geom["dilation"]), False, [0, 0], 1, [False, True, False])[1]  # fmt: skip
    dw = torch.full_like(wt, float("nan")).contiguous(memory_format=CL)
    fold_weight_grad(dwp.contiguous(memory_format=CL), dw, rows)
    torch.testing.assert_close(dw, want, rtol=1e-10, atol=1e-10)


def test_fold_refuses_a_gradient_that_is_not_channels_last() -> None:
    dwp = torch.zeros(8, 24, 7, 1).contiguous(memory_format=CL)
    with pytest.raises(ValueError, match="channels_last"):
        fold_weight_grad(dwp, torch.zeros(8, 3, 7, 7))


def test_the_lowered_stem() -> None:
    p = stem()
    low = unfolded_problem(p)
    assert unfolded_channels(p) == 24 == low.c  # 7 taps x 3 channels, rounded up to 8 (16 bytes of bf16)
    assert (low.n, low.h, low.w, low.k, low.r, low.s) == (32, 224, 112, 64, 7, 1)
    assert (low.stride_h, low.stride_w, low.pad_h, low.pad_w, low.dil_h, low.dil_w) == (2, 1, 3, 0, 1, 1)
    assert (low.p, low.q) == (p.p, p.q) == (112, 112)
    assert (low.align_x, low.align_w, low.align_y) == (16, 16, p.align_y)
    assert low.flops > p.flops  # the zero channels are multiplied too
    two, three = unfolded_problem(p, 2), unfolded_problem(p, 3)
    # T = 2 reads x' rows 2p + 2j only (stride 2, dilation 2): x' keeps every second row, input rows 2i-3 and 2i-2,
    # and the lowered layer is a stride-1 4x1 convolution over 115 rows
    assert row_step(p, 2) == 2 and row_step(p, 3) == 1 and row_step(p, 1) == 1
    assert (two.c, two.r, two.stride_h, two.dil_h, two.pad_h, two.h) == (48, 4, 1, 1, 0, 115)
    assert (three.c, three.r, three.stride_h, three.dil_h, three.pad_h, three.h) == (64, 3, 2, 3, 0, 229)  # rows -3..225
    assert (two.p, two.q) == (three.p, three.q) == (112, 112)
    assert unfolded_channels(stem(c=4, r=3, s=3, x_dtype=DType.FP16, w_dtype=DType.FP16, y_dtype=DType.FP16)) == 16


@pytest.mark.parametrize(
    "problem,direction,needle",
    [
        (stem(c=64), ConvDirection.FPROP, "whole 16-byte units"),
        (stem(c=6, k=66, groups=3), ConvDirection.FPROP, "groups=3"),
        (dataclasses.replace(stem(), direction=ConvDirection.DGRAD), ConvDirection.FPROP, "fprop only, not dgrad"),
        (stem(c=37, s=7), ConvDirection.FPROP, f"more than {MAX_UNFOLDED_CHANNELS}"),
        (stem(h=3, w=3, pad_h=0, pad_w=0), ConvDirection.FPROP, "output is empty"),
    ],
)
def test_reasons(problem: ConvProblem, direction: ConvDirection, needle: str) -> None:
    why = unsupported(problem, direction)
    assert why is not None and needle in why
    fam = FPROP if direction is ConvDirection.FPROP else WGRAD
    assert needle in (fam.supports(problem) or "")


def test_the_registry_serves_the_stems_fprop_and_wgrad_only(monkeypatch: pytest.MonkeyPatch) -> None:
    names = lambda p: [f.name for f in families_for(p)]
    assert names(stem()) == ["hopper_conv_unfold"]
    assert names(dataclasses.replace(stem(), direction=ConvDirection.WGRAD)) == ["hopper_conv_wgrad_unfold"]
    assert names(dataclasses.replace(stem(), direction=ConvDirection.DGRAD)) == []  # cuDNN
    assert names(stem(c=64, align_x=16, align_w=16)) == ["hopper_conv"]  # aligned channels: read as they are
    monkeypatch.setenv("AUTOCUTLASS_CONV_WGRAD", "0")  # the inner wgrad family's switch holds for the lowered layer
    assert names(dataclasses.replace(stem(), direction=ConvDirection.WGRAD)) == []
    assert "AUTOCUTLASS_CONV_WGRAD=0" in (WGRAD.supports(dataclasses.replace(stem(), direction=ConvDirection.WGRAD)) or "")
    assert WGRAD.TUNED_ONLY and not FPROP.TUNED_ONLY


@pytest.mark.parametrize(
    "fam,inner,problem",
    [
        (FPROP, HopperConvFamily(), stem()),
        (FPROP, HopperConvFamily(), stem(epilogue=Epilogue(bias=True, activation=Activation.RELU))),
        (WGRAD, HopperConvWgradFamily(), dataclasses.replace(stem(), direction=ConvDirection.WGRAD)),
        (WGRAD, HopperConvWgradFamily(), dataclasses.replace(stem(c=4, r=3, s=3, stride_h=1, stride_w=1, pad_h=1, pad_w=1,
                                                                   h=64, w=64), direction=ConvDirection.WGRAD)),
    ],
    ids=["stem", "stem-bias-relu", "stem-wgrad", "latent-wgrad"],
)
def test_space_seeds_and_check_are_the_inner_familys_on_the_lowered_layer(fam, inner, problem: ConvProblem) -> None:
    assert fam.supports(problem) is None
    rows = unfold_rows(problem)
    assert len(rows) >= 2
    # the lowered layers: each T, with C' in 16-byte units and (the wgrad family, where that is not a
    # multiple of 64 channels) padded to 64 channels, offered with tiles across the taps in 64-channel boxes
    lowerings = [(t, m) for t in rows for m in fam.channel_multiples(problem, t)]
    wide = fam is WGRAD  # the stem's 24, 48 (not 64) and the latent's 16, 24, 40 channels
    assert any(m for _, m in lowerings) == wide and all(m in (0, WIDE_CHANNELS) for _, m in lowerings)
    space = list(fam.space(problem))
    assert space == [UnfoldedConfig(c, t, m, ASSEMBLE) for t, m in lowerings for c in inner.space(unfolded_problem(problem, t, m))
                     if not m or c.tap_channels == m]  # fmt: skip
    assert any(c.channels for c in space) == wide
    seeds = fam.seeds(problem)
    assert seeds and all(fam.check(s, problem) is None for s in seeds)
    if fam is FPROP:  # the first T's cooperative tile in a 2x1 cluster first, then the T-interleaved seeds
        first, seeds = seeds[0], seeds[1:]
        assert (first.inner.cluster_m, first.inner.cluster_n, first.inner.schedule.value, first.rows) == (
            2, 1, "cooperative", max(rows))
    # the inner family's seeds of each lowered layer, in turn, the largest T first (16-byte C' before 64)
    order = sorted(lowerings, key=lambda tm: (-tm[0], tm[1]))
    assert [(s.rows, s.channels) for s in seeds[: len(order)]] == order
    for t, m in lowerings:
        mine = [s.inner for s in seeds if (s.rows, s.channels) == (t, m)]
        low = unfolded_problem(problem, t, m)
        if not m:
            assert mine == [c for c in inner.seeds(low) if UnfoldedConfig(c, t, m, ASSEMBLE) in seeds]
            continue
        # padded to 64 channels: the inner seeds across the taps in 64-channel boxes, then the cost
        # model's cheapest such config of each way of sharing the pixel loop
        assert mine and all(c.tap_channels == m for c in mine)
        assert [c for c in inner.seeds(low) if c.tap_channels == m] == mine[: len([c for c in inner.seeds(low) if c.tap_channels == m])]
        assert {c.stream_k for c in mine} == {False, True} and any(c.split_k > 1 for c in mine)
    for cfg in random.Random(7).sample(space, 30):
        assert fam.check(cfg, problem) == inner.check(cfg.inner, unfolded_problem(problem, cfg.rows, cfg.channels))
    assert "rows=9" in (fam.check(UnfoldedConfig(seeds[0].inner, 9), problem) or "")
    assert "channels=32" in (fam.check(UnfoldedConfig(seeds[0].inner, seeds[0].rows, 32), problem) or "")
    for s in seeds[:3] + [c for c in seeds if c.channels][:2]:
        d = fam.config_to_dict(s)
        assert d["rows"] == s.rows and d.get("channels", 0) == s.channels and fam.config_from_dict(d) == s
        assert fam.simplicity(s) == (*inner.simplicity(s.inner), s.rows, s.channels)
    # the space's and the seeds' unfolding kernel is the slot-assembling one, named in the dict form; a dict
    # without it (a record from before it) runs the first kernel, and so does a dict without rows (T = 1)
    assert ASSEMBLE == "slots" and {c.assemble for c in space} == {c.assemble for c in seeds} == {"slots"}
    assert fam.config_to_dict(seeds[0])["assemble"] == "slots"
    gather = dataclasses.replace(seeds[0], assemble="gather")
    assert "assemble" not in fam.config_to_dict(gather) and fam.config_from_dict(fam.config_to_dict(gather)) == gather
    assert fam.check(gather, problem) is None and "assemble='bogus'" in (
        fam.check(dataclasses.replace(seeds[0], assemble="bogus"), problem) or "")
    bare = inner.config_to_dict(seeds[0].inner)  # a dict without rows: one filter row per pixel
    assert fam.config_from_dict(bare) == UnfoldedConfig(seeds[0].inner, 1)
    other = dataclasses.replace(problem, direction=ConvDirection.DGRAD)
    assert fam.space(other) == [] and fam.seeds(other) == [] and "not dgrad" in (fam.check(seeds[0], other) or "")


def test_source_files_and_hashes() -> None:
    assert set(FPROP_SOURCES) < set(sources.FPROP_SOURCE_FILES) and set(WGRAD_SOURCES) < set(sources.WGRAD_SOURCE_FILES)
    for own in (sources.LOWERING, *sources.UNFOLD):
        assert own in sources.FPROP_SOURCE_FILES and own in sources.WGRAD_SOURCE_FILES
    for rel in (*sources.FPROP_SOURCE_FILES, *sources.WGRAD_SOURCE_FILES):
        assert (KERNELS_DIR / rel).is_file(), rel
    hashes = source_hashes()
    assert hashes["hopper_conv_unfold"] == source_hash(sources.FPROP_SOURCE_FILES) == FPROP.source_hash()
    assert hashes["hopper_conv_wgrad_unfold"] == source_hash(sources.WGRAD_SOURCE_FILES) == WGRAD.source_hash()
    assert len({hashes[n] for n in ("hopper_conv", "hopper_conv_wgrad", "hopper_conv_unfold", "hopper_conv_wgrad_unfold")}) == 4
    assert get_family("hopper_conv_unfold") is get_family("hopper_conv_unfold")


def test_the_unfold_kernels_class_and_key() -> None:
    a = RowUnfold(3, 7, 24, 2, 3, 1)
    assert unfold_key(a) == unfold_key(RowUnfold(3, 7, 24, 2, 3, 1)) != unfold_key(RowUnfold(3, 7, 24, 2, 2, 1))
    assert len({unfold_key(RowUnfold(3, 3, c, 1, 1, d)) for c in (16, 24) for d in (1, 2)}) == 4
    # one row per pixel: x' keeps x's rows, so the padding and dilation along H do not make another kernel
    assert RowUnfold(3, 7, 24, 2, 3, 1, 1, 3, 2) == a and unfold_key(RowUnfold(3, 7, 24, 2, 3, 1, 1, 3, 2)) == unfold_key(a)
    assert unfold_key(dataclasses.replace(a, assemble="slots")) != unfold_key(a)  # another kernel, another object
    two = RowUnfold(3, 7, 48, 2, 3, 1, rows=2, pad_h=3, dil_h=1)
    assert unfold_key(two) != unfold_key(RowUnfold(3, 7, 48, 2, 3, 1, rows=2, pad_h=2, dil_h=1)) != unfold_key(a)
    for bad, needle in (((3, 7, 20, 2, 3, 1), "multiple of 8"), ((3, 7, 16, 2, 3, 1), "T*S*C = 21"),
                        ((3, 7, 24, 0, 3, 1), "stride_w=0"), ((3, 7, 24, 2, -1, 1), "pad_w=-1"),
                        ((3, True, 24, 2, 3, 1), "s=True"), ((3, 7, 40, 2, 3, 1, 2), "T*S*C = 42"),
                        ((3, 7, 48, 2, 3, 1, 2, -1), "pad_h=-1"), ((3, 7, 48, 2, 3, 1, 0), "rows=0"),
                        ((3, 7, 24, 2, 3, 1, 1, 0, 1, 1, "scatter"), "assemble='scatter'")):  # fmt: skip
        with pytest.raises(ValueError, match=needle):
            RowUnfold(*bad)


def test_the_unfold_kernel_stages_what_fits() -> None:
    stem = RowUnfold(3, 7, 48, 2, 3, 1, rows=2, pad_h=3, dil_h=1, step=2)
    assert columns_per_cta(stem) == MAX_COLUMNS == 128  # a whole row of the stem's 112 output columns
    assert staged_elements(stem, 128) == 2 * (127 * 2 + 6 + 1) * 3
    wide = RowUnfold(127, 2, 256, 8, 0, 120)  # a 2-tap filter 120 pixels apart, 127 channels
    cols = columns_per_cta(wide)
    assert 0 < cols < MAX_COLUMNS and staged_elements(wide, cols) * 2 <= STAGING_BYTES < staged_elements(wide, 2 * cols) * 2
    far = ConvProblem(direction="fprop", n=1, h=8, w=300, c=127, k=8, r=1, s=2, dil_w=130, align_x=2, align_w=2)
    assert "stages" in (unsupported(far, ConvDirection.FPROP) or "")


# ---- the runners, around fake inner runners ---------------------------------------------------
class _FakeInner:
    """Records what the unfolded runner hands the inner runner and computes the lowered layer
    with torch (the CPU stand-in for the kernel)."""

    def __init__(self, problem: ConvProblem) -> None:
        self.problem = problem
        self.calls: list[tuple] = []

    def __call__(self, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, **kw: object) -> None:
        p = self.problem
        geo = ([p.stride_h, p.stride_w], [p.pad_h, p.pad_w], [p.dil_h, p.dil_w])
        self.calls.append((a, b, out, kw))
        if p.direction is ConvDirection.FPROP:
            out.copy_(F.conv2d(a, b, kw.get("bias"), *geo))
        else:
            wz = torch.zeros_like(out)
            out.copy_(torch.ops.aten.convolution_backward(a, b, wz, None, *geo, False, [0, 0], 1, [False, True, False])[1])

    def poison_scratch(self) -> None:
        self.calls.append(("poison",))


def _no_gpu_kernel(*_: object) -> None:
    pytest.fail("CPU tensors are unfolded in torch, not by the GPU kernel")


def test_the_fprop_runner_unfolds_and_keeps_the_filter_per_weight_version(monkeypatch: pytest.MonkeyPatch) -> None:
    from autocutlass.kernels.hopper_conv_unfold import runner as runner_mod

    fakes: list[_FakeInner] = []
    kinds: list[object] = []
    monkeypatch.setattr(runner_mod, "get_unfold", lambda cls, cache_dir: kinds.append(cls) or _no_gpu_kernel)
    monkeypatch.setattr(runner_mod, "HopperConvRunner", lambda config, problem, cache_dir: fakes.append(_FakeInner(problem)) or fakes[-1])
    p = stem(n=2, h=23, w=29, k=8, x_dtype=DType.FP32, w_dtype=DType.FP32, y_dtype=DType.FP32, epilogue=Epilogue(bias=True))
    r = runner_mod.UnfoldFpropRunner(FPROP.seeds(stem())[0], p, None)  # T = 3: 3 taps of 64 channels
    assert r.rows == 3
    assert fakes[0].problem == unfolded_problem(p, r.rows) and kinds == [RowUnfold(3, 7, unfolded_channels(p, 3), 2, 3, 1, 3, 3, 1, assemble="slots")]
    x = torch.randn(2, 3, 23, 29).contiguous(memory_format=CL)
    w = torch.randn(8, 3, 7, 7).contiguous(memory_format=CL)
    b = torch.randn(8)
    y = torch.full((2, 8, 12, 15), float("nan")).contiguous(memory_format=CL)
    r(x, w, y, bias=b)
    torch.testing.assert_close(y, F.conv2d(x, w, b, 2, 3), rtol=1e-4, atol=1e-4)
    assert fakes[0].calls[0][3]["bias"] is b
    r(x, w, y, bias=b)
    assert fakes[0].calls[1][1] is fakes[0].calls[0][1]  # the same weight at the same version: w' kept
    with torch.no_grad():
        w.mul_(2)
    r(x, w, y, bias=b)
    assert fakes[0].calls[2][1] is not fakes[0].calls[1][1]
    torch.testing.assert_close(y, F.conv2d(x, w, b, 2, 3), rtol=1e-4, atol=1e-4)
    r.poison_scratch()
    assert fakes[0].calls[-1] == ("poison",)
    with pytest.raises(ValueError, match="C=3"):
        r(torch.randn(2, 4, 23, 29).contiguous(memory_format=CL), w, y, bias=b)
    with pytest.raises(ValueError, match="7x7"):
        r(x, torch.randn(8, 3, 5, 5).contiguous(memory_format=CL), y, bias=b)


def test_the_wgrad_runner_folds_the_gradient_into_dw(monkeypatch: pytest.MonkeyPatch) -> None:
    from autocutlass.kernels.hopper_conv_unfold import runner as runner_mod

    fakes: list[_FakeInner] = []
    kinds: list[object] = []
    monkeypatch.setattr(runner_mod, "get_unfold", lambda cls, cache_dir: kinds.append(cls) or _no_gpu_kernel)
    monkeypatch.setattr(runner_mod, "HopperConvWgradRunner", lambda config, problem, cache_dir: fakes.append(_FakeInner(problem)) or fakes[-1])
    # a bf16 problem (C' in 16-byte units of 2-byte elements) computed by the fake in float64
    p = dataclasses.replace(stem(n=2, h=23, w=29, k=8), direction=ConvDirection.WGRAD)
    r = runner_mod.UnfoldWgradRunner(WGRAD.seeds(dataclasses.replace(stem(), direction=ConvDirection.WGRAD))[0], p, None)
    assert kinds[-1].rows == 3
    x = torch.randn(2, 3, 23, 29, dtype=torch.float64).contiguous(memory_format=CL)
    dy = torch.randn(2, 8, 12, 15, dtype=torch.float64).contiguous(memory_format=CL)
    dw = torch.full((8, 3, 7, 7), float("nan"), dtype=torch.float64).contiguous(memory_format=CL)
    r(dy, x, dw)
    want = torch.ops.aten.convolution_backward(dy, x, torch.zeros_like(dw), None, [2, 2], [3, 3], [1, 1], False, [0, 0],
                                               1, [False, True, False])[1]  # fmt: skip
    torch.testing.assert_close(dw, want, rtol=1e-10, atol=1e-10)
    a, b, out, _ = fakes[0].calls[0]
    assert r.rows == 3 and a is dy and b.shape == (2, 64, 29, 15) and out.shape == (8, 64, 3, 1)  # H' = 11*2 + 1 + 3*2
    assert out.is_contiguous(memory_format=CL)
    inner = r.config.inner
    for rows, channels in ((1, 0), (2, 0), (1, WIDE_CHANNELS), (2, WIDE_CHANNELS)):  # the other T, C' padded to 64
        r = runner_mod.UnfoldWgradRunner(UnfoldedConfig(inner, rows, channels), p, None)
        dw.fill_(float("nan"))
        r(dy, x, dw)
        torch.testing.assert_close(dw, want, rtol=1e-10, atol=1e-10)
        a, b, out, _ = fakes[-1].calls[-1]
        assert b.shape[1] == out.shape[1] == unfolded_channels(p, rows, channels) == (64 if channels else 8 * -(-21 * rows // 8))
        assert fakes[-1].problem == unfolded_problem(p, rows, channels) and kinds[-1].channels == b.shape[1]


# ---- compile (no GPU) ----------------------------------------------------------------------------


@pytest.mark.compile
def test_the_lowered_stems_seeds_compile() -> None:
    """The first seed of the stem's fprop (with the bias and ReLU a stem's conv carries after BN
    folding) and of its wgrad compile: the inner kernels on the 24-channel, 7x1 lowered layer."""
    if not dsl_available():
        pytest.skip("nvidia-cutlass-dsl is not installed")
    from autocutlass.kernels.hopper_conv.compile import _compile as fprop_compile
    from autocutlass.kernels.hopper_conv.plan import make_plan as fprop_plan
    from autocutlass.kernels.hopper_conv_wgrad.compile import _compile as wgrad_compile
    from autocutlass.kernels.hopper_conv_wgrad.plan import make_plan as wgrad_plan

    f = stem(epilogue=Epilogue(bias=True, activation=Activation.RELU))
    for cfg in FPROP.seeds(f)[:3]:  # T = 3, 2, 1
        assert fprop_compile(fprop_plan(cfg.inner, unfolded_problem(f, cfg.rows))) is not None
    w = dataclasses.replace(stem(), direction=ConvDirection.WGRAD)
    for cfg in WGRAD.seeds(w)[:3]:
        assert wgrad_compile(wgrad_plan(cfg.inner, unfolded_problem(w, cfg.rows, cfg.channels))) is not None
    # C' padded to 64 at T = 2: the 4 taps in one 256-wide tile of 64-channel boxes, split through the workspace
    wide = UnfoldedConfig(HopperConvWgradConfig(64, 256, 64, split_k=32, split_mode="workspace", tap_channels=64), 2,
                          WIDE_CHANNELS, ASSEMBLE)  # fmt: skip
    assert WGRAD.check(wide, w) is None and wide in WGRAD.space(w)
    assert wgrad_compile(wgrad_plan(wide.inner, unfolded_problem(w, 2, WIDE_CHANNELS))) is not None


@pytest.mark.compile
def test_each_unfold_kernels_key_hashes_every_file_its_class_comes_from() -> None:
    """A kernel built on another's class (the slots kernel on the gather one's set-up and launch)
    changes with its base's file too: its cache key must hash that file as well."""
    if not dsl_available():
        pytest.skip("nvidia-cutlass-dsl is not installed")
    import importlib
    import inspect

    from autocutlass.kernels.hopper_conv_unfold import unfold

    for class_name, modules in unfold.ASSEMBLIES.values():
        kernel = getattr(importlib.import_module(f"autocutlass.kernels.hopper_conv_unfold.{modules[-1]}"), class_name)
        ours = {Path(inspect.getfile(k)).stem for k in kernel.__mro__ if k.__module__.startswith("autocutlass.")}
        assert ours == set(modules), class_name


@pytest.mark.compile
def test_the_unfold_kernel_compiles() -> None:
    if not dsl_available():
        pytest.skip("nvidia-cutlass-dsl is not installed")
    from autocutlass.kernels.hopper_conv_unfold.unfold import _compile

    for cls in (RowUnfold(3, 7, 24, 2, 3, 1), RowUnfold(5, 3, 16, 3, 2, 2), RowUnfold(3, 7, 64, 2, 3, 1, 3, 3, 1),
                RowUnfold(3, 7, 64, 2, 3, 1, 2, 3, 1, 2)):  # the stem at T = 2 with C' padded to 64
        assert _compile(cls) is not None
        # the slot-assembling kernel: 8-channel slots in threads' fixed places (3 slots for C' = 24, 2 for 16)
        assert _compile(dataclasses.replace(cls, assemble="slots")) is not None

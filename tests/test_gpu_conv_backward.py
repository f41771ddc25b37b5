"""conv2d's backward on the GPU (marker ``gpu``; skipped without CUDA).

* dgrad on ``hopper_conv_dgrad`` (stride 1: the fprop kernel on dy and the flipped filter), on
  ``hopper_conv_dgrad_strided`` (stride > 1: one phase per stride residue, scattered into dx) and
  on the GEMM family (pointwise layers), wgrad on the GEMM family (pointwise: split-K, stream-K)
  and on ``hopper_conv_wgrad`` (the implicit-GEMM wgrad kernel, turned on here explicitly; off by
  default until these tests pass): each against the float32 gradient on random data with a
  NaN-poisoned output (``ops.conv.evaluation``, the tuner's own verification), over strides 1 and
  2, dilation, padding, R != S and residues in every dimension;
* determinism: split reductions give the same bits on two runs;
* the dgrad runner's transformed filter follows an in-place weight update;
* dispatch end to end: gradients of a small channels_last convnet's training step against torch,
  which layers' directions ran our kernels and which fell back.
"""

from __future__ import annotations

import copy
import logging
from pathlib import Path
from typing import Any

import pytest

from _conv_helpers import verify_conv as _verify
from autocutlass.ops.conv.problem import ConvProblem
from autocutlass.ops.types import DType

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("isolated_env")]

BF16, FP16 = DType.BF16, DType.FP16


def problem(direction: str, n: int, h: int, w: int, c: int, k: int, r: int, s: int, *,
            stride: tuple[int, int] = (1, 1), pad: tuple[int, int] = (0, 0), dil: tuple[int, int] = (1, 1),
            dt: DType = BF16) -> ConvProblem:  # fmt: skip
    return ConvProblem(direction=direction, n=n, h=h, w=w, c=c, k=k, r=r, s=s, stride_h=stride[0], stride_w=stride[1],
                       pad_h=pad[0], pad_w=pad[1], dil_h=dil[0], dil_w=dil[1], x_dtype=dt, w_dtype=dt, y_dtype=dt)  # fmt: skip


# ---- dgrad: the fprop kernel on dy and the flipped filter ----------------------------------------
def _dgrad_family(tmp: Path) -> Any:
    from autocutlass.kernels.hopper_conv_dgrad import HopperConvDgradFamily

    return HopperConvDgradFamily(tmp)


def _dgrad_cases() -> list[tuple[Any, ConvProblem]]:
    from autocutlass.kernels.hopper_conv import HopperConvConfig as C

    return [
        # 3x3 pad 1: odd spatial size (N*H*W = 578, no multiple of 128), C = K = 64
        (C(128, 64, 64), problem("dgrad", 2, 17, 17, 64, 64, 3, 3, pad=(1, 1))),
        # K = 72 (the reduction's second channel block holds 8), C = 136 (a partial tile column)
        (C(128, 128, 64), problem("dgrad", 3, 15, 13, 136, 72, 3, 3, pad=(1, 1))),
        # no padding (dx's border gathers fewer taps); dilation 2 with pad 2; 5x3 (R != S)
        (C(128, 64, 64, schedule="pingpong"), problem("dgrad", 2, 12, 14, 64, 64, 3, 3)),
        (C(128, 96, 64, cluster_n=2), problem("dgrad", 2, 23, 31, 96, 64, 3, 3, pad=(2, 2), dil=(2, 2))),
        (C(64, 128, 64), problem("dgrad", 2, 19, 21, 128, 64, 5, 3, pad=(2, 1))),
        # 1x7 with tile_k 128; 2x2 cluster, tile_m 256; fp16; split-K (few tiles, long K*R*S)
        (C(128, 128, 128, cluster_m=2), problem("dgrad", 2, 9, 33, 128, 128, 1, 7, pad=(0, 3))),
        (C(256, 128, 64, cluster_m=2, cluster_n=2), problem("dgrad", 4, 21, 21, 128, 256, 3, 3, pad=(1, 1))),
        (C(128, 128, 64), problem("dgrad", 2, 15, 15, 64, 64, 3, 3, pad=(1, 1), dt=FP16)),
        (C(128, 128, 64, split_k=3), problem("dgrad", 2, 7, 7, 128, 512, 3, 3, pad=(1, 1))),
        (C(128, 256, 64, split_k=5, split_mode="workspace"), problem("dgrad", 32, 7, 7, 512, 512, 3, 3, pad=(1, 1))),
        (C(128, 256, 64, stream_k=True), problem("dgrad", 128, 7, 7, 512, 512, 3, 3, pad=(1, 1))),
        # direct store with residues; the ResNet stage-3 layer's shape
        (C(64, 128, 64, store="direct"), problem("dgrad", 1, 7, 9, 72, 64, 3, 3, pad=(1, 1))),
        (C(128, 128, 64, cluster_n=2, raster="along_n"), problem("dgrad", 32, 14, 14, 256, 256, 3, 3, pad=(1, 1))),
        # a 192-row tile (consumers split N, session 44) on the fprop kernel dgrad runs
        (C(192, 256, 64, cluster_n=2), problem("dgrad", 6, 7, 7, 512, 512, 3, 3, pad=(1, 1))),
    ]


def test_dgrad_on_the_fprop_kernel(tmp_path: Path) -> None:
    fam = _dgrad_family(tmp_path)
    for config, p in _dgrad_cases():
        _verify(fam, config, p)


def test_dgrad_seeds_of_suite_layers(tmp_path: Path) -> None:
    fam = _dgrad_family(tmp_path)
    for p in (problem("dgrad", 32, 56, 56, 64, 64, 3, 3, pad=(1, 1)), problem("dgrad", 8, 32, 32, 640, 640, 3, 3, pad=(1, 1)),
              problem("dgrad", 32, 7, 7, 512, 512, 3, 3, pad=(1, 1))):  # fmt: skip
        _verify(fam, fam.seeds(p)[0], p)


def test_dgrad_follows_an_in_place_weight_update(tmp_path: Path) -> None:
    import torch

    from autocutlass.ops.conv import evaluation as ev

    fam = _dgrad_family(tmp_path)
    config, p = _dgrad_cases()[0]
    runner, inputs = _verify(fam, config, p)
    with torch.no_grad():
        inputs.w.mul_(-0.5)  # an optimizer step: the weight's version moves
    ok, why = ev.verify(runner, p, inputs, ev.reference(p, inputs))
    assert ok, why


# ---- strided dgrad: one stride-1 convolution per stride phase, scattered into dx -----------------
def _strided_family(tmp: Path) -> Any:
    from autocutlass.kernels.hopper_conv_dgrad_strided import HopperConvDgradStridedFamily

    return HopperConvDgradStridedFamily(tmp)


def _strided_cases() -> list[tuple[Any, ConvProblem]]:
    from autocutlass.kernels.hopper_conv import HopperConvConfig as C

    d = "direct"  # the register scatter; the others the staged one (store TMA)
    return [
        # ResNet's 3x3 stride 2 pad 1 (phases of 1, 2, 2 and 4 taps), even size; odd sizes (phases of
        # 8 and 7 rows), residues in every dimension
        (C(128, 128, 64), problem("dgrad", 2, 28, 28, 128, 128, 3, 3, stride=(2, 2), pad=(1, 1))),
        (C(128, 64, 64, store=d), problem("dgrad", 3, 15, 17, 72, 136, 3, 3, stride=(2, 2), pad=(1, 1))),
        # 1x1 stride 2 (three phases zero), odd size; 2x2 stride 2 (patch merging); 3x3 unpadded
        (C(128, 128, 64, schedule="pingpong"), problem("dgrad", 4, 15, 13, 256, 128, 1, 1, stride=(2, 2))),
        (C(64, 128, 64, store=d), problem("dgrad", 2, 16, 16, 128, 64, 2, 2, stride=(2, 2))),
        (C(128, 96, 64, cluster_n=2), problem("dgrad", 2, 19, 20, 96, 64, 3, 3, stride=(2, 2))),
        # stride 3 with padding 1 (a phase reads a band of dy: a positive im2col lower corner); mixed
        # strides with R != S; 4x4 stride 2 pad 1
        (C(128, 64, 64, store=d), problem("dgrad", 2, 13, 11, 64, 64, 3, 3, stride=(3, 3), pad=(1, 1))),
        (C(128, 128, 64, cluster_m=2), problem("dgrad", 2, 12, 11, 128, 64, 5, 3, stride=(2, 1), pad=(2, 1))),
        (C(128, 64, 128, store=d), problem("dgrad", 2, 16, 12, 64, 128, 4, 4, stride=(2, 2), pad=(1, 1))),
        # fp16; 256-row tiles; serial split-K and stream-K (a few-tile ResNet stage-4 layer)
        (C(128, 128, 64), problem("dgrad", 2, 14, 14, 64, 64, 3, 3, stride=(2, 2), pad=(1, 1), dt=FP16)),
        (C(256, 128, 64, store=d), problem("dgrad", 8, 28, 28, 128, 128, 3, 3, stride=(2, 2), pad=(1, 1))),
        (C(128, 128, 64, split_k=3), problem("dgrad", 4, 14, 14, 256, 512, 3, 3, stride=(2, 2), pad=(1, 1))),
        (C(128, 128, 64, store=d, stream_k=True), problem("dgrad", 8, 14, 14, 256, 512, 3, 3, stride=(2, 2), pad=(1, 1))),
    ]  # fmt: skip


@pytest.mark.parametrize("i", range(12))
def test_strided_dgrad_kernel(tmp_path: Path, i: int) -> None:
    config, p = _strided_cases()[i]
    _verify(_strided_family(tmp_path), config, p)


def test_strided_dgrad_seeds_and_weight_updates(tmp_path: Path) -> None:
    import torch

    from autocutlass.ops.conv import evaluation as ev

    fam = _strided_family(tmp_path)
    for p in (problem("dgrad", 32, 56, 56, 128, 128, 3, 3, stride=(2, 2), pad=(1, 1)),
              problem("dgrad", 32, 56, 56, 256, 512, 1, 1, stride=(2, 2))):  # fmt: skip
        _verify(fam, fam.seeds(p)[0], p)
    config, p = _strided_cases()[0]
    runner, inputs = _verify(fam, config, p)
    with torch.no_grad():
        inputs.w.mul_(-0.5)  # an optimizer step: the sub-filters follow the weight's version
    ok, why = ev.verify(runner, p, inputs, ev.reference(p, inputs))
    assert ok, why
    # the runner of one shape serves the other shapes of its class (a neighbour's record): odd sizes
    for other in (problem("dgrad", 3, 27, 29, 128, 128, 3, 3, stride=(2, 2), pad=(1, 1)),
                  problem("dgrad", 1, 9, 8, 128, 128, 3, 3, stride=(2, 2), pad=(1, 1))):  # fmt: skip
        inputs = ev.make_inputs(other, device=torch.device("cuda"), seed=1)
        ok, why = ev.verify(runner, other, inputs, ev.reference(other, inputs))
        assert ok, f"{other.describe()} on the runner of {p.describe()}: {why}"


# ---- pointwise dgrad and wgrad: GEMMs ----------------------------------------------------------
def test_pointwise_backward_on_the_gemm_family(tmp_path: Path) -> None:
    from autocutlass.kernels.hopper_gemm import HopperGemmConfig as G
    from autocutlass.kernels.hopper_gemm import HopperGemmFamily

    fam = HopperGemmFamily(tmp_path)
    cases = [
        (G(128, 128, 64), problem("dgrad", 2, 17, 19, 136, 72, 1, 1)),
        (G(128, 256, 64, cluster_m=2), problem("dgrad", 32, 14, 14, 1024, 256, 1, 1)),
        (G(128, 64, 64), problem("wgrad", 2, 17, 19, 72, 136, 1, 1)),
        (G(128, 128, 64, stream_k=True), problem("wgrad", 32, 14, 14, 1024, 256, 1, 1)),
        (G(128, 64, 64, stream_k=True), problem("wgrad", 32, 56, 56, 64, 256, 1, 1)),
        (G(128, 128, 64, split_k=8, split_mode="workspace"), problem("wgrad", 32, 14, 14, 1024, 256, 1, 1)),
        (G(128, 128, 64, split_k=4), problem("wgrad", 8, 28, 28, 512, 128, 1, 1, dt=FP16)),
    ]
    for config, p in cases:
        _verify(fam, config, p)
    for p in (cases[1][1], cases[3][1], cases[4][1]):
        _verify(fam, fam.seeds(p)[0], p)


# ---- wgrad: the implicit-GEMM wgrad kernel -------------------------------------------------------
def _wgrad_family(tmp: Path) -> Any:
    from autocutlass.kernels.hopper_conv_wgrad import HopperConvWgradFamily

    return HopperConvWgradFamily(tmp, enabled=True)


def _wgrad_cases() -> list[tuple[Any, ConvProblem]]:
    from autocutlass.kernels.hopper_conv_wgrad import HopperConvWgradConfig as W

    return [
        # 3x3 pad 1, C = K = 64, N*P*Q = 578 (no multiple of tile_k): one tile per tap
        (W(64, 64, 64), problem("wgrad", 2, 17, 17, 64, 64, 3, 3, pad=(1, 1))),
        (W(128, 64, 64), problem("wgrad", 2, 17, 17, 64, 64, 3, 3, pad=(1, 1))),
        # two im2col boxes per tile (tile_n 128); C = 136 and K = 72 (partial tiles both ways)
        (W(128, 128, 64), problem("wgrad", 2, 15, 13, 136, 72, 3, 3, pad=(1, 1))),
        # stride 2; stride (2, 1) with a 5x3 filter; dilation 2; no padding; 1x7
        (W(128, 128, 64), problem("wgrad", 3, 29, 29, 128, 128, 3, 3, stride=(2, 2), pad=(1, 1))),
        (W(64, 128, 64), problem("wgrad", 2, 19, 21, 128, 64, 5, 3, stride=(2, 1), pad=(2, 1))),
        (W(128, 64, 128), problem("wgrad", 2, 23, 31, 64, 128, 3, 3, pad=(2, 2), dil=(2, 2))),
        (W(128, 64, 64), problem("wgrad", 2, 12, 14, 64, 128, 3, 3)),
        (W(128, 128, 64), problem("wgrad", 2, 9, 33, 128, 128, 1, 7, pad=(0, 3))),
        # the pixel loop split: serial (uneven), stream-K, with clusters (both multicasts)
        (W(64, 64, 64, split_k=12), problem("wgrad", 8, 28, 28, 64, 64, 3, 3, pad=(1, 1))),
        (W(64, 64, 64, stream_k=True), problem("wgrad", 8, 28, 28, 64, 64, 3, 3, pad=(1, 1))),
        (W(128, 128, 64, split_k=3, cluster_m=2), problem("wgrad", 4, 14, 14, 256, 128, 3, 3, pad=(1, 1))),
        (W(128, 128, 64, stream_k=True, cluster_n=2), problem("wgrad", 4, 14, 14, 128, 256, 3, 3, pad=(1, 1))),
        (W(256, 128, 64, cluster_m=2, cluster_n=2, split_k=2), problem("wgrad", 4, 14, 14, 256, 512, 3, 3, pad=(1, 1))),
        # ping-pong, direct store, raster along N with swizzle, fp16
        (W(128, 128, 64, schedule="pingpong"), problem("wgrad", 2, 16, 16, 128, 128, 3, 3, pad=(1, 1))),
        (W(64, 64, 64, store="direct"), problem("wgrad", 2, 9, 7, 64, 72, 3, 3, pad=(1, 1))),
        (W(128, 128, 64, raster="along_n", swizzle=4), problem("wgrad", 2, 16, 16, 256, 256, 3, 3, pad=(1, 1))),
        (W(128, 128, 64, stream_k=True), problem("wgrad", 2, 15, 15, 128, 128, 3, 3, pad=(1, 1), dt=FP16)),
        # several taps per tile (C = 64 or 128): 2 taps with K = 72 (9 taps: the last tile's second
        # tap is past R*S, its columns clipped), 3 taps into workspace slabs, 4 taps with stream-K,
        # 2 taps of 128 channels with the im2col multicast and a serial split, stride 2 with 24
        # workspace splits, a 5x3 filter (15 taps), the dy multicast
        (W(64, 128, 64, tap_channels=64), problem("wgrad", 2, 17, 17, 64, 72, 3, 3, pad=(1, 1))),
        (W(128, 192, 64, tap_channels=64, split_k=6, split_mode="workspace"),
         problem("wgrad", 4, 20, 18, 64, 136, 3, 3, pad=(1, 1))),
        (W(64, 256, 64, tap_channels=64, stream_k=True), problem("wgrad", 8, 28, 28, 64, 64, 3, 3, pad=(1, 1))),
        (W(128, 256, 64, tap_channels=128, cluster_m=2, split_k=4), problem("wgrad", 4, 14, 14, 128, 256, 3, 3,
                                                                            pad=(1, 1))),
        (W(64, 192, 64, tap_channels=64, split_k=24, split_mode="workspace"),
         problem("wgrad", 8, 29, 29, 64, 64, 3, 3, stride=(2, 2), pad=(1, 1))),
        (W(64, 128, 64, tap_channels=64), problem("wgrad", 2, 19, 21, 64, 64, 5, 3, stride=(2, 1), pad=(2, 1))),
        (W(128, 128, 64, tap_channels=64, cluster_n=2), problem("wgrad", 2, 16, 16, 64, 128, 3, 3, pad=(1, 1))),
        # one tap per tile into workspace slabs (dw batched over the taps for the reduce kernel)
        (W(128, 128, 64, split_k=6, split_mode="workspace"), problem("wgrad", 4, 14, 14, 256, 128, 3, 3, pad=(1, 1))),
        # wave-filling split counts (wave_splits): 7 serial splits, and 22 workspace slabs of a pixel
        # loop of 60 K blocks (splits of 3, the last two empty)
        (W(128, 256, 64, split_k=7), problem("wgrad", 2, 24, 24, 256, 256, 3, 3, pad=(1, 1))),
        (W(128, 128, 64, split_k=22, split_mode="workspace"), problem("wgrad", 3, 35, 36, 128, 256, 3, 3,
                                                                          pad=(1, 1))),
        # tiles across the taps of wider layers, in 64-channel boxes (C = 192, 320, 256): a box never
        # straddles two taps, the last tile's boxes past R*S*C are clipped; K = 200 leaves a partial M
        # tile; serial and workspace splits, stream-K, a 5x3 strided filter, the im2col multicast
        (W(128, 256, 64, tap_channels=64), problem("wgrad", 2, 12, 12, 192, 200, 3, 3, pad=(1, 1))),
        (W(128, 192, 64, tap_channels=64, split_k=2), problem("wgrad", 2, 16, 16, 320, 320, 3, 3, pad=(1, 1))),
        (W(64, 192, 64, tap_channels=64, split_k=7, split_mode="workspace"),
         problem("wgrad", 2, 16, 16, 320, 320, 3, 3, pad=(1, 1))),
        (W(128, 256, 64, tap_channels=64, stream_k=True), problem("wgrad", 2, 16, 16, 320, 320, 3, 3, pad=(1, 1))),
        (W(128, 256, 64, tap_channels=64, cluster_m=2), problem("wgrad", 2, 19, 21, 192, 256, 5, 3, stride=(2, 1),
                                                                pad=(2, 1))),
        # the slab sum in 4 groups of slabs (slab_groups): 64 slabs of a pointwise layer's (K, C) dw, 22
        # slabs of a 3x3 layer's taps (groups of 5 and 6 slabs), 9 slabs of a fp16 dw across the taps,
        # the last block's lanes past the end
        (W(128, 64, 64, split_k=64, split_mode="workspace", slab_groups=4), problem("wgrad", 8, 28, 28, 64, 256, 1, 1)),
        (W(128, 128, 64, split_k=22, split_mode="workspace", slab_groups=4),
         problem("wgrad", 3, 35, 36, 128, 256, 3, 3, pad=(1, 1))),
        (W(64, 192, 64, tap_channels=64, split_k=9, split_mode="workspace", slab_groups=4),
         problem("wgrad", 2, 16, 16, 320, 72, 3, 3, pad=(1, 1), dt=FP16)),
        # interleaved splits (split s takes pixel blocks s, s + S, ...): a pointwise dw in 12 slabs, 22
        # slabs of a 3x3 layer's 60 pixel blocks with residues, serial splits across the taps
        (W(128, 64, 64, split_k=12, split_mode="workspace", interleave=True), problem("wgrad", 8, 28, 28, 64, 256, 1, 1)),
        (W(128, 128, 64, split_k=22, split_mode="workspace", interleave=True),
         problem("wgrad", 3, 35, 36, 128, 256, 3, 3, pad=(1, 1))),
        (W(64, 192, 64, tap_channels=64, split_k=7, interleave=True), problem("wgrad", 2, 16, 16, 320, 320, 3, 3,
                                                                             pad=(1, 1))),
    ]  # fmt: skip


@pytest.mark.parametrize("i", range(38))
def test_wgrad_kernel(tmp_path: Path, i: int) -> None:
    config, p = _wgrad_cases()[i]
    _verify(_wgrad_family(tmp_path), config, p)


def test_wgrad_seeds_of_suite_layers(tmp_path: Path) -> None:
    fam = _wgrad_family(tmp_path)
    for p in (problem("wgrad", 32, 56, 56, 64, 64, 3, 3, pad=(1, 1)), problem("wgrad", 8, 32, 32, 640, 640, 3, 3, pad=(1, 1)),
              problem("wgrad", 32, 14, 14, 256, 256, 3, 3, pad=(1, 1)), problem("wgrad", 32, 56, 56, 128, 128, 3, 3,
                                                                                  stride=(2, 2), pad=(1, 1))):  # fmt: skip
        for config in fam.seeds(p)[:2]:
            _verify(fam, config, p)


# ---- determinism of the split reductions ---------------------------------------------------------
def test_split_reductions_give_the_same_bits_twice(tmp_path: Path) -> None:
    import torch

    from autocutlass.kernels.hopper_conv_wgrad import HopperConvWgradConfig as W
    from autocutlass.kernels.hopper_gemm import HopperGemmConfig as G
    from autocutlass.kernels.hopper_gemm import HopperGemmFamily

    runs = [
        (_wgrad_family(tmp_path), W(64, 64, 64, split_k=12), problem("wgrad", 8, 28, 28, 64, 64, 3, 3, pad=(1, 1))),
        (_wgrad_family(tmp_path), W(64, 64, 64, stream_k=True), problem("wgrad", 8, 28, 28, 64, 64, 3, 3, pad=(1, 1))),
        (_wgrad_family(tmp_path), W(64, 192, 64, tap_channels=64, split_k=24, split_mode="workspace"),
         problem("wgrad", 8, 28, 28, 64, 64, 3, 3, pad=(1, 1))),
        (_wgrad_family(tmp_path), W(64, 128, 64, tap_channels=64, stream_k=True),
         problem("wgrad", 8, 28, 28, 64, 64, 3, 3, pad=(1, 1))),
        (_wgrad_family(tmp_path), W(64, 192, 64, tap_channels=64, split_k=7, split_mode="workspace"),
         problem("wgrad", 2, 16, 16, 320, 320, 3, 3, pad=(1, 1))),
        (_wgrad_family(tmp_path), W(128, 64, 64, split_k=64, split_mode="workspace", slab_groups=4),
         problem("wgrad", 8, 28, 28, 64, 256, 1, 1)),
        (_wgrad_family(tmp_path), W(128, 64, 64, split_k=12, split_mode="workspace", interleave=True),
         problem("wgrad", 8, 28, 28, 64, 256, 1, 1)),
        (HopperGemmFamily(tmp_path), G(128, 64, 64, stream_k=True), problem("wgrad", 32, 56, 56, 64, 256, 1, 1)),
        (HopperGemmFamily(tmp_path), G(128, 128, 64, split_k=8, split_mode="workspace"),
         problem("wgrad", 32, 14, 14, 1024, 256, 1, 1)),
        (_dgrad_family(tmp_path), _dgrad_cases()[8][0], _dgrad_cases()[8][1]),
        (_strided_family(tmp_path), _strided_cases()[10][0], _strided_cases()[10][1]),
        (_strided_family(tmp_path), _strided_cases()[11][0], _strided_cases()[11][1]),
    ]  # fmt: skip
    for fam, config, p in runs:
        runner, inputs = _verify(fam, config, p)
        first = inputs.output.clone()
        for _ in range(3):
            inputs.poison()
            inputs.run(runner)
        torch.cuda.synchronize()
        assert torch.equal(inputs.output, first), f"{config} on {p.describe()}: not bitwise reproducible"


# ---- dispatch end to end: a training step's gradients ---------------------------------------------
def _convnet_step(dtype: Any) -> tuple[list[Any], list[Any], Any]:
    """One forward + backward of three channels_last convs (3x3 s1, 3x3 s2, 1x1 with a fused
    residual + ReLU) through autocutlass, and the same in float32 torch; the grads of both."""
    import torch
    import torch.nn.functional as F

    import autocutlass

    g = torch.Generator(device="cuda").manual_seed(0)
    cl = torch.channels_last

    def r(*shape: int, scale: float = 1.0) -> Any:
        return (torch.randn(*shape, device="cuda", generator=g) * scale).to(dtype).to(memory_format=cl)

    x = r(8, 64, 30, 30)
    w1, b1 = r(128, 64, 3, 3, scale=1 / 24), torch.randn(128, device="cuda", generator=g).to(dtype)
    w2, w3 = r(128, 128, 3, 3, scale=1 / 34), r(128, 128, 1, 1, scale=1 / 11)
    leaves = [t.requires_grad_() for t in (x, w1, b1, w2, w3)]

    h = autocutlass.conv2d(x, w1, b1, padding=1, activation="relu")
    h2 = autocutlass.conv2d(h, w2, stride=2, padding=1)
    y = autocutlass.conv2d(h2, w3, residual=h2, activation="relu")
    dy = torch.randn(y.shape, device="cuda", generator=g).to(dtype).to(memory_format=cl)
    y.backward(dy)
    ref = [t.detach().float().requires_grad_() for t in leaves]
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
        rh = F.relu(F.conv2d(ref[0], ref[1], ref[2], padding=1))
        rh2 = F.conv2d(rh, ref[3], stride=2, padding=1)
        F.relu(F.conv2d(rh2, ref[4]) + rh2).backward(dy.float())
    return [t.grad for t in leaves], [t.grad for t in ref], autocutlass.stats()


@pytest.mark.parametrize("wgrad_kernel", [False, True], ids=["wgrad-kernel-off", "wgrad-kernel-on"])
def test_a_convnet_training_step_matches_torch(wgrad_kernel: bool, monkeypatch: pytest.MonkeyPatch,
                                               caplog: pytest.LogCaptureFixture) -> None:  # fmt: skip
    import torch

    import autocutlass

    monkeypatch.setenv("AUTOCUTLASS_CONV_WGRAD", "1" if wgrad_kernel else "0")
    monkeypatch.setenv("AUTOCUTLASS_CONV_DGRAD", "1")
    autocutlass.reset()
    with caplog.at_level(logging.WARNING, logger="autocutlass"):
        got, want, stats = _convnet_step(torch.bfloat16)
    with autocutlass.policy("off"):  # torch's own bf16 step on the same inputs: the error to match
        base, _, _ = _convnet_step(torch.bfloat16)
    for name, a, t, b in zip(("x", "w1", "b1", "w2", "w3"), got, base, want, strict=True):
        assert torch.isfinite(a).all(), f"grad of {name}: not finite"
        err = lambda u: float((u.float() - b.float()).norm() / b.float().norm().clamp_min(1e-30))  # noqa: E731
        # bf16 storage between three layers and ReLU gates that flip on rounding: a chain's gradient is
        # a few percent off the float32 reference (3.7% for dX on an H200); ours must be no worse than
        # torch's bf16 path by more than half again
        assert err(a) <= max(2e-2, 1.5 * err(t)), f"grad of {name}: ours {err(a):.3e}, torch bf16 {err(t):.3e}"
    fell_back = [m for m in caplog.messages if "served by torch" in m]
    # forwards: 3 ours; dgrad (x needs its own: 3 dgrads): the 3x3 s1 and 1x1 ours, the strided 3x3 on cuDNN
    # (hopper_conv_dgrad_strided is off by default); wgrad: the 1x1 ours (GEMM), the 3x3 ours only with the
    # wgrad kernel on
    assert any("conv2d_dgrad" in m and "stride 2x2" in m for m in fell_back), fell_back
    assert sum("conv2d_wgrad" in m for m in fell_back) == (0 if wgrad_kernel else 2), fell_back
    assert stats.fallbacks == (1 if wgrad_kernel else 3), stats
    autocutlass.reset()


def test_conv_modules_train_through_their_sites() -> None:
    """Three training steps of autocutlass.nn.Conv2d modules (3x3 s1 with a bias, 3x3 s2, 1x1;
    the conv sites of ``autocutlass.nn.conv_site``): from the second step on each module's calls
    skip the dispatcher's memo keys (counted as memo hits); every step's gradients are as close to
    the float32 torch step as torch's own bf16 step is (the bound of the functional step above)."""
    import torch
    from torch import nn

    import autocutlass

    autocutlass.reset()
    torch.manual_seed(0)
    cl = torch.channels_last
    ref = nn.Sequential(nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(), nn.Conv2d(128, 128, 3, 2, 1, bias=False),
                        nn.Conv2d(128, 64, 1, bias=False)).cuda().to(memory_format=cl)  # fmt: skip
    bf = copy.deepcopy(ref).bfloat16()
    ours = autocutlass.swap_conv2d_(copy.deepcopy(bf))
    assert sum(type(m) is autocutlass.nn.Conv2d for m in ours.modules()) == 3
    x = torch.randn(8, 64, 30, 30, device="cuda").to(memory_format=cl)
    dy = torch.randn(8, 64, 15, 15, device="cuda").to(memory_format=cl)

    def grads(model: Any, dtype: Any) -> list[Any]:
        xi = x.to(dtype).detach().requires_grad_()  # a leaf of this dtype
        for p in model.parameters():
            p.grad = None
        model(xi).backward(dy.to(dtype))
        return [xi.grad] + [p.grad for p in model.parameters()]

    want, base = grads(ref, torch.float32), grads(bf, torch.bfloat16)
    for step in range(3):
        hits = autocutlass.stats().memo_hits
        got = grads(ours, torch.bfloat16)
        for i, (a, t, b) in enumerate(zip(got, base, want, strict=True)):
            assert a is not None and torch.isfinite(a).all(), (step, i)
            err = lambda u: float((u.float() - b.float()).norm() / b.float().norm().clamp_min(1e-30))  # noqa: E731
            assert err(a) <= max(2e-2, 1.5 * err(t)), f"step {step}, grad {i}: ours {err(a):.3e}, torch {err(t):.3e}"
        if step == 2:  # 3 forwards, 3 dgrads wanted (x requires grad), 3 wgrads, 1 bias merged: all hits
            assert autocutlass.stats().memo_hits - hits >= 3 + 3
            assert all(m._ac_hits is not None and m._ac_hits._site is not None
                       for m in ours.modules() if type(m) is autocutlass.nn.Conv2d)  # fmt: skip
    autocutlass.reset()


def test_an_nchw_input_layer_trains_on_our_kernels() -> None:
    """A channels_last conv module fed an NCHW input and an NCHW dY (a GroupNorm's output and its
    backward in Stable Diffusion's resnet blocks): the module makes x channels_last, the copy cuDNN
    makes itself, so from its third call on every training call runs our forward, dgrad and wgrad
    through the site's autograd Function (torch's ``ConvolutionBackward0`` served it before); no
    direction falls back to torch; the output is channels_last as F.conv2d's; every step's
    gradients, dX included, are as close to float32 as torch's bf16 step's."""
    import torch
    from torch import nn

    import autocutlass

    autocutlass.reset()
    torch.manual_seed(0)
    cl = torch.channels_last
    ref = nn.Conv2d(64, 128, 3, padding=1).cuda().to(memory_format=cl)
    bf = copy.deepcopy(ref).bfloat16()
    ours = autocutlass.nn.Conv2d.from_conv2d(copy.deepcopy(bf))
    x = torch.randn(4, 64, 24, 24, device="cuda")  # NCHW
    dy = torch.randn(4, 128, 24, 24, device="cuda")  # NCHW

    def grads(model: Any, dtype: Any) -> tuple[Any, list[Any]]:
        xi = x.to(dtype).detach().requires_grad_()
        for p in model.parameters():
            p.grad = None
        y = model(xi)
        y.backward(dy.to(dtype))
        return y, [xi.grad] + [p.grad for p in model.parameters()]

    (_, want), (_, base) = grads(ref, torch.float32), grads(bf, torch.bfloat16)
    for step in range(4):
        before = autocutlass.stats().fallbacks
        y, got = grads(ours, torch.bfloat16)
        assert y.is_contiguous(memory_format=cl)
        for i, (a, t, b) in enumerate(zip(got, base, want, strict=True)):
            assert a is not None and torch.isfinite(a).all(), (step, i)
            err = lambda u: float((u.float() - b.float()).norm() / b.float().norm().clamp_min(1e-30))  # noqa: E731
            assert err(a) <= max(2e-2, 1.5 * err(t)), f"step {step}, grad {i}: ours {err(a):.3e}, torch {err(t):.3e}"
        assert autocutlass.stats().fallbacks == before, step
        if step >= 2:
            assert type(y.grad_fn).__name__ == "_SiteConv2dBackward", step
    y = autocutlass.conv2d(x.bfloat16(), bf.weight.detach(), bf.bias.detach(), padding=1)  # the functional form too
    torch.testing.assert_close(y.float(), ref(x).detach(), rtol=3e-2, atol=3e-2)
    assert y.is_contiguous(memory_format=cl) and autocutlass.stats().fallbacks == before
    autocutlass.reset()

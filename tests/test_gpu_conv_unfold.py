"""The unfolded convolutions on the GPU (marker ``gpu``; skipped without CUDA): layers whose input
channels are not whole 16-byte units (a 3-channel stem), run on the forward and wgrad kernels
through a row-unfolded input.

* fprop (``hopper_conv_unfold``) against the float32 reference on random data with a NaN-poisoned
  output (``ops.conv.evaluation``, the tuner's own verification): the ResNet stem (7x7 stride 2),
  its fused bias + ReLU and a residual, 3x3 image and latent (4-channel) layers, a 1x7 filter,
  stride 3 and dilation 2 along W, fp16, odd sizes; the seeds and sampled configs of the space;
* wgrad (``hopper_conv_wgrad_unfold``): the stem and a latent layer, split (serial, workspace
  slabs) and stream-K configs, and the same bits on two runs;
* dispatch end to end: a stem + 3x3 training step through ``autocutlass.conv2d`` (the image needs
  no gradient): the stem's forward and weight gradient on our kernels, no fallback, gradients as
  torch's.
"""

from __future__ import annotations

import itertools
import logging
import random
from pathlib import Path
from typing import Any

import pytest

from _conv_helpers import verify_conv as _verify
from autocutlass.ops.conv.problem import ConvProblem
from autocutlass.ops.types import Activation, DType, Epilogue

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("isolated_env")]

BF16, FP16 = DType.BF16, DType.FP16


def problem(direction: str, n: int, h: int, w: int, c: int, k: int, r: int, s: int, *,
            stride: tuple[int, int] = (1, 1), pad: tuple[int, int] = (0, 0), dil: tuple[int, int] = (1, 1),
            dt: DType = BF16, epilogue: Epilogue | None = None) -> ConvProblem:  # fmt: skip
    row = c * dt.bytes
    align = row & -row if row % 16 else 16
    return ConvProblem(direction=direction, n=n, h=h, w=w, c=c, k=k, r=r, s=s, stride_h=stride[0], stride_w=stride[1],
                       pad_h=pad[0], pad_w=pad[1], dil_h=dil[0], dil_w=dil[1], x_dtype=dt, w_dtype=dt, y_dtype=dt,
                       align_x=min(align, 16), align_w=min(align, 16), epilogue=epilogue or Epilogue())  # fmt: skip


def _fprop(tmp: Path) -> Any:
    from autocutlass.kernels.hopper_conv_unfold import HopperConvUnfoldFamily

    return HopperConvUnfoldFamily(tmp)


def _wgrad(tmp: Path) -> Any:
    from autocutlass.kernels.hopper_conv_unfold import HopperConvWgradUnfoldFamily

    return HopperConvWgradUnfoldFamily(tmp)


UNFOLD_GEOMETRIES = [  # (N, C, H, W, R, S, stride, pad, dilation, dtype)
    (4, 3, 37, 41, 7, 7, (2, 2), (3, 3), (1, 1), "bfloat16"),
    (2, 4, 9, 13, 3, 3, (1, 1), (1, 1), (1, 1), "float16"),
    (2, 5, 8, 21, 1, 7, (1, 1), (0, 3), (1, 1), "bfloat16"),
    (1, 3, 13, 25, 3, 3, (2, 3), (2, 2), (1, 2), "bfloat16"),
    (3, 6, 7, 7, 2, 2, (1, 1), (0, 0), (1, 1), "float16"),
    (1, 3, 9, 300, 3, 3, (1, 1), (1, 1), (1, 1), "bfloat16"),  # 300 output columns: three CTAs per x' row
    (2, 3, 19, 16, 7, 3, (3, 1), (3, 1), (1, 1), "bfloat16"),  # stride 3: x' keeps every third row for T = 3
]


@pytest.mark.parametrize("geo", UNFOLD_GEOMETRIES, ids=[f"c{g[1]}-{g[4]}x{g[5]}-s{g[6][1]}-d{g[8][1]}" for g in UNFOLD_GEOMETRIES])
def test_the_unfold_kernel_writes_the_torch_maps_bits(tmp_path: Path, geo: tuple) -> None:
    """Every T the layer offers (several filter rows per unfolded pixel, their padding rows
    materialized), C' in 16-byte units by both assembling kernels and padded to 64 by the slots one, on a
    contiguous input and on a view whose rows are not (H sliced)."""
    import torch

    from autocutlass.kernels.hopper_conv_unfold.lowering import WIDE_CHANNELS, unfold_input, unfold_rows
    from autocutlass.kernels.hopper_conv_unfold.runner import _Unfolding
    from autocutlass.kernels.hopper_conv_unfold.unfold import ASSEMBLIES

    n, c, h, w, r, s, stride, pad, dil, dt = geo
    p = problem("fprop", n, h, w, c, 8, r, s, stride=stride, pad=pad, dil=dil,
                dt=BF16 if dt == "bfloat16" else FP16)  # fmt: skip
    x = torch.randn(n, c, h, w, device="cuda").to(getattr(torch, dt)).contiguous(memory_format=torch.channels_last)
    kinds = [(0, "gather"), *((m, "slots") for m in (0, WIDE_CHANNELS))]
    assert {a for _, a in kinds} == set(ASSEMBLIES)
    for rows, (multiple, assemble) in itertools.product(unfold_rows(p), kinds):
        un = _Unfolding(p, rows, tmp_path, multiple, assemble)
        for xi in (x, x[:, :, 1:, :]):
            got = un.input(xi)
            height, _ = un._sizes(xi.shape[2], xi.shape[3])
            want = unfold_input(xi, s, stride[1], pad[1], dil[1], un.channels, rows=rows, height=height, pad_h=pad[0],
                                dil_h=dil[0], step=un.step)  # fmt: skip
            assert got.shape == want.shape and got.is_contiguous(memory_format=torch.channels_last), (rows, assemble)
            assert torch.equal(got.view(torch.int16), want.view(torch.int16)), (rows, multiple, assemble)


RELU_BIAS = Epilogue(bias=True, activation=Activation.RELU)
FPROP_CASES = [
    problem("fprop", 4, 64, 64, 3, 64, 7, 7, stride=(2, 2), pad=(3, 3)),  # the stem, small batch
    problem("fprop", 3, 37, 41, 3, 64, 7, 7, stride=(2, 2), pad=(3, 3), epilogue=RELU_BIAS),  # odd sizes, BN folded
    problem("fprop", 2, 29, 31, 3, 128, 3, 3, pad=(1, 1), epilogue=Epilogue(with_c=True)),  # residual
    problem("fprop", 2, 33, 35, 4, 320, 3, 3, pad=(1, 1), dt=FP16),  # a latent's 4 channels, K a partial tile
    problem("fprop", 2, 19, 40, 5, 64, 1, 7, pad=(0, 3)),  # 1x7: one filter row, 35 -> 40 channels
    problem("fprop", 2, 21, 47, 3, 72, 3, 3, stride=(2, 3), pad=(2, 2), dil=(1, 2)),  # stride 3, dilation 2 along W
]


@pytest.mark.parametrize("p", FPROP_CASES, ids=[p.describe() for p in FPROP_CASES])
def test_fprop_seeds(tmp_path: Path, p: ConvProblem) -> None:
    """The first seed of each T the layer offers, then the next."""
    from autocutlass.kernels.hopper_conv_unfold.lowering import unfold_rows

    fam = _fprop(tmp_path)
    assert fam.supports(p) is None, fam.supports(p)
    for config in fam.seeds(p)[: len(unfold_rows(p)) + 1]:
        _verify(fam, config, p)


def test_fprop_sampled_configs_of_the_stem(tmp_path: Path) -> None:
    fam = _fprop(tmp_path)
    p = FPROP_CASES[1]
    feasible = [c for c in fam.space(p) if fam.check(c, p) is None]
    for config in random.Random(2026).sample(feasible, 4):
        _verify(fam, config, p)


def _wgrad_cases() -> list[tuple[Any, ConvProblem]]:
    from autocutlass.kernels.hopper_conv_unfold import UnfoldedConfig as U
    from autocutlass.kernels.hopper_conv_wgrad import HopperConvWgradConfig as W

    stem = problem("wgrad", 4, 64, 64, 3, 64, 7, 7, stride=(2, 2), pad=(3, 3))
    latent = problem("wgrad", 2, 33, 35, 4, 320, 3, 3, pad=(1, 1))
    wide_stem = problem("wgrad", 8, 128, 128, 3, 64, 7, 7, stride=(2, 2), pad=(3, 3))  # 512 K blocks
    return [
        (U(W(64, 64, 64, split_k=18, split_mode="workspace")), stem),
        (U(W(64, 64, 64, split_k=8), 2), stem),  # 4 filter rows of 48 channels
        (U(W(64, 64, 64, stream_k=True), 3), stem),  # 3 of 64
        (U(W(64, 128, 64, split_k=24, split_mode="workspace", tap_channels=64), 3), stem),  # 2 of them a tile
        (U(W(128, 64, 64, split_k=4, split_mode="workspace")), latent),
        (U(W(128, 64, 128), 2), latent),
        # C' padded to 64 channels (lowering.WIDE_CHANNELS): the stem's 4 taps of T = 2 in one 256-wide tile
        # through the workspace; its 7 taps of T = 1 in 128-wide tiles, serially; the latent's, stream-K
        (U(W(64, 256, 64, split_k=16, split_mode="workspace", tap_channels=64), 2, 64), stem),
        (U(W(64, 128, 64, split_k=4, tap_channels=64), 1, 64), stem),
        (U(W(128, 192, 64, stream_k=True, tap_channels=64), 2, 64), latent),
        # the stem's one 64x256 tile in 132 splits (config.SPLIT_MAX, one wave of an H100 or H200), slab sums
        # of one group and of four, x' by the slot-assembling unfold kernel
        (U(W(64, 256, 64, split_k=132, split_mode="workspace", tap_channels=64), 2, 64, "slots"), wide_stem),
        (U(W(64, 256, 64, split_k=132, split_mode="workspace", slab_groups=4, tap_channels=64), 2, 64, "slots"), wide_stem),
    ]


@pytest.mark.parametrize("i", range(11))
def test_wgrad(tmp_path: Path, i: int) -> None:
    config, p = _wgrad_cases()[i]
    _verify(_wgrad(tmp_path), config, p)


def test_wgrad_seeds_and_the_same_bits_twice(tmp_path: Path) -> None:
    import torch

    fam = _wgrad(tmp_path)
    p = _wgrad_cases()[0][1]
    for config in fam.seeds(p)[:4]:
        runner, inputs = _verify(fam, config, p)
        first = inputs.output.clone()
        for _ in range(2):
            inputs.poison()
            inputs.run(runner)
        torch.cuda.synchronize()
        assert torch.equal(inputs.output, first), f"{config}: not bitwise reproducible"


def test_a_stem_training_step_runs_our_kernels(caplog: pytest.LogCaptureFixture) -> None:
    """stem (bias + ReLU fused) then a 3x3 conv, forward and backward through autocutlass.conv2d;
    the image needs no gradient, so the stem's dgrad is never asked for."""
    import torch
    import torch.nn.functional as F

    import autocutlass

    autocutlass.reset()
    g = torch.Generator(device="cuda").manual_seed(0)
    cl, dt = torch.channels_last, torch.bfloat16

    def r(*shape: int, scale: float = 1.0) -> Any:
        return (torch.randn(*shape, device="cuda", generator=g) * scale).to(dt).to(memory_format=cl)

    x = r(4, 3, 96, 96)
    w1, b1 = r(64, 3, 7, 7, scale=1 / 12), torch.randn(64, device="cuda", generator=g).to(dt)
    w2 = r(64, 64, 3, 3, scale=1 / 24)
    leaves = [t.requires_grad_() for t in (w1, b1, w2)]
    with caplog.at_level(logging.WARNING, logger="autocutlass"):
        h = autocutlass.conv2d(x, w1, b1, stride=2, padding=3, activation="relu")
        y = autocutlass.conv2d(h, w2, padding=1)
        dy = torch.randn(y.shape, device="cuda", generator=g).to(dt).to(memory_format=cl)
        y.backward(dy)
    stats = autocutlass.stats()
    ref = [t.detach().float().requires_grad_() for t in leaves]
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
        rh = F.relu(F.conv2d(x.float(), ref[0], ref[1], stride=2, padding=3))
        F.conv2d(rh, ref[2], padding=1).backward(dy.float())
    for name, a, b in zip(("w1", "b1", "w2"), (t.grad for t in leaves), (t.grad for t in ref), strict=True):
        err = float((a.float() - b).norm() / b.norm().clamp_min(1e-30))
        assert err <= 2e-2, f"grad of {name}: {err:.3e}"
    assert not [m for m in caplog.messages if "served by torch" in m], caplog.messages
    assert stats.fallbacks == 0, stats
    autocutlass.reset()

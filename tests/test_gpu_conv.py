"""The Hopper implicit-GEMM conv2d family on the GPU, against F.conv2d in float32 on random data
with NaN-poisoned outputs: 3x3 pad 1, strides, dilations, 1x7, R != S, odd spatial sizes,
residues (N*P*Q not a tile multiple, C not a multiple of tile_k, K not a multiple of tile_n),
padding wider than the filter's reach, bias, residual, every activation, and every config axis."""

from __future__ import annotations

import math

import pytest

from autocutlass.kernels.hopper_conv import HopperConvConfig as C
from autocutlass.kernels.hopper_conv import HopperConvFamily, check
from autocutlass.ops.conv.problem import ConvProblem
from autocutlass.ops.gemm.problem import Activation, DType, Epilogue

pytestmark = pytest.mark.gpu

BF16, FP16, FP32 = DType.BF16, DType.FP16, DType.FP32
REL_TOL = {BF16: 1e-2, FP16: 5e-3, FP32: 5e-3}
"""Relative Frobenius tolerance by the coarsest dtype of x, w and y (fp32 y: the inputs')."""
ELEMENT_RTOL_FACTOR, ELEMENT_ATOL_FACTOR = 4.0, 2.0


def conv(n: int, h: int, w: int, c: int, k: int, r: int, s: int, *, stride: tuple[int, int] = (1, 1),
         pad: tuple[int, int] = (0, 0), dil: tuple[int, int] = (1, 1), x: DType = BF16, y: DType | None = None,
         epilogue: Epilogue | None = None) -> ConvProblem:  # fmt: skip
    return ConvProblem(
        direction="fprop", n=n, h=h, w=w, c=c, k=k, r=r, s=s, stride_h=stride[0], stride_w=stride[1],
        pad_h=pad[0], pad_w=pad[1], dil_h=dil[0], dil_w=dil[1], x_dtype=x, w_dtype=x, y_dtype=y or x,
        epilogue=epilogue or Epilogue(),
    )  # fmt: skip


E = Epilogue
A = Activation
CASES = [
    # 3x3 pad 1, odd spatial size: N*P*Q = 578 is no multiple of 128; C = tile_k
    (C(128, 64, 64), conv(2, 17, 17, 64, 64, 3, 3, pad=(1, 1))),
    # stride 2; C = 72 (a second channel block with 8 channels); K = 136 (a partial tile column)
    (C(128, 128, 64), conv(3, 29, 29, 72, 136, 3, 3, stride=(2, 2), pad=(1, 1))),
    # dilation 2 with pad 2; im2col multicast across cluster_n = 2
    (C(128, 96, 64, cluster_n=2), conv(2, 23, 31, 64, 96, 3, 3, pad=(2, 2), dil=(2, 2))),
    # 1x7 (R != S), tile_k 128 over C = 128; filter multicast across cluster_m = 2
    (C(128, 128, 128, cluster_m=2), conv(2, 9, 33, 128, 128, 1, 7, pad=(0, 3))),
    # 5x3 with stride (2, 1), ping-pong
    (C(64, 128, 64, schedule="pingpong"), conv(2, 19, 21, 64, 128, 5, 3, stride=(2, 1), pad=(2, 1))),
    # 7x7 stride 2 pad 3 (a stem with 8 channels: one block of 64, 56 zero-filled)
    (C(128, 64, 64), conv(2, 45, 45, 8, 64, 7, 7, stride=(2, 2), pad=(3, 3))),
    # asymmetric stride (2, 3) and dilation (3, 1); a tile_k=128 block with C = 96
    (C(128, 128, 128), conv(2, 40, 50, 96, 64, 3, 3, stride=(2, 3), pad=(3, 1), dil=(3, 1))),
    # padding wider than the filter's reach: an all-zero border ring of outputs (upper corner > 0)
    (C(128, 64, 64), conv(1, 10, 12, 64, 64, 3, 3, pad=(3, 2))),
    # the largest traversal stride and a large dilation
    (C(64, 64, 64), conv(2, 64, 64, 64, 64, 3, 3, stride=(8, 8), pad=(8, 8), dil=(8, 8))),
    # 1x1, stride 1 (pointwise) and stride 2 (downsample); 2x2 cluster, tile_m 256
    (C(256, 128, 64, cluster_m=2, cluster_n=2), conv(4, 28, 28, 256, 256, 1, 1)),
    (C(128, 256, 64), conv(4, 28, 28, 128, 512, 1, 1, stride=(2, 2))),
    # tile shapes: 160, 192, 208, 224 wide; 256 x 128 cooperative with cluster 2x1
    (C(128, 160, 64), conv(2, 14, 14, 128, 320, 3, 3, pad=(1, 1))),
    (C(128, 192, 64, cluster_m=2), conv(2, 15, 15, 64, 200, 3, 3, pad=(1, 1))),
    (C(128, 208, 64), conv(2, 13, 13, 64, 208, 3, 3, pad=(1, 1))),
    (C(128, 224, 64, cluster_n=2), conv(2, 13, 13, 64, 224, 3, 3, pad=(1, 1))),
    (C(256, 128, 64, cluster_m=2), conv(4, 21, 21, 128, 256, 3, 3, pad=(1, 1))),
    # raster along N with swizzle, explicit stages
    (C(128, 128, 64, raster="along_n", swizzle=4, stages=3), conv(8, 16, 16, 64, 512, 3, 3, pad=(1, 1))),
    (C(128, 128, 64, swizzle=2, stages=5, schedule="pingpong", cluster_m=2), conv(8, 16, 16, 64, 256, 3, 3,
                                                                                   pad=(1, 1))),
    # direct store (residues in both directions)
    (C(64, 128, 64, store="direct"), conv(1, 7, 9, 64, 72, 3, 3, pad=(1, 1))),
    (C(128, 128, 64, store="direct", schedule="pingpong"), conv(2, 11, 13, 64, 136, 3, 3, pad=(1, 1))),
    # serial split-K: uneven splits, with a cluster, with an epilogue
    (C(128, 128, 64, split_k=3), conv(2, 7, 7, 256, 128, 3, 3, pad=(1, 1))),
    (C(128, 128, 64, split_k=2, cluster_m=2), conv(2, 7, 7, 512, 256, 3, 3, pad=(1, 1))),
    (C(64, 128, 64, split_k=4), conv(2, 7, 7, 136, 128, 3, 3, pad=(1, 1),
                                     epilogue=E(with_c=True, bias=True, activation=A.RELU))),
    # a wave-filling split count (layer_splits): 5 serial splits of 72 K blocks, and 7 of 9 with a bias
    (C(128, 256, 64, split_k=5), conv(32, 7, 7, 512, 512, 3, 3, pad=(1, 1))),
    (C(128, 128, 64, split_k=7), conv(2, 7, 7, 64, 128, 3, 3, pad=(1, 1), epilogue=E(bias=True))),
    # workspace split-K (the GEMM family's reduce kernel sums the slabs and runs the epilogue):
    # uneven splits, a wave-filling count, a cluster, residual + bias + activation, fp16 into fp32
    (C(128, 128, 64, split_k=3, split_mode="workspace"), conv(2, 7, 7, 256, 128, 3, 3, pad=(1, 1))),
    (C(128, 256, 64, split_k=5, split_mode="workspace"), conv(32, 7, 7, 512, 512, 3, 3, pad=(1, 1))),
    (C(128, 128, 64, split_k=2, cluster_m=2, split_mode="workspace"), conv(2, 7, 7, 512, 256, 3, 3, pad=(1, 1))),
    (C(64, 128, 64, split_k=4, split_mode="workspace"), conv(2, 7, 7, 136, 136, 3, 3, pad=(1, 1),
                                     epilogue=E(with_c=True, bias=True, activation=A.RELU))),
    (C(128, 128, 64, split_k=7, split_mode="workspace"), conv(3, 9, 11, 64, 128, 3, 3, stride=(2, 2), pad=(1, 1),
                                                          x=FP16, y=FP32, epilogue=E(bias=True, activation=A.SILU))),
    # the narrow seeds (hopper_conv.narrow_split_seeds): 64-column tiles in workspace slabs, a 1x2 cluster's
    # im2col multicast (ResNet-50 stage 4 at batch 8: 32 tiles x 4), 256x64 (Stable Diffusion's 16x16 layer at
    # batch 2: 40 tiles x 3); pixel and channel residues with residual + bias + ReLU
    (C(128, 64, 64, cluster_n=2, split_k=4, split_mode="workspace"), conv(8, 7, 7, 512, 512, 3, 3, pad=(1, 1))),
    (C(256, 64, 64, split_k=3, split_mode="workspace"), conv(2, 16, 16, 1280, 1280, 3, 3, pad=(1, 1))),
    (C(128, 64, 64, cluster_n=2, split_k=6, split_mode="workspace"), conv(3, 5, 7, 200, 136, 3, 3, pad=(1, 1),
                                     epilogue=E(with_c=True, bias=True, activation=A.RELU))),
    # stream-K (every cluster the same share of the (tile, K block) iterations; a tile cut between
    # clusters summed in K order): ResNet-50 stage 4 at batch 256 in 128x256 tiles (196 tiles, 72 K
    # blocks), pixel and channel residues with residual + bias + ReLU, 2-CTA clusters both ways
    # (odd tile counts: a cluster's second CTA past the last tile), stride 2, fp16 into fp32,
    # more clusters than tiles (each tile cut many ways)
    (C(128, 256, 64, stream_k=True), conv(256, 7, 7, 512, 512, 3, 3, pad=(1, 1))),
    (C(128, 128, 64, stream_k=True), conv(3, 9, 11, 136, 136, 3, 3, pad=(1, 1),
                                          epilogue=E(with_c=True, bias=True, activation=A.RELU))),
    (C(128, 128, 64, cluster_m=2, stream_k=True), conv(5, 7, 7, 256, 128, 3, 3, pad=(1, 1))),
    (C(256, 128, 64, cluster_n=2, stream_k=True), conv(8, 14, 14, 256, 384, 3, 3, pad=(1, 1),
                                                       epilogue=E(bias=True))),
    (C(128, 128, 64, raster="along_n", stream_k=True), conv(4, 17, 17, 64, 128, 3, 3, stride=(2, 2), pad=(1, 1),
                                                            x=FP16, y=FP32, epilogue=E(activation=A.SILU))),
    (C(128, 256, 128, stream_k=True), conv(1, 8, 8, 1280, 1280, 3, 3, pad=(1, 1))),
    # epilogues: bias, residual, activations, fp32 and fp16 outputs
    (C(128, 128, 64), conv(2, 17, 17, 64, 128, 3, 3, pad=(1, 1), epilogue=E(bias=True))),
    (C(128, 128, 64, schedule="pingpong"), conv(2, 17, 17, 64, 128, 3, 3, pad=(1, 1),
                                                epilogue=E(with_c=True, bias=True, activation=A.SILU))),
    (C(128, 128, 64), conv(2, 17, 17, 64, 128, 3, 3, stride=(2, 2), pad=(1, 1), y=FP32,
                           epilogue=E(bias=True, activation=A.GELU))),
    (C(128, 128, 64, cluster_n=2), conv(2, 15, 15, 64, 64, 3, 3, pad=(1, 1), x=FP16,
                                        epilogue=E(with_c=True, activation=A.GELU_TANH))),
    (C(128, 64, 64), conv(2, 15, 15, 64, 64, 3, 3, pad=(1, 1), x=FP16, y=FP32, epilogue=E(with_c=True))),
    # 192-row tiles (the consumers split N, session 44): residues in pixels (N*P*Q not a multiple of
    # 192), channels (C not a multiple of tile_k) and K (not a multiple of tile_n or its halves);
    # clusters either way; bias + ReLU; a residual at 192x128; fp16 into fp32 with GELU
    (C(192, 256, 64), conv(3, 13, 15, 72, 256, 3, 3, pad=(1, 1))),
    (C(192, 256, 64, cluster_n=2), conv(5, 7, 7, 128, 520, 3, 3, pad=(1, 1))),
    (C(192, 224, 64, cluster_m=2), conv(4, 11, 9, 136, 200, 3, 3, stride=(2, 2), pad=(1, 1),
                                        epilogue=E(bias=True, activation=A.RELU))),
    (C(192, 128, 64), conv(2, 17, 17, 64, 136, 3, 3, pad=(1, 1), epilogue=E(with_c=True, bias=True, activation=A.RELU))),
    (C(192, 160, 128, raster="along_n", swizzle=2), conv(2, 16, 16, 256, 320, 3, 3, pad=(1, 1), x=FP16, y=FP32,
                                                          epilogue=E(activation=A.GELU))),
]


def _tensors(problem: ConvProblem, seed: int):  # type: ignore[no-untyped-def]
    import torch

    dt = {BF16: torch.bfloat16, FP16: torch.float16, FP32: torch.float32}
    gen = torch.Generator(device="cuda").manual_seed(seed)
    cl = torch.channels_last
    p = problem
    x = torch.randn(p.n, p.c, p.h, p.w, device="cuda", generator=gen).to(dt[p.x_dtype]).to(memory_format=cl)
    scale = 1.0 / math.sqrt(p.c * p.r * p.s)
    w = (torch.randn(p.k, p.c, p.r, p.s, device="cuda", generator=gen) * scale).to(dt[p.w_dtype])
    w = w.to(memory_format=cl)
    y = torch.full((p.n, p.k, p.p, p.q), float("nan"), device="cuda", dtype=dt[p.y_dtype]).to(memory_format=cl)
    bias = residual = None
    if p.epilogue.bias:
        bias = torch.randn(p.k, device="cuda", generator=gen).to(dt[p.y_dtype])
    if p.epilogue.with_c:
        residual = torch.randn(y.shape, device="cuda", generator=gen).to(dt[p.y_dtype]).to(memory_format=cl)
    return x, w, y, bias, residual


def _reference(problem: ConvProblem, x, w, bias, residual, alpha: float, beta: float):  # type: ignore[no-untyped-def]
    import torch
    import torch.nn.functional as F

    p = problem
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
        out = F.conv2d(x.float(), w.float(), None, (p.stride_h, p.stride_w), (p.pad_h, p.pad_w), (p.dil_h, p.dil_w))
    out = out * alpha
    if residual is not None:
        out = out + beta * residual.float()
    if bias is not None:
        out = out + bias.float().view(1, -1, 1, 1)
    act = p.epilogue.activation
    if act is A.RELU:
        out = torch.relu(out)
    elif act is A.GELU:
        out = F.gelu(out, approximate="none")
    elif act is A.GELU_TANH:
        out = F.gelu(out, approximate="tanh")
    elif act is A.SILU:
        out = F.silu(out)
    return out


def _check(problem: ConvProblem, y, ref) -> str | None:  # type: ignore[no-untyped-def]
    import torch

    yf = y.float()
    if not bool(torch.isfinite(yf).all()):
        bad = (~torch.isfinite(yf)).nonzero()[0].tolist()
        return f"{int((~torch.isfinite(yf)).sum())} of {y.numel()} outputs are NaN/Inf (first at {bad}): unwritten"
    tol = max(REL_TOL[problem.x_dtype], REL_TOL[problem.y_dtype] if problem.y_dtype is not FP32 else 0.0)
    ref_norm = float(torch.linalg.vector_norm(ref)) or 1.0
    err = yf - ref
    rel = float(torch.linalg.vector_norm(err)) / ref_norm
    if rel >= tol:
        return f"relative Frobenius error {rel:.3e} >= {tol:.1e}"
    limit = ELEMENT_RTOL_FACTOR * tol * ref.abs() + ELEMENT_ATOL_FACTOR * tol * ref_norm / math.sqrt(ref.numel())
    over = err.abs() > limit
    if bool(over.any()):
        idx = tuple(over.nonzero()[0].tolist())
        return f"{int(over.sum())} outputs off (first at {idx}: got {float(yf[idx]):.5g}, expected {float(ref[idx]):.5g})"
    return None


@pytest.mark.parametrize("cfg,prob", CASES, ids=[f"{c.short()}|{p.describe()}" for c, p in CASES])
def test_conv_matches_reference(cfg: C, prob: ConvProblem) -> None:
    import torch

    assert check(cfg, prob) is None, check(cfg, prob)
    runner = HopperConvFamily(cache_dir=None).compile(cfg, prob)
    alpha, beta = (0.5, 0.75) if prob.epilogue.with_c else (1.0, 0.0)
    for seed in (0, 1):
        x, w, y, bias, residual = _tensors(prob, seed)
        runner(x, w, y, bias=bias, residual=residual, alpha=alpha, beta=beta)
        torch.cuda.synchronize()
        why = _check(prob, y, _reference(prob, x, w, bias, residual, alpha, beta))
        assert why is None, why


def test_one_compiled_kernel_serves_many_shapes_and_geometries() -> None:
    import torch

    from autocutlass.kernels.hopper_conv.compile import STATS

    fam = HopperConvFamily(cache_dir=None)
    cfg = C(128, 128, 64)
    fam.compile(cfg, conv(1, 8, 8, 64, 64, 3, 3, pad=(1, 1)))
    before = STATS.compiled
    for prob in (
        conv(3, 31, 17, 128, 192, 3, 3, pad=(1, 1)),
        conv(2, 30, 30, 64, 64, 3, 3, stride=(2, 2), pad=(0, 2)),
        conv(1, 40, 40, 200, 72, 3, 3, stride=(3, 1), pad=(4, 4), dil=(2, 3)),
    ):
        runner = fam.compile(cfg, prob)
        x, w, y, bias, residual = _tensors(prob, 3)
        runner(x, w, y)
        torch.cuda.synchronize()
        why = _check(prob, y, _reference(prob, x, w, bias, residual, 1.0, 0.0))
        assert why is None, (prob.describe(), why)
    assert STATS.compiled == before


@pytest.mark.parametrize("mode", ["serial", "workspace", "stream_k"])
def test_split_k_is_bitwise_deterministic(mode: str) -> None:
    import torch

    prob = conv(2, 7, 7, 512, 256, 3, 3, pad=(1, 1))
    cfg = C(128, 128, 64, stream_k=True) if mode == "stream_k" else C(128, 128, 64, split_k=4, split_mode=mode)
    runner = HopperConvFamily(cache_dir=None).compile(cfg, prob)
    x, w, y, _, _ = _tensors(prob, 5)
    outs = []
    for _ in range(4):
        y.fill_(float("nan"))
        runner(x, w, y)
        outs.append(y.clone())
    torch.cuda.synchronize()
    assert all(torch.equal(outs[0], o) for o in outs[1:])
    assert not torch.isnan(outs[0]).any()


def test_runner_requires_the_epilogue_operands() -> None:
    prob = conv(1, 8, 8, 64, 64, 3, 3, pad=(1, 1), epilogue=E(with_c=True, bias=True))
    runner = HopperConvFamily(cache_dir=None).compile(C(128, 64, 64), prob)
    x, w, y, bias, residual = _tensors(prob, 0)
    with pytest.raises(ValueError, match="residual"):
        runner(x, w, y, bias=bias)
    with pytest.raises(ValueError, match="bias"):
        runner(x, w, y, residual=residual)


def test_non_channels_last_output_is_refused() -> None:
    import torch

    prob = conv(1, 8, 8, 64, 64, 3, 3, pad=(1, 1))
    runner = HopperConvFamily(cache_dir=None).compile(C(128, 64, 64), prob)
    x, w, _, _, _ = _tensors(prob, 0)
    y = torch.empty((1, 64, 8, 8), device="cuda", dtype=torch.bfloat16)  # NCHW-contiguous
    with pytest.raises(ValueError, match="channels_last"):
        runner(x, w, y)


def test_mismatched_output_shape_is_refused() -> None:
    import torch

    prob = conv(1, 8, 8, 64, 64, 3, 3, pad=(1, 1))
    runner = HopperConvFamily(cache_dir=None).compile(C(128, 64, 64), prob)
    x, w, _, _, _ = _tensors(prob, 0)
    y = torch.empty((1, 64, 6, 6), device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    with pytest.raises(ValueError, match="y shape"):
        runner(x, w, y)

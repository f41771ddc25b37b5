"""The Hopper GEMM family on the GPU: every layout, batched, residue shapes and every config axis,
against an fp32 reference on random data with NaN-poisoned outputs."""

from __future__ import annotations

import pytest

from autocutlass.kernels.hopper_gemm import HopperGemmConfig as C, HopperGemmFamily, check
from autocutlass.ops.gemm.problem import Activation, DType, Epilogue, Major, GemmProblem

pytestmark = pytest.mark.gpu

R, T = Major.ROW, Major.COL
CASES = [
    # every layout, residues in M, N and K (N and K not multiples of the tile)
    (C(128, 128, 64), GemmProblem(m=257, n=392, k=200, a_major=R, b_major=R)),
    (C(128, 128, 64), GemmProblem(m=257, n=392, k=200, a_major=R, b_major=T)),
    (C(128, 128, 64), GemmProblem(m=264, n=392, k=200, a_major=T, b_major=R)),
    (C(128, 128, 64), GemmProblem(m=264, n=392, k=200, a_major=T, b_major=T)),
    (C(64, 64, 64), GemmProblem(m=1, n=4096, k=1000, b_major=T)),
    (C(64, 128, 128), GemmProblem(m=7, n=264, k=136, b_major=T)),
    # tile_m 256 / two consumers, tile_n values, tile_k 128
    (C(256, 128, 64), GemmProblem(m=700, n=640, k=384)),
    (C(128, 96, 64), GemmProblem(m=300, n=416, k=96)),
    (C(128, 160, 128), GemmProblem(m=300, n=480, k=520, b_major=T)),
    (C(128, 208, 64), GemmProblem(m=300, n=416, k=96, l=3, b_major=T)),
    (C(128, 224, 64), GemmProblem(m=129, n=448, k=64)),
    (C(128, 192, 128), GemmProblem(m=512, n=960, k=1024, l=4, a_major=T)),
    # the fitted widths (check.TILE_N_FITTED: 16-column multiples that 32 does not divide, and 240;
    # K-major B only): layouts of A, residues, batched, 64/256-row tiles, B multicast, ping-pong,
    # direct store, workspace and serial split-K, stream-K, epilogues, fp16, fp8
    (C(128, 144, 64), GemmProblem(m=1536, n=1536, k=520, b_major=T)),
    (C(128, 144, 64, cluster_n=2), GemmProblem(m=300, n=1000, k=200, a_major=R, b_major=T, l=2)),
    (C(64, 176, 64, schedule="pingpong"), GemmProblem(m=520, n=360, k=264, a_major=T, b_major=T)),
    (C(64, 112, 64), GemmProblem(m=104, n=232, k=136, a_major=T, b_major=T)),
    (C(256, 112, 64), GemmProblem(m=600, n=704, k=304, b_major=T)),
    (C(128, 80, 128, store="direct"), GemmProblem(m=200, n=248, k=256, b_major=T,
                                              epilogue=Epilogue(bias=True, activation=Activation.SILU))),
    (C(128, 240, 64, cluster_m=2, raster="along_n", swizzle=2), GemmProblem(
        m=700, n=1000, k=400, b_major=T, c_dtype=DType.BF16, epilogue=Epilogue(with_c=True, bias=True))),
    (C(128, 144, 64, split_k=4, split_mode="workspace"), GemmProblem(m=256, n=296, k=8192, b_major=T)),
    (C(128, 176, 64, split_k=3), GemmProblem(m=257, n=392, k=3000, b_major=T)),
    (C(128, 144, 64, stream_k=True), GemmProblem(m=1000, n=704, k=3000, b_major=T)),
    (C(128, 112, 64), GemmProblem(m=296, n=296, k=296, b_major=T, a_dtype=DType.FP16, b_dtype=DType.FP16,
                                  d_dtype=DType.FP16)),
    (C(128, 144, 128), GemmProblem(m=1000, n=1000, k=1008, a_dtype=DType.E4M3, b_dtype=DType.E4M3,
                                   d_dtype=DType.BF16, b_major=T)),
    # the wide cooperative tiles (check.ACC_REGS_WIDE: 192 and 160 accumulator registers per
    # thread): residues in M, N and K, both B layouts, batched, clusters, bias and activation,
    # direct store, serial and workspace split-K, stream-K, fp8, tf32 (K-major A), swapped
    (C(256, 192, 64), GemmProblem(m=700, n=1000, k=520)),
    (C(256, 192, 64, cluster_n=2), GemmProblem(m=2000, n=3000, k=1000, b_major=T,
                                               epilogue=Epilogue(bias=True, activation=Activation.GELU))),
    (C(256, 192, 64, cluster_m=2, raster="along_n"), GemmProblem(m=520, n=968, k=264, l=2, a_major=T, b_major=T)),
    (C(256, 160, 64, cluster_m=2, store="direct"), GemmProblem(m=600, n=712, k=304, b_major=T,
                                                              epilogue=Epilogue(bias=True, activation=Activation.SILU))),
    (C(256, 192, 64, split_k=2), GemmProblem(m=300, n=400, k=3000, b_major=T)),
    (C(256, 192, 64, split_k=3, split_mode="workspace"), GemmProblem(m=300, n=400, k=3000,
                                                                    epilogue=Epilogue(bias=True))),
    (C(256, 192, 64, stream_k=True), GemmProblem(m=520, n=600, k=2000, b_major=T)),
    (C(256, 192, 128), GemmProblem(m=700, n=904, k=512, a_dtype=DType.E4M3, b_dtype=DType.E4M3,
                                   d_dtype=DType.BF16, b_major=T)),
    (C(256, 192, 32), GemmProblem(m=520, n=600, k=300, a_dtype=DType.TF32, b_dtype=DType.TF32,
                                  d_dtype=DType.FP32, b_major=T)),
    (C(256, 192, 64, swap_ab=True), GemmProblem(m=100, n=1000, k=512, b_major=T)),
    # 192-row tiles split along N (HopperGemmConfig.n_split): residues in M, N and K, both B
    # layouts, batched, clusters, bias and activations, C, direct store, fp16, fp8, swapped
    (C(192, 128, 64), GemmProblem(m=2000, n=3000, k=1000)),
    (C(192, 128, 64, cluster_n=2), GemmProblem(m=520, n=712, k=264, l=2)),
    (C(192, 160, 64, cluster_m=2), GemmProblem(m=2049, n=1000, k=520, b_major=T,
                                               epilogue=Epilogue(bias=True, activation=Activation.GELU))),
    (C(192, 256, 64), GemmProblem(m=400, n=600, k=304, b_major=T)),
    (C(192, 96, 64, store="direct"), GemmProblem(m=300, n=200, k=136, b_major=T,
                                                 epilogue=Epilogue(bias=True, activation=Activation.SILU))),
    (C(192, 128, 64), GemmProblem(m=304, n=520, k=200, a_major=T, c_dtype=DType.BF16,
                                  epilogue=Epilogue(with_c=True, activation=Activation.RELU))),
    (C(192, 128, 64), GemmProblem(m=296, n=296, k=296, b_major=T, a_dtype=DType.FP16, b_dtype=DType.FP16,
                                  d_dtype=DType.FP16)),
    (C(192, 128, 128), GemmProblem(m=700, n=904, k=512, a_dtype=DType.E4M3, b_dtype=DType.E4M3,
                                   d_dtype=DType.BF16, b_major=T)),
    (C(192, 128, 64, swap_ab=True), GemmProblem(m=100, n=1000, k=512, b_major=T)),
    # clusters (multicast), explicit stages
    (C(128, 256, 64, cluster_m=2), GemmProblem(m=1000, n=1000, k=1000, b_major=T)),
    (C(128, 128, 64, cluster_n=2), GemmProblem(m=1000, n=1000, k=1000)),
    (C(128, 128, 64, cluster_m=2, cluster_n=2, stages=3), GemmProblem(m=1496, n=1496, k=800)),
    # schedules, raster order, swizzle, stores
    (C(128, 128, 64, schedule="pingpong"), GemmProblem(m=2048, n=2048, k=1024, b_major=T)),
    (C(64, 256, 64, schedule="pingpong", raster="along_n", swizzle=2), GemmProblem(m=777, n=1024, k=1024)),
    (C(128, 256, 64, raster="along_n", swizzle=8), GemmProblem(m=2048, n=2048, k=512, b_major=T)),
    (C(128, 256, 64, swizzle=4, store="direct"), GemmProblem(m=1000, n=1000, k=1000, a_major=T)),
    (C(128, 128, 64, schedule="pingpong", store="direct"), GemmProblem(m=1024, n=1000, k=520)),
    # dtypes and epilogues
    (C(128, 128, 64), GemmProblem(m=512, n=512, k=512, a_dtype=DType.FP16, b_dtype=DType.FP16, d_dtype=DType.FP16)),
    (C(128, 128, 64), GemmProblem(m=500, n=512, k=512, d_dtype=DType.FP32, c_dtype=DType.FP32,
                              epilogue=Epilogue(with_c=True))),
    (C(64, 128, 64), GemmProblem(m=500, n=520, k=512, c_dtype=DType.BF16,
                             epilogue=Epilogue(with_c=True, bias=True, activation=Activation.GELU))),
    (C(128, 128, 64, store="direct"), GemmProblem(m=64, n=512, k=512, b_major=T,
                                              epilogue=Epilogue(bias=True, activation=Activation.SILU))),
    (C(128, 128, 64), GemmProblem(m=100, n=512, k=256, epilogue=Epilogue(bias=True, activation=Activation.RELU))),
    (C(128, 128, 64), GemmProblem(m=100, n=512, k=256, epilogue=Epilogue(activation=Activation.GELU_TANH))),
    # serial split-K: uneven splits, empty splits (K = 64 in 4 splits), batched, clusters, epilogues
    (C(64, 128, 64, split_k=4), GemmProblem(m=16, n=6144, k=4096, b_major=T)),
    (C(128, 128, 64, split_k=3), GemmProblem(m=257, n=392, k=1000)),
    (C(64, 64, 64, split_k=4), GemmProblem(m=30, n=200, k=64, b_major=T)),
    (C(128, 96, 128, split_k=2, cluster_n=2), GemmProblem(m=300, n=480, k=2056, l=3)),
    (C(64, 128, 128, split_k=8, store="direct"), GemmProblem(m=128, n=4096, k=14336, b_major=T,
                                                         epilogue=Epilogue(bias=True, activation=Activation.SILU))),
    (C(128, 256, 64, split_k=2, cluster_m=2), GemmProblem(m=500, n=512, k=2048, d_dtype=DType.FP32, c_dtype=DType.FP32,
                                                      epilogue=Epilogue(with_c=True))),
    # workspace split-K (partials in slabs, then the reduce kernel): residues, batched, clusters, epilogues
    (C(64, 128, 128, split_k=4, split_mode="workspace"), GemmProblem(m=16, n=6144, k=4096, b_major=T)),
    (C(128, 128, 64, split_k=3, split_mode="workspace"), GemmProblem(m=257, n=392, k=1000)),
    (C(64, 64, 64, split_k=4, split_mode="workspace"), GemmProblem(m=30, n=200, k=64, b_major=T)),
    (C(128, 96, 128, split_k=2, cluster_n=2, split_mode="workspace"), GemmProblem(m=300, n=480, k=2056, l=3)),
    (C(64, 128, 128, split_k=8, split_mode="workspace"), GemmProblem(
        m=128, n=4096, k=14336, b_major=T, c_dtype=DType.BF16,
        epilogue=Epilogue(with_c=True, bias=True, activation=Activation.GELU_TANH))),
    (C(128, 256, 64, split_k=2, cluster_m=2, split_mode="workspace"), GemmProblem(
        m=500, n=516, k=2048, b_major=T, d_dtype=DType.FP32, c_dtype=DType.FP32, epilogue=Epilogue(with_c=True))),
    # swap_ab with workspace split-K (the reduce's transposed class writes D' column-major): an M
    # residue in tile_n 160, 112 and 96, batched with C, bias and activation, a cluster, fp32 D
    (C(128, 160, 64, split_k=4, split_mode="workspace", swap_ab=True), GemmProblem(m=320, n=640, k=4096)),
    (C(128, 112, 64, split_k=3, cluster_m=2, split_mode="workspace", swap_ab=True), GemmProblem(
        m=200, n=512, k=3000, b_major=T, l=2, c_dtype=DType.BF16,
        epilogue=Epilogue(with_c=True, bias=True, activation=Activation.SILU))),
    (C(64, 96, 64, split_k=5, split_mode="workspace", swap_ab=True), GemmProblem(
        m=88, n=264, k=5000, a_major=T, d_dtype=DType.FP32, epilogue=Epilogue(bias=True))),
    # swap_ab (D^T = B^T A^T, D written column-major): narrow tiles, residues, every layout,
    # batched, clusters, ping-pong, direct store, serial split-K, C / bias (along D's columns) / activation
    (C(128, 16, 128, swap_ab=True), GemmProblem(m=16, n=6144, k=4096, b_major=T)),
    (C(64, 16, 128, swap_ab=True, split_k=11), GemmProblem(m=13, n=6144, k=4096, b_major=T)),
    (C(128, 32, 64, swap_ab=True, cluster_n=2), GemmProblem(m=50, n=1000, k=1000, b_major=T)),
    (C(128, 64, 64, swap_ab=True), GemmProblem(m=104, n=520, k=300, a_major=T, b_major=R, l=2)),  # M-contiguous A: 16-byte rows
    (C(128, 16, 64, swap_ab=True, cluster_m=2), GemmProblem(m=1, n=4096, k=1000)),
    (C(64, 32, 64, swap_ab=True, schedule="pingpong"), GemmProblem(m=24, n=904, k=520, a_major=T, b_major=T)),
    (C(128, 16, 128, swap_ab=True, store="direct"), GemmProblem(
        m=9, n=1032, k=1024, b_major=T, c_dtype=DType.BF16,
        epilogue=Epilogue(with_c=True, bias=True, activation=Activation.SILU))),
    (C(128, 64, 128, swap_ab=True, split_k=4), GemmProblem(
        m=64, n=2048, k=8192, b_major=T, d_dtype=DType.FP32, c_dtype=DType.FP32,
        epilogue=Epilogue(with_c=True, bias=True, activation=Activation.GELU))),
    (C(128, 128, 64, swap_ab=True), GemmProblem(m=128, n=4096, k=512, b_major=T, a_dtype=DType.FP16, b_dtype=DType.FP16,
                                            d_dtype=DType.FP16, epilogue=Epilogue(bias=True))),
    # fp8 e4m3 (K-major A and B, per-tensor scales): tile_k 128/256, clusters, ping-pong, residues,
    # every output dtype, bias + activation, serial split-K, the swapped decode kernel
    (C(128, 256, 128, cluster_m=2), GemmProblem(m=1000, n=1000, k=1008, a_dtype=DType.E4M3, b_dtype=DType.E4M3,
                                            d_dtype=DType.BF16, b_major=T)),
    (C(128, 128, 256, schedule="pingpong"), GemmProblem(m=257, n=392, k=512, a_dtype=DType.E4M3, b_dtype=DType.E4M3,
                                                    d_dtype=DType.FP16, b_major=T)),
    (C(256, 128, 128, cluster_n=2), GemmProblem(m=700, n=640, k=400, l=2, a_dtype=DType.E4M3, b_dtype=DType.E4M3,
                                            d_dtype=DType.FP32, b_major=T)),
    (C(64, 128, 256, split_k=4, store="direct"), GemmProblem(
        m=16, n=6144, k=4096, a_dtype=DType.E4M3, b_dtype=DType.E4M3, d_dtype=DType.BF16, b_major=T,
        epilogue=Epilogue(bias=True, activation=Activation.GELU))),
    (C(128, 16, 256, swap_ab=True), GemmProblem(m=7, n=4096, k=4096, a_dtype=DType.E4M3, b_dtype=DType.E4M3,
                                            d_dtype=DType.BF16, b_major=T, epilogue=Epilogue(bias=True))),
    # tf32: K-major natively; row-major B / column-major A through a K-major copy; residues
    (C(128, 256, 32), GemmProblem(m=1000, n=1000, k=1000, a_dtype=DType.TF32, b_dtype=DType.TF32, d_dtype=DType.FP32,
                              b_major=T)),
    (C(128, 128, 64, cluster_m=2), GemmProblem(m=257, n=392, k=200, a_dtype=DType.TF32, b_dtype=DType.TF32,
                                           d_dtype=DType.FP32)),
    (C(128, 128, 32, schedule="pingpong"), GemmProblem(m=264, n=392, k=204, l=2, a_dtype=DType.TF32, b_dtype=DType.TF32,
                                                   d_dtype=DType.FP32, a_major=T, b_major=T)),
    (C(64, 128, 32, split_k=2, split_mode="workspace"), GemmProblem(
        m=7, n=520, k=2052, a_dtype=DType.TF32, b_dtype=DType.TF32, d_dtype=DType.FP32, b_major=T,
        epilogue=Epilogue(bias=True, activation=Activation.RELU))),
    # tf32 with an M-major A through registers (Plan.a_regs): 'nn' swapped (no copy), 'tn'
    # unswapped, 'tt' swapped (B' copied); clusters, both schedules, residues, batched, C + bias
    (C(128, 256, 32, cluster_m=2, swap_ab=True), GemmProblem(m=1000, n=1000, k=1000, a_dtype=DType.TF32,
                                                         b_dtype=DType.TF32, d_dtype=DType.FP32)),
    (C(128, 128, 32, schedule="pingpong", swap_ab=True), GemmProblem(
        m=257, n=392, k=200, a_dtype=DType.TF32, b_dtype=DType.TF32, d_dtype=DType.FP32, c_dtype=DType.FP32,
        epilogue=Epilogue(with_c=True, bias=True, activation=Activation.SILU))),
    (C(256, 128, 32, cluster_n=2), GemmProblem(m=264, n=520, k=204, l=2, a_dtype=DType.TF32, b_dtype=DType.TF32,
                                           d_dtype=DType.FP32, a_major=T, b_major=T, epilogue=Epilogue(bias=True))),
    (C(128, 192, 64, swap_ab=True), GemmProblem(m=300, n=264, k=136, a_dtype=DType.TF32, b_dtype=DType.TF32,
                                            d_dtype=DType.FP32, a_major=T)),
    (C(64, 64, 32, split_k=3, swap_ab=True), GemmProblem(m=96, n=1024, k=3000, a_dtype=DType.TF32, b_dtype=DType.TF32,
                                                     d_dtype=DType.FP32)),
    # stream-K: cut tiles finished from the workspace; clusters, raster orders, residues, batched,
    # epilogues, swapped decode, fp8, tf32 through registers, direct store, M = 1, one K block
    (C(128, 128, 64, stream_k=True), GemmProblem(m=1000, n=1000, k=3000)),
    (C(128, 128, 64, cluster_m=2, cluster_n=2, raster="along_n", stream_k=True), GemmProblem(
        m=257, n=136, k=1000, l=2, c_dtype=DType.BF16, epilogue=Epilogue(with_c=True, bias=True,
                                                                         activation=Activation.GELU))),
    (C(128, 16, 128, swap_ab=True, stream_k=True), GemmProblem(m=16, n=6144, k=4096, b_major=T)),
    (C(128, 128, 128, stream_k=True), GemmProblem(m=128, n=1024, k=8192, a_dtype=DType.E4M3, b_dtype=DType.E4M3,
                                              b_major=T)),
    (C(128, 128, 32, swap_ab=True, stream_k=True), GemmProblem(m=500, n=700, k=3000, a_dtype=DType.TF32,
                                                           b_dtype=DType.TF32, d_dtype=DType.FP32)),
    (C(64, 128, 64, store="direct", stream_k=True), GemmProblem(m=1, n=4096, k=4096, b_major=T)),
    (C(128, 256, 64, stream_k=True), GemmProblem(m=300, n=520, k=64, d_dtype=DType.FP32)),
    # interleaved splits (split s takes K blocks s, s + S, ...): uneven block counts (16 blocks in 5
    # splits, 65 in 7, 257 in 16), splits with no block (1 block in 4), serial and workspace,
    # clusters, swapped decode, tf32 with bias + ReLU, C + GELU, batched
    (C(128, 128, 64, split_k=5, split_mode="workspace", interleave=True), GemmProblem(m=257, n=392, k=1000)),
    (C(64, 128, 64, split_k=7, interleave=True), GemmProblem(m=30, n=200, k=4104, b_major=T)),
    (C(128, 64, 64, cluster_n=2, split_k=16, split_mode="workspace", interleave=True),
     GemmProblem(m=256, n=256, k=16448)),
    (C(64, 64, 64, split_k=4, interleave=True), GemmProblem(m=30, n=200, k=64, b_major=T)),
    (C(64, 16, 128, swap_ab=True, split_k=11, interleave=True), GemmProblem(m=13, n=6144, k=4096, b_major=T)),
    (C(64, 128, 32, split_k=3, split_mode="workspace", interleave=True), GemmProblem(
        m=7, n=520, k=2052, a_dtype=DType.TF32, b_dtype=DType.TF32, d_dtype=DType.FP32, b_major=T,
        epilogue=Epilogue(bias=True, activation=Activation.RELU))),
    (C(128, 96, 128, split_k=2, cluster_n=2, interleave=True), GemmProblem(
        m=300, n=480, k=2056, l=3, c_dtype=DType.BF16, epilogue=Epilogue(with_c=True, activation=Activation.GELU))),
]


@pytest.mark.parametrize("cfg,prob", CASES, ids=[f"{c.short()}|{p.describe()}" for c, p in CASES])
def test_kernel_matches_reference(cfg: C, prob: GemmProblem) -> None:
    from autocutlass.ops.gemm.evaluation import make_inputs, reference, verify

    assert check(cfg, prob) is None, check(cfg, prob)
    runner = HopperGemmFamily(cache_dir=None).compile(cfg, prob)
    for seed in (0, 1):  # fresh random inputs each time
        inputs = make_inputs(prob, device="cuda", seed=seed)
        ok, why = verify(runner, prob, inputs, reference(prob, inputs))
        assert ok, why


def test_one_compiled_kernel_serves_many_shapes() -> None:
    from autocutlass.kernels.hopper_gemm.compile import STATS
    from autocutlass.ops.gemm.evaluation import make_inputs, reference, verify

    fam = HopperGemmFamily(cache_dir=None)
    cfg = C(128, 128, 64)
    runner = fam.compile(cfg, GemmProblem(m=64, n=64, k=64, b_major=T))
    before = STATS.compiled
    for m, n, k in ((1, 8, 8), (33, 200, 72), (1000, 2056, 4104)):
        prob = GemmProblem(m=m, n=n, k=k, b_major=T)
        inputs = make_inputs(prob, device="cuda", seed=m)
        ok, why = verify(runner, prob, inputs, reference(prob, inputs))
        assert ok, why
    assert STATS.compiled == before


@pytest.mark.parametrize("mode", ["serial", "workspace", "stream", "serial-interleaved", "workspace-interleaved"])
def test_split_k_is_bitwise_deterministic(mode: str) -> None:
    import torch

    from autocutlass.ops.gemm.evaluation import make_inputs

    prob = GemmProblem(m=64, n=4096, k=8192, b_major=T)
    if mode == "stream":
        cfg = C(64, 128, 64, stream_k=True)
    else:
        cfg = C(64, 128, 64, split_k=8, split_mode=mode.split("-")[0], interleave=mode.endswith("-interleaved"))
    runner = HopperGemmFamily(cache_dir=None).compile(cfg, prob)
    inputs = make_inputs(prob, device="cuda", seed=7)
    outs = []
    for _ in range(5):
        d = torch.full_like(inputs.d, float("nan"))
        runner(inputs.a, inputs.b, d)
        outs.append(d)
    torch.cuda.synchronize()
    assert all(torch.equal(outs[0], o) for o in outs[1:])
    assert not torch.isnan(outs[0]).any()


@pytest.mark.parametrize("mode", ["serial", "workspace"])
def test_split_k_scratch_follows_the_current_stream(mode: str) -> None:
    """The scratch look-up reads the raw stream handle (``runner.current_raw_stream``): the handle of
    torch's own Stream object on the default stream and inside a side stream. On the side stream a
    captured split-K GEMM gets scratch of its own (the graph's), the default stream keeps its
    buffers, and replays with new operands give the right products."""
    import torch

    from autocutlass.ops.launch import current_raw_stream
    from autocutlass.ops.gemm.evaluation import make_inputs

    assert current_raw_stream(0) == torch.cuda.current_stream().cuda_stream == torch.cuda.default_stream().cuda_stream
    prob = GemmProblem(m=64, n=1024, k=8192, b_major=T)
    runner = HopperGemmFamily(cache_dir=None).compile(C(64, 128, 64, split_k=4, split_mode=mode), prob)
    x = make_inputs(prob, device="cuda", seed=3)
    x.run(runner)  # the default stream's scratch
    kept = {k: v[0] for k, v in runner._workspace._bufs.items()}
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        assert current_raw_stream(0) == s.cuda_stream != torch.cuda.default_stream().cuda_stream
        x.run(runner)  # warm-up on the side stream
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        x.run(runner)
    assert {k: v[0] for k, v in runner._workspace._bufs.items()} == kept  # nothing kept from the capture
    for seed in (4, 5):
        fresh = make_inputs(prob, device="cuda", seed=seed)
        x.a.copy_(fresh.a)
        x.b.copy_(fresh.b)
        x.d.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        want = (x.a.float() @ x.b.float()).to(x.d.dtype)
        assert torch.allclose(x.d.float(), want.float(), rtol=2e-2, atol=2e-2), (x.d - want).abs().max()


def test_fp8_runner_without_scales_raises() -> None:
    from autocutlass.ops.gemm.evaluation import make_inputs

    prob = GemmProblem(m=64, n=64, k=128, a_dtype=DType.E4M3, b_dtype=DType.E4M3, d_dtype=DType.BF16, b_major=T)
    runner = HopperGemmFamily(cache_dir=None).compile(C(128, 128, 128), prob)
    x = make_inputs(prob, device="cuda")
    with pytest.raises(ValueError, match="scale_a and scale_b"):
        runner(x.a, x.b, x.d)
    runner(x.a, x.b, x.d, scale_a=x.scale_a.reshape(()), scale_b=x.scale_b)  # a 0-dim scale is accepted

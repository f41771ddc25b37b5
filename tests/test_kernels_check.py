"""The Hopper family's pure-Python feasibility rules and plan arithmetic (no compile)."""

from __future__ import annotations

import pytest

from autocutlass.kernels import budgets, get_family
from autocutlass.kernels.hopper_gemm import HopperGemmConfig, HopperGemmFamily, Schedule, check
from autocutlass.kernels.hopper_gemm.plan import make_plan, max_stages, smem_bill
from autocutlass.ops.gemm.problem import DType, Epilogue, GemmProblem, Major

NT = GemmProblem(m=8192, n=8192, k=8192, b_major=Major.COL)
NN = GemmProblem(m=8192, n=8192, k=8192)


def test_good_config_passes_and_plan_fits() -> None:
    cfg = HopperGemmConfig(128, 256, 64, cluster_m=2)
    assert check(cfg, NT) is None
    plan = make_plan(cfg, NT)
    assert plan.stages >= 3 and plan.smem_bytes <= budgets.SM90_SMEM_PER_BLOCK_OPTIN
    assert plan.threads == 384 and plan.acc_regs == 128 and plan.consumer_regs == 232


@pytest.mark.parametrize(
    "cfg,prob,needle",
    [
        (HopperGemmConfig(128, 256, 64, schedule=Schedule.PINGPONG), NT, "accumulator registers"),
        (HopperGemmConfig(256, 256, 64), NT, "accumulator registers"),
        (HopperGemmConfig(256, 128, 64, schedule=Schedule.PINGPONG), NT, "ping-pong"),
        (HopperGemmConfig(128, 120, 64), NT, "tile_n=120"),
        (HopperGemmConfig(128, 128, 64, stages=12), NT, "shared memory"),
        (HopperGemmConfig(128, 128, 64, cluster_m=4), NT, "cluster"),
        (HopperGemmConfig(128, 208, 64, cluster_m=2), NN, "B multicast"),
        (HopperGemmConfig(128, 128, 64, split_k=2, schedule=Schedule.PINGPONG), NT, "split_k"),
        (HopperGemmConfig(128, 128, 64, split_k=17), NT, "split_k"),
        (HopperGemmConfig(128, 128, 64), GemmProblem(m=8, n=8, k=8, align_a=8), "8-byte aligned"),
        (HopperGemmConfig(128, 128, 128), GemmProblem(m=8, n=8, k=8, a_dtype=DType.TF32, b_dtype=DType.TF32,
                                                  d_dtype=DType.FP32), "tile_k=128 for tf32 inputs is not one of"),
        (HopperGemmConfig(128, 128, 32), GemmProblem(m=8, n=8, k=8, a_dtype=DType.TF32, b_dtype=DType.TF32,
                                                 d_dtype=DType.BF16), "tf32 GEMMs write fp32 D"),
        (HopperGemmConfig(128, 128, 32), GemmProblem(m=8, n=8, k=8), "tile_k=32 for bf16 inputs is not one of"),
        (HopperGemmConfig(128, 208, 32), GemmProblem(m=8, n=8, k=8, a_dtype=DType.TF32, b_dtype=DType.TF32,
                                                 d_dtype=DType.FP32), "with tf32 is not a multiple of 32"),
        (HopperGemmConfig(128, 144, 32), GemmProblem(m=8, n=8, k=8, a_dtype=DType.TF32, b_dtype=DType.TF32,
                                                 d_dtype=DType.FP32), "with tf32 is not a multiple of 32"),
        (HopperGemmConfig(128, 136, 64), NT, "tile_n=136"),
        (HopperGemmConfig(128, 128, 64), GemmProblem(m=8, n=8, k=8, a_dtype=DType.FP32, b_dtype=DType.FP32,
                                                 d_dtype=DType.FP32), "served through tf32"),
        (HopperGemmConfig(128, 128, 64, split_mode="workspace"), GemmProblem(m=8, n=8, k=8), "needs split_k > 1"),
        (HopperGemmConfig(128, 128, 64, split_k=2, split_mode="workspace", store="direct"), GemmProblem(m=8, n=8, k=8),
         "no effect in workspace"),
        (HopperGemmConfig(64, 128, 64, split_k=16, split_mode="workspace"),
         GemmProblem(m=4096, n=8192, k=8192, l=8), "32-bit offsets"),
        (HopperGemmConfig(128, 128, 64), GemmProblem(m=8, n=8, k=8, b_dtype=DType.FP16), "differ"),
        # a residual sliced at an odd offset: the kernels read C 16-byte aligned
        (HopperGemmConfig(128, 128, 64), GemmProblem(m=8, n=8, k=8, c_dtype=DType.BF16, align_c=4,
                                                 epilogue=Epilogue(with_c=True)), "C (the residual"),
        # serial split-K's partial tiles past 2^31 fp32 elements
        (HopperGemmConfig(128, 128, 64, split_k=2), GemmProblem(m=1 << 19, n=8192, k=8192), "serial split-K keeps"),
    ],
)
def test_infeasible_pairs_have_reasons(cfg: HopperGemmConfig, prob: GemmProblem, needle: str) -> None:
    reason = check(cfg, prob)
    assert reason is not None and needle in reason


def test_wide_cooperative_tiles_are_this_familys_alone() -> None:
    """256x192 (192 fp32 accumulator registers per consumer thread) runs in the GEMM family's own
    cooperative kernel, not with an epilogue that reads C (it spills), nor in ping-pong, nor with
    tf32 A through registers, nor in the families built on the kernel (``acc_regs`` at the
    conservative budget); 256x208 is past every limit."""
    from autocutlass.kernels.hopper_gemm.check import ACC_REGS_WIDE

    wide = HopperGemmConfig(256, 192, 64)
    assert wide.wg_tile_m * wide.tile_n // 128 == ACC_REGS_WIDE > budgets.ACC_REGS_MAX
    assert check(wide, NT) is None and check(wide, NN) is None
    assert make_plan(wide, NT).acc_regs == ACC_REGS_WIDE
    assert check(HopperGemmConfig(256, 192, 64, cluster_n=2, split_k=2), GemmProblem(m=700, n=900, k=4096)) is None
    biased = GemmProblem(m=700, n=900, k=512, epilogue=Epilogue(bias=True))
    assert check(wide, biased) is None
    with_c = GemmProblem(m=700, n=900, k=512, c_dtype=DType.BF16, epilogue=Epilogue(with_c=True))
    assert "reads C" in (check(wide, with_c) or "")
    assert check(HopperGemmConfig(256, 128, 64), with_c) is None
    assert "192 fp32 accumulator registers" in (check(HopperGemmConfig(128, 192, 64, schedule=Schedule.PINGPONG), NT) or "")
    assert "exceed 192" in (check(HopperGemmConfig(256, 208, 64), NT) or "")
    assert "exceed 128" in (check(wide, NT, acc_regs=budgets.ACC_REGS_MAX) or "")
    tf32_m_major_a = GemmProblem(m=512, n=512, k=512, a_dtype=DType.TF32, b_dtype=DType.TF32, d_dtype=DType.FP32,
                                 a_major=Major.COL)
    assert "through registers" in (check(HopperGemmConfig(256, 192, 32), tf32_m_major_a) or "")
    tf32_k_major_a = GemmProblem(m=512, n=512, k=512, a_dtype=DType.TF32, b_dtype=DType.TF32, d_dtype=DType.FP32)
    assert check(HopperGemmConfig(256, 192, 32), tf32_k_major_a) is None
    assert wide in get_family("hopper_gemm").space(NT)
    assert wide in get_family("hopper_gemm").space(NN)
    # data-parallel only: split and stream-K wide tiles lost on every long-K GEMM probed
    long_k = GemmProblem(m=768, n=768, k=16384)
    space = get_family("hopper_gemm").space(long_k)
    wides = [c for c in space if c.tile_m == 256 and c.tile_n == 192]
    assert wides and any(c.split_k > 1 for c in space) and any(c.stream_k for c in space)
    assert not any(c.split_k > 1 or c.stream_k for c in wides)


def test_192_row_tiles_split_n_between_the_consumers() -> None:
    """tile_m=192 (cooperative) splits N: each consumer accumulates 192 x tile_n/2, runs its own
    epilogue (64-row chunks, its own staging buffers) and the tile runs data-parallel only."""
    cfg = HopperGemmConfig(192, 128, 64, cluster_n=2)
    assert cfg.n_split and cfg.wg_tile_m == 192 and cfg.wg_tile_n == 64
    assert check(cfg, NN) is None and check(cfg, NT) is None
    plan = make_plan(cfg, NT)
    assert plan.n_split and plan.acc_regs == 96 and plan.mma_atoms_m == 1 and plan.mma_atoms_n == 2
    assert (plan.epi_m, plan.epi_n) == (64, 32) and plan.epi_groups == 2
    assert not HopperGemmConfig(128, 128, 64).n_split and not HopperGemmConfig(192, 128, 64, schedule=Schedule.PINGPONG).n_split
    assert "ping-pong tile_m=192" in (check(HopperGemmConfig(192, 128, 64, schedule=Schedule.PINGPONG), NT) or "")
    assert "data-parallel only" in (check(HopperGemmConfig(192, 128, 64, split_k=2), NT) or "")
    assert "data-parallel only" in (check(HopperGemmConfig(192, 128, 64, stream_k=True), NT) or "")
    assert "swizzle atoms" in (check(HopperGemmConfig(192, 96, 64), NN) or "")
    assert check(HopperGemmConfig(192, 96, 64), NT) is None
    # 176 / 2 = 88 columns a consumer: not whole 16-column epilogue chunks (wrong output on an H200)
    assert "multiple of 32" in (check(HopperGemmConfig(192, 176, 64), NT) or "")
    assert "tf32" in (check(HopperGemmConfig(192, 128, 32), GemmProblem(
        m=512, n=512, k=512, a_dtype=DType.TF32, b_dtype=DType.TF32, d_dtype=DType.FP32)) or "")
    # 192 x 256 / 2 = 192 accumulator registers: the wide limit
    assert make_plan(HopperGemmConfig(192, 256, 64), NT).acc_regs == 192 and check(HopperGemmConfig(192, 256, 64), NT) is None
    space = get_family("hopper_gemm").space(GemmProblem(m=768, n=768, k=16384))
    assert any(c.tile_m == 192 for c in space)
    assert not any(c.tile_m == 192 and (c.split_k > 1 or c.stream_k) for c in space)


def test_explicit_stages_bill_matches_the_limit() -> None:
    cfg = HopperGemmConfig(128, 256, 64)
    fit = max_stages(cfg, NT, budgets.SM90_SMEM_PER_BLOCK_OPTIN)
    assert smem_bill(cfg, NT, fit) <= budgets.SM90_SMEM_PER_BLOCK_OPTIN < smem_bill(cfg, NT, fit + 1)
    assert check(HopperGemmConfig(128, 256, 64, stages=fit), NT) is None
    assert check(HopperGemmConfig(128, 256, 64, stages=fit + 1), NT) is not None


def test_seeds_are_feasible_and_space_is_large() -> None:
    fam = get_family("hopper_gemm")
    for prob in (NT, NN, GemmProblem(m=16, n=6144, k=4096, b_major=Major.COL), GemmProblem(m=1, n=64, k=64)):
        seeds = fam.seeds(prob)
        assert seeds and all(check(s, prob) is None for s in seeds)
    space = fam.space(NT)
    feasible = [c for c in space if check(c, NT) is None]
    assert len(space) > 1000 and len(feasible) > 500


def test_config_dict_round_trip_and_simplicity() -> None:
    fam = HopperGemmFamily()
    cfg = HopperGemmConfig(64, 256, 64, 1, 2, 0, Schedule.PINGPONG, "along_n", 4)
    assert fam.config_from_dict(fam.config_to_dict(cfg)) == cfg
    assert fam.simplicity(HopperGemmConfig()) < fam.simplicity(cfg)


def test_problem_supported_reasons() -> None:
    fam = HopperGemmFamily()
    assert fam.supports(NT) is None
    assert "16" in (fam.supports(GemmProblem(m=8, n=8, k=8, align_d=4)) or "")


def test_tf32_operands_are_judged_k_major() -> None:
    """A tf32 row-major B (N-contiguous) is served through a K-major copy: the rules see the
    K-major kernel problem, and an unaligned N no longer matters (the copy is aligned)."""
    from autocutlass.kernels.hopper_gemm.check import kernel_problem

    tf = GemmProblem(m=4096, n=4094, k=4096, a_dtype=DType.TF32, b_dtype=DType.TF32, d_dtype=DType.FP32,
                 align_b=8, align_d=16)
    kp = kernel_problem(tf)
    assert (kp.a_major, kp.b_major, kp.align_b) == (Major.ROW, Major.COL, 16)
    assert kernel_problem(NT) is NT
    assert check(HopperGemmConfig(128, 256, 32), tf) is None
    fam = HopperGemmFamily()
    space = fam.space(tf)
    assert {c.tile_k for c in space} == {32, 64}
    assert all(c.tile_k < 128 for c in fam.seeds(tf))


def test_workspace_split_k_plan_has_no_smem_epilogue() -> None:
    base = HopperGemmConfig(64, 128, 128, split_k=4)
    ws = HopperGemmConfig(64, 128, 128, split_k=4, split_mode="workspace")
    p = GemmProblem(m=16, n=6144, k=4096, b_major=Major.COL)
    assert check(ws, p) is None
    assert make_plan(ws, p).split_workspace and not make_plan(ws, p).smem_epilogue
    assert make_plan(base, p).smem_epilogue and make_plan(ws, p).smem_bytes < make_plan(base, p).smem_bytes or \
        make_plan(ws, p).stages >= make_plan(base, p).stages
    modes = {(c.split_k > 1, c.split_mode.value) for c in HopperGemmFamily().space(p)}
    assert modes == {(False, "serial"), (True, "serial"), (True, "workspace")}


def test_swapped_problem_flips_operands_and_majors() -> None:
    from autocutlass.kernels.hopper_gemm.check import kernel_problem, swapped

    p = GemmProblem(m=16, n=6144, k=4096, b_major=Major.COL, align_a=8)
    s = swapped(p)
    # A' = B^T (N, K): K-contiguous since B was; B' = A^T (K, M): K-contiguous since A was
    assert (s.m, s.n, s.k) == (6144, 16, 4096)
    assert s.a_major is Major.ROW and s.b_major is Major.COL
    assert s.align_a == 16 and s.align_b == 8
    assert swapped(s) == p
    q = GemmProblem(m=16, n=512, k=64, a_major=Major.COL, b_major=Major.ROW)
    assert (swapped(q).a_major, swapped(q).b_major) == (Major.COL, Major.ROW)
    swap = HopperGemmConfig(128, 16, 128, swap_ab=True)
    assert kernel_problem(p, swap) == s and kernel_problem(p, HopperGemmConfig()) == p
    assert make_plan(swap, s).swap_ab and not make_plan(HopperGemmConfig(), p).swap_ab


def test_swap_ab_rules() -> None:
    decode = GemmProblem(m=16, n=6144, k=4096, b_major=Major.COL)
    assert check(HopperGemmConfig(128, 16, 128, swap_ab=True), decode) is None
    # the rules judge the swapped problem: tile_n 16 covers the 16 tokens, tile_m the weight rows
    assert check(HopperGemmConfig(64, 16, 128, split_k=11, swap_ab=True), decode) is None
    # workspace split-K too: the reduce kernel writes the column-major D' of its transposed class
    assert check(HopperGemmConfig(64, 16, 128, split_k=2, split_mode="workspace", swap_ab=True), decode) is None
    fp8 = GemmProblem(m=16, n=6144, k=4096, a_dtype=DType.E4M3, b_dtype=DType.E4M3, b_major=Major.COL)
    why = check(HopperGemmConfig(64, 16, 128, split_k=2, split_mode="workspace", swap_ab=True), fp8)
    assert why is not None and "fp8 scales" in why
    tf = GemmProblem(m=16, n=512, k=512, a_dtype=DType.TF32, b_dtype=DType.TF32, d_dtype=DType.FP32, b_major=Major.COL)
    assert check(HopperGemmConfig(64, 16, 64, swap_ab=True), tf) is None
    # B' multicast over cluster_m splits the narrow tile_n: 16 -> 8-row slices are whole atoms
    assert check(HopperGemmConfig(128, 16, 128, cluster_m=2, swap_ab=True), decode) is None
    with pytest.raises(TypeError):
        HopperGemmConfig(swap_ab=1)  # type: ignore[arg-type]


def test_decode_space_has_swapped_and_balanced_split_configs() -> None:
    from autocutlass.kernels.hopper_gemm import split_counts, swap_tile_ns

    fam = HopperGemmFamily()
    decode = GemmProblem(m=16, n=6144, k=4096, b_major=Major.COL)
    space = fam.space(decode)
    swapped_cfgs = [c for c in space if c.swap_ab and check(c, decode) is None]
    assert swapped_cfgs and {c.tile_n for c in swapped_cfgs} == {16}
    assert any(c.split_k == 11 for c in swapped_cfgs)  # 96 tiles x 11 = 8 waves of 132
    assert len(space) == len(set(space))
    # large problems: the swapped orientation data-parallel only (hopper_gemm.swap_dp_candidate)
    large_swaps = [c for c in fam.space(NT) if c.swap_ab]
    assert large_swaps and all(c.split_k == 1 and c.schedule is Schedule.COOPERATIVE and c.tile_n >= 64
                               for c in large_swaps)  # fmt: skip
    assert not any(c.tile_n < 64 for c in fam.space(NT))  # nor narrow tiles
    assert swap_tile_ns(16) == (16,) and swap_tile_ns(64) == (64, 32) and swap_tile_ns(100) == (128, 64)
    assert split_counts(6144, 16, 1, 64, 16) == (2, 3, 4, 8, 11, 12)
    for s in split_counts(6144, 16, 1, 64, 16)[4:]:
        units = 96 * s
        assert units / (-(-units // 132) * 132) >= 0.95
    seeds = fam.seeds(decode)
    assert any(c.swap_ab for c in seeds[:3]) and all(check(c, decode) is None for c in seeds)


def test_fp8_rules_space_and_seeds() -> None:
    fam = HopperGemmFamily()
    e = DType.E4M3
    nt = GemmProblem(m=4096, n=4096, k=4096, a_dtype=e, b_dtype=e, d_dtype=DType.BF16, b_major=Major.COL)
    assert check(HopperGemmConfig(128, 256, 128, cluster_m=2), nt) is None
    assert check(HopperGemmConfig(128, 256, 256), nt) is None
    assert "tile_k=64" in (check(HopperGemmConfig(128, 256, 64), nt) or "")
    nn = GemmProblem(m=4096, n=4096, k=4096, a_dtype=e, b_dtype=e, d_dtype=DType.BF16)
    assert "K-major" in (fam.supports(nn) or "")
    ws = HopperGemmConfig(64, 128, 128, split_k=2, split_mode="workspace")
    assert "fp8 scales" in (check(ws, GemmProblem(m=16, n=6144, k=4096, a_dtype=e, b_dtype=e, d_dtype=DType.BF16,
                                              b_major=Major.COL)) or "")  # fmt: skip
    space = [c for c in fam.space(nt) if check(c, nt) is None]
    assert space and {c.tile_k for c in space} == {128, 256}
    decode = GemmProblem(m=16, n=6144, k=4096, a_dtype=e, b_dtype=e, d_dtype=DType.BF16, b_major=Major.COL)
    dspace = fam.space(decode)
    assert any(c.swap_ab for c in dspace) and not any(c.split_mode.value == "workspace" for c in dspace)
    seeds = fam.seeds(decode)
    assert seeds and all(check(c, decode) is None for c in seeds) and all(c.tile_k in (128, 256) for c in seeds)
    assert make_plan(HopperGemmConfig(128, 256, 128), nt).scaled and not make_plan(HopperGemmConfig(), NT).scaled


def test_tf32_m_major_a_is_read_through_registers() -> None:
    """tf32: an M-major A that TMA can load goes through registers (no copy); an N-major B is
    copied. So 'nn' copies B unswapped and nothing swapped; 'tn' copies nothing unswapped."""
    from autocutlass.kernels.hopper_gemm import tf32_swap_saves_copy
    from autocutlass.kernels.hopper_gemm.check import copied_operands, kernel_problem

    def tf(a: Major, b: Major, **kw: int) -> GemmProblem:
        return GemmProblem(m=512, n=768, k=256, a_dtype=DType.TF32, b_dtype=DType.TF32, d_dtype=DType.FP32,
                       a_major=a, b_major=b, **kw)

    plain, swap = HopperGemmConfig(128, 128, 32), HopperGemmConfig(128, 128, 32, swap_ab=True)
    R, C = Major.ROW, Major.COL
    expected = {  # (a_major, b_major): (copies unswapped, copies swapped)
        (R, C): ((False, False), (False, False)),
        (R, R): ((False, True), (False, False)),
        (C, C): ((False, False), (False, True)),
        (C, R): ((False, True), (False, True)),
    }
    for (a, b), (want_plain, want_swap) in expected.items():
        p = tf(a, b)
        assert copied_operands(p, plain) == want_plain, (a, b)
        assert copied_operands(p, swap) == want_swap, (a, b)
        assert tf32_swap_saves_copy(p) == (sum(want_swap) < sum(want_plain))
    nn = tf(R, R)
    kp = kernel_problem(nn, swap)
    assert (kp.m, kp.n, kp.a_major, kp.b_major) == (768, 512, C, C)
    assert make_plan(swap, kp).a_regs and not make_plan(plain, kernel_problem(nn, plain)).a_regs
    # a column-major A whose columns are not 16-byte aligned cannot be loaded by TMA: copied
    unaligned = tf(C, C, align_a=8)
    assert copied_operands(unaligned, plain) == (True, False)
    assert kernel_problem(unaligned, plain).a_major is R
    # bf16 never reads A through registers
    assert not make_plan(plain, GemmProblem(m=64, n=64, k=64, a_major=C)).a_regs
    fam = HopperGemmFamily()
    assert any(c.swap_ab for c in fam.space(nn)) and not any(c.swap_ab for c in fam.space(tf(R, C)))
    assert fam.seeds(nn)[0].swap_ab


def test_four_byte_d_uses_narrow_epilogue_chunks() -> None:
    """fp32 D is staged 16 columns at a time (the bytes of a 32-column 16-bit chunk), which
    leaves tf32 128x256x32 four mainloop stages instead of three."""
    cfg = HopperGemmConfig(128, 256, 32)
    tf = GemmProblem(m=4096, n=4096, k=4096, a_dtype=DType.TF32, b_dtype=DType.TF32, d_dtype=DType.FP32,
                 b_major=Major.COL)
    plan = make_plan(cfg, tf)
    assert (plan.epi_m, plan.epi_n, plan.stages) == (128, 16, 4)
    bf = make_plan(HopperGemmConfig(128, 256, 64), GemmProblem(m=4096, n=4096, k=4096, b_major=Major.COL))
    assert bf.epi_n == 32


def test_stream_k_rules_space_and_round_trip() -> None:
    decode = GemmProblem(m=128, n=4096, k=14336, b_major=Major.COL)
    assert check(HopperGemmConfig(128, 128, 128, stream_k=True), decode) is None
    assert check(HopperGemmConfig(128, 16, 128, swap_ab=True, stream_k=True), decode) is None
    for bad, needle in (
        (HopperGemmConfig(128, 128, 128, split_k=2, stream_k=True), "split_k=1"),
        (HopperGemmConfig(128, 128, 128, schedule="pingpong", stream_k=True), "cooperative"),
        (HopperGemmConfig(128, 128, 128, swizzle=2, stream_k=True), "swizzle=1"),
    ):
        why = check(bad, decode)
        assert why is not None and needle in why, (bad.short(), why)
    fam = HopperGemmFamily()
    space = fam.space(decode)
    streamed = [c for c in space if c.stream_k]
    assert streamed and all(c.split_k == 1 and c.swizzle == 1 for c in streamed)
    assert all(c.schedule is Schedule.COOPERATIVE for c in streamed)
    assert any(c.swap_ab for c in streamed) and any(not c.swap_ab for c in streamed)
    assert len(space) == len(set(space))
    assert not any(c.stream_k for c in fam.space(NT))  # many tiles: data-parallel only
    assert not any(c.stream_k for c in fam.space(GemmProblem(m=512, n=512, k=128, l=32)))  # short K
    cfg = HopperGemmConfig(128, 256, 64, cluster_m=2, stream_k=True)
    assert HopperGemmConfig.from_dict(cfg.as_dict()) == cfg and "streamk" in cfg.short()
    assert HopperGemmConfig.from_dict({k: v for k, v in cfg.as_dict().items() if k != "stream_k"}).stream_k is False
    assert make_plan(cfg, decode).stream_k and not make_plan(HopperGemmConfig(128, 256, 64), decode).stream_k
    with pytest.raises(TypeError):
        HopperGemmConfig(stream_k=1)  # type: ignore[arg-type]

"""Feasibility of (config, problem) for the Hopper GEMM, in pure Python, before any compile.

Each rule is a named predicate returning a reason or None; ``check`` returns the first reason.
A reason says what was required, the limit, and (where useful) what to try.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Collection

from autocutlass.kernels import budgets
from autocutlass.kernels.hopper_gemm.config import (
    CLUSTERS,
    SPLIT_K,
    SWIZZLE,
    TILE_K,
    TILE_M,
    TILE_N,
    HopperGemmConfig,
    Schedule,
    SplitMode,
    Store,
)
from autocutlass.kernels.hopper_gemm.plan import MAX_AUTO_STAGES, max_stages, smem_bill
from autocutlass.kernels.rules import first_broken, tile_domain
from autocutlass.ops.gemm.problem import DType, GemmProblem, Major

TILE_N_FITTED = (80, 112, 144, 176, 240)
"""Tile widths between ``config.TILE_N``'s wide ones (multiples of 16), so that an N which no
width of TILE_N divides into whole waves gets one that does: 1536 columns in 11 tiles of 144 next
to 12 row tiles of 128 make 132 tiles, one wave of an H100's SMs (in 128x128 tiles: 144, a second
wave 9% full). The kernel builds any multiple of 16 (its epilogue stores 16-column chunks where
32 does not divide); the widths live here, not in ``config.py``, because that file is hashed into
every record and a new feasible width changes no existing config's code."""
TILE_N_ALL = tuple(sorted(TILE_N + TILE_N_FITTED))
"""Every tile_n the family builds: ``config.TILE_N`` and ``TILE_N_FITTED``."""
INPUT_DTYPES = (DType.BF16, DType.FP16, DType.TF32, DType.E4M3)
OUTPUT_DTYPES = (DType.BF16, DType.FP16, DType.FP32)
TF32_TILE_N_STEP = 32
"""tf32 tile widths past 16 must be multiples of this: nvidia-cutlass-dsl 4.8.1's compiler cannot
build the shared-memory descriptor of a tf32 operand tile of an odd number (above one) of 16-row
groups (208 aborted with SIGABRT, 2026-11-21; 80, 112, 144, 176 and 240 fail to legalize
``make_gmma_smem_desc``, 2026-11-27); 16 (the swapped decode kernel's) builds and runs."""
TILE_K_32BIT = (32, 64)
"""tile_k for tf32 inputs: 32 elements are one 128-byte swizzle row, as 64 are for 16-bit types."""
TILE_K_16BIT = (64, 128)
TILE_K_8BIT = (128, 256)
"""tile_k for fp8 inputs: 128 elements are one 128-byte swizzle row."""


def tile_ks(dtype: DType) -> tuple[int, ...]:
    """The tile_k values of an input dtype: one or two 128-byte swizzle rows."""
    return {4: TILE_K_32BIT, 2: TILE_K_16BIT, 1: TILE_K_8BIT}[dtype.bytes]


def _flip(major: Major) -> Major:
    return Major.COL if major is Major.ROW else Major.ROW


def swapped(problem: GemmProblem) -> GemmProblem:
    """The problem D^T = B^T A^T that a ``swap_ab`` config runs: M and N trade places, A' = B^T
    and B' = A^T (each transposed view flips its major), alignments follow their operands. The
    kernel writes D' = D^T, which is column-major (M'-contiguous): ``Plan.swap_ab`` tells it so,
    and that a bias runs along the kernel's rows."""
    return dataclasses.replace(
        problem, m=problem.n, n=problem.m, a_major=_flip(problem.b_major), b_major=_flip(problem.a_major),
        align_a=problem.align_b, align_b=problem.align_a,
    )  # fmt: skip


def kernel_problem(problem: GemmProblem, config: HopperGemmConfig | None = None) -> GemmProblem:
    """The problem the kernel itself runs for ``config`` (None: any config without ``swap_ab``).

    ``swap_ab`` swaps the operands (``swapped``). tf32 WGMMA reads only K-major shared-memory
    operands. An M-major A that TMA can load (16-byte aligned) is read through registers
    (``Plan.a_regs``); any other M-major A and any N-major B is served through a K-major copy
    (``runner``): the kernel sees a row-major A / column-major B with the copy's 16-byte-aligned
    rows. So a tf32 'nn' GEMM runs either unswapped with a copy of B, or swapped (A' = B^T is
    M-major, through registers; B' = A^T is K-major) with no copy at all."""
    if config is not None and config.swap_ab:
        problem = swapped(problem)
    if problem.a_dtype is not DType.TF32:
        return problem
    changes: dict[str, object] = {}
    if problem.a_major is not Major.ROW and problem.align_a < budgets.TMA_ALIGN_BYTES:
        changes.update(a_major=Major.ROW, align_a=budgets.TMA_ALIGN_BYTES)
    if problem.b_major is not Major.COL:
        changes.update(b_major=Major.COL, align_b=budgets.TMA_ALIGN_BYTES)
    return dataclasses.replace(problem, **changes) if changes else problem

def copied_operands(problem: GemmProblem, config: HopperGemmConfig) -> tuple[bool, bool]:
    """Whether the runner copies the kernel's A and B (after any swap) to K-major: tf32 operands
    that ``kernel_problem`` lays out differently from the views it is handed."""
    views = swapped(problem) if config.swap_ab else problem
    kp = kernel_problem(problem, config)
    return kp.a_major is not views.a_major, kp.b_major is not views.b_major


Rule = Callable[[HopperGemmConfig, GemmProblem], "str | None"]


def problem_supported(problem: GemmProblem) -> str | None:
    """Reasons that no config of the family can serve ``problem``."""
    if problem.op != "gemm":
        return f"op {problem.op!r} is not a GEMM"
    if problem.epilogue.c_mul:
        return "a multiplying epilogue (linear's mul=) is the hopper_gemm_gated family's"
    if problem.epilogue.swiglu:
        return "a SwiGLU epilogue (linear's activation='swiglu') is the hopper_gemm_swiglu family's"
    if problem.a_dtype is DType.FP32 or problem.b_dtype is DType.FP32:
        return "fp32 inputs are served through tf32 (a_dtype = b_dtype = tf32); full fp32 GEMM is not in hopper_gemm"
    if problem.a_dtype not in INPUT_DTYPES:
        return f"A dtype {problem.a_dtype.value} is not one of {[d.value for d in INPUT_DTYPES]}"
    if problem.b_dtype != problem.a_dtype:
        return f"A and B dtypes differ ({problem.a_dtype.value} vs {problem.b_dtype.value}); WGMMA needs them equal"
    if problem.d_dtype not in OUTPUT_DTYPES:
        return f"D dtype {problem.d_dtype.value} is not one of {[d.value for d in OUTPUT_DTYPES]}"
    if problem.acc_dtype is not DType.FP32:
        return f"accumulator {problem.acc_dtype.value} is not fp32"
    if problem.a_dtype is DType.TF32 and problem.d_dtype is not DType.FP32:
        return f"tf32 GEMMs write fp32 D, not {problem.d_dtype.value}"
    if problem.a_dtype is DType.E4M3 and (problem.a_major is not Major.ROW or problem.b_major is not Major.COL):
        return (
            "fp8 WGMMA reads only K-major operands: A row-major (M, K) and B = W.t() of an (N, K) weight "
            f"(got A {problem.a_major.value}-major, B {problem.b_major.value}-major)"
        )
    if problem.epilogue.with_c and problem.c_dtype not in OUTPUT_DTYPES:
        return f"C dtype {problem.c_dtype} is not one of {[d.value for d in OUTPUT_DTYPES]}"
    kp = kernel_problem(problem)
    for name, align in (("A", kp.align_a), ("B", kp.align_b), ("D", kp.align_d)):
        if align < budgets.TMA_ALIGN_BYTES:
            return (
                f"{name} is only {align}-byte aligned (base pointer or leading dimension); TMA needs "
                f"{budgets.TMA_ALIGN_BYTES}: pad the leading dimension to a multiple of "
                f"{budgets.TMA_ALIGN_BYTES} bytes"
            )
    if problem.epilogue.with_c and problem.align_c < budgets.TMA_ALIGN_BYTES:
        # the kernels are compiled for a 16-byte aligned C base (rows 4-byte aligned); TVM-FFI
        # rejects any other at launch, so such a C (a residual or mul sliced at an odd offset)
        # runs torch with this reason instead
        return (f"C (the residual, mul or gemm's c) is only {problem.align_c}-byte aligned (base pointer or "
                f"row stride); the epilogue reads it {budgets.TMA_ALIGN_BYTES}-byte aligned")  # fmt: skip
    return None


def _domain(config: HopperGemmConfig, problem: GemmProblem, split_k: Collection[int] = SPLIT_K) -> str | None:
    why = tile_domain(config, (TILE_M, TILE_N_ALL, TILE_K), swizzle=SWIZZLE, split_k=split_k, clusters=CLUSTERS)
    if why is not None:
        return why
    allowed_k = tile_ks(problem.a_dtype)
    if config.tile_k not in allowed_k:
        return f"tile_k={config.tile_k} for {problem.a_dtype.value} inputs is not one of {allowed_k}"
    if config.stages != 0 and not 2 <= config.stages <= 12:
        return f"stages={config.stages}: need 0 (auto) or 2..12"
    return None


def _wgmma_shape(config: HopperGemmConfig, problem: GemmProblem) -> str | None:
    if config.tile_n % 8:
        return f"tile_n={config.tile_n} is not a multiple of 8 (WGMMA N step for 16-bit types)"
    if problem.a_dtype is DType.TF32 and config.tile_n > 16 and config.tile_n % TF32_TILE_N_STEP:
        return (
            f"tile_n={config.tile_n} with tf32 is not a multiple of {TF32_TILE_N_STEP}: nvidia-cutlass-dsl 4.8.1's "
            f"compiler cannot build it; use 192 or 224"
        )
    if config.wg_tile_m % budgets.WGMMA_M:
        return f"each consumer's tile_m={config.wg_tile_m} is not a multiple of {budgets.WGMMA_M} (WGMMA M)"
    if config.schedule is Schedule.PINGPONG and config.tile_m > 128:
        return f"ping-pong tile_m={config.tile_m} > 128: each consumer owns a whole tile; use cooperative"
    if config.n_split:
        if problem.a_dtype is DType.TF32:
            return "tile_m=192 (consumers split along N) is built for 16-bit and fp8 inputs, not tf32"
        if config.wg_tile_n % 16:
            return (f"tile_m=192 splits tile_n={config.tile_n} between two consumers: each half must be whole "
                    f"16-column epilogue chunks, so tile_n must be a multiple of 32")
        if problem.b_major is Major.ROW and config.wg_tile_n % 64:
            return (f"tile_m=192 with N-contiguous B: each consumer's {config.wg_tile_n} columns of B are not whole "
                    f"64-column swizzle atoms; use tile_n 128 or 256")
        if config.split_k > 1 or config.stream_k:
            return "tile_m=192 (consumers split along N) runs data-parallel only: use split_k=1, stream_k=False"
    return None


ACC_REGS_WIDE = 192
"""fp32 accumulator registers per consumer thread that this family's own cooperative kernel may
hold (above ``budgets.ACC_REGS_MAX``, the limit of the ping-pong schedule and of the families
built on this kernel): 256x144 to 256x192 tiles, whose two consumer warpgroups run at setmaxnreg
232, so 40 registers remain for addresses, the ring's state and the epilogue. ptxas (CUDA 13.0,
on DSL 4.8.1's PTX; no GPU) reports no spills for 256x192 with the plain, bias, activation and
direct-store epilogues, split-K (serial and workspace), stream-K, clusters, fp8, tf32 with K-major
A and the swapped kernel; an epilogue that reads C spills 896 bytes at 256x192 (``_registers``
refuses it), one with GELU 84 (once per tile, in the epilogue). On an H200
(benchmarks/results/2026-11-28-h200-s38-a-wide-tiles.txt) 256x192 in a 1x2 cluster ran
3072x6144x4096 'nt' at x1.047 of torch where the shipped record reads x0.950, 8192x6144x4096
x1.031 (record x0.989), 2000x3000x1000 x0.956 (x0.925: 128 tiles, one wave); ping-pong 128x192
and 128x160 lost to the best record on all 11 cases probed (x0.53-1.01), so the ping-pong
schedule keeps ``budgets.ACC_REGS_MAX``."""


def acc_regs(config: HopperGemmConfig) -> int:
    """fp32 accumulator registers per consumer thread (``Plan.acc_regs`` before a plan is made)."""
    return config.wg_tile_m * config.wg_tile_n // budgets.THREADS_PER_WARPGROUP


def _registers(config: HopperGemmConfig, problem: GemmProblem, limit: int = ACC_REGS_WIDE) -> str | None:
    regs = acc_regs(config)
    if regs <= budgets.ACC_REGS_MAX:
        return None
    if config.schedule is Schedule.PINGPONG:
        limit = min(limit, budgets.ACC_REGS_MAX)
    if regs > limit:
        return (
            f"{regs} fp32 accumulator registers per thread ({config.wg_tile_m}x{config.wg_tile_n} per consumer "
            f"warpgroup) exceed {limit}: use a smaller tile or the cooperative schedule"
        )
    if problem.epilogue.with_c:
        return (
            f"{regs} fp32 accumulator registers per thread ({config.wg_tile_m}x{config.wg_tile_n} per consumer "
            f"warpgroup) with an epilogue that reads C spill (ptxas): at most {budgets.ACC_REGS_MAX} with C"
        )
    if problem.a_dtype is DType.TF32 and problem.a_major is Major.COL:
        return (
            f"{regs} fp32 accumulator registers per thread with tf32 A read through registers (M-major A): "
            f"at most {budgets.ACC_REGS_MAX}"
        )
    return None


WORKSPACE_MAX_ELEMS = 2**31 - 1
"""The workspace split-K slabs are indexed with 32-bit offsets."""


def _split_k(config: HopperGemmConfig, problem: GemmProblem) -> str | None:
    if config.interleave and config.split_k == 1:
        return "interleave orders the K blocks of the splits: it needs split_k > 1"
    if config.split_k > 1 and config.schedule is Schedule.PINGPONG:
        return "split_k > 1 needs the cooperative schedule (ping-pong consumers cannot skip uneven K splits)"
    if config.split_mode is SplitMode.WORKSPACE:
        if problem.a_dtype is DType.E4M3 and config.split_k > 1:
            return "workspace split-K: the reduce kernel does not apply fp8 scales; use split_mode=serial"
        if config.split_k == 1:
            return "split_mode=workspace needs split_k > 1 (with one split there is nothing to reduce)"
        if config.store is Store.DIRECT:
            return "store=direct has no effect in workspace split-K (partials are stored directly); use store=tma"
        n_pad = -(-problem.n // 4) * 4
        if config.split_k * problem.l * problem.m * n_pad > WORKSPACE_MAX_ELEMS:
            return (
                f"workspace split-K needs {config.split_k} x {problem.l} x {problem.m} x {n_pad} fp32 partials, "
                f"more than the 2^31 its 32-bit offsets address: use split_mode=serial or fewer splits"
            )
    elif config.split_k > 1:
        # serial split-K keeps one fp32 partial tile per output tile (tiles padded to whole
        # clusters), indexed with 32-bit offsets in the kernel
        tiles_m = -(-problem.m // (config.tile_m * config.cluster_m)) * config.cluster_m
        tiles_n = -(-problem.n // (config.tile_n * config.cluster_n)) * config.cluster_n
        slots = tiles_m * tiles_n * problem.l * config.tile_m * config.tile_n
        if slots > WORKSPACE_MAX_ELEMS:
            return (f"serial split-K keeps {slots} fp32 partials (one tile per output tile), more than the 2^31 "
                    f"its 32-bit offsets address: use split_k=1")  # fmt: skip
    return None


def _stream_k(config: HopperGemmConfig, problem: GemmProblem) -> str | None:
    if not config.stream_k:
        return None
    if config.split_k > 1:
        return "stream_k divides K among the clusters itself: use split_k=1"
    if config.schedule is Schedule.PINGPONG:
        return "stream_k needs the cooperative schedule (ping-pong consumers take whole tiles in turn)"
    if config.swizzle != 1:
        return "stream_k walks tiles in plain raster order: use swizzle=1"
    return None


def _smem_layout(config: HopperGemmConfig, problem: GemmProblem) -> str | None:
    # An MN-major operand is tiled by swizzle atoms along its contiguous M/N extent: the extent
    # must be a multiple of 16 elements (the narrowest 32-byte swizzle atom of 16-bit types).
    if problem.b_major is Major.ROW and config.tile_n % 16:
        return f"tile_n={config.tile_n} with N-contiguous B is not a multiple of 16 (smem swizzle atom)"
    if problem.b_major is Major.ROW and config.tile_n in TILE_N_FITTED:
        # measured: 1.5-2.3x slower than the 64-multiple widths on 'nn' and 'tn' GEMMs (H100,
        # benchmarks/results/2026-11-27-h100-s23-fitted-widths-probe.txt), 1.0-1.06x faster on 'nt'
        return (f"tile_n={config.tile_n} (a fitted width) with N-contiguous B: its tile rows are not whole 128-byte "
                f"swizzle atoms, measured 1.5-2.3x slower; use 128, 192 or 256")
    return None


def _multicast(config: HopperGemmConfig, problem: GemmProblem) -> str | None:
    # A multicast tile is split among the CTAs that share it; each slice must hold whole
    # swizzle atoms (8 rows of the K-major atom, or 64 contiguous elements of an MN-major one).
    if config.cluster_n > 1:
        unit = 64 if problem.a_major is Major.COL else 8
        if config.tile_m % (config.cluster_n * unit):
            return (
                f"A multicast over cluster_n={config.cluster_n} splits tile_m={config.tile_m} into slices "
                f"that are not multiples of {unit} rows"
            )
    if config.cluster_m > 1:
        unit = 64 if problem.b_major is Major.ROW else 8
        if config.tile_n % (config.cluster_m * unit):
            return (
                f"B multicast over cluster_m={config.cluster_m} splits tile_n={config.tile_n} into slices "
                f"that are not multiples of {unit}"
            )
    return None


def _shared_memory(config: HopperGemmConfig, problem: GemmProblem) -> str | None:
    limit = budgets.SM90_SMEM_PER_BLOCK_OPTIN
    if config.stages == 0:
        fit = max_stages(config, problem, limit)
        if fit < 2:
            return (
                f"two stages of {config.tile_m}x{config.tile_n}x{config.tile_k} need "
                f"{smem_bill(config, problem, 2)} bytes of shared memory > {limit}: use a smaller tile"
            )
        return None
    need = smem_bill(config, problem, config.stages)
    if need > limit:
        return (
            f"{config.stages} stages need {need} bytes of shared memory > {limit}; at most "
            f"{max(1, max_stages(config, problem, limit))} fit (or use stages=0)"
        )
    if config.stages > MAX_AUTO_STAGES + 4:
        return f"stages={config.stages} is more than the ring benefits from"
    return None


RULES: tuple[Rule, ...] = (_domain, _wgmma_shape, _registers, _split_k, _stream_k, _smem_layout, _multicast, _shared_memory)


def check(
    config: HopperGemmConfig, problem: GemmProblem, *, split_k: Collection[int] = SPLIT_K,
    acc_regs: int = ACC_REGS_WIDE,
) -> str | None:
    """None if ``config`` can run ``problem``, else the first broken rule's reason. The rules
    judge the problem the kernel runs (``kernel_problem``: swapped for ``swap_ab``, K-major
    operands for tf32). ``split_k``: the split counts allowed (a family running this kernel on a
    longer reduction allows more than the GEMM family's own ``SPLIT_K``). ``acc_regs``: the fp32
    accumulator registers per consumer thread allowed (``ACC_REGS_WIDE`` for this family's
    kernel; the families that build on it, whose consumers and epilogues keep more state, pass
    ``budgets.ACC_REGS_MAX``)."""
    reason = problem_supported(problem)
    if reason is not None:
        return reason
    rules = RULES
    if split_k != SPLIT_K:
        rules = tuple(functools.partial(_domain, split_k=split_k) if rule is _domain else rule for rule in rules)
    if acc_regs != ACC_REGS_WIDE:
        rules = tuple(functools.partial(_registers, limit=acc_regs) if rule is _registers else rule for rule in rules)
    return first_broken(rules, config, kernel_problem(problem, config))

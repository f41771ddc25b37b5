"""A frozen ``Plan``: everything the kernel needs, derived once from (config, kernel class).

Pure Python (no cutlass import) so that ``check`` can use the same arithmetic as the kernel:
the stage count, the epilogue tile, the warpgroup roles and the shared-memory bill.
"""

from __future__ import annotations

from dataclasses import dataclass

from autocutlass.kernels import budgets
from autocutlass.kernels.hopper_gemm.config import HopperGemmConfig, Raster, Schedule, SplitMode, Store
from autocutlass.ops.gemm.problem import Activation, DType, Major, GemmProblem

MAX_AUTO_STAGES = 8


@dataclass(frozen=True)
class Plan:
    """The kernel's compile-time parameters for one (config, kernel class)."""

    tile_m: int
    tile_n: int
    tile_k: int
    cluster_m: int
    cluster_n: int
    stages: int
    epi_m: int
    epi_n: int
    epi_stages: int
    pingpong: bool
    num_consumer_wgs: int
    wg_tile_m: int
    consumer_regs: int
    raster_along_m: bool
    swizzle: int
    a_dtype: DType
    b_dtype: DType
    d_dtype: DType
    c_dtype: DType | None
    a_major: Major
    b_major: Major
    with_c: bool
    bias: bool
    activation: Activation
    direct_store: bool
    split_k: int
    split_workspace: bool
    split_interleave: bool
    """``HopperGemmConfig.interleave``: split s of S walks K blocks s, s + S, ... (else one run)."""
    stream_k: bool
    """Stream-K (``HopperGemmConfig.stream_k``): a workspace slot and a flag per CTA of the grid."""
    scaled: bool
    """fp8 inputs: the epilogue multiplies the accumulator by two per-tensor scales read from
    global memory (``scale_a * scale_b``; device tensors, so no host synchronisation)."""
    swap_ab: bool
    """The kernel runs the swapped problem (``check.swapped``): D (and C) arrive transposed,
    i.e. column-major, and the bias runs along the kernel's rows."""
    smem_bytes: int
    n_split: bool = False
    """``HopperGemmConfig.n_split``: the consumers split the tile along N and each runs its
    half's epilogue (its own staging buffers, barrier and store warp, as in ping-pong)."""

    @property
    def smem_epilogue(self) -> bool:
        """The epilogue stages D in shared memory for a TMA store (not in direct-store mode, nor
        in workspace split-K, whose partials go straight to global memory)."""
        return not self.direct_store and not self.split_workspace

    @property
    def a_regs(self) -> bool:
        """WGMMA reads A from registers: tf32 with an M-major A (tf32 WGMMA reads only K-major
        shared memory, but a register fragment has no major; the consumers load it themselves)."""
        return self.a_dtype is DType.TF32 and self.a_major is Major.COL

    @property
    def threads(self) -> int:
        return budgets.THREADS_PER_WARPGROUP * (1 + self.num_consumer_wgs)

    @property
    def wg_tile_n(self) -> int:
        """Columns of the tile one consumer accumulates (half of tile_n when split along N)."""
        return self.tile_n // 2 if self.n_split else self.tile_n

    @property
    def acc_regs(self) -> int:
        """fp32 accumulator registers per consumer thread."""
        return self.wg_tile_m * self.wg_tile_n // budgets.THREADS_PER_WARPGROUP

    @property
    def mma_atoms_m(self) -> int:
        """Warpgroups the tiled MMA spreads along M (1 in ping-pong: each WG owns a tile; 1 when
        split along N)."""
        return 1 if self.pingpong or self.n_split else self.num_consumer_wgs

    @property
    def mma_atoms_n(self) -> int:
        """Warpgroups the tiled MMA spreads along N (2 when split along N)."""
        return 2 if self.n_split else 1

    @property
    def epi_groups(self) -> int:
        """Consumers that run their own epilogue (own staging buffers): 2 in ping-pong and when
        split along N, else 1 (the cooperative consumers share one)."""
        return 2 if self.pingpong or self.n_split else 1



def epilogue_tile(config: HopperGemmConfig, d_bytes: int) -> tuple[int, int]:
    """(rows, cols) of one epilogue store: one WGMMA row block (64 rows) per warpgroup that shares
    the epilogue, by 32 columns (16 when tile_n is not a multiple of 32, or when D has 4-byte
    elements: a chunk then has the bytes of a 16-bit one, and the staging buffers leave room for
    one more mainloop stage, e.g. 4 instead of 3 for tf32 128x256x32). The accumulator is walked
    in these chunks, column chunks fastest."""
    wgs = 1 if config.schedule is Schedule.PINGPONG or config.n_split else config.num_consumer_wgs
    rows = 64 * wgs
    cols = 32 if config.wg_tile_n % 32 == 0 and d_bytes < 4 else 16
    return rows, cols


def epilogue_stages(config: HopperGemmConfig) -> int:
    """Staging buffers of the epilogue (per consumer in ping-pong). At least 2: the store loop
    lets epi_stages - 2 TMA stores still read shared memory when it writes the next chunk."""
    return 4 if config.schedule is Schedule.COOPERATIVE else 2


def split_workspace(config: HopperGemmConfig) -> bool:
    return config.split_k > 1 and config.split_mode is SplitMode.WORKSPACE


def epilogue_bytes(config: HopperGemmConfig, problem: GemmProblem) -> int:
    if config.store is Store.DIRECT or split_workspace(config):
        return 0
    em, en = epilogue_tile(config, problem.d_dtype.bytes)
    groups = 2 if config.schedule is Schedule.PINGPONG or config.n_split else 1
    return em * en * problem.d_dtype.bytes * epilogue_stages(config) * groups


def _round_up(x: int, a: int) -> int:
    return (x + a - 1) // a * a


def smem_bill(config: HopperGemmConfig, problem: GemmProblem, stages: int) -> int:
    """Bytes of shared memory the kernel allocates with ``stages`` mainloop stages."""
    a = _round_up(config.tile_m * config.tile_k * problem.a_dtype.bytes * stages, budgets.SMEM_BUFFER_ALIGN)
    b = _round_up(config.tile_n * config.tile_k * problem.b_dtype.bytes * stages, budgets.SMEM_BUFFER_ALIGN)
    e = _round_up(epilogue_bytes(config, problem), budgets.SMEM_BUFFER_ALIGN)
    return budgets.SMEM_RESERVED_BYTES + a + b + e


def max_stages(config: HopperGemmConfig, problem: GemmProblem, smem_limit: int) -> int:
    """The most mainloop stages that fit in ``smem_limit`` bytes (may be < 2)."""
    s = 1
    while smem_bill(config, problem, s + 1) <= smem_limit:
        s += 1
    return s


def make_plan(config: HopperGemmConfig, problem: GemmProblem, smem_limit: int = budgets.SM90_SMEM_PER_BLOCK_OPTIN) -> Plan:
    """Derive the plan for the problem the kernel runs (``check.kernel_problem(p, config)``).
    Assumes ``check`` accepted the pair (it calls this for the stage math)."""
    fit = max_stages(config, problem, smem_limit)
    stages = min(fit, MAX_AUTO_STAGES) if config.stages == 0 else config.stages
    em, en = epilogue_tile(config, problem.d_dtype.bytes)
    return Plan(
        tile_m=config.tile_m,
        tile_n=config.tile_n,
        tile_k=config.tile_k,
        cluster_m=config.cluster_m,
        cluster_n=config.cluster_n,
        stages=stages,
        epi_m=em,
        epi_n=en,
        epi_stages=epilogue_stages(config),
        pingpong=config.schedule is Schedule.PINGPONG,
        num_consumer_wgs=config.num_consumer_wgs,
        wg_tile_m=config.wg_tile_m,
        consumer_regs=budgets.consumer_regs(config.num_consumer_wgs),
        raster_along_m=config.raster is Raster.ALONG_M,
        swizzle=config.swizzle,
        a_dtype=problem.a_dtype,
        b_dtype=problem.b_dtype,
        d_dtype=problem.d_dtype,
        c_dtype=problem.c_dtype if problem.epilogue.with_c else None,
        a_major=problem.a_major,
        b_major=problem.b_major,
        with_c=problem.epilogue.with_c,
        bias=problem.epilogue.bias,
        activation=problem.epilogue.activation,
        direct_store=config.store is Store.DIRECT,
        split_k=config.split_k,
        split_workspace=split_workspace(config),
        split_interleave=config.interleave and config.split_k > 1,
        stream_k=config.stream_k,
        scaled=problem.a_dtype is DType.E4M3,
        swap_ab=config.swap_ab,
        smem_bytes=smem_bill(config, problem, stages),
        n_split=config.n_split,
    )

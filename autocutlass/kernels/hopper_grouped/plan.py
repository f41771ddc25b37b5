"""A frozen ``GroupedPlan``: everything the grouped kernel is compiled from, derived once from
(config, kernel class, expert-table size).

Pure Python (no cutlass import). The mainloop is the GEMM family's (TMA ring, WGMMA consumers),
so the plan holds the GEMM ``Plan`` of the equivalent GEMM (``equivalent_gemm``: x as A, each
expert's weight as B, out as D; its stage count leaves room for the tables) plus the capacity of
the per-CTA group tables in shared memory (``table_entries``).

**Group tables.** At its start every CTA reads ``offs`` once and builds three int32 tables in
shared memory, one entry per group: its first row, its row count, and the running total of tiles
through it. Group E (one past the experts) is the *tail*: the rows past ``offs[-1]``, whose tiles
store zeros. A tile index is mapped to its group by a binary search of the running totals. The
table capacity is compile-time: a power of four from 64 entries (``TABLE_ENTRIES``), the smallest
holding E + 1 groups; the runner picks the compiled variant by E at each call (E is not part of
the kernel class: one runner serves every expert count of its class up to ``MAX_EXPERTS``).
"""

from __future__ import annotations

from dataclasses import dataclass

from autocutlass.kernels import budgets
from autocutlass.kernels.hopper_gemm.plan import Plan
from autocutlass.kernels.hopper_gemm.plan import make_plan as make_gemm_plan
from autocutlass.kernels.hopper_grouped.config import HopperGroupedConfig
from autocutlass.ops.gemm.problem import GemmProblem, Major
from autocutlass.ops.grouped.problem import GroupedGemmProblem

TABLE_ENTRIES = (64, 256, 1024)
"""Capacities (groups, the tail included) of the shared-memory group tables."""
TABLES = 3
"""first row, row count, running tile total."""
MAX_EXPERTS = TABLE_ENTRIES[-1] - 1


def table_entries(experts: int) -> int:
    """The smallest table capacity holding ``experts`` + 1 groups (the tail); raises ValueError
    past ``MAX_EXPERTS``."""
    for entries in TABLE_ENTRIES:
        if experts + 1 <= entries:
            return entries
    raise ValueError(f"{experts} experts exceed the grouped kernel's {MAX_EXPERTS}")


def table_bytes(entries: int) -> int:
    """Shared memory of the tables, rounded to the operand buffers' alignment."""
    raw = TABLES * entries * 4
    return -(-raw // budgets.SMEM_BUFFER_ALIGN) * budgets.SMEM_BUFFER_ALIGN


@dataclass(frozen=True)
class GroupedPlan:
    """The grouped kernel's compile-time parameters for one (config, kernel class, table size)."""

    gemm: Plan
    """The equivalent GEMM's plan (tiles, stages, consumers, dtypes, majors, epilogue)."""
    entries: int
    """Capacity of the group tables (``TABLE_ENTRIES``)."""


def equivalent_gemm(problem: GroupedGemmProblem) -> GemmProblem:
    """The GEMM each expert runs: A = its rows of x (row-major), B = its weight (K, N) in the
    problem's major, D = its rows of out (row-major), the problem's epilogue."""
    return GemmProblem(
        m=max(problem.t, 1), n=problem.n, k=problem.k,
        a_dtype=problem.x_dtype, b_dtype=problem.w_dtype, d_dtype=problem.out_dtype, acc_dtype=problem.acc_dtype,
        a_major=Major.ROW, b_major=problem.w_major,
        align_a=problem.align_x, align_b=problem.align_w, align_d=problem.align_out,
        epilogue=problem.epilogue,
    )  # fmt: skip


def make_plan(config: HopperGroupedConfig, problem: GroupedGemmProblem, entries: int | None = None,
              smem_limit: int = budgets.SM90_SMEM_PER_BLOCK_OPTIN) -> GroupedPlan:  # fmt: skip
    """The plan for ``problem``'s class with tables of ``entries`` (default: ``problem.experts``'s
    tier). Assumes ``check`` accepted the pair."""
    entries = table_entries(problem.experts) if entries is None else entries
    gemm = make_gemm_plan(config.gemm_config(), equivalent_gemm(problem), smem_limit - table_bytes(entries))
    return GroupedPlan(gemm=gemm, entries=entries)

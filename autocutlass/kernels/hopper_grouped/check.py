"""Feasibility of (config, grouped problem) for the Hopper grouped GEMM, in pure Python.

Three layers of rules, the first broken one's reason wins:

1. ``problem_supported``: what no config serves (op, dtypes, TMA alignment of x and w, the
   output's rows, the expert count the shared-memory tables hold).
2. The family's own axes (``_domain``) and the shared memory left to the ring beside the largest
   table (``_shared_memory``).
3. The GEMM family's rules on the equivalent GEMM (WGMMA shape, accumulator registers, the
   shared-memory swizzle of an N-contiguous weight, the slices a multicast tile splits into):
   the mainloop is the GEMM's.
"""

from __future__ import annotations

from collections.abc import Callable

from autocutlass.kernels import budgets
from autocutlass.kernels.hopper_gemm.check import check as gemm_check
from autocutlass.kernels.hopper_gemm.plan import max_stages
from autocutlass.kernels.hopper_grouped.config import (
    CLUSTERS,
    TILE_K,
    TILE_M,
    TILE_N,
    HopperGroupedConfig,
)
from autocutlass.kernels.hopper_grouped.plan import (
    MAX_EXPERTS,
    equivalent_gemm,
    table_bytes,
    table_entries,
)
from autocutlass.kernels.rules import first_broken, tile_domain
from autocutlass.ops.grouped.problem import GroupedGemmProblem
from autocutlass.ops.types import DType

INPUT_DTYPES = (DType.BF16, DType.FP16)
OUTPUT_DTYPES = (DType.BF16, DType.FP16, DType.FP32)
INT32_MAX = 2**31 - 1

Rule = Callable[[HopperGroupedConfig, GroupedGemmProblem], "str | None"]


def problem_supported(problem: GroupedGemmProblem) -> str | None:
    """Reasons that no config of the family can serve ``problem``."""
    if getattr(problem, "op", None) != "grouped_mm":
        return f"op {getattr(problem, 'op', None)!r} is not grouped_mm"
    if problem.x_dtype not in INPUT_DTYPES:
        return f"x dtype {problem.x_dtype.value} is not one of {[d.value for d in INPUT_DTYPES]}"
    if problem.w_dtype != problem.x_dtype:
        return f"x and w dtypes differ ({problem.x_dtype.value} vs {problem.w_dtype.value}); WGMMA needs them equal"
    if problem.out_dtype not in OUTPUT_DTYPES:
        return f"out dtype {problem.out_dtype.value} is not one of {[d.value for d in OUTPUT_DTYPES]}"
    if problem.acc_dtype is not DType.FP32:
        return f"accumulator {problem.acc_dtype.value} is not fp32"
    for name, align in (("x", problem.align_x), ("w", problem.align_w)):
        if align < budgets.TMA_ALIGN_BYTES:
            return (f"{name} is only {align}-byte aligned (base pointer or a stride); TMA needs "
                    f"{budgets.TMA_ALIGN_BYTES}")  # fmt: skip
    if problem.align_out < budgets.TMA_ALIGN_BYTES:
        unit = budgets.TMA_ALIGN_BYTES // problem.out_dtype.bytes
        return (f"N={problem.n}: the output's rows must be whole {budgets.TMA_ALIGN_BYTES}-byte units for the "
                f"vector stores (N a multiple of {unit} for {problem.out_dtype.value})")  # fmt: skip
    if problem.experts > MAX_EXPERTS:
        return f"{problem.experts} experts exceed the {MAX_EXPERTS} the kernel's shared-memory group tables hold"
    if problem.experts < 1:
        return "no experts"
    if problem.t * max(problem.n, problem.k) > INT32_MAX:
        return f"T={problem.t} rows of {max(problem.n, problem.k)} elements exceed 32-bit coordinates"
    return None


def _domain(config: HopperGroupedConfig, problem: GroupedGemmProblem) -> str | None:
    why = tile_domain(config, (TILE_M, TILE_N, TILE_K))
    if why is None and (config.cluster_m, config.cluster_n) not in CLUSTERS:
        why = f"cluster {config.cluster_m}x{config.cluster_n} is not one of {CLUSTERS}"
    return why


def _shared_memory(config: HopperGroupedConfig, problem: GroupedGemmProblem) -> str | None:
    tables = table_bytes(table_entries(problem.experts))
    limit = budgets.SM90_SMEM_PER_BLOCK_OPTIN - tables
    fit = max_stages(config.gemm_config(), equivalent_gemm(problem), limit)
    if fit < 2:
        return (f"two stages of {config.tile_m}x{config.tile_n}x{config.tile_k} do not fit beside the "
                f"{tables}-byte group tables of {problem.experts} experts: use a smaller tile")  # fmt: skip
    return None


RULES: tuple[Rule, ...] = (_domain, _shared_memory)


def check(config: HopperGroupedConfig, problem: GroupedGemmProblem) -> str | None:
    """None if ``config`` can run ``problem``, else the first broken rule's reason."""
    reason = problem_supported(problem)
    if reason is not None:
        return reason
    return first_broken(RULES, config, problem) or gemm_check(
        config.gemm_config(), equivalent_gemm(problem), acc_regs=budgets.ACC_REGS_MAX
    )

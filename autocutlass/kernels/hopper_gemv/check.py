"""Which GEMMs and configs the decode GEMV family serves: each rule named, with its reason."""

from __future__ import annotations

from autocutlass.kernels.hopper_gemv.config import (
    KINDS,
    M_TILES,
    MAX_ACC,
    MAX_LOADS,
    MAX_WARPS,
    MMA_M_TILES,
    MMA_ROWS,
    ROWS,
    UNROLL,
    WARPS,
    GemvConfig,
)
from autocutlass.kernels.rules import outside
from autocutlass.ops.gemm.problem import DType, GemmProblem, Major

INPUT_DTYPES = (DType.BF16, DType.FP16)
C_DTYPES = (DType.BF16, DType.FP16, DType.FP32)
MAX_M = 16
"""Most rows the family serves (the tensor-core kernel's two 8-column MMA blocks)."""
K_UNIT = 8
"""K must be a multiple of this: each lane loads 16-byte chunks (8 bf16/fp16 elements) along K,
and the kernel counts K // 8 of them."""
SIMT_MAX_M = 8
"""Most rows of the CUDA-core kernel. Measured on an H200 (2026-11-25, Llama-3-8B decode
weights): it beats cuBLAS at M = 1 (x1.05-1.30) and M = 4 (x0.93-1.29) and loses from M = 8
(x0.5-1.0: its FMAs and conversions, not the memory, become the bound) and at M = 16
(x0.27-0.72)."""


def problem_supported(problem: GemmProblem) -> str | None:
    """None when some config of the family can serve ``problem``, else why not."""
    if problem.a_dtype not in INPUT_DTYPES or problem.b_dtype is not problem.a_dtype:
        return (f"the GEMV takes A and B both of {[d.value for d in INPUT_DTYPES]}, not {problem.a_dtype.value} "
                f"and {problem.b_dtype.value}")  # fmt: skip
    if problem.d_dtype not in (problem.a_dtype, DType.FP32):
        return f"D must be {problem.a_dtype.value} or fp32, not {problem.d_dtype.value}"
    if problem.acc_dtype is not DType.FP32:
        return f"the GEMV accumulates in fp32, not {problem.acc_dtype.value}"
    if problem.a_major is not Major.ROW or problem.b_major is not Major.COL:
        return "the GEMV reads A and B along K: A row-major (M, K) and B K-major (a weight's W.t(), F.linear's layout)"
    if problem.l != 1:
        return f"the GEMV is not batched (L={problem.l})"
    if not 1 <= problem.m <= MAX_M:
        return f"M={problem.m}: the GEMV serves 1..{MAX_M} rows (decode); larger M is a tile GEMM's"
    if problem.n < 1:
        return "N=0: nothing to compute"
    if problem.align_a < 16 or problem.align_b < 16:
        return (f"A and B need 16-byte aligned bases and row strides, not {problem.align_a} and "
                f"{problem.align_b} bytes")  # fmt: skip
    if problem.k % K_UNIT:
        # aligned strides do not imply it: a sliced (or one-row) operand has a padded row stride
        return f"K={problem.k}: the GEMV reads K in 16-byte chunks of {K_UNIT} elements; K must be a multiple of {K_UNIT}"
    if problem.align_d < problem.d_dtype.bytes:
        return f"D needs {problem.d_dtype.bytes}-byte alignment, not {problem.align_d}"
    epi = problem.epilogue
    if epi.c_mul or epi.swiglu:
        return "the GEMV's epilogue adds C; a multiplying or SwiGLU epilogue is another family's"
    if epi.with_c and (problem.c_dtype not in C_DTYPES or problem.align_c < problem.c_dtype.bytes):
        return f"C must be one of {[d.value for d in C_DTYPES]}, element-aligned"
    return None


def check(config: GemvConfig, problem: GemmProblem) -> str | None:
    """None when ``config`` can run ``problem``, else the rule it breaks."""
    why = problem_supported(problem)
    if why is not None:
        return why
    if config.kind not in KINDS:
        return f"kind={config.kind!r} is not one of {KINDS}"
    mma = config.kind == "mma"
    why = outside((("m_tile", config.m_tile, MMA_M_TILES if mma else M_TILES),
                   ("rows", config.rows, MMA_ROWS if mma else ROWS), ("warps_n", config.warps_n, WARPS),
                   ("warps_k", config.warps_k, WARPS), ("unroll", config.unroll, UNROLL)),
                  f"for the {config.kind} kernel")  # fmt: skip
    if why is not None:
        return why
    if not mma and problem.m > SIMT_MAX_M:
        return f"M={problem.m}: the simt kernel serves 1..{SIMT_MAX_M} rows (the mma kernel serves more)"
    if problem.m > config.m_tile:
        return f"M={problem.m} rows do not fit m_tile={config.m_tile}"
    if config.warps > MAX_WARPS:
        return f"warps_n * warps_k = {config.warps} warps exceed {MAX_WARPS} per CTA"
    if not mma and config.rows * config.m_tile > MAX_ACC:
        return (f"rows * m_tile = {config.rows * config.m_tile} accumulators per lane exceed {MAX_ACC} "
                "(they would spill)")
    loads = 2 * (config.rows // 16) * config.unroll if mma else config.rows * config.unroll
    if loads > MAX_LOADS:
        return f"{loads} weight loads in flight per lane (rows, unroll) exceed {MAX_LOADS}"
    return None

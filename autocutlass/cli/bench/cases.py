"""``autocutlass bench``'s cases: a shapes file's problems, the operands each is run on, whether
torch has anything to compare it with, and the roofline it is judged against. Pure (no torch).

A case is memory-bound when its arithmetic intensity (flops / min_bytes) is below the ridge
point (compute roof / bandwidth roof); its headline is then TB/s (min_bytes / time), else TFLOP/s.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autocutlass.cli.shapes import load_cases
from autocutlass.ops.gemm.problem import DType, GemmProblem, Major

COMPUTE_ROOF_16BIT_TFLOPS = 790.0
"""Default dense bf16/fp16 compute roof (TFLOP/s); TF32's is half of it, e4m3's twice."""

_TORCH_DTYPE_NAMES = {DType.BF16: "bfloat16", DType.FP16: "float16", DType.TF32: "float32",
                      DType.FP32: "float32", DType.E4M3: "float8_e4m3fn"}  # fmt: skip

# ---- cases and operands ------------------------------------------------------------------------
@dataclass(frozen=True)
class OperandSpec:
    """How a case's operands are allocated: A @ B into a preallocated, row-major ``out``.

    A is ``a_storage`` contiguous, used as is (K contiguous) or, when ``a_transposed``, as its
    ``transpose(-1, -2)`` (M contiguous); likewise B: (K, N) as is, or a row-major (N, K) weight
    W used as ``W.t()`` (layout letter 't', as in x @ W.T). A leading L is the batch (L > 1)."""

    a_storage: tuple[int, ...]
    a_transposed: bool
    b_storage: tuple[int, ...]
    b_transposed: bool
    out_shape: tuple[int, ...]
    dtype: str
    """torch dtype name of A and B."""
    out_dtype: str
    tf32: bool
    """fp32 operands: run with torch's fp32 matmul precision 'tf32' (autocutlass serves them only then)."""

    @property
    def layout(self) -> str:
        return ("t" if self.a_transposed else "n") + ("t" if self.b_transposed else "n")

    def describe(self) -> str:
        a = f"A{_dims(self.a_storage)}" + (".t()" if self.a_transposed else "")
        b = f"W{_dims(self.b_storage)}.t()" if self.b_transposed else f"B{_dims(self.b_storage)}"
        return f"{a} @ {b} -> {self.out_dtype}{_dims(self.out_shape)}" + (" (tf32)" if self.tf32 else "")

    def as_dict(self) -> dict[str, Any]:
        return {"a_storage": list(self.a_storage), "a_transposed": self.a_transposed,
                "b_storage": list(self.b_storage), "b_transposed": self.b_transposed,
                "out_shape": list(self.out_shape), "dtype": self.dtype, "out_dtype": self.out_dtype,
                "tf32": self.tf32, "layout": self.layout}  # fmt: skip


def _dims(shape: Sequence[int]) -> str:
    return "(" + ",".join(str(s) for s in shape) + ")"


def operand_spec(problem: GemmProblem) -> OperandSpec:
    """The operands of ``problem`` (the layout of ``autocutlass.ops.gemm.evaluation.make_inputs``)."""
    m, n, k = problem.m, problem.n, problem.k
    batch = (problem.l,) if problem.l > 1 else ()
    a_t = problem.a_major is Major.COL
    b_t = problem.b_major is Major.COL
    return OperandSpec(
        a_storage=batch + ((k, m) if a_t else (m, k)),
        a_transposed=a_t,
        b_storage=batch + ((n, k) if b_t else (k, n)),
        b_transposed=b_t,
        out_shape=batch + (m, n),
        dtype=_TORCH_DTYPE_NAMES[problem.a_dtype],
        out_dtype=_TORCH_DTYPE_NAMES[problem.d_dtype],
        tf32=problem.a_dtype is DType.TF32,
    )


def skip_reason(problem: GemmProblem) -> str | None:
    """Why a case cannot be benchmarked against torch.matmul at all, or None."""
    if min(problem.m, problem.n, problem.k, problem.l) == 0:
        return "empty problem (a zero dimension)"
    if problem.a_dtype is DType.E4M3:
        if (problem.a_major, problem.b_major) != (Major.ROW, Major.COL) or problem.l != 1:
            return "fp8 cases compare with torch._scaled_mm, which takes only 2-D row-major A and W.t() B ('nt')"
    elif problem.a_dtype not in (DType.BF16, DType.FP16, DType.TF32):
        return f"torch.matmul has no {problem.a_dtype.value} matmul to compare with"
    if not problem.epilogue.is_plain:
        return "bench compares plain matmuls; this case has an epilogue"
    return None


@dataclass(frozen=True)
class BenchCase:
    """One case of the shapes file: its name, GemmProblem and operands."""

    name: str
    problem: GemmProblem
    spec: OperandSpec

    @property
    def skip(self) -> str | None:
        return skip_reason(self.problem)


def bench_cases(path: str | Path, only: Sequence[str] | None = None) -> list[BenchCase]:
    """The cases of a shapes file (``autocutlass tune``'s format), optionally only those named.

    Raises ValueError naming the file for a malformed file or an unknown name."""
    return [BenchCase(c.name, c.problem, operand_spec(c.problem)) for c in load_cases(path, only)]

# ---- roofs and classification ------------------------------------------------------------------
@dataclass(frozen=True)
class Roofs:
    """The ceilings a case is judged against: dense compute per dtype and memory bandwidth."""

    bandwidth_tbps: float
    bandwidth_source: str
    tflops_16bit: float = COMPUTE_ROOF_16BIT_TFLOPS
    tflops_tf32: float = COMPUTE_ROOF_16BIT_TFLOPS / 2

    def compute_tflops(self, problem: GemmProblem) -> float:
        dt_ = problem.a_dtype
        if dt_ in (DType.TF32, DType.FP32):
            return self.tflops_tf32
        if dt_ is DType.E4M3:
            return 2 * self.tflops_16bit
        return self.tflops_16bit

    def ridge(self, problem: GemmProblem) -> float:
        """Arithmetic intensity (flop/byte) at which the compute and bandwidth roofs meet."""
        return self.compute_tflops(problem) / self.bandwidth_tbps

    def attainable_tflops(self, problem: GemmProblem) -> float:
        """The roofline: min(compute roof, bandwidth roof x intensity)."""
        return min(self.compute_tflops(problem), self.bandwidth_tbps * intensity(problem))

    def as_dict(self) -> dict[str, Any]:
        return {"compute_tflops": {"bf16": self.tflops_16bit, "fp16": self.tflops_16bit, "tf32": self.tflops_tf32,
                                   "e4m3": 2 * self.tflops_16bit},
                "bandwidth_tbps": self.bandwidth_tbps, "bandwidth_source": self.bandwidth_source}  # fmt: skip


def intensity(problem: GemmProblem) -> float:
    """Arithmetic intensity: flops per byte of the fewest bytes the GEMM must move."""
    return problem.flops / problem.min_bytes if problem.min_bytes else math.inf


def is_memory_bound(problem: GemmProblem, roofs: Roofs) -> bool:
    """True when the problem's intensity is below the ridge point (at the ridge: compute-bound)."""
    return intensity(problem) < roofs.ridge(problem)

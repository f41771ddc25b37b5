"""``autocutlass bench``'s cases: a shapes file's problems, the operands each is run on, whether
torch has anything to compare it with, and the roofline it is judged against. Pure (no torch).

GEMM cases run on ``OperandSpec`` operands (A @ B into a preallocated output), conv2d cases on
``ConvOperandSpec`` ones (channels_last x and filter; ``autocutlass.conv2d`` allocates y), grouped
GEMM cases on ``GroupedOperandSpec`` ones (x, the expert weights, the offsets of the case's
routing; ``autocutlass.grouped_mm`` allocates the output).

A case is memory-bound when its arithmetic intensity (flops / min_bytes) is below the ridge
point (compute roof / bandwidth roof); its headline is then TB/s (min_bytes / time), else TFLOP/s.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autocutlass.cli.shapes import Case, Skipped, load_shapes
from autocutlass.ops.base import OpProblem
from autocutlass.ops.conv.problem import ConvDirection, ConvProblem
from autocutlass.ops.gemm.problem import DType, GemmProblem, Major
from autocutlass.ops.grouped.problem import ROUTINGS, GroupedGemmProblem

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
class ConvOperandSpec:
    """How a conv2d case's operands are allocated: x (N, C, H, W) and the filter (K, C/groups, R, S),
    both channels_last, convolved into a new channels_last y (N, K, P, Q) (fprop); for dgrad dy
    (like y) and the filter into a new dx (like x); for wgrad dy and x into a new dw (like the
    filter). ``out_shape`` is the computed tensor's shape."""

    x_shape: tuple[int, int, int, int]
    w_shape: tuple[int, int, int, int]
    out_shape: tuple[int, int, int, int]
    stride: tuple[int, int]
    padding: tuple[int, int]
    dilation: tuple[int, int]
    groups: int
    dtype: str
    """torch dtype name of x and the filter."""
    out_dtype: str
    tf32: bool
    """fp32 operands: run with ``torch.backends.cudnn.allow_tf32`` (autocutlass serves them only then)."""
    direction: str = "fprop"
    y_shape: tuple[int, int, int, int] | None = None
    """The forward's output shape (dy's, for dgrad and wgrad); None for fprop (it is ``out_shape``)."""

    def describe(self) -> str:
        geo = f"stride {_dims(self.stride)} pad {_dims(self.padding)} dil {_dims(self.dilation)}"
        geo += f" groups {self.groups}" if self.groups != 1 else ""
        tail = " channels_last" + (" (tf32)" if self.tf32 else "")
        if self.direction == "dgrad":
            return f"dgrad: dy{_dims(self.y_shape or ())} * w{_dims(self.w_shape)} {geo} -> dx {self.out_dtype}{_dims(self.out_shape)}{tail}"
        if self.direction == "wgrad":
            return f"wgrad: dy{_dims(self.y_shape or ())} * x{_dims(self.x_shape)} {geo} -> dw {self.out_dtype}{_dims(self.out_shape)}{tail}"
        return f"x{_dims(self.x_shape)} * w{_dims(self.w_shape)} {geo} -> {self.out_dtype}{_dims(self.out_shape)}{tail}"

    def as_dict(self) -> dict[str, Any]:
        d = {"op": "conv2d", "x_shape": list(self.x_shape), "w_shape": list(self.w_shape),
             "out_shape": list(self.out_shape), "stride": list(self.stride), "padding": list(self.padding),
             "dilation": list(self.dilation), "groups": self.groups, "dtype": self.dtype,
             "out_dtype": self.out_dtype, "tf32": self.tf32, "memory_format": "channels_last"}  # fmt: skip
        if self.direction != "fprop":
            d["direction"] = self.direction
            d["y_shape"] = list(self.y_shape or ())
        return d


def conv_operand_spec(problem: ConvProblem) -> ConvOperandSpec:
    """The operands of a conv2d ``problem`` (those of ``autocutlass.ops.conv.evaluation.make_inputs``)."""
    p = problem
    x, w, y = (p.n, p.c, p.h, p.w), (p.k, p.c // p.groups, p.r, p.s), (p.n, p.k, p.p, p.q)
    out = {ConvDirection.FPROP: y, ConvDirection.DGRAD: x, ConvDirection.WGRAD: w}[p.direction]
    return ConvOperandSpec(
        x_shape=x, w_shape=w, out_shape=out,
        stride=(p.stride_h, p.stride_w), padding=(p.pad_h, p.pad_w), dilation=(p.dil_h, p.dil_w), groups=p.groups,
        dtype=_TORCH_DTYPE_NAMES[p.x_dtype], out_dtype=_TORCH_DTYPE_NAMES[p.y_dtype], tf32=p.x_dtype is DType.TF32,
        direction=p.direction.value, y_shape=None if p.direction is ConvDirection.FPROP else y,
    )  # fmt: skip


def conv_skip_reason(problem: ConvProblem) -> str | None:
    """Why a conv2d case cannot be benchmarked against cuDNN at all, or None."""
    if min(problem.n, problem.c, problem.k, problem.p, problem.q) <= 0:
        return "empty problem (a zero dimension)"
    if problem.x_dtype not in (DType.BF16, DType.FP16, DType.TF32):
        return f"F.conv2d has no {problem.x_dtype.value} convolution to compare with"
    if not problem.epilogue.is_plain:
        return "bench compares plain convolutions; this case has an epilogue"
    return None


@dataclass(frozen=True)
class GroupedOperandSpec:
    """How a grouped case's operands are allocated (``ops.grouped.evaluation.make_inputs``): x
    (T, K); the weights stored (E, N, K) and used as ``w.transpose(-2, -1)`` (``w_transposed``) or
    stored (E, K, N); int32 offsets of ``routing`` (``ops.grouped.evaluation.offsets``, seed 0);
    ``autocutlass.grouped_mm`` allocates the (T, N) output."""

    x_shape: tuple[int, int]
    w_storage: tuple[int, int, int]
    w_transposed: bool
    out_shape: tuple[int, int]
    routing: str
    dtype: str
    out_dtype: str
    tf32: bool = False

    def describe(self) -> str:
        w = f"W{_dims(self.w_storage)}" + (".transpose(-2,-1)" if self.w_transposed else "")
        return f"grouped x{_dims(self.x_shape)} @ {w}, {self.routing} routing -> {self.out_dtype}{_dims(self.out_shape)}"

    def as_dict(self) -> dict[str, Any]:
        return {"op": "grouped_mm", "x_shape": list(self.x_shape), "w_storage": list(self.w_storage),
                "w_transposed": self.w_transposed, "out_shape": list(self.out_shape), "routing": self.routing,
                "dtype": self.dtype, "out_dtype": self.out_dtype, "tf32": self.tf32}  # fmt: skip


def grouped_operand_spec(problem: GroupedGemmProblem, routing: str | None = None) -> GroupedOperandSpec:
    """The operands of a grouped ``problem`` under ``routing`` (balanced when None)."""
    p = problem
    transposed = p.w_major is Major.COL
    return GroupedOperandSpec(
        x_shape=(p.t, p.k), w_storage=(p.experts, p.n, p.k) if transposed else (p.experts, p.k, p.n),
        w_transposed=transposed, out_shape=(p.t, p.n), routing=routing or ROUTINGS[0],
        dtype=_TORCH_DTYPE_NAMES[p.x_dtype], out_dtype=_TORCH_DTYPE_NAMES[p.out_dtype],
    )  # fmt: skip


def grouped_skip_reason(problem: GroupedGemmProblem) -> str | None:
    """Why a grouped case cannot be benchmarked against torch._grouped_mm at all, or None."""
    if min(problem.experts, problem.t, problem.n, problem.k) == 0:
        return "empty problem (a zero dimension)"
    if problem.x_dtype is not DType.BF16 or problem.out_dtype is not DType.BF16:
        return "torch._grouped_mm's fast path multiplies bfloat16 only; bench compares bf16 cases"
    if not problem.epilogue.is_plain:
        return "bench compares plain grouped GEMMs; this case has an epilogue"
    return None


Spec = OperandSpec | ConvOperandSpec | GroupedOperandSpec


def spec_for(problem: OpProblem, routing: str | None = None) -> Spec:
    """The operands of a GEMM, conv2d or grouped problem (``routing``: a grouped case's)."""
    if isinstance(problem, ConvProblem):
        return conv_operand_spec(problem)
    if isinstance(problem, GroupedGemmProblem):
        return grouped_operand_spec(problem, routing)
    return operand_spec(problem)  # type: ignore[arg-type]


@dataclass(frozen=True)
class BenchCase:
    """One case of the shapes file: its name, problem (``GemmProblem`` or ``ConvProblem``) and operands."""

    name: str
    problem: Any
    spec: Spec

    @property
    def op(self) -> str:
        return str(self.problem.op)

    @property
    def skip(self) -> str | None:
        if isinstance(self.problem, ConvProblem):
            return conv_skip_reason(self.problem)
        if isinstance(self.problem, GroupedGemmProblem):
            return grouped_skip_reason(self.problem)
        return skip_reason(self.problem)


@dataclass(frozen=True)
class BenchSuite:
    """The cases of a shapes file, and the conv directions it lists that are not measured."""

    cases: list[BenchCase]
    skipped: list[Skipped]


def bench_suite(path: str | Path, only: Sequence[str] | None = None) -> BenchSuite:
    """The cases of a shapes file (``autocutlass tune``'s format), optionally only those named.

    Raises ValueError naming the file for a malformed file or an unknown name."""
    shapes = load_shapes(path, only)
    return BenchSuite([bench_case(c) for c in shapes.cases], shapes.skipped)


def bench_case(case: Case) -> BenchCase:
    return BenchCase(case.name, case.problem, spec_for(case.problem, case.routing))


def bench_cases(path: str | Path, only: Sequence[str] | None = None) -> list[BenchCase]:
    """The cases of ``bench_suite(path, only)``."""
    return bench_suite(path, only).cases


# ---- roofs and classification ------------------------------------------------------------------
@dataclass(frozen=True)
class Roofs:
    """The ceilings a case is judged against: dense compute per dtype and memory bandwidth."""

    bandwidth_tbps: float
    bandwidth_source: str
    tflops_16bit: float = COMPUTE_ROOF_16BIT_TFLOPS
    tflops_tf32: float = COMPUTE_ROOF_16BIT_TFLOPS / 2

    def compute_tflops(self, problem: OpProblem) -> float:
        dt_ = input_dtype(problem)
        if dt_ in (DType.TF32, DType.FP32):
            return self.tflops_tf32
        if dt_ is DType.E4M3:
            return 2 * self.tflops_16bit
        return self.tflops_16bit

    def ridge(self, problem: OpProblem) -> float:
        """Arithmetic intensity (flop/byte) at which the compute and bandwidth roofs meet."""
        return self.compute_tflops(problem) / self.bandwidth_tbps

    def attainable_tflops(self, problem: OpProblem, nbytes: int | None = None) -> float:
        """The roofline: min(compute roof, bandwidth roof x intensity) (of ``nbytes`` moved when given)."""
        return min(self.compute_tflops(problem), self.bandwidth_tbps * intensity(problem, nbytes))

    def as_dict(self) -> dict[str, Any]:
        return {"compute_tflops": {"bf16": self.tflops_16bit, "fp16": self.tflops_16bit, "tf32": self.tflops_tf32,
                                   "e4m3": 2 * self.tflops_16bit},
                "bandwidth_tbps": self.bandwidth_tbps, "bandwidth_source": self.bandwidth_source}  # fmt: skip


def input_dtype(problem: OpProblem) -> DType:
    """The dtype the tensor cores read: A's for a GEMM, x's for a convolution or a grouped GEMM."""
    if isinstance(problem, ConvProblem | GroupedGemmProblem):
        return problem.x_dtype
    return problem.a_dtype  # type: ignore[attr-defined,no-any-return]


def intensity(problem: OpProblem, nbytes: int | None = None) -> float:
    """Arithmetic intensity: flops per byte of the fewest bytes the problem must move (or of
    ``nbytes``: a grouped case's bytes under its routing, ``Measured.bytes_moved``)."""
    nbytes = problem.min_bytes if nbytes is None else nbytes
    return problem.flops / nbytes if nbytes else math.inf


def is_memory_bound(problem: OpProblem, roofs: Roofs, nbytes: int | None = None) -> bool:
    """True when the problem's intensity is below the ridge point (at the ridge: compute-bound)."""
    return intensity(problem, nbytes) < roofs.ridge(problem)

"""The fingerprint of a grouped GEMM (``torch._grouped_mm`` semantics): ``GroupedGemmProblem``.

Pure Python. A mixture-of-experts layer multiplies the rows routed to each expert by that
expert's weight: x (T, K) with rows sorted by expert, w (E, K, N) (``w_major`` ROW, N
contiguous) or the transposed view of an (E, N, K) weight (COL, K contiguous), ``offs`` the E
cumulative row ends, out (T, N). Which rows go to which expert is data (``offs`` on the GPU),
never part of the fingerprint: a new routing of the same shapes is the same problem.

**Bucket rule** (``GroupedGemmProblem.bucket``): the total token count T varies at run time (the
batch); it is rounded up to a power of two (at least 16). E, N, K, dtypes, layouts, alignments
and the epilogue are fixed by the layer and stay exact. ``neighbour_key`` drops T; the nearest
tuned T (log2 distance, ties to the larger) serves a bucket never tuned.

``ROUTINGS`` names the routings the evaluation and the benchmark can build (``evaluation.offsets``);
like any routing, they are inputs of a problem, not part of it.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import ClassVar

from autocutlass.ops.gemm.problem import bucket_pow2
from autocutlass.ops.types import (
    DType,
    Epilogue,
    Major,
    ProblemFields,
    check_alignments,
    check_dims,
)


ROUTINGS = ("balanced", "skewed", "empty-even", "one-expert")
"""How the T rows are spread over the E experts (``ops.grouped.evaluation.expert_sizes``):
T // E each; Zipf(1.2) sizes (seeded); every even expert empty; all rows to one expert."""


@dataclass(frozen=True)
class GroupedGemmProblem(ProblemFields):
    """One grouped GEMM call's fingerprint; see the module docstring."""

    experts: int
    t: int
    n: int
    k: int
    x_dtype: DType = DType.BF16
    w_dtype: DType = DType.BF16
    out_dtype: DType = DType.BF16
    acc_dtype: DType = DType.FP32
    w_major: Major = Major.ROW
    align_x: int = 16
    align_w: int = 16
    align_out: int = 16
    epilogue: Epilogue = field(default_factory=Epilogue)

    op: ClassVar[str] = "grouped_mm"
    RUNTIME_DIMS: ClassVar[tuple[str, ...]] = ("t",)

    def __post_init__(self) -> None:
        for name in ("x_dtype", "w_dtype", "out_dtype", "acc_dtype"):
            object.__setattr__(self, name, DType(getattr(self, name)))
        object.__setattr__(self, "w_major", Major(self.w_major))
        check_dims(self, ("experts", "t", "n", "k"), minimum=0)
        check_alignments(self, ("align_x", "align_w", "align_out"))

    @property
    def flops(self) -> int:
        return 2 * self.t * self.n * self.k

    @property
    def min_bytes(self) -> int:
        """x and out once, and every expert's weight once (routing may leave some unread)."""
        return (self.t * self.k * self.x_dtype.bytes + self.experts * self.k * self.n * self.w_dtype.bytes
                + self.t * self.n * self.out_dtype.bytes)  # fmt: skip

    def bucket(self) -> GroupedGemmProblem:
        return dataclasses.replace(self, t=bucket_pow2(self.t, floor=16))

    def neighbour_distance(self, other: GroupedGemmProblem) -> tuple[float, int]:
        return (abs(math.log2(max(self.t, 1)) - math.log2(max(other.t, 1))), -other.t)

    def dims(self) -> dict[str, int]:
        return {"experts": self.experts, "t": self.t, "n": self.n, "k": self.k}

    def kernel_class_key(self) -> str:
        return self._class_key("experts", "t", "n", "k")

    def describe(self) -> str:
        """'grouped_mm 128 experts T=8192 N=768 K=2048 bf16 w row'."""
        return (f"grouped_mm {self.experts} experts T={self.t} N={self.n} K={self.k} {self.x_dtype.value}"
                f" w {self.w_major.value}")  # fmt: skip

"""The fingerprint of a GEMM call: a frozen ``GemmProblem``, its canonical key and its bucket.

Pure Python, no CUDA, no torch. Everything that changes which kernel is best, or whether a
compiled kernel can serve the call, is a typed field here; nothing else is.

Conventions (the CUTLASS ones, spelled in torch terms):

* D[l] = activation(alpha * A[l] @ B[l] + beta * C[l] + bias) with A (M, K), B (K, N),
  C and D (M, N), batched over L. A SwiGLU epilogue (``Epilogue.swiglu``) keeps N the GEMM's
  (the packed weight's 2I rows, gate then up) and writes D (M, N/2).
* ``a_major`` is ROW when A's K dimension is contiguous (a plain row-major (M, K) tensor) and
  COL when M is contiguous (``a.t()`` of a row-major (K, M) tensor). ``b_major`` is ROW when N
  is contiguous (a plain (K, N) tensor, ``a @ b``) and COL when K is contiguous (``x @ W.T``
  with W an (N, K) row-major weight, i.e. F.linear). D and C are row-major (N contiguous).
* alignment: the largest power of two in bytes, at most 16, that divides the base pointer's
  address and every non-unit stride of the operand (in bytes). TMA needs 16.

**Bucket rule** (``GemmProblem.bucket``): M is rounded up to the next power of two, with a floor of
16, up to 256, and above that to a multiple of a quarter of the power of two below it (257..320 ->
320, 4097..5120 -> 5120: four buckets per octave, ``bucket_m``); N, K, L, dtypes, layouts,
alignments and epilogue stay exact. The M dimension is the one that
varies at run time (tokens in a batch), while N and K are fixed by the weights, so a config tuned
for (N, K, M-bucket) serves every M in that bucket. ``neighbour_key`` drops M entirely: the
database uses it to find the nearest tuned M when the bucket itself was never tuned.

**Key stability**: ``key()`` is a canonical JSON text built from field values (sorted keys, no
whitespace, enum values as plain strings, version-prefixed). It never uses ``hash()``, ``repr()``
or ``str()`` of an object, so it is identical across processes, platforms and Python versions.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

from autocutlass.ops.types import (
    VALID_ALIGNMENTS,
    Activation,
    DType,
    Epilogue,
    Major,
    ProblemFields,
    check_alignments,
    check_dims,
)

__all__ = ["VALID_ALIGNMENTS", "Activation", "DType", "Epilogue", "GemmProblem", "Major", "bucket_m", "bucket_pow2", "problem_from_case"]  # fmt: skip


@dataclass(frozen=True)
class GemmProblem(ProblemFields):
    """One GEMM call's fingerprint."""

    m: int
    n: int
    k: int
    l: int = 1
    a_dtype: DType = DType.BF16
    b_dtype: DType = DType.BF16
    c_dtype: DType | None = None
    d_dtype: DType = DType.BF16
    acc_dtype: DType = DType.FP32
    a_major: Major = Major.ROW
    b_major: Major = Major.ROW
    align_a: int = 16
    align_b: int = 16
    align_c: int = 16
    align_d: int = 16
    epilogue: Epilogue = field(default_factory=Epilogue)

    op: ClassVar[str] = "gemm"
    """The op's name in keys and in the tuning database (``autocutlass.ops.registry``)."""
    RUNTIME_DIMS: ClassVar[tuple[str, ...]] = ("m",)
    NEIGHBOUR_TAG: ClassVar[str] = "family"  # the single-op releases' tag: stored keys stay identical

    def __post_init__(self) -> None:
        check_dims(self, ("m", "n", "k", "l"), minimum=0)
        check_alignments(self, ("align_a", "align_b", "align_c", "align_d"))
        # Coerce strings to enums so that GemmProblem(a_dtype="bf16") and from_dict() agree.
        for name in ("a_dtype", "b_dtype", "d_dtype", "acc_dtype"):
            object.__setattr__(self, name, DType(getattr(self, name)))
        if self.c_dtype is not None:
            object.__setattr__(self, "c_dtype", DType(self.c_dtype))
        object.__setattr__(self, "a_major", Major(self.a_major))
        object.__setattr__(self, "b_major", Major(self.b_major))
        if self.epilogue.with_c and self.c_dtype is None:
            raise ValueError("GemmProblem: epilogue.with_c needs c_dtype")

    # ---- bucketing -----------------------------------------------------------------------
    def bucket(self) -> GemmProblem:
        """The representative of this problem's bucket: M rounded up (see module docstring)."""
        return dataclasses.replace(self, m=bucket_m(self.m))

    def neighbour_distance(self, other: GemmProblem) -> tuple[float, int]:
        """Sort key of a neighbour ``other`` as a stand-in for this problem, smallest first:
        the log2 distance of the two M, then the larger M (a tile tuned for more rows wastes
        less on fewer than the other way round)."""
        return (abs(math.log2(max(self.m, 1)) - math.log2(max(other.m, 1))), -other.m)

    def dims(self) -> dict[str, int]:
        """The op's dimensions, as the database indexes them."""
        return {"m": self.m, "n": self.n, "k": self.k, "l": self.l}

    def kernel_class_key(self) -> str:
        """Everything a compiled kernel is specialised on: no M, N, K or L (they are symbolic),
        but whether L > 1 (batched operands have rank 3, and runners are compiled per rank)."""
        return self._class_key("m", "n", "k", "l", batched=self.l > 1)

    # ---- derived quantities --------------------------------------------------------------
    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k * self.l

    @property
    def d_cols(self) -> int:
        """D's columns: N, or N/2 with a SwiGLU epilogue (gate and up columns make one output)."""
        return self.n // 2 if self.epilogue.swiglu else self.n

    @property
    def min_bytes(self) -> int:
        """Fewest bytes a GEMM must move: A, B and D once each (C and bias if read)."""
        b = self.l * (
            self.m * self.k * self.a_dtype.bytes
            + self.k * self.n * self.b_dtype.bytes
            + self.m * self.d_cols * self.d_dtype.bytes
        )
        if self.epilogue.with_c and self.c_dtype is not None:
            b += self.l * self.m * self.n * self.c_dtype.bytes
        return b

    def describe(self) -> str:
        """A short human label: 'gemm 8192x6144x4096 bf16 row/col'."""
        batch = f"{self.l}x" if self.l != 1 else ""
        return (
            f"{self.op} {batch}{self.m}x{self.n}x{self.k} {self.a_dtype.value}"
            f" {self.a_major.value}/{self.b_major.value}" + (" swiglu" if self.epilogue.swiglu else "")
        )


def bucket_pow2(v: int, *, floor: int) -> int:
    """``v`` rounded up to a power of two, at least ``floor`` (a power of two)."""
    if v <= floor:
        return floor
    return 1 << (v - 1).bit_length()


M_FINE_ABOVE = 256
"""Above this M, buckets are a quarter of an octave wide (``bucket_m``)."""


def bucket_m(m: int) -> int:
    """M's bucket: up to ``M_FINE_ABOVE``, M rounded up to a power of two (at least 16); above it,
    rounded up to a multiple of a quarter of the power of two below it (4097..5120 -> 5120,
    5121..6144 -> 6144, ...), since there the number of M tiles, and with it how full the last
    wave of tiles is, decides which config wins: a config tuned for M = 8192 runs M = 4097 with a
    nearly empty last wave (H100, 2026-11-25: x0.68 of cuBLAS, 4097x4096x4096)."""
    if m <= M_FINE_ABOVE:
        return bucket_pow2(m, floor=16)
    step = (1 << ((m - 1).bit_length() - 1)) // 4
    return -(-m // step) * step


LAYOUT_LETTERS = {"n": Major.ROW, "t": Major.COL}
"""shapes.json layout letters: first letter for A, second for B. 'nn' = a @ b (both row-major);
'nt' = x @ W.T (B is K-contiguous)."""


def problem_from_case(case: dict[str, Any]) -> GemmProblem:
    """A ``GemmProblem`` from one case of the benchmark-suite format (``../shared/bench/shapes.json``)."""
    dt = DType(case["dtype"])
    layout = case.get("layout", "nn")
    if len(layout) != 2 or any(ch not in LAYOUT_LETTERS for ch in layout):
        raise ValueError(f"case {case.get('name')!r}: layout must be two letters of 'n'/'t', got {layout!r}")
    a_dtype = b_dtype = dt
    d_dtype = dt
    if dt is DType.FP32:
        # fp32 inputs are computed through tf32 tensor cores, output fp32.
        a_dtype = b_dtype = DType.TF32
        d_dtype = DType.FP32
    elif dt is DType.E4M3:
        # fp8 inputs (per-tensor scales, as torch._scaled_mm), bf16 output.
        d_dtype = DType.BF16
    return GemmProblem(
        m=int(case["M"]),
        n=int(case["N"]),
        k=int(case["K"]),
        l=int(case.get("L", 1)),
        a_dtype=a_dtype,
        b_dtype=b_dtype,
        d_dtype=d_dtype,
        a_major=LAYOUT_LETTERS[layout[0]],
        b_major=LAYOUT_LETTERS[layout[1]],
    )

"""Comparison of a kernel's output with a reference, shared by every op's evaluation.

Device-agnostic (CUDA tensors in the benchmark worker, CPU tensors in the unit tests). An output
is accepted when it is finite, its relative Frobenius error is below the tolerance, and no
single element is off by more than ``ELEMENT_RTOL_FACTOR * tol * |ref| + ELEMENT_ATOL_FACTOR *
tol * rms(ref)`` (a few wrong elements hide in a Frobenius norm of millions).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

import torch

from autocutlass.ops.types import Activation, DType

TORCH_DTYPES: dict[DType, torch.dtype] = {
    DType.BF16: torch.bfloat16,
    DType.FP16: torch.float16,
    DType.FP32: torch.float32,
    DType.TF32: torch.float32,
    DType.E4M3: torch.float8_e4m3fn,
}

REL_FROBENIUS_TOL: dict[DType, float] = {
    DType.BF16: 1e-2,
    DType.FP16: 5e-3,
    DType.TF32: 5e-3,
    DType.FP32: 1e-5,
    DType.E4M3: 1e-2,
}
"""Largest relative Frobenius error accepted, per dtype. The tolerance of a problem is the
largest over its operand and output dtypes (the coarsest rounding in the computation)."""

ELEMENT_RTOL_FACTOR = 4.0
ELEMENT_ATOL_FACTOR = 2.0


def torch_dtype(dt: DType) -> torch.dtype:
    return TORCH_DTYPES[dt]


def coarsest_tolerance(*dtypes: DType) -> float:
    """The tolerance of a computation through ``dtypes``: the coarsest of theirs."""
    return max(REL_FROBENIUS_TOL[d] for d in dtypes)


@contextlib.contextmanager
def fp32_matmul_precision(precision: str) -> Iterator[None]:
    """Temporarily set torch's CUDA fp32 matmul precision ('ieee' or 'tf32')."""
    matmul = torch.backends.cuda.matmul
    old = matmul.fp32_precision
    matmul.fp32_precision = precision
    try:
        yield
    finally:
        matmul.fp32_precision = old


def activation_ref(x: torch.Tensor, act: Activation) -> torch.Tensor:
    if act is Activation.NONE:
        return x
    if act is Activation.RELU:
        return torch.relu(x)
    if act is Activation.GELU:
        return torch.nn.functional.gelu(x, approximate="none")
    if act is Activation.GELU_TANH:
        return torch.nn.functional.gelu(x, approximate="tanh")
    if act is Activation.SILU:
        return torch.nn.functional.silu(x)
    raise ValueError(f"no reference for activation {act!r}")


def compare(out: torch.Tensor, ref: torch.Tensor, tol: float, label: str) -> tuple[bool, str | None]:
    """(True, None) when ``out`` matches ``ref`` within ``tol`` (see the module docstring), else
    (False, why); ``label`` names the output's dtype in the reason."""
    d = out
    if d.shape != ref.shape:
        return False, f"output shape {tuple(d.shape)} != reference shape {tuple(ref.shape)}"
    if not bool(torch.isfinite(ref).all()):  # an inf in the norms below would let any output pass
        return False, "the reference has NaN/Inf elements: the inputs overflow this check; nothing can be verified"
    df = d.float()
    finite = torch.isfinite(df)
    if not bool(finite.all()):
        bad = int((~finite).sum())
        first = tuple(int(i) for i in (~finite).nonzero()[0].tolist())
        return False, f"{bad} of {d.numel()} output elements are NaN/Inf (first at index {first}): unwritten or overflowed"
    ref_norm = float(torch.linalg.vector_norm(ref))
    err = df - ref
    err_norm = float(torch.linalg.vector_norm(err))
    scale = ref_norm if ref_norm > 0 else 1.0
    rel = err_norm / scale
    if rel >= tol:
        return False, f"relative Frobenius error {rel:.3e} >= tolerance {tol:.1e} ({label} output)"
    rms = scale / math.sqrt(max(ref.numel(), 1))
    limit = ELEMENT_RTOL_FACTOR * tol * ref.abs() + ELEMENT_ATOL_FACTOR * tol * rms
    over = err.abs() > limit
    if bool(over.any()):
        n_over = int(over.sum())
        idx = tuple(int(i) for i in over.nonzero()[0].tolist())
        return False, (
            f"{n_over} output elements exceed the element-wise tolerance (first at {idx}: "
            f"got {float(df[idx]):.6g}, expected {float(ref[idx]):.6g}); relative Frobenius error {rel:.3e}"
        )
    return True, None


def _synchronize(t: torch.Tensor) -> None:
    if t.is_cuda:
        torch.cuda.synchronize(t.device)




def synchronize(t: torch.Tensor) -> None:
    """Wait for ``t``'s device (CUDA) to finish its work."""
    if t.is_cuda:
        torch.cuda.synchronize(t.device)

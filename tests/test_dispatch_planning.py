"""validate.plan: which calls become which GemmProblem (layouts, alignment, folding, buckets), which
fall back and why, and which raise. CPU tensors stand in for GPU ones through the Context seam."""

from __future__ import annotations

import pytest
import torch

from _dispatch_fakes import device_info
from autocutlass.ops.gemm.problem import Activation, DType, Major
from autocutlass.ops.gemm.frontend import Call, Context, KernelPlan, Op, Unsupported, plan

BF = torch.bfloat16


def ctx(*, grad: bool = False, tf32: bool = True, cc: tuple[int, int] = (9, 0), gpu: bool = True) -> Context:
    return Context(on_gpu=lambda t: gpu, device_info=lambda i: device_info(cc), grad=grad, tf32=tf32)


def t(*shape: int, dtype: torch.dtype = BF) -> torch.Tensor:
    return torch.randn(*shape).to(dtype)


def kernel(call: Call, **kw) -> KernelPlan:  # noqa: ANN003
    p = plan(call, ctx(**kw))
    assert isinstance(p, KernelPlan), p
    return p


def unsupported(call: Call, **kw) -> str:  # noqa: ANN003
    p = plan(call, ctx(**kw))
    assert isinstance(p, Unsupported), p
    return p.reason


# ---- layouts -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("ta", "tb", "a_major", "b_major"),
    [(False, False, Major.ROW, Major.ROW), (False, True, Major.ROW, Major.COL),
     (True, False, Major.COL, Major.ROW), (True, True, Major.COL, Major.COL)],
)  # fmt: skip
def test_matmul_four_layouts(ta: bool, tb: bool, a_major: Major, b_major: Major) -> None:
    a = t(64, 32).t() if ta else t(32, 64)
    b = t(48, 64).t() if tb else t(64, 48)
    p = kernel(Call(Op.MATMUL, a, b))
    pr = p.problem
    assert (pr.m, pr.n, pr.k, pr.l) == (32, 48, 64, 1)
    assert (pr.a_major, pr.b_major) == (a_major, b_major)
    assert (pr.align_a, pr.align_b, pr.align_d) == (16, 16, 16)
    assert p.a is None and p.b is None and p.d is None  # no views needed: passed as they are
    assert p.out_shape == (32, 48)


def test_problem_conventions_for_dtypes() -> None:
    pr = kernel(Call(Op.MATMUL, t(32, 64, dtype=torch.float16), t(64, 48, dtype=torch.float16))).problem
    assert (pr.a_dtype, pr.b_dtype, pr.d_dtype, pr.c_dtype) == (DType.FP16, DType.FP16, DType.FP16, None)
    pr = kernel(Call(Op.MATMUL, t(32, 64, dtype=torch.float32), t(64, 48, dtype=torch.float32))).problem
    assert (pr.a_dtype, pr.b_dtype, pr.d_dtype) == (DType.TF32, DType.TF32, DType.FP32)


def test_fp32_needs_torch_to_allow_tf32() -> None:
    reason = unsupported(Call(Op.MATMUL, t(32, 64, dtype=torch.float32), t(64, 48, dtype=torch.float32)), tf32=False)
    assert "set_float32_matmul_precision('high')" in reason


def test_linear_passes_weight_t_and_flattens_x_without_copy() -> None:
    x, w = t(4, 8, 64), t(96, 64)
    p = kernel(Call(Op.LINEAR, x, w, bias=t(96), activation=Activation.GELU_TANH))
    pr = p.problem
    assert (pr.m, pr.n, pr.k, pr.l) == (32, 96, 64, 1)
    assert (pr.a_major, pr.b_major) == (Major.ROW, Major.COL)
    assert pr.epilogue.bias and pr.epilogue.activation is Activation.GELU_TANH and not pr.epilogue.with_c
    assert p.a is not None and p.a.shape == (32, 64) and p.a.stride == (64, 1) and not p.a.copy
    assert p.b is not None and p.b.shape == (64, 96) and p.b.stride == (1, 64)
    assert p.out_shape == (4, 8, 96) and p.d is not None and p.d.shape == (32, 96)


def test_linear_residual_is_a_row_major_c_of_the_result_folded_like_x() -> None:
    x, w, res = t(4, 8, 64), t(96, 64), t(4, 8, 96)
    p = kernel(Call(Op.LINEAR, x, w, c=res, bias=t(96), beta=1.0, activation=Activation.SILU))
    pr = p.problem
    assert pr.epilogue.with_c and pr.epilogue.bias and pr.epilogue.activation is Activation.SILU
    assert pr.c_dtype is DType.BF16 and pr.align_c == 16 and (pr.m, pr.n) == (32, 96)
    assert p.c is not None and p.c.shape == (32, 96) and p.c.stride == (96, 1)
    assert pr.key() != kernel(Call(Op.LINEAR, x, w, bias=t(96), activation=Activation.SILU)).problem.key()
    assert "broadcast" in unsupported(Call(Op.LINEAR, x, w, c=t(96), beta=1.0))
    assert "do not fold" in unsupported(Call(Op.LINEAR, x, w, c=t(8, 4, 96).transpose(0, 1), beta=1.0))
    assert "N-contiguous" in unsupported(Call(Op.LINEAR, t(32, 64), w, c=t(96, 32).t(), beta=1.0))


def test_linear_with_a_transposed_weight_is_b_row_major() -> None:
    assert kernel(Call(Op.LINEAR, t(16, 64), t(64, 96).t())).problem.b_major is Major.ROW


def test_linear_copies_x_only_when_leading_dims_do_not_merge() -> None:
    x = t(8, 4, 64).transpose(0, 1)  # (4, 8, 64), leading dims not mergeable, K contiguous
    p = kernel(Call(Op.LINEAR, x, t(96, 64)))
    assert p.a is not None and p.a.copy and p.a.shape == (32, 64)
    x2 = t(64, 8, 4).permute(2, 1, 0)  # K not contiguous and not mergeable
    assert "do not merge" in unsupported(Call(Op.LINEAR, x2, t(96, 64)))


# ---- batching and broadcasting --------------------------------------------------------------
def test_batched_3d_is_l_problem() -> None:
    p = kernel(Call(Op.MATMUL, t(4, 32, 64), t(4, 64, 48)))
    assert (p.problem.m, p.problem.n, p.problem.k, p.problem.l) == (32, 48, 64, 4)
    assert p.out_shape == (4, 32, 48) and p.d is None


def test_3d_a_over_2d_b_folds_batch_into_m() -> None:
    p = kernel(Call(Op.MATMUL, t(4, 32, 64), t(64, 48)))
    assert (p.problem.m, p.problem.l) == (128, 1)
    assert p.a is not None and p.a.shape == (128, 64)
    assert p.d is not None and p.d.shape == (128, 48) and p.out_shape == (4, 32, 48)


def test_3d_col_major_a_folds_when_batch_and_m_merge() -> None:
    a = t(64, 128).t().view(4, 32, 64)  # M contiguous across batches
    p = kernel(Call(Op.MATMUL, a, t(64, 48)))
    assert (p.problem.m, p.problem.a_major) == (128, Major.COL)


def test_unfoldable_3d_a_and_2d_a_over_3d_b_fall_back() -> None:
    a = t(4, 64, 32).transpose(1, 2)  # per-batch transposed: batch does not fold into M
    assert "does not fold" in unsupported(Call(Op.MATMUL, a, t(64, 48)))
    assert "2-D A broadcast" in unsupported(Call(Op.MATMUL, t(32, 64), t(4, 64, 48)))


def test_size_one_batch_is_dropped() -> None:
    p = kernel(Call(Op.MATMUL, t(1, 32, 64), t(1, 64, 48)))
    assert p.problem.l == 1 and p.out_shape == (1, 32, 48) and p.d is not None and p.d.shape == (32, 48)


def test_size_one_dims_get_tma_friendly_strides() -> None:
    a = t(1, 64).t().t()  # (1, 64); strides of a size-1 dim address nothing
    a = a.as_strided((1, 64), (1, 1))
    p = kernel(Call(Op.MATMUL, a, t(64, 48)))
    assert p.problem.m == 1 and p.problem.align_a == 16
    assert p.a is not None and p.a.stride[1] == 1 and p.a.stride[0] * 2 % 16 == 0
    odd_k = kernel(Call(Op.MATMUL, t(1, 60), t(60, 48)))  # a row of 120 bytes: its stride is padded
    assert odd_k.problem.align_a == 16 and odd_k.a is not None and odd_k.a.stride == (64, 1)


# ---- alignment class -------------------------------------------------------------------------
def test_alignment_class_from_pointer_and_strides() -> None:
    buf = t(32 * 64 + 8)
    a = buf[1 : 1 + 32 * 64].view(32, 64)  # base pointer 2 bytes past 16
    assert kernel(Call(Op.MATMUL, a, t(64, 48))).problem.align_a == 2
    a = buf[4 : 4 + 32 * 64].view(32, 64)
    assert kernel(Call(Op.MATMUL, a, t(64, 48))).problem.align_a == 8
    padded = t(32, 68)[:, :60]  # leading dimension 68 elements = 136 bytes -> 8
    assert kernel(Call(Op.MATMUL, padded, t(60, 48))).problem.align_a == 8
    odd_n = kernel(Call(Op.MATMUL, t(32, 64), t(64, 44))).problem  # N*2 = 88 bytes
    assert (odd_n.align_b, odd_n.align_d) == (8, 8)


# ---- gemm's C ----------------------------------------------------------------------------------
def test_gemm_c_only_read_when_beta_nonzero() -> None:
    a, b, c = t(32, 64), t(64, 48), t(32, 48)
    assert kernel(Call(Op.GEMM, a, b, c=c, beta=0.5)).problem.epilogue.with_c
    pr = kernel(Call(Op.GEMM, a, b, c=c, beta=0.0)).problem
    assert not pr.epilogue.with_c and pr.c_dtype is None


def test_gemm_broadcast_or_column_major_c_falls_back() -> None:
    a, b = t(32, 64), t(64, 48)
    assert "broadcast" in unsupported(Call(Op.GEMM, a, b, c=t(48), beta=1.0))
    assert "row-major" in unsupported(Call(Op.GEMM, a, b, c=t(48, 32).t(), beta=1.0))


# ---- bucketing decisions --------------------------------------------------------------------
@pytest.mark.parametrize(("m", "bucket"), [(1, 16), (16, 16), (17, 32), (100, 128), (128, 128), (129, 256), (4097, 5120)])
def test_m_bucket_of_planned_problem(m: int, bucket: int) -> None:
    pr = kernel(Call(Op.LINEAR, t(m, 64), t(96, 64))).problem
    assert pr.m == m and pr.bucket().m == bucket
    assert pr.neighbour_key() == kernel(Call(Op.LINEAR, t(1000, 64), t(96, 64))).problem.neighbour_key()


# ---- unsupported -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("call", "kw", "words"),
    [
        (lambda: Call(Op.MATMUL, t(32, 64), t(64, 48)), {"gpu": False}, "cpu"),
        (lambda: Call(Op.MATMUL, t(32, 64), t(64, 48)), {"cc": (8, 0)}, "cc 8.0"),
        (lambda: Call(Op.MATMUL, t(32, 64, dtype=torch.float64), t(64, 48, dtype=torch.float64)), {}, "float64"),
        (lambda: Call(Op.MATMUL, t(32, 64), t(64, 48)), {"grad": True}, "grad"),
        (lambda: Call(Op.MATMUL, t(0, 64), t(64, 48)), {}, "empty"),
        (lambda: Call(Op.MATMUL, t(32, 0), t(0, 48)), {}, "K = 0"),
        (lambda: Call(Op.MATMUL, t(64), t(64, 48)), {}, "1-D"),
        (lambda: Call(Op.MATMUL, t(2, 2, 32, 64), t(64, 48)), {}, "4-D"),
        (lambda: Call(Op.MATMUL, t(64, 64)[::2, ::2], t(32, 48)), {}, "no unit stride"),
        (lambda: Call(Op.MATMUL, t(1, 64).expand(32, 64), t(64, 48)), {}, "stride-0"),
        (lambda: Call(Op.MATMUL, t(32, 64), t(64, 48), out=t(48, 32).t()), {}, "out= is not contiguous"),
        (lambda: Call(Op.LINEAR, t(32, 64), t(96, 64), bias=t(192)[::2]), {}, "bias"),
        (lambda: Call(Op.LINEAR, t(32, 64), t(96, 64), bias=t(97)[1:]), {}, "aligned"),
    ],
)  # fmt: skip
def test_unsupported_reasons(call, kw, words: str) -> None:  # noqa: ANN001
    assert words in unsupported(call(), **kw)


# ---- errors --------------------------------------------------------------------------------
def test_shape_mismatch_raises_naming_both_shapes() -> None:
    with pytest.raises(RuntimeError, match=r"\(32, 64\).*\(63, 48\)"):
        plan(Call(Op.MATMUL, t(32, 64), t(63, 48)), ctx())
    with pytest.raises(RuntimeError, match=r"\(4, 32, 64\).*\(3, 64, 48\)"):
        plan(Call(Op.MATMUL, t(4, 32, 64), t(3, 64, 48)), ctx())
    with pytest.raises(RuntimeError, match=r"\(8, 64\).*\(96, 63\)"):
        plan(Call(Op.LINEAR, t(8, 64), t(96, 63)), ctx())


def test_errors_beat_fallback_decisions() -> None:
    """A CPU call with bad shapes raises; it is not 'unsupported'."""
    with pytest.raises(RuntimeError):
        plan(Call(Op.MATMUL, t(32, 64), t(63, 48)), ctx(gpu=False))


@pytest.mark.parametrize(
    ("out", "words"),
    [(lambda: t(32, 47), "shape"), (lambda: t(32, 48, dtype=torch.float16), "dtype"),
     (lambda: torch.empty(32, 48, dtype=BF, device="meta"), "meta")],
)  # fmt: skip
def test_bad_out_raises(out, words: str) -> None:  # noqa: ANN001
    with pytest.raises(RuntimeError, match=words):
        plan(Call(Op.MATMUL, t(32, 64), t(64, 48), out=out()), ctx())


def test_dtype_and_type_errors() -> None:
    with pytest.raises(RuntimeError, match="same dtype"):
        plan(Call(Op.MATMUL, t(32, 64), t(64, 48, dtype=torch.float16)), ctx())
    with pytest.raises(RuntimeError, match="bias has dtype"):
        plan(Call(Op.LINEAR, t(32, 64), t(96, 64), bias=t(96, dtype=torch.float32)), ctx())
    with pytest.raises(TypeError, match="torch.Tensor"):
        plan(Call(Op.MATMUL, [[1.0]], t(1, 2)), ctx())  # type: ignore[arg-type]

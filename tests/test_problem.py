"""GemmProblem keys are canonical and process-stable; the bucket rule is the documented one."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from autocutlass.ops.gemm.problem import (
    Activation,
    DType,
    Epilogue,
    Major,
    GemmProblem,
    bucket_m,
    problem_from_case,
)

P = GemmProblem(m=1000, n=4096, k=4096, b_major=Major.COL, epilogue=Epilogue(bias=True, activation=Activation.SILU))


def test_key_is_canonical_json_of_typed_fields() -> None:
    d = json.loads(P.key())
    assert d["m"] == 1000 and d["b_major"] == "col" and d["epilogue"]["activation"] == "silu"
    assert d["v"] == 1
    assert P.key() == GemmProblem.from_dict(P.as_dict()).key()


def test_key_same_in_another_process() -> None:
    code = (
        "from autocutlass.ops.gemm.problem import *;"
        "print(GemmProblem(m=1000,n=4096,k=4096,b_major=Major.COL,"
        "epilogue=Epilogue(bias=True,activation=Activation.SILU)).key())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONHASHSEED": "123", "PATH": ""} | {k: v for k, v in __import__("os").environ.items()})
    assert out.stdout.strip() == P.key()


def test_keys_differ_in_every_field() -> None:
    variants = [
        GemmProblem(m=1001, n=4096, k=4096),
        GemmProblem(m=1000, n=4096, k=4096, l=2),
        GemmProblem(m=1000, n=4096, k=4096, a_dtype=DType.FP16, b_dtype=DType.FP16),
        GemmProblem(m=1000, n=4096, k=4096, a_major=Major.COL),
        GemmProblem(m=1000, n=4096, k=4096, align_a=8),
        GemmProblem(m=1000, n=4096, k=4096, d_dtype=DType.FP32),
        GemmProblem(m=1000, n=4096, k=4096, epilogue=Epilogue(activation=Activation.RELU)),
    ]
    keys = {v.key() for v in variants} | {GemmProblem(m=1000, n=4096, k=4096).key()}
    assert len(keys) == len(variants) + 1


@pytest.mark.parametrize("m,b", [(1, 16), (16, 16), (17, 32), (100, 128), (128, 128), (129, 256), (256, 256), (257, 320),
                                 (320, 320), (321, 384), (511, 512), (512, 512), (2000, 2048), (3000, 3072),
                                 (4096, 4096), (4097, 5120), (5120, 5120), (6000, 6144), (7169, 8192), (8192, 8192),
                                 (8193, 10240)])  # fmt: skip
def test_bucket_rounds_m_up_to_power_of_two_then_quarter_octaves(m: int, b: int) -> None:
    assert bucket_m(m) == b
    assert GemmProblem(m=m, n=64, k=64).bucket().m == b


def test_bucket_and_neighbour_keys() -> None:
    a, b = GemmProblem(m=100, n=4096, k=4096), GemmProblem(m=120, n=4096, k=4096)
    assert a.key() != b.key() and a.bucket_key() == b.bucket_key()
    assert GemmProblem(m=300, n=4096, k=4096).bucket_key() != a.bucket_key()
    assert GemmProblem(m=300, n=4096, k=4096).neighbour_key() == a.neighbour_key()
    assert GemmProblem(m=300, n=4096, k=1024).neighbour_key() != a.neighbour_key()
    assert a.kernel_class_key() != GemmProblem(m=7, n=8, k=9, l=3).kernel_class_key()  # rank 3
    assert GemmProblem(m=1, n=2, k=3, l=2).kernel_class_key() == GemmProblem(m=7, n=8, k=9, l=3).kernel_class_key()


def test_validation_errors_name_the_field() -> None:
    with pytest.raises(ValueError, match="GemmProblem.m"):
        GemmProblem(m=-1, n=1, k=1)
    with pytest.raises(ValueError, match="align_b"):
        GemmProblem(m=1, n=1, k=1, align_b=3)
    with pytest.raises(ValueError, match="c_dtype"):
        GemmProblem(m=1, n=1, k=1, epilogue=Epilogue(with_c=True))


def test_problem_from_case_layouts() -> None:
    p = problem_from_case({"name": "x", "M": 16, "N": 6144, "K": 4096, "dtype": "bf16", "layout": "nt"})
    assert (p.a_major, p.b_major) == (Major.ROW, Major.COL)
    t = problem_from_case({"name": "t", "M": 8, "N": 8, "K": 8, "dtype": "fp32", "layout": "nn"})
    assert t.a_dtype is DType.TF32 and t.d_dtype is DType.FP32
    f = problem_from_case({"name": "f", "M": 8, "N": 8, "K": 32, "dtype": "e4m3", "layout": "nt"})
    assert f.a_dtype is f.b_dtype is DType.E4M3 and f.d_dtype is DType.BF16
    assert problem_from_case({"name": "b", "L": 32, "M": 8, "N": 8, "K": 8, "dtype": "bf16"}).l == 32
    with pytest.raises(ValueError, match="layout"):
        problem_from_case({"name": "bad", "M": 8, "N": 8, "K": 8, "dtype": "bf16", "layout": "nx"})

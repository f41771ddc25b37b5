"""Shapes files (``autocutlass.cli.shapes``): GEMM and conv2d cases (a problem per direction),
one-line errors naming the case and the field, and conv problems equal to what the
conv2d front-ends (forward and backward) plan for the same tensors (so that ``tune`` records what ``bench`` looks up)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from autocutlass.cli.shapes import SERVED_DIRECTIONS, Case, Shapes, is_conv_case, load_cases, load_shapes
from autocutlass.ops.conv.backward import CONV2D_DGRAD, CONV2D_WGRAD
from autocutlass.ops.conv.frontend import CONV2D, ConvPlan
from autocutlass.ops.conv.problem import ConvDirection, ConvProblem
from autocutlass.ops.gemm.problem import GemmProblem
from autocutlass.ops.types import DType, Major

REPO = Path(__file__).resolve().parents[1]
CONV_SUITE = REPO / "benchmarks" / "shapes-conv.json"

CONV = {"name": "c", "N": 2, "C": 64, "H": 10, "W": 12, "K": 32, "R": 3, "S": 3, "stride": [1, 1], "pad": [1, 1],
        "dilation": [1, 1], "dtype": "bf16", "directions": ["fprop", "dgrad", "wgrad"]}  # fmt: skip


def write(tmp_path: Path, cases: list[Any]) -> Path:
    f = tmp_path / "shapes.json"
    f.write_text(json.dumps({"cases": cases}))
    return f


# ---- the public conv suite ---------------------------------------------------------------------
def test_the_conv_suite_loads_as_problems_of_every_direction() -> None:
    shapes = load_shapes(CONV_SUITE)
    raw = json.loads(CONV_SUITE.read_text())["cases"]
    assert [c.name for c in shapes.cases] == [n for c in raw for n in (c["name"], c["name"] + "/dgrad", c["name"] + "/wgrad")]
    for i, src in enumerate(raw):
        directions = [c.problem.direction for c in shapes.cases[3 * i : 3 * i + 3]]
        assert directions == [ConvDirection.FPROP, ConvDirection.DGRAD, ConvDirection.WGRAD]
        for case in shapes.cases[3 * i : 3 * i + 3]:
            p = case.problem
            assert isinstance(p, ConvProblem)
            assert (p.n, p.c, p.h, p.w, p.k, p.r, p.s) == tuple(src[f] for f in ("N", "C", "H", "W", "K", "R", "S"))
            assert [p.stride_h, p.stride_w] == src["stride"] and [p.pad_h, p.pad_w] == src["pad"]
            assert [p.dil_h, p.dil_w] == src["dilation"] and p.groups == 1 and p.epilogue.is_plain
            assert p.x_dtype.value == p.w_dtype.value == p.y_dtype.value == src["dtype"]
    assert shapes.skipped == [] and load_cases(CONV_SUITE) == shapes.cases
    assert SERVED_DIRECTIONS == (ConvDirection.FPROP, ConvDirection.DGRAD, ConvDirection.WGRAD)


def test_the_stem_keeps_its_two_byte_channel_alignment() -> None:
    stem = next(c.problem for c in load_cases(CONV_SUITE) if c.name == "rn50-stem")
    assert (stem.c, stem.align_x, stem.align_w, stem.align_y) == (3, 2, 2, 16)  # 3 bf16 channels: 6-byte pixels


def test_only_selects_cases_with_their_directions_or_one_direction() -> None:
    shapes = load_shapes(CONV_SUITE, ["sd-640@32", "rn50-stem"])
    assert [c.name for c in shapes.cases] == ["rn50-stem", "rn50-stem/dgrad", "rn50-stem/wgrad", "sd-640@32",
                                              "sd-640@32/dgrad", "sd-640@32/wgrad"]  # fmt: skip
    one = load_shapes(CONV_SUITE, ["sd-640@32/wgrad"])
    assert [(c.name, c.problem.direction) for c in one.cases] == [("sd-640@32/wgrad", ConvDirection.WGRAD)]
    fwd = load_shapes(CONV_SUITE, ["sd-640@32/fprop", "rn50-stem/wgrad"])
    assert [(c.name, c.problem.direction) for c in fwd.cases] == [("rn50-stem/wgrad", ConvDirection.WGRAD),
                                                                 ("sd-640@32", ConvDirection.FPROP)]  # fmt: skip
    fprops = load_shapes(CONV_SUITE, ["*/fprop"])
    raw = json.loads(CONV_SUITE.read_text())["cases"]
    assert [c.name for c in fprops.cases] == [c["name"] for c in raw]
    mixed = load_shapes(CONV_SUITE, ["*/wgrad", "rn50-stem"])
    assert len(mixed.cases) == len(raw) + 2 and {c.problem.direction for c in mixed.cases if c.name != "rn50-stem"} \
        >= {ConvDirection.WGRAD}  # fmt: skip
    with pytest.raises(ValueError, match="no case named \\*/bprop"):
        load_shapes(CONV_SUITE, ["*/bprop"])
    with pytest.raises(ValueError, match="no case named nope"):
        load_shapes(CONV_SUITE, ["nope"])


# ---- conv cases --------------------------------------------------------------------------------
def test_conv_fields_and_defaults(tmp_path: Path) -> None:
    f = write(tmp_path, [
        {**CONV, "stride": 2, "pad": [1, 0], "dilation": [2, 1], "groups": 2, "dtype": "fp16", "directions": ["fprop"]},
        {"name": "plain", "N": 1, "C": 16, "H": 8, "W": 8, "K": 16, "R": 1, "S": 1, "dtype": "bf16"},
    ])  # fmt: skip
    shapes = load_shapes(f)
    c, plain = (x.problem for x in shapes.cases)
    assert (c.stride_h, c.stride_w, c.pad_h, c.pad_w, c.dil_h, c.dil_w, c.groups) == (2, 2, 1, 0, 2, 1, 2)
    assert c.x_dtype is c.w_dtype is c.y_dtype is DType.FP16 and not shapes.skipped
    assert (c.p, c.q) == ((10 + 2 - 2 * 2 - 1) // 2 + 1, (12 - 2 - 1) // 2 + 1)
    assert (plain.stride_h, plain.pad_h, plain.dil_h, plain.groups) == (1, 0, 1, 1) and plain.is_pointwise()
    assert plain.direction is ConvDirection.FPROP


def test_fp32_conv_runs_tf32_inputs_into_fp32(tmp_path: Path) -> None:
    case, *_ = load_cases(write(tmp_path, [{**CONV, "dtype": "fp32"}]))
    p = case.problem
    assert p.x_dtype is p.w_dtype is DType.TF32 and p.y_dtype is DType.FP32 and p.acc_dtype is DType.FP32
    assert (p.align_x, p.align_y) == (16, 16)


def test_a_case_of_backward_directions_only(tmp_path: Path) -> None:
    shapes = load_shapes(write(tmp_path, [{**CONV, "directions": ["wgrad"]}]), ["c"])
    assert [(c.name, c.problem.direction) for c in shapes.cases] == [("c/wgrad", ConvDirection.WGRAD)]
    assert shapes.skipped == []


def test_mixed_files_hold_gemm_and_conv_cases(tmp_path: Path) -> None:
    f = write(tmp_path, [{"name": "g", "M": 64, "N": 32, "K": 16, "dtype": "bf16", "layout": "nt"},
                         {**CONV, "directions": ["fprop"]}, {"M": 8, "N": 8, "K": 8, "dtype": "fp32"}])  # fmt: skip
    shapes = load_shapes(f)
    assert [(c.name, c.problem.op) for c in shapes.cases] == [("g", "gemm"), ("c", "conv2d"), ("case2", "gemm")]
    g = shapes.cases[0].problem
    assert isinstance(g, GemmProblem) and g.b_major is Major.COL and shapes.cases[2].problem.a_dtype is DType.TF32
    assert isinstance(shapes, Shapes) and isinstance(shapes.cases[0], Case)
    assert is_conv_case(CONV) and not is_conv_case({"M": 1, "N": 1, "K": 1})


# ---- errors: one line, naming the file, the case and the field ---------------------------------
@pytest.mark.parametrize(("change", "field", "says"), [
    ({"K": None}, "K", "expected an integer >= 1, got None"),
    ({"N": True}, "N", "expected an integer"),
    ({"C": "64"}, "C", "expected an integer"),
    ({"R": 0}, "R", ">= 1"),
    ({"stride": [1]}, "stride", "a pair [h, w]"),
    ({"stride": 0}, "stride", ">= 1"),
    ({"pad": [-1, 0]}, "pad", ">= 0"),
    ({"dilation": "2"}, "dilation", "got '2'"),
    ({"groups": 3}, "groups", "multiples of groups=3"),
    ({"dtype": "e4m3"}, "dtype", "expected one of bf16, fp16, fp32"),
    ({"directions": ["fwd"]}, "directions", "non-empty list"),
    ({"directions": []}, "directions", "non-empty list"),
    ({"directions": ["fprop", "fprop"]}, "directions", "twice"),
    ({"R": 13, "S": 13, "pad": [0, 0]}, "R", "the output would be -2x0"),
    ({"S": 15}, "S", "the output would be 10x0"),
])  # fmt: skip
def test_a_bad_conv_case_is_one_line_naming_case_and_field(tmp_path: Path, change: dict[str, Any], field: str,
                                                           says: str) -> None:  # fmt: skip
    good = {"name": "ok", "M": 8, "N": 8, "K": 8, "dtype": "bf16"}
    f = write(tmp_path, [good, {**CONV, "name": "bad", **change}])
    with pytest.raises(ValueError) as e:
        load_shapes(f)
    msg = str(e.value)
    assert msg.startswith(f"shapes file {f}, case 1 ('bad'): field {field!r}: ") and says in msg, msg
    assert "\n" not in msg


def test_a_missing_conv_field_is_named(tmp_path: Path) -> None:
    case = {k: v for k, v in CONV.items() if k != "S"}
    with pytest.raises(ValueError, match=r"case 0 \('c'\): field 'S': missing$"):
        load_shapes(write(tmp_path, [case]))
    with pytest.raises(ValueError, match=r"field 'dtype': missing"):
        load_shapes(write(tmp_path, [{k: v for k, v in CONV.items() if k != "dtype"}]))


@pytest.mark.parametrize(("case", "field"), [
    ({"name": "g", "M": 8, "N": 8, "dtype": "bf16"}, "K"),
    ({"name": "g", "M": -1, "N": 8, "K": 8, "dtype": "bf16"}, "M"),
    ({"name": "g", "M": 8, "N": 8, "K": 8, "L": 1.5, "dtype": "bf16"}, "L"),
    ({"name": "g", "M": 8, "N": 8, "K": 8, "dtype": "bf17"}, "dtype"),
])  # fmt: skip
def test_a_bad_gemm_case_names_its_field(tmp_path: Path, case: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=rf"case 0 \('g'\): field '{field}': "):
        load_shapes(write(tmp_path, [case]))


def test_a_bad_layout_and_a_case_that_is_not_an_object(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"case 0 \('g'\): .*layout must be two letters"):
        load_shapes(write(tmp_path, [{"name": "g", "M": 8, "N": 8, "K": 8, "dtype": "bf16", "layout": "nx"}]))
    with pytest.raises(ValueError, match=r"case 0 \('case0'\): TypeError: expected an object, got list"):
        load_shapes(write(tmp_path, [[1, 2]]))


# ---- the loader's problem is the front-end's ---------------------------------------------------
class _Hopper:
    """A PlanContext that puts every tensor on an sm_90 GPU (the plan only reads metadata)."""

    def on_gpu(self, t: Any) -> bool:
        return True

    def device_info(self, index: int) -> Any:
        return SimpleNamespace(cc_major=9, cc_minor=0, cc="9.0", gpu_name="NVIDIA H200")


def _planned(p: ConvProblem) -> ConvProblem:
    dt = {DType.BF16: torch.bfloat16, DType.FP16: torch.float16, DType.TF32: torch.float32}[p.x_dtype]
    cl = torch.channels_last
    x = torch.empty((p.n, p.c, p.h, p.w), dtype=dt, memory_format=cl)
    w = torch.empty((p.k, p.c // p.groups, p.r, p.s), dtype=dt, memory_format=cl)
    dy = torch.empty((p.n, p.k, p.p, p.q), dtype=dt, memory_format=cl)
    geo = ((p.stride_h, p.stride_w), (p.pad_h, p.pad_w), (p.dil_h, p.dil_w), p.groups)
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=True):
        if p.direction is ConvDirection.FPROP:
            plan = CONV2D.plan(CONV2D.make_call(x, w, None, *geo, None, None), _Hopper())
        elif p.direction is ConvDirection.DGRAD:
            plan = CONV2D_DGRAD.plan(CONV2D_DGRAD.make_call(dy, w, x.shape, *geo), _Hopper())
        else:
            plan = CONV2D_WGRAD.plan(CONV2D_WGRAD.make_call(dy, x, w.shape, *geo), _Hopper())
    assert isinstance(plan, ConvPlan), plan
    return plan.problem


@pytest.mark.parametrize("name", [c["name"] for c in json.loads(CONV_SUITE.read_text())["cases"]])
def test_suite_problems_equal_the_front_ends_plan(name: str) -> None:
    for case in load_cases(CONV_SUITE, [name]):
        planned = _planned(case.problem)
        assert planned == case.problem and planned.key() == case.problem.key(), case.name


@pytest.mark.parametrize("change", [{"dtype": "fp32"}, {"dtype": "fp16", "C": 12, "K": 20}, {"groups": 2},
                                    {"stride": [2, 1], "pad": [0, 2], "dilation": [1, 2]}])  # fmt: skip
def test_other_problems_equal_the_front_ends_plan(tmp_path: Path, change: dict[str, Any]) -> None:
    for case in load_cases(write(tmp_path, [{**CONV, **change}])):
        assert _planned(case.problem) == case.problem, case.name

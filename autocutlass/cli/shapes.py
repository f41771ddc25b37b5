"""Shapes files: the benchmark-suite format that ``autocutlass tune`` and ``autocutlass bench`` read.

``{"cases": [...]}`` (or the bare list); each case becomes a problem of its op, told apart by its
fields:

* **GEMM** ``{"name", "M", "N", "K", "L"?, "dtype", "layout"?}``
  (``autocutlass.ops.gemm.problem.problem_from_case``), e.g. ``benchmarks/shapes.json``.
* **conv2d**, any case with one of C, H, W, R, S: ``{"name", "N", "C", "H", "W", "K", "R", "S",
  "stride"?, "pad"?, "dilation"? (each an int or [h, w]; 1, 0, 1), "groups"? (1), "dtype",
  "directions"? (["fprop"])}``, e.g. ``benchmarks/shapes-conv.json``: x is (N, C, H, W) in
  channels_last, the filter (K, C/groups, R, S). dtype bf16 or fp16 (inputs and output), or fp32
  (TF32 inputs, fp32 output, as ``autocutlass.conv2d`` serves float32 tensors). Each listed
  direction (``SERVED_DIRECTIONS``: fprop, dgrad, wgrad) becomes a ``ConvProblem``: fprop named
  as the case, the others ``<name>/dgrad`` and ``<name>/wgrad`` (``--only <name>`` selects all of
  a case's directions, ``--only <name>/wgrad`` one (``<name>/fprop`` the forward alone), ``--only '*/wgrad'``
  every case's wgrad). A direction no kernel family computes is
  still a problem (``tune`` reports it unserved, ``bench`` times torch's fallback against cuDNN);
  ``Shapes.skipped`` lists directions left out (none today).

* **grouped GEMM** (``torch._grouped_mm``), any case with ``E``: ``{"name", "E", "T", "N", "K",
  "dtype", "routing"? ("balanced"), "w_layout"? ("nk")}``, e.g. ``benchmarks/shapes-grouped.json``:
  x (T, K) with rows sorted by expert, w (E, N, K) used as ``w.transpose(-2, -1)`` ("nk", the
  weight layout of MoE checkpoints) or (E, K, N) used as is ("kn"), offsets of the routing
  (``ops.grouped.problem.ROUTINGS``: how the rows are spread over the experts, which the problem
  leaves out: tune tunes the problem, bench runs the routing). dtype bf16 or fp16.

A conv case's ``ConvProblem`` is the one ``autocutlass.conv2d`` (and its backward,
``ops.conv.backward``) plans for fresh channels_last tensors of those shapes (no bias, no
residual): its alignments follow C and K as the front-ends' do, so what ``tune`` records is what
``bench`` (and a model) looks up; likewise a grouped case's ``GroupedGemmProblem`` is the one
``autocutlass.grouped_mm`` plans for fresh tensors.

Pure Python (no torch). A malformed case is a ``ValueError`` of one line naming the file, the
case (index and name) and the field.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autocutlass.ops.base import OpProblem
from autocutlass.ops.conv.problem import ConvDirection, ConvProblem
from autocutlass.ops.gemm.problem import problem_from_case
from autocutlass.ops.grouped.problem import ROUTINGS, GroupedGemmProblem
from autocutlass.ops.types import DType, Major

__all__ = ["CONV_FIELDS", "GROUPED_FIELDS", "SERVED_DIRECTIONS", "Case", "Shapes", "Skipped", "conv_case_name",
           "load_cases", "load_shapes"]  # fmt: skip

CONV_FIELDS = ("C", "H", "W", "R", "S")
"""A case with any of these fields is a conv2d case (a GEMM case has M, N, K)."""
SERVED_DIRECTIONS = (ConvDirection.FPROP, ConvDirection.DGRAD, ConvDirection.WGRAD)
"""conv2d directions that become problems (each has an evaluation); others would be skipped with a note."""
_CONV_DTYPES = {"bf16": (DType.BF16, DType.BF16), "fp16": (DType.FP16, DType.FP16), "fp32": (DType.TF32, DType.FP32)}
"""Shapes-file dtype -> (x and w dtype, y dtype), as ``autocutlass.conv2d`` plans torch dtypes."""
TMA_ALIGN = 16
GROUPED_FIELDS = ("E",)
"""A case with an expert count is a grouped-GEMM case."""
_GROUPED_DTYPES = {"bf16": DType.BF16, "fp16": DType.FP16}
_W_LAYOUTS = {"nk": Major.COL, "kn": Major.ROW}
"""Grouped cases' weight storage: (E, N, K) used transposed (K contiguous), or (E, K, N) as is."""


@dataclass(frozen=True)
class Case:
    """One problem of a shapes file, with the name it is shown under."""

    name: str
    problem: OpProblem
    routing: str | None = None
    """Grouped cases: how the rows are spread over the experts (``ROUTINGS``); None otherwise."""


@dataclass(frozen=True)
class Skipped:
    """A direction of a conv case that is not measured, and why."""

    name: str
    direction: str
    reason: str


@dataclass(frozen=True)
class Shapes:
    """A shapes file read: its problems, and the conv directions left out."""

    cases: list[Case]
    skipped: list[Skipped] = field(default_factory=list)


class _FieldError(ValueError):
    """A bad field of one case; ``load_shapes`` adds the file and the case."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"field {name!r}: {message}")


def load_cases(path: str | Path, only: Sequence[str] | None = None) -> list[Case]:
    """The problems of a shapes file (``load_shapes(path, only).cases``)."""
    return load_shapes(path, only).cases


def load_shapes(path: str | Path, only: Sequence[str] | None = None) -> Shapes:
    """The cases of a shapes file, optionally only those named in ``only``.

    Raises ValueError with the file name for a malformed file, a malformed case (its index, name
    and field) or an unknown name in ``only``."""
    p = Path(path).expanduser()
    try:
        doc = json.loads(p.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"cannot read shapes file {p}: {e}") from None
    raw = doc.get("cases") if isinstance(doc, dict) else doc
    if not isinstance(raw, list):
        raise ValueError(f"shapes file {p}: expected {{'cases': [...]}} or a list of cases")
    cases: list[Case] = []
    skipped: list[Skipped] = []
    names: list[str] = []
    for i, case in enumerate(raw):
        name = str(case.get("name", f"case{i}")) if isinstance(case, dict) else f"case{i}"
        names.append(name)
        try:
            if not isinstance(case, dict):
                raise TypeError(f"expected an object, got {type(case).__name__}")
            if is_conv_case(case):
                problems, left_out = conv_problems(case)
                cases += [Case(conv_case_name(name, prob.direction), prob) for prob in problems]
                names += [conv_case_name(name, prob.direction) if prob.direction is not ConvDirection.FPROP
                          else f"{name}/{ConvDirection.FPROP.value}" for prob in problems]  # fmt: skip
                skipped += [Skipped(name, d, why) for d, why in left_out]
            elif is_grouped_case(case):
                problem, routing = grouped_problem(case)
                cases.append(Case(name, problem, routing))
            else:
                cases.append(Case(name, _gemm_problem(case)))
        except (KeyError, TypeError, ValueError) as e:
            what = str(e) if isinstance(e, ValueError) else f"{type(e).__name__}: {e}"
            raise ValueError(f"shapes file {p}, case {i} ({name!r}): {what}") from None
    if only:
        every = {f"*/{d.value}" for d in ConvDirection}
        unknown = [n for n in only if n not in names and n not in every]
        if unknown:
            raise ValueError(f"shapes file {p} has no case named {', '.join(unknown)}; "
                             f"it has: {', '.join(sorted(n for n in names if not n.endswith('/fprop')))} "
                             f"(and */fprop, */dgrad, */wgrad; <name>/fprop for a case's forward alone)")  # fmt: skip
        cases = [c for c in cases if _selected(c.name, getattr(c.problem, "direction", None), only)]
        skipped = [s for s in skipped if _selected(conv_case_name(s.name, ConvDirection(s.direction)),
                                                   ConvDirection(s.direction), only)]  # fmt: skip
    return Shapes(cases, skipped)


def _selected(name: str, direction: ConvDirection | None, only: Sequence[str]) -> bool:
    """Whether ``only`` names the case (``<name>``: all its directions; ``<name>/<direction>``: one,
    ``<name>/fprop`` included)
    or, for a conv case, its direction in every case (``*/fprop``, ``*/dgrad``, ``*/wgrad``)."""
    if name in only or name.split("/")[0] in only:
        return True
    if direction is ConvDirection.FPROP and f"{name}/{direction.value}" in only:
        return True
    return direction is not None and f"*/{direction.value}" in only


def conv_case_name(name: str, direction: ConvDirection) -> str:
    """The name a conv case's direction is shown and selected under: the case's for fprop,
    ``<name>/dgrad`` and ``<name>/wgrad`` for the backward directions."""
    return name if direction is ConvDirection.FPROP else f"{name}/{direction.value}"


def is_conv_case(case: Mapping[str, Any]) -> bool:
    """Whether ``case`` describes a convolution (it has a conv field) rather than a GEMM."""
    return any(f in case for f in CONV_FIELDS)


def is_grouped_case(case: Mapping[str, Any]) -> bool:
    """Whether ``case`` describes a grouped GEMM (it has an expert count)."""
    return any(f in case for f in GROUPED_FIELDS)


# ---- grouped GEMM cases --------------------------------------------------------------------------
def grouped_problem(case: Mapping[str, Any]) -> tuple[GroupedGemmProblem, str]:
    """The ``GroupedGemmProblem`` of a grouped case and its routing; ``ValueError`` naming the
    field for a malformed case. Alignments are those of fresh tensors of the case's shapes."""
    e, t = _int(case, "E", minimum=1), _int(case, "T", minimum=0)
    n, k = _int(case, "N", minimum=1), _int(case, "K", minimum=1)
    dt = _GROUPED_DTYPES[_choice(case, "dtype", list(_GROUPED_DTYPES))]
    routing = _choice(case, "routing", list(ROUTINGS)) if "routing" in case else ROUTINGS[0]
    major = _W_LAYOUTS[_choice(case, "w_layout", list(_W_LAYOUTS))] if "w_layout" in case else Major.COL
    elt = dt.bytes
    w_lead = k if major is Major.COL else n
    problem = GroupedGemmProblem(
        experts=e, t=t, n=n, k=k, x_dtype=dt, w_dtype=dt, out_dtype=dt, w_major=major,
        align_x=_pow2_align(k * elt), align_w=min(_pow2_align(w_lead * elt), _pow2_align(n * k * elt) if e > 1 else TMA_ALIGN),
        align_out=_pow2_align(n * elt),
    )  # fmt: skip
    return problem, routing


# ---- GEMM cases --------------------------------------------------------------------------------
def _gemm_problem(case: Mapping[str, Any]) -> OpProblem:
    for name in ("M", "N", "K"):
        _int(case, name, minimum=0)
    if "L" in case:
        _int(case, "L", minimum=0)
    _choice(case, "dtype", [d.value for d in DType])
    return problem_from_case(dict(case))


# ---- conv2d cases ------------------------------------------------------------------------------
def conv_problems(case: Mapping[str, Any]) -> tuple[list[ConvProblem], list[tuple[str, str]]]:
    """The ``ConvProblem`` of each served direction of a conv case, and (direction, reason) for
    the directions left out. Raises ``ValueError`` naming the field for a malformed case."""
    n, c, h, w, k = (_int(case, f, minimum=1) for f in ("N", "C", "H", "W", "K"))
    r, s = _int(case, "R", minimum=1), _int(case, "S", minimum=1)
    stride, pad = _pair(case, "stride", 1, minimum=1), _pair(case, "pad", 0, minimum=0)
    dil = _pair(case, "dilation", 1, minimum=1)
    groups = _int(case, "groups", minimum=1, default=1)
    if c % groups or k % groups:
        raise _FieldError("groups", f"C={c} and K={k} must be multiples of groups={groups}")
    xw, y = _CONV_DTYPES[_choice(case, "dtype", list(_CONV_DTYPES))]
    directions = _directions(case)
    elt = xw.bytes
    base = ConvProblem(
        direction=ConvDirection.FPROP, n=n, h=h, w=w, c=c, k=k, r=r, s=s,
        stride_h=stride[0], stride_w=stride[1], pad_h=pad[0], pad_w=pad[1], dil_h=dil[0], dil_w=dil[1],
        groups=groups, x_dtype=xw, w_dtype=xw, y_dtype=y,
        align_x=_pow2_align(c * elt), align_w=_pow2_align(c * elt), align_y=_pow2_align(k * elt),
    )  # fmt: skip
    if base.p < 1 or base.q < 1:
        raise _FieldError("R" if base.p < 1 else "S",
                          f"the filter's reach exceeds the padded input: the output would be {base.p}x{base.q} "
                          f"(H={h}, W={w}, R={r}, S={s}, pad={list(pad)}, dilation={list(dil)})")  # fmt: skip
    served = [dataclasses.replace(base, direction=d) for d in directions if d in SERVED_DIRECTIONS]
    left_out = [(d.value, f"no conv2d {d.value} evaluation") for d in directions if d not in SERVED_DIRECTIONS]
    return served, left_out


def _pow2_align(nbytes: int) -> int:
    """The largest power of two <= 16 dividing ``nbytes``: the alignment the conv2d front-end
    gives a channels_last tensor of 16-byte aligned base whose pixel row is ``nbytes``."""
    return TMA_ALIGN if nbytes % TMA_ALIGN == 0 else nbytes & -nbytes


def _directions(case: Mapping[str, Any]) -> list[ConvDirection]:
    raw = case.get("directions", ["fprop"])
    known = [d.value for d in ConvDirection]
    if not isinstance(raw, list) or not raw or not all(isinstance(d, str) and d in known for d in raw):
        raise _FieldError("directions", f"expected a non-empty list of {known}, got {raw!r}")
    if len(set(raw)) != len(raw):
        raise _FieldError("directions", f"lists a direction twice: {raw!r}")
    return [ConvDirection(d) for d in raw]


# ---- field readers -----------------------------------------------------------------------------
_MISSING: Any = object()


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _int(case: Mapping[str, Any], name: str, *, minimum: int, default: int = _MISSING) -> int:
    if name not in case:
        if default is _MISSING:
            raise _FieldError(name, "missing")
        return default
    v = case[name]
    if not _is_int(v) or v < minimum:
        raise _FieldError(name, f"expected an integer >= {minimum}, got {v!r}")
    return int(v)


def _pair(case: Mapping[str, Any], name: str, default: int, *, minimum: int) -> tuple[int, int]:
    v = case.get(name, default)
    pair = [v, v] if _is_int(v) else v
    if not isinstance(pair, list) or len(pair) != 2 or not all(_is_int(x) and x >= minimum for x in pair):
        raise _FieldError(name, f"expected an integer >= {minimum} or a pair [h, w] of them, got {v!r}")
    return int(pair[0]), int(pair[1])


def _choice(case: Mapping[str, Any], name: str, allowed: Sequence[str]) -> str:
    if name not in case:
        raise _FieldError(name, "missing")
    v = case[name]
    if v not in allowed:
        raise _FieldError(name, f"expected one of {', '.join(allowed)}, got {v!r}")
    return str(v)

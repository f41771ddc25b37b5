"""Shapes files: the benchmark-suite format that ``autocutlass tune`` and ``autocutlass bench`` read.

``{"cases": [{"name", "M", "N", "K", "L"?, "dtype", "layout"?}, ...]}`` (or the bare list), one
GEMM per case (``autocutlass.ops.gemm.problem.problem_from_case``), e.g. ``benchmarks/shapes.json``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from autocutlass.ops.gemm.problem import GemmProblem, problem_from_case


@dataclass(frozen=True)
class Case:
    """One problem of a shapes file, with the name it is shown under."""

    name: str
    problem: GemmProblem


def load_cases(path: str | Path, only: Sequence[str] | None = None) -> list[Case]:
    """The cases of a shapes file (benchmark-suite format), optionally only those named in ``only``.

    Raises ValueError with the file name for a malformed file or an unknown name in ``only``."""
    p = Path(path).expanduser()
    try:
        doc = json.loads(p.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"cannot read shapes file {p}: {e}") from None
    raw = doc.get("cases") if isinstance(doc, dict) else doc
    if not isinstance(raw, list):
        raise ValueError(f"shapes file {p}: expected {{'cases': [...]}} or a list of cases")
    cases = []
    for i, case in enumerate(raw):
        try:
            cases.append(Case(str(case.get("name", f"case{i}")), problem_from_case(case)))
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise ValueError(f"shapes file {p}, case {i}: {type(e).__name__}: {e}") from None
    if only:
        known = {c.name for c in cases}
        unknown = [n for n in only if n not in known]
        if unknown:
            raise ValueError(f"shapes file {p} has no case named {', '.join(unknown)}; it has: {', '.join(sorted(known))}")
        cases = [c for c in cases if c.name in only]
    return cases

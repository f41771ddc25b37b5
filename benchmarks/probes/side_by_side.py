"""Shared by the side-by-side probes: interleaved timing rounds, paired ratios, the result file.

Imported by probes run as scripts (``python benchmarks/probes/<probe>.py``: this folder is then on
``sys.path``).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Mapping
from typing import Any


def interleaved(timers: Mapping[str, Callable[[], object]], rounds: int, flush_bytes: int) -> dict[str, list[float]]:
    """Median milliseconds of each timer per round (``search.timing`` protocol v1, L2 flushed by
    writing before every timed call), the timers in order, reversed every other round."""
    from autocutlass.search.timing import time_callable

    per: dict[str, list[float]] = {name: [] for name in timers}
    names = list(timers)
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            per[name].append(time_callable(timers[name], flush_bytes=flush_bytes).median_ms)
    return per


def paired_ratio(per: Mapping[str, list[float]], ours: str, theirs: str) -> float:
    """The median over rounds of theirs / ours (above 1: ours is faster)."""
    return round(statistics.median([b / a for a, b in zip(per[ours], per[theirs], strict=True)]), 3)


def geomean(rows: list[dict[str, Any]], key: str) -> float:
    return round(statistics.geometric_mean([r[key] for r in rows]), 3)


def header(what: str, dev: Any, rounds: int) -> dict[str, Any]:
    """The result file's opening fields: what was measured, on which GPU and software, how."""
    import time

    import torch

    return {
        "what": what, "gpu": dev.gpu_name, "torch": torch.__version__, "cuda": torch.version.cuda,
        "dsl": dev.dsl_version, "rounds": rounds, "date": time.strftime("%Y-%m-%d"),
        "protocol": "search.timing v1, write flush, interleaved rounds (order reversed every other), medians",
    }  # fmt: skip


def write_json(path: str | None, doc: dict[str, Any]) -> None:
    if path:
        with open(path, "w") as f:
            json.dump(doc, f, indent=1)

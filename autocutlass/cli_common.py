"""Pieces the command-line modules share: argument types and the results-table printer."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence


def positive_int(text: str) -> int:
    """argparse type: an integer > 0."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return v


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}") from None
    if not (v > 0 and math.isfinite(v)):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return v


def print_table(
    title: str,
    headers: Sequence[str],
    body: Sequence[Sequence[str]],
    *,
    right: Callable[[int], bool] = lambda i: False,
    row_styles: Sequence[str | None] | None = None,
) -> None:
    """A rich table on a terminal, aligned plain text otherwise (logs, pipes, CI).

    ``right(i)``: whether column ``i`` is right-aligned (rich only); ``row_styles``: a rich style
    per row (None for none)."""
    if sys.stdout.isatty():
        from rich.console import Console
        from rich.table import Table

        t = Table(title=title)
        for i, h in enumerate(headers):
            t.add_column(h, justify="right" if right(i) else "left")
        styles = row_styles or [None] * len(body)
        for row, style in zip(body, styles, strict=True):
            t.add_row(*row, style=style)
        Console().print(t)
        return
    widths = [max(len(h), *(len(r[i]) for r in body)) if body else len(h) for i, h in enumerate(headers)]
    print(title)
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip())
    for row in body:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())

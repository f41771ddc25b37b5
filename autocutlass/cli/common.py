"""Pieces the command modules share: the user-error type, argument types, the results-table
printer and the progress reporter.

A command reports a user error (bad arguments argparse cannot judge alone, an existing output
file, a machine without the GPU it needs) by raising ``UsageError`` (or ``autocutlass.errors.NoGPU``);
``autocutlass.cli.main`` prints it as one line and exits with 2. No command catches them itself.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from autocutlass.errors import NoGPU

USER_ERROR = 2
"""Exit code of a user error (argparse's too); 1 is a failed run or an unusable database."""


class UsageError(Exception):
    """A mistake in how a command was called, found after parsing; the message says what is
    accepted. ``autocutlass.cli.main`` prints it on one line and exits with ``USER_ERROR``."""


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a parse error is one line (``prog: error: message (see prog --help)``) instead
    of the usage block and the message; the exit code stays 2. Subparsers inherit the class."""

    def error(self, message: str) -> NoReturn:
        self.exit(USER_ERROR, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def require_gpu(command: str) -> None:
    """Raise ``NoGPU`` (a user error) unless torch sees a CUDA GPU; ``command`` names who needs it."""
    from autocutlass.device import gpu_available

    if not gpu_available():
        raise NoGPU(
            f"{command} needs a CUDA GPU (sm_90a: H100/H200): no CUDA GPU is visible to this process "
            "(torch.cuda.is_available() is False)"
        )


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


# ---- progress ----------------------------------------------------------------------------------
def _duration(s: float) -> str:
    s = max(0, round(s))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


class Progress:
    """Progress of counted work (trials, compiles) on stderr, one task at a time.

    On a terminal: a rich bar (done/total, elapsed) with the rate, failures so far, time left and
    a note beside it. Otherwise (logs, pipes, CI): a plain line each time ``every`` more items are
    done, and one when the task finishes, e.g.
    ``compile hopper_gemm bf16 nt 8192x8192x8192: 40/1920 configs, 2.1 s per config, 1 failed, ~1 h 05 min left``.

    ``start(label, total)`` begins a task (``total`` None: unknown), ``update(done, ...)``
    reports the count so far, ``finish()`` ends it. Use it as a context manager."""

    def __init__(self, *, unit: str = "item", every: int = 10, tty: bool | None = None,
                 clock: Callable[[], float] = time.perf_counter) -> None:  # fmt: skip
        self.unit = unit
        self.every = max(1, every)
        self._tty = tty
        self._clock = clock
        self._bar: Any = None
        self._task: Any = None
        self._label = ""
        self._t0 = 0.0
        self._state: tuple[int, int | None, int, str] = (0, None, 0, "")
        self._printed = -1
        self._next_line = self.every
        self._active = False

    def __enter__(self) -> Progress:
        if sys.stderr.isatty() if self._tty is None else self._tty:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                TextColumn,
                TimeElapsedColumn,
            )
            from rich.progress import Progress as RichProgress

            self._bar = RichProgress(
                TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                TextColumn("{task.fields[status]}"), console=Console(stderr=True), transient=False,
            )  # fmt: skip
            self._bar.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._active:
            self.finish()
        if self._bar is not None:
            self._bar.__exit__(*exc)

    def start(self, label: str, total: int | None = None) -> None:
        if self._active:
            self.finish()
        self._label, self._t0, self._printed, self._active = label, self._clock(), -1, True
        self._next_line = self.every
        self._state = (0, total, 0, "")
        if self._bar is not None:
            self._task = self._bar.add_task(label, total=total, status="")

    def update(self, done: int, *, total: int | None = None, failed: int = 0, note: str = "") -> None:
        """``done`` items so far (``failed`` of them failed); ``total`` replaces the planned total
        when given; ``note`` is shown after the counts (e.g. the best result so far)."""
        if not self._active:
            return
        total = self._state[1] if total is None else total
        self._state = (done, total, failed, note)
        if self._bar is not None:
            self._bar.update(self._task, completed=done, total=total, status=self._status(with_count=False))
        elif done >= self._next_line:
            self._next_line = (done // self.every + 1) * self.every
            self._print()

    def finish(self) -> None:
        """End the task: the bar stops at the count reached; plain mode prints the last line."""
        if not self._active:
            return
        self._active = False
        done = self._state[0]
        if self._bar is not None:
            self._bar.update(self._task, completed=done, total=done)
            self._task = None
        elif self._printed != done:
            self._print(final=True)

    def status(self) -> str:
        """The current line: label, counts, rate, failures, time left, note."""
        return f"{self._label}: {self._status(with_count=True)}"

    def _status(self, *, with_count: bool, final: bool = False) -> str:
        done, total, failed, note = self._state
        elapsed = self._clock() - self._t0
        parts = []
        if with_count:
            parts.append(f"{done}/{total if total is not None else '?'} {self.unit}s")
        if done and elapsed > 0:
            rate = done / elapsed
            parts.append(f"{rate:.1f} {self.unit}s/s" if rate >= 1 else f"{1 / rate:.1f} s per {self.unit}")
        parts.append(f"{failed} failed")
        if done and total is not None and done < total and elapsed > 0 and not final:
            parts.append(f"~{_duration((total - done) * elapsed / done)} left")
        if note:
            parts.append(note)
        return ", ".join(parts)

    def _print(self, *, final: bool = False) -> None:
        self._printed = self._state[0]
        text = f"{self._label}: {self._status(with_count=True, final=final)}"
        if final:
            text += f" in {_duration(self._clock() - self._t0)}"
        print(text, file=sys.stderr, flush=True)

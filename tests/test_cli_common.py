"""``autocutlass.cli.common.Progress``: plain lines every N items off a terminal, a rich bar on one."""

from __future__ import annotations

import pytest

from autocutlass.cli.common import Progress


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_plain_lines_every_n_items_and_at_the_end(capsys: pytest.CaptureFixture[str]) -> None:
    clock = Clock()
    with Progress(unit="config", every=4, tty=False, clock=clock) as p:
        p.start("compile x", total=10)
        for done in range(1, 11):
            clock.t += 2.0
            p.update(done, failed=done // 5, note="busy")
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [
        "compile x: 4/10 configs, 2.0 s per config, 0 failed, ~12 s left, busy",
        "compile x: 8/10 configs, 2.0 s per config, 1 failed, ~4 s left, busy",
        "compile x: 10/10 configs, 2.0 s per config, 2 failed, busy in 20 s",
    ]


def test_plain_mode_rates_totals_and_tasks(capsys: pytest.CaptureFixture[str]) -> None:
    clock = Clock()
    with Progress(unit="trial", every=100, tty=False, clock=clock) as p:
        p.start("a")  # total unknown until the first update says
        clock.t += 0.5
        p.update(3, total=64)
        assert p.status() == "a: 3/64 trials, 6.0 trials/s, 0 failed, ~10 s left"
        p.start("b")  # finishes a
        clock.t += 7200.0
        p.update(1, total=2)
        assert p.status() == "b: 1/2 trials, 7200.0 s per trial, 0 failed, ~2 h 00 min left"
    assert capsys.readouterr().err.splitlines() == ["a: 3/64 trials, 6.0 trials/s, 0 failed in 0 s",
                                                    "b: 1/2 trials, 7200.0 s per trial, 0 failed in 2 h 00 min"]  # fmt: skip


def test_a_task_with_nothing_to_do(capsys: pytest.CaptureFixture[str]) -> None:
    with Progress(unit="config", tty=False) as p:
        p.start("compile y", total=0)
    assert capsys.readouterr().err.startswith("compile y: 0/0 configs, 0 failed in ")


def test_terminal_mode_draws_a_bar_and_no_lines(capsys: pytest.CaptureFixture[str]) -> None:
    with Progress(unit="config", every=1, tty=True) as p:
        p.start("compile z", total=3)
        for done in range(1, 4):
            p.update(done, failed=1)
    err = capsys.readouterr().err
    assert "compile z" in err and "3/3" in err and "1 failed" in err and "configs," not in err

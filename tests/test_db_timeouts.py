"""A database server that does not answer costs one timeout per outage, not a stall per call.

* ``DbTimeouts`` (``AUTOCUTLASS_DB_CONNECT_TIMEOUT``, ``AUTOCUTLASS_DB_STATEMENT_TIMEOUT``) reach
  PostgreSQL engines as libpq ``connect_timeout`` and ``statement_timeout``.
* ``LayeredStore`` leaves a failed database alone (30 s, doubling to 5 min): ``lookup`` and
  ``record_miss`` return at once meanwhile, and the outage is logged once.

The listener test runs a real TCP listener on 127.0.0.1 that accepts connections and never
answers (as a hung server or a stuck proxy does); it needs the psycopg driver (test extra). The
statement-timeout test needs a real server (AUTOCUTLASS_TEST_PG_URL, see test_db_store.py).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from autocutlass.db import LayeredStore, TuningStore, export, release
from autocutlass.db import engine as eng
from autocutlass.db.layered import BACKOFF_FIRST_S, BACKOFF_MAX_S
from autocutlass.db.models import Base
from autocutlass.device import HardKey
from autocutlass.errors import DatabaseError
from autocutlass.ops.gemm.problem import GemmProblem
from autocutlass.settings import DbTimeouts, SettingsError

PG_ENV = "AUTOCUTLASS_TEST_PG_URL"
HK = HardKey("NVIDIA H100 80GB HBM3", cc="9.0", sm_count=132, dsl_version="4.8.1", kernel_hash="k0", protocol_version=1)
P = GemmProblem(m=256, n=4096, k=4096)
SLACK_S = 3.0
"""What a call may take beyond its timeout (connection setup, a slow CI machine)."""


class SilentServer:
    """Accepts TCP connections on 127.0.0.1 and never sends a byte. Closes everything after
    ``give_up_s`` (so code without a timeout fails a test instead of hanging it) or ``stop()``."""

    def __init__(self, give_up_s: float = 30.0) -> None:
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._sock.settimeout(0.1)
        self.port: int = self._sock.getsockname()[1]
        self.accepted: list[socket.socket] = []
        self._stop = threading.Event()
        self._deadline = time.monotonic() + give_up_s
        self._thread = threading.Thread(target=self._run, name="silent-server", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set() and time.monotonic() < self._deadline:
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            self.accepted.append(conn)
        for conn in self.accepted:
            conn.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self._sock.close()


@pytest.fixture
def silent() -> Iterator[SilentServer]:
    server = SilentServer()
    yield server
    server.stop()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("how", ["argument", "environment"])
def test_unanswering_server_costs_one_timeout_then_backoff(
    how: str, silent: SilentServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    pytest.importorskip("psycopg", reason="the PostgreSQL driver (pip install 'autocutlass[postgres]')")
    url = f"postgresql+psycopg://user:secret@127.0.0.1:{silent.port}/tuning"
    timeout_s = 2.0  # libpq's smallest connect_timeout
    if how == "argument":
        user = TuningStore(url, timeouts=DbTimeouts(connect_s=timeout_s, statement_s=timeout_s))
    else:
        monkeypatch.setenv("AUTOCUTLASS_DB_CONNECT_TIMEOUT", str(timeout_s))
        user = TuningStore(url)
    shipped_dir = tmp_path / "tuning_dbs"
    work = TuningStore(tmp_path / "work.sqlite")
    work.record_best(P, HK, "f", {"from": "shipped"}, 1.0, 1.0)
    export(work, shipped_dir / "h100.sqlite")
    layered = LayeredStore(user, shipped_dir)

    with caplog.at_level(logging.DEBUG, logger="autocutlass.db"):
        t0 = time.monotonic()
        rec = layered.lookup(P, HK)  # the user database times out; the shipped one answers
        first = time.monotonic() - t0
        assert rec is not None and rec.config == {"from": "shipped"}
        assert silent.accepted, "the store never reached the listener"
        assert first < timeout_s + SLACK_S, f"lookup took {first:.1f} s"
        assert layered.is_down(user)
        for call in (lambda: layered.record_miss(P, HK), lambda: layered.lookup(P, HK),
                     lambda: layered.lookup(GemmProblem(m=1, n=1, k=1), HK)):  # fmt: skip
            t0 = time.monotonic()
            call()
            assert time.monotonic() - t0 < 0.5  # backoff: the dead database is not asked
        assert len(silent.accepted) == 1
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1
    msg = warnings[0].getMessage()
    assert "secret" not in msg and f"127.0.0.1:{silent.port}" in msg and "30 s" in msg
    release(url)


class FlakyStore:
    """Quacks like a TuningStore: fails or answers as told, counts the calls that reached it."""

    def __init__(self) -> None:
        self.display = "flaky://db"
        self.read_only = False
        self.failing = True
        self.calls = 0

    def _maybe_fail(self) -> None:
        self.calls += 1
        if self.failing:
            raise DatabaseError("Cannot use the tuning database flaky://db (server down).")

    def lookup(self, problem: Any, hard_key: HardKey) -> None:
        self._maybe_fail()

    def record_miss(self, problem: Any, hard_key: HardKey) -> None:
        self._maybe_fail()


def test_backoff_doubles_to_its_ceiling_and_a_success_ends_the_outage(caplog: pytest.LogCaptureFixture) -> None:
    now = [1000.0]
    flaky = FlakyStore()
    layered = LayeredStore(flaky, None, clock=lambda: now[0])  # type: ignore[arg-type]
    waits = []
    with caplog.at_level(logging.DEBUG, logger="autocutlass.db"):
        for _ in range(7):
            calls = flaky.calls
            layered.lookup(P, HK)
            assert flaky.calls == calls + 1  # tried (the backoff ran out)
            start = now[0]
            for _ in range(400):  # find when it is tried again, in 1 s steps
                now[0] += 1.0
                if not layered.is_down(flaky):  # type: ignore[arg-type]
                    break
                layered.record_miss(P, HK)
                layered.lookup(P, HK)
            assert flaky.calls == calls + 1  # nothing reached the database while it was down
            waits.append(now[0] - start)
        assert waits == [30.0, 60.0, 120.0, 240.0, 300.0, 300.0, 300.0]
        assert (BACKOFF_FIRST_S, BACKOFF_MAX_S) == (30.0, 300.0)
        flaky.failing = False
        assert layered.lookup(P, HK) is None and not layered.is_down(flaky)  # type: ignore[arg-type]
        flaky.failing = True
        layered.record_miss(P, HK)  # a new outage starts at 30 s again
        now[0] += 29.0
        assert layered.is_down(flaky)  # type: ignore[arg-type]
        now[0] += 1.0
        assert not layered.is_down(flaky)  # type: ignore[arg-type]
    levels = [(r.levelname, "usable again" in r.getMessage()) for r in caplog.records]
    assert levels.count(("WARNING", False)) == 2  # once per outage
    assert levels.count(("INFO", True)) == 1
    assert levels.count(("DEBUG", False)) == 6  # the retries that failed again


def test_pg_connect_args() -> None:
    args = eng._pg_connect_args("postgresql+psycopg://u@h/db", read_only=False, timeouts=DbTimeouts(2.5, 1.5))
    # the client notices a server that stops answering (its statement_timeout cannot reach it):
    # keepalives after the statement's time, unacknowledged data after connect + statement time
    assert args == {"connect_timeout": 3, "options": "-c statement_timeout=1500", "keepalives_idle": 2,
                    "tcp_user_timeout": 4000, "keepalives": 1, "keepalives_interval": 1, "keepalives_count": 3}  # fmt: skip
    args = eng._pg_connect_args("postgresql+psycopg://u@h/db", read_only=True, timeouts=DbTimeouts(0, 0))
    assert args == {"options": "-c default_transaction_read_only=on"}
    # What the URL says itself wins (connect_timeout) or is kept (options).
    args = eng._pg_connect_args(
        "postgresql+psycopg://u@h/db?connect_timeout=10&options=-c%20search_path%3Dac", read_only=False,
        timeouts=DbTimeouts(3, 5),
    )  # fmt: skip
    assert args == {"options": "-c statement_timeout=5000 -c search_path=ac", "keepalives_idle": 5,
                    "tcp_user_timeout": 8000, "keepalives": 1, "keepalives_interval": 1, "keepalives_count": 3}  # fmt: skip


def test_timeout_settings() -> None:
    assert DbTimeouts.from_env({}) == DbTimeouts(3.0, 5.0)
    env = {"AUTOCUTLASS_DB_CONNECT_TIMEOUT": "10", "AUTOCUTLASS_DB_STATEMENT_TIMEOUT": "0.5"}
    assert DbTimeouts.from_env(env) == DbTimeouts(10.0, 0.5)
    assert DbTimeouts.from_env({"AUTOCUTLASS_DB_CONNECT_TIMEOUT": "0"}).connect_s == 0.0  # no limit
    for bad in ("soon", "-1", "nan", "inf"):
        with pytest.raises(SettingsError, match="AUTOCUTLASS_DB_STATEMENT_TIMEOUT"):
            DbTimeouts.from_env({"AUTOCUTLASS_DB_STATEMENT_TIMEOUT": bad})


@pytest.mark.timeout(60)
def test_statement_timeout_reaches_the_server() -> None:
    """A lookup blocked by a lock another session holds is cancelled after statement_timeout."""
    url = os.environ.get(PG_ENV)
    if not url:
        pytest.skip(f"{PG_ENV} is not set")
    release(url)
    engine = create_engine(url)
    try:
        Base.metadata.drop_all(engine)
        store = TuningStore(url, timeouts=DbTimeouts(connect_s=3, statement_s=1))
        store.record_best(P, HK, "f", {"v": 1}, 1.0, 1.0)
        with engine.connect() as locker:
            locker.execute(text("LOCK TABLE best IN ACCESS EXCLUSIVE MODE"))
            t0 = time.monotonic()
            with pytest.raises(DatabaseError) as info:
                store.lookup(P, HK)
            assert time.monotonic() - t0 < 1 + SLACK_S
            assert "statement timeout" in str(info.value)
            locker.rollback()
        assert store.lookup(P, HK) is not None
    finally:
        release(url)
        Base.metadata.drop_all(engine)
        engine.dispose()

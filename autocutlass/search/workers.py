"""Out-of-process evaluation: GPU-blind compile workers feeding one GPU benchmark worker.

Every candidate is compiled and run in a child process, never in the caller's: a kernel that
faults, hangs or crashes the interpreter costs that child, which is killed and restarted, while
the caller and its CUDA context carry on. Only plain data crosses the process boundary
(``OpProblem.as_dict()``, config dicts, replies of strings and numbers), as JSON.

``IsolatedWorker`` is one child process (``python -m autocutlass.search._child``) running an
injectable *handler* named ``"module:factory"``, with its environment set at spawn time, a
per-request deadline (kill on expiry) and death detection. It replies with ``Reply`` of kind
``result``, ``timeout`` or ``died``; a handler *exception* is a bug and is re-raised in the
parent as ``WorkerError``.

``CandidatePipeline`` runs ``compile_workers`` compile children (``CUDA_VISIBLE_DEVICES=""``,
``CUTE_DSL_ARCH`` set: they compile into the on-disk kernel cache) and one benchmark child on
the GPU, which loads the compiled kernel from that cache, verifies it and times it. States are
the plain strings of ``autocutlass.db.records.TrialState``: ok, cant_implement, compile_error,
wrong_result, timeout, crash.

Request kinds (handled by ``autocutlass.search.handlers``)::

    {"op": "compile", "family": str, "problem": dict, "config": dict}
        -> {"state": str, "reason": str | None, "seconds": float}
    {"op": "bench", "family": str, "problem": dict, "config": dict | None, "device": int}
        -> {"state": str, "reason": str | None, "timing": dict | None, "exit"?: bool}
        (config None: torch on the same inputs)
    {"op": "final", "family": str, "problem": dict, "configs": [dict, ...], "rounds": int, "device": int}
        -> {"state": "ok", "entries": [{"state": str, "reason": str | None, "timing": dict | None,
                                        "round_ms": [float, ...]}, ...],
            "torch": {"timing": dict | None, "round_ms": [float, ...]},
            "torch_variants": {variant: {"timing": dict | None, "round_ms": [float, ...]}, ...}}
        or {"state": "crash", "reason": str, "entries": None, "torch": None, "exit": True}
        (the finals: each config verified, then it and torch (and torch in each of the op's
        ``baseline_variants``, on a thread of its own) timed once per round, the order
        reversed every other round; entries in request order, a failed config has no timing;
        a timing is the median and p20/p80 of the per-round medians, n = rounds)
    {"op": "device", "device": int} -> {"device": dict}
    {"op": "release", "device": int} -> {"state": "ok"}
        (free the problem's inputs: a pooled child waiting for its next tuning)

``CandidatePipeline.finals`` sends the finals request and returns a ``FinalsOutcome``, or None
when the finals did not finish (timeout, death, CUDA fault): the tuner then decides without them.

**Cancelling and forking.** A blocking ``call`` (the pipeline's device, baseline and finals
requests) takes a ``cancel`` event: once it is set, the child is killed and the reply is a death
("cancelled"), within about a second. In a forked child process, every ``IsolatedWorker`` of the
parent forgets its child process without touching it (the worker processes are the parent's):
the inherited pipe ends are closed, so the parent's children still see end-of-file when the
parent closes them, and the next request starts a child of the fork's own.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any, Literal

from autocutlass.keys import config_key
from autocutlass.ops.base import OpProblem
from autocutlass.search.timing import Timing

log = logging.getLogger("autocutlass")

OK = "ok"
CANT_IMPLEMENT = "cant_implement"
COMPILE_ERROR = "compile_error"
WRONG_RESULT = "wrong_result"
TIMEOUT = "timeout"
CRASH = "crash"
STATES = (OK, CANT_IMPLEMENT, COMPILE_ERROR, WRONG_RESULT, TIMEOUT, CRASH)
"""Trial states as plain strings; the values of ``autocutlass.db.records.TrialState``."""

COMPILE_HANDLER = "autocutlass.search.handlers:make_compile_handler"
BENCH_HANDLER = "autocutlass.search.handlers:make_bench_handler"
DEFAULT_ARCH = "sm_90a"

DEFAULT_START_TIMEOUT_S = 180.0
"""Time a child may take to import its handler (torch, the DSL, CUDA initialisation)."""
DEFAULT_COMPILE_TIMEOUT_S = 120.0
"""A DSL compile takes 1-5 s; one that runs for minutes is hung."""
DEFAULT_BENCH_TIMEOUT_S = 60.0
DEFAULT_BASELINE_TIMEOUT_S = 600.0
"""The first benchmark request of a problem also builds its inputs and reference."""
FINALS_TIMEOUT_S = 60.0
FINALS_TORCH_SIDES = 2
"""Torch's participants in the finals the deadline allows for: its main path and one variant
(``baseline_variants``: conv2d's cuDNN outside benchmark mode)."""
FINALS_TIMEOUT_PER_TIMING_S = 3.0
"""The finals' deadline: ``FINALS_TIMEOUT_S`` (inputs, loading the kernels) plus this much per
participant (configs and torch) per round. One timing (``time_callable``: warm-up, ~100 ms of
timed calls) takes a fraction of a second; the margin is for a kernel the cache lacks (compiled
in the benchmark child, 1-5 s), not a hang."""
LOG_TAIL_CHARS = 1500


def default_compile_workers() -> int:
    """Compile children to run beside the benchmark child: one per spare core, at most 6."""
    return max(1, min(6, (os.cpu_count() or 2) - 2))


CLOSE_GRACE_S = 5.0
"""How long closing children waits for them to exit by themselves, all together, before SIGKILL."""


def close_all(workers: Sequence[IsolatedWorker]) -> None:
    """Close ``workers`` at once: every child is asked to exit first, then each is waited for
    within one shared grace period: one after the other, each child that lingers costs up to the
    whole grace period, and a worker with two GPUs closes a dozen compile children."""
    for w in workers:
        w.ask_to_exit()
    deadline = time.monotonic() + CLOSE_GRACE_S
    for w in workers:
        w.close(deadline=deadline)


class WorkerError(RuntimeError):
    """A worker's handler raised: a bug in autocutlass (or the handler), with the child's traceback."""


@dataclass(frozen=True)
class Reply:
    """What came back from one request: a result, a timeout (child killed) or the child's death."""

    kind: Literal["result", "timeout", "died"]
    result: dict[str, Any] | None = None
    reason: str | None = None


def _child_env(overrides: Mapping[str, str | None]) -> dict[str, str]:
    env = dict(os.environ)
    path = [p for p in sys.path if p]
    if env.get("PYTHONPATH"):
        path.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(path)
    env["PYTHONUNBUFFERED"] = "1"
    for k, v in overrides.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


class IsolatedWorker:
    """One child process serving requests with a handler; see the module docstring."""

    def __init__(
        self,
        handler: str,
        *,
        name: str,
        env: Mapping[str, str | None] | None = None,
        start_timeout_s: float = DEFAULT_START_TIMEOUT_S,
    ) -> None:
        self.handler = handler
        self.name = name
        self._env = dict(env or {})
        self.start_timeout_s = start_timeout_s
        self._proc: subprocess.Popen[bytes] | None = None
        self._send: Connection | None = None
        self._recv: Connection | None = None
        self._log_path: Path | None = None
        self._ready = False
        self._deadline: float | None = None
        self._timeout_s = 0.0
        self._request: dict[str, Any] | None = None
        self.restarts = 0
        _LIVE.add(self)

    # ---- lifecycle --------------------------------------------------------------------------
    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def busy(self) -> bool:
        return self._request is not None

    def start(self) -> None:
        """Spawn the child (no-op while one is running). It loads its handler in the background."""
        if self.alive:
            return
        self._cleanup()
        if self._log_path is not None:  # the previous child's output was read when it died
            self._log_path.unlink(missing_ok=True)
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        fd, log_name = tempfile.mkstemp(prefix=f"autocutlass-{self.name}-", suffix=".log")
        self._log_path = Path(log_name)
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "autocutlass.search._child", self.handler, str(req_r), str(rep_w)],
                pass_fds=(req_r, rep_w),
                env=_child_env(self._env),
                stdin=subprocess.DEVNULL,
                stdout=fd,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        finally:
            os.close(fd)
            os.close(req_r)
            os.close(rep_w)
        self._send = Connection(req_w, readable=False)
        self._recv = Connection(rep_r, writable=False)
        self._ready = False

    def kill(self) -> None:
        """Kill the child (SIGKILL, by its pid) and reap it."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                log.warning("worker %s (pid %d) did not die after SIGKILL", self.name, self._proc.pid)
        self._cleanup()

    def close(self, *, deadline: float | None = None) -> None:
        """Ask the child to exit (EOF on its request pipe), then kill it if it lingers past
        ``deadline`` (``time.monotonic()``; default: 5 s from now)."""
        self.ask_to_exit()
        if self._proc is not None:
            left = 5.0 if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                self._proc.wait(timeout=left)
            except subprocess.TimeoutExpired:
                pass
        self.kill()
        if self._log_path is not None:
            self._log_path.unlink(missing_ok=True)
            self._log_path = None

    def ask_to_exit(self) -> None:
        """EOF on the request pipe: the child's loop ends and the process exits by itself."""
        if self._send is not None:
            self._send.close()
            self._send = None

    @property
    def pid(self) -> int | None:
        """The child's process id while one was started (it may have exited since)."""
        return self._proc.pid if self._proc is not None else None

    def forget(self) -> None:
        """Drop the child without signalling or waiting for it (in a forked process, where it is
        the parent's): close this process's ends of its pipes; the next request starts a new child."""
        self._proc = None
        self._log_path = None
        self._cleanup()

    def _cleanup(self) -> None:
        for conn in (self._send, self._recv):
            if conn is not None:
                conn.close()
        self._send = self._recv = None
        self._ready = False
        self._request = None
        self._deadline = None

    def log_tail(self) -> str:
        if self._log_path is None or not self._log_path.exists():
            return ""
        text = self._log_path.read_bytes()[-LOG_TAIL_CHARS:].decode(errors="replace").strip()
        return text

    # ---- requests ---------------------------------------------------------------------------
    def submit(self, request: dict[str, Any], timeout_s: float) -> None:
        """Send ``request``; its reply (or timeout, or death) comes from ``collect``."""
        if self.busy:
            raise RuntimeError(f"worker {self.name} is busy")
        self.start()
        assert self._send is not None
        self._request = request
        self._timeout_s = timeout_s
        extra = 0.0 if self._ready else self.start_timeout_s
        self._deadline = time.monotonic() + timeout_s + extra
        try:
            self._send.send_bytes(json.dumps(request).encode())
        except (BrokenPipeError, OSError):
            pass  # the child is gone; collect() reports its death

    def waitable(self) -> Connection | None:
        return self._recv if self.busy else None

    def seconds_left(self, now: float) -> float:
        return max(0.0, self._deadline - now) if self._deadline is not None else float("inf")

    def collect(self, now: float) -> Reply | None:
        """The reply of the request in flight if there is one by now; kills the child on timeout."""
        if not self.busy or self._recv is None:
            return None
        while self._recv.poll():
            try:
                raw = self._recv.recv_bytes()
            except (EOFError, OSError):
                return self._died()
            msg = json.loads(raw)
            if "error" in msg:
                tb = msg["error"]
                self.kill()
                raise WorkerError(f"worker {self.name} ({self.handler}) raised {msg.get('type')}:\n{tb}")
            if msg.get("ready"):
                self._ready = True
                self._deadline = now + self._timeout_s
                continue
            result = msg["result"]
            self._request = None
            self._deadline = None
            if isinstance(result, dict) and result.get("exit"):
                self._reap()
            return Reply("result", result=result)
        if self._proc is not None and self._proc.poll() is not None:
            return self._died()
        if self._deadline is not None and now >= self._deadline:
            timeout = self._timeout_s if self._ready else self._timeout_s + self.start_timeout_s
            self.kill()
            self.restarts += 1
            return Reply("timeout", reason=f"no reply within {timeout:.0f} s; worker {self.name} killed")
        return None

    def _reap(self) -> None:
        if self._proc is not None:
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._cleanup()

    def _died(self) -> Reply:
        assert self._proc is not None
        try:
            code = self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            code = self._proc.wait()
        tail = self.log_tail()
        self._cleanup()
        self.restarts += 1
        reason = f"worker {self.name} died ({_describe_exit(code)})"
        if tail:
            reason += f"; last output:\n{tail}"
        return Reply("died", reason=reason)

    def call(self, request: dict[str, Any], timeout_s: float, cancel: threading.Event | None = None) -> Reply:
        """Send ``request`` and block until its reply, timeout or death; or until ``cancel`` is set
        (checked at least once a second): then the child is killed and the reply is a death."""
        if cancel is not None and cancel.is_set():
            return Reply("died", reason=f"worker {self.name}: cancelled")
        self.submit(request, timeout_s)
        while True:
            now = time.monotonic()
            reply = self.collect(now)
            if reply is not None:
                return reply
            if cancel is not None and cancel.is_set():
                self.kill()
                return Reply("died", reason=f"worker {self.name}: cancelled")
            conn = self.waitable()
            wait([conn] if conn is not None else [], timeout=min(1.0, self.seconds_left(now)))


_LIVE: weakref.WeakSet[IsolatedWorker] = weakref.WeakSet()
"""Every ``IsolatedWorker`` of this process (for ``_after_fork_in_child``)."""


def _after_fork_in_child() -> None:
    for w in list(_LIVE):
        w.forget()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


@dataclass(frozen=True)
class EvalOutcome:
    """The result of evaluating one candidate: a trial state, its reason, and the timing if ok."""

    key: str
    params: dict[str, Any]
    state: str
    reason: str | None
    timing: Timing | None = None
    compile_s: float | None = None


def _bench_outcome(key: str, params: dict[str, Any], reply: Reply, compile_s: float | None) -> EvalOutcome:
    if reply.kind == "timeout":
        return EvalOutcome(key, params, TIMEOUT, f"benchmark: {reply.reason}", None, compile_s)
    if reply.kind == "died":
        return EvalOutcome(key, params, CRASH, f"benchmark: {reply.reason}", None, compile_s)
    r = reply.result or {}
    state = str(r["state"])
    if state not in STATES:
        raise WorkerError(f"benchmark worker returned unknown state {state!r}")
    timing = Timing.from_dict(r["timing"]) if state == OK else None
    return EvalOutcome(key, params, state, r.get("reason"), timing, compile_s)


@dataclass(frozen=True)
class FinalsOutcome:
    """The finals (see the module doc): one outcome per config in request order (key, params,
    state, reason, and when ok the timing over the rounds), and torch's timing over the same
    rounds (None if it could not be timed)."""

    entries: tuple[EvalOutcome, ...]
    torch: Timing | None
    rounds: int
    variants: Mapping[str, Timing] = field(default_factory=dict)
    """torch's timing over the same rounds in each of the op's other ``baseline_variants`` that
    could be timed (``autocutlass.vendor``: variants; conv2d's ``heuristic``)."""


def _finals_outcome(configs: list[dict[str, Any]], rounds: int, reply: Reply) -> FinalsOutcome | None:
    """The finals reply as a ``FinalsOutcome``; None (and a warning) when they did not finish."""
    if reply.kind != "result":
        log.warning("finals: benchmark worker %s: %s", reply.kind, reply.reason)
        return None
    r = reply.result or {}
    if r.get("state") == CRASH:
        log.warning("finals: %s", r.get("reason"))
        return None
    entries = r.get("entries")
    if r.get("state") != OK or not isinstance(entries, list) or len(entries) != len(configs):
        raise WorkerError(f"benchmark worker returned a malformed finals reply: {r!r}"[:500])
    outcomes = []
    for params, e in zip(configs, entries, strict=True):
        state = str(e["state"])
        if state not in STATES:
            raise WorkerError(f"benchmark worker returned unknown state {state!r}")
        timing = Timing.from_dict(e["timing"]) if state == OK and e.get("timing") else None
        if state == OK and timing is None:
            raise WorkerError("benchmark worker returned an ok finals entry without a timing")
        outcomes.append(EvalOutcome(config_key(params), dict(params), state, e.get("reason"), timing))
    torch = (r.get("torch") or {}).get("timing")
    variants = {str(name): Timing.from_dict(side["timing"]) for name, side in (r.get("torch_variants") or {}).items()
                if isinstance(side, dict) and side.get("timing")}  # fmt: skip
    return FinalsOutcome(tuple(outcomes), Timing.from_dict(torch) if torch else None, rounds, variants)


@dataclass(frozen=True)
class _Job:
    problem: dict[str, Any]
    key: str
    params: dict[str, Any]
    compile_s: float | None = None


class CandidatePipeline:
    """Compile children feeding one benchmark child; ``submit`` candidates, ``poll`` outcomes.

    ``compile_workers=0`` skips the compile stage (the benchmark child then compiles itself).
    Handlers and environments are injectable so tests can run fakes without a GPU.
    """

    def __init__(
        self,
        family_name: str,
        *,
        compile_workers: int | None = None,
        compile_handler: str = COMPILE_HANDLER,
        bench_handler: str = BENCH_HANDLER,
        compile_timeout_s: float = DEFAULT_COMPILE_TIMEOUT_S,
        bench_timeout_s: float = DEFAULT_BENCH_TIMEOUT_S,
        baseline_timeout_s: float = DEFAULT_BASELINE_TIMEOUT_S,
        start_timeout_s: float = DEFAULT_START_TIMEOUT_S,
        arch: str = DEFAULT_ARCH,
        device_index: int = 0,
        compile_env: Mapping[str, str | None] | None = None,
        bench_env: Mapping[str, str | None] | None = None,
        cancel: threading.Event | None = None,
    ) -> None:
        """``cancel``: set, it ends the blocking requests (device, baseline, finals) at once."""
        self.family_name = family_name
        self.cancel = cancel
        self.device_index = device_index
        self.compile_timeout_s = compile_timeout_s
        self.bench_timeout_s = bench_timeout_s
        self.baseline_timeout_s = baseline_timeout_s
        n = default_compile_workers() if compile_workers is None else compile_workers
        cenv: dict[str, str | None] = {"CUDA_VISIBLE_DEVICES": "", "CUTE_DSL_ARCH": arch}
        cenv.update(compile_env or {})
        self._compilers = [
            IsolatedWorker(compile_handler, name=f"compile{i}", env=cenv, start_timeout_s=start_timeout_s)
            for i in range(n)
        ]
        self._bench = IsolatedWorker(bench_handler, name="bench", env=bench_env, start_timeout_s=start_timeout_s)
        self._compile_queue: collections.deque[_Job] = collections.deque()
        self._bench_queue: collections.deque[_Job] = collections.deque()
        self._compiling: dict[int, tuple[_Job, float]] = {}
        self._benching: _Job | None = None
        self._done: list[EvalOutcome] = []

    # ---- lifecycle --------------------------------------------------------------------------
    def start(self) -> None:
        """Spawn every child now so that their start-up overlaps."""
        self._bench.start()
        for w in self._compilers:
            w.start()

    def close(self) -> None:
        close_all((*self._compilers, self._bench))

    def kill(self) -> None:
        """Kill every child now (an abandoned tuning: no graceful wait for requests in flight)."""
        for w in (*self._compilers, self._bench):
            w.kill()
        self._compile_queue.clear()
        self._bench_queue.clear()
        self._compiling.clear()
        self._benching = None
        self._done = []

    def __enter__(self) -> CandidatePipeline:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def capacity(self) -> int:
        """Candidates worth keeping in flight: one per compile child plus the one benchmarking."""
        return len(self._compilers) + 1

    @property
    def in_flight(self) -> int:
        return (
            len(self._compile_queue)
            + len(self._compiling)
            + len(self._bench_queue)
            + (self._benching is not None)
            + len(self._done)
        )

    # ---- synchronous requests to the benchmark child ----------------------------------------
    def _bench_call(self, request: dict[str, Any], timeout_s: float) -> Reply:
        if self._bench.busy:
            raise RuntimeError("benchmark worker is busy; drain the pipeline first")
        return self._bench.call(request, timeout_s, self.cancel)

    def device(self) -> dict[str, Any]:
        """``{"device": DeviceInfo.as_dict()}`` of the benchmark GPU (a family's hard key is
        ``DeviceInfo(**reply["device"]).hard_key(family.source_hash())``)."""
        reply = self._bench_call({"op": "device", "device": self.device_index}, self.baseline_timeout_s)
        if reply.kind != "result" or reply.result is None:
            raise WorkerError(f"benchmark worker could not report its device: {reply.reason}")
        return reply.result

    def baseline(self, problem: OpProblem) -> EvalOutcome:
        """torch on the same inputs as the candidates, timed with the same protocol (config ``None``).
        The first benchmark request of a problem builds its inputs, hence the longer timeout."""
        request = self._bench_request(problem.as_dict(), None)
        return _bench_outcome("torch", {}, self._bench_call(request, self.baseline_timeout_s), None)

    def finals(self, problem: OpProblem, configs: list[dict[str, Any]], rounds: int) -> FinalsOutcome | None:
        """Time ``configs`` and torch head to head in ``rounds`` interleaved rounds (the ``final``
        request of the module doc); None when the finals did not finish (timeout, the child died,
        a CUDA fault), so that the caller decides without them. Only with nothing in flight."""
        if self.in_flight:
            raise RuntimeError("finals need an idle pipeline; drain it first")
        if rounds < 1:
            raise ValueError(f"finals need at least one round, got {rounds}")
        configs = [dict(c) for c in configs]
        request = {"op": "final", "family": self.family_name, "problem": problem.as_dict(), "configs": configs,
                   "rounds": rounds, "device": self.device_index}  # fmt: skip
        timeout_s = FINALS_TIMEOUT_S + FINALS_TIMEOUT_PER_TIMING_S * (len(configs) + FINALS_TORCH_SIDES) * rounds
        return _finals_outcome(configs, rounds, self._bench_call(request, timeout_s))

    def _bench_request(self, problem: dict[str, Any], params: dict[str, Any] | None) -> dict[str, Any]:
        return {"op": "bench", "family": self.family_name, "problem": problem, "config": params,
                "device": self.device_index}  # fmt: skip

    # ---- the pipeline -----------------------------------------------------------------------
    def submit(self, problem: OpProblem, key: str, params: dict[str, Any]) -> None:
        """Queue a candidate for compile (or straight for benchmark without compile children)."""
        job = _Job(problem.as_dict(), key, dict(params))
        if self._compilers:
            self._compile_queue.append(job)
        else:
            self._bench_queue.append(job)
        self._dispatch()

    def _dispatch(self) -> None:
        for i, w in enumerate(self._compilers):
            if not self._compile_queue:
                break
            if w.busy:
                continue
            job = self._compile_queue.popleft()
            req = {"op": "compile", "family": self.family_name, "problem": job.problem, "config": job.params}
            w.submit(req, self.compile_timeout_s)
            self._compiling[i] = (job, time.monotonic())
        if self._benching is None and self._bench_queue:
            job = self._bench_queue.popleft()
            req = self._bench_request(job.problem, job.params)
            self._bench.submit(req, self.bench_timeout_s)
            self._benching = job

    def _collect(self, now: float) -> None:
        for i, w in enumerate(self._compilers):
            if i not in self._compiling:
                continue
            reply = w.collect(now)
            if reply is None:
                continue
            job, t0 = self._compiling.pop(i)
            if reply.kind == "timeout":
                self._done.append(EvalOutcome(job.key, job.params, TIMEOUT, f"compile: {reply.reason}"))
            elif reply.kind == "died":
                self._done.append(EvalOutcome(job.key, job.params, CRASH, f"compile: {reply.reason}"))
            else:
                r = reply.result or {}
                state = str(r["state"])
                seconds = float(r.get("seconds", now - t0))
                if state == OK:
                    self._bench_queue.append(dataclasses.replace(job, compile_s=seconds))
                elif state in STATES:
                    self._done.append(EvalOutcome(job.key, job.params, state, r.get("reason"), None, seconds))
                else:
                    raise WorkerError(f"compile worker returned unknown state {state!r}")
        if self._benching is not None:
            reply = self._bench.collect(now)
            if reply is not None:
                job = self._benching
                self._benching = None
                self._done.append(_bench_outcome(job.key, job.params, reply, job.compile_s))

    def poll(self, timeout_s: float) -> list[EvalOutcome]:
        """Outcomes finished by now, waiting up to ``timeout_s`` for at least one."""
        end = time.monotonic() + timeout_s
        while True:
            now = time.monotonic()
            self._collect(now)
            self._dispatch()
            if self._done or now >= end:
                done, self._done = self._done, []
                return done
            workers = [w for w in (*self._compilers, self._bench) if w.busy]
            if not workers:
                return []
            conns = [c for c in (w.waitable() for w in workers) if c is not None]
            left = min([end - now, *(w.seconds_left(now) for w in workers)])
            wait(conns, timeout=max(0.0, min(left, 1.0)))

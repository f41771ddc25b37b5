"""Fakes for the search tests: a small kernel family, an in-process evaluator, an in-memory sink,
and worker handlers (imported by child processes through the parent's sys.path)."""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any

from autocutlass.device import DeviceInfo, HardKey
from autocutlass.kernels.base import GemmRunner, KernelFamily
from autocutlass.ops.gemm.problem import GemmProblem
from autocutlass.search.space import config_key
from autocutlass.search.timing import Timing, summarize
from autocutlass.search.workers import EvalOutcome, FinalsOutcome
from autocutlass.vendor import variant_of

DEVICE = DeviceInfo(
    index=0, gpu_name="Fake GPU", cc_major=9, cc_minor=0, sm_count=132, max_smem_per_block_optin=232_448,
    l2_bytes=50 << 20, total_memory_bytes=80 << 30, driver_version="0", cuda_runtime_version="0", dsl_version="0",
    torch_version="0",
)  # fmt: skip
HARD_KEY = HardKey(gpu_name="Fake GPU", cc="9.0", sm_count=132, dsl_version="0", kernel_hash="fake", protocol_version=1)
"""What the tuner derives from ``DEVICE`` for the fake family (whose sources hash to 'fake')."""


@dataclass(frozen=True, order=True)
class FakeConfig:
    tile: int = 32
    stages: int = 2
    mode: str = "a"


class FakeFamily(KernelFamily[FakeConfig]):
    """Axes tile x stages x mode; ``check`` rejects tile * stages > ``smem``."""

    name = "fake"
    SOURCE_FILES = ()

    def source_hash(self) -> str:
        return "fake"

    def __init__(self, tiles: Sequence[int] = (16, 32, 64, 128), stages: Sequence[int] = (1, 2, 3),
                 modes: Sequence[str] = ("a", "b"), smem: int = 192, seeds: Sequence[FakeConfig] | None = None) -> None:  # fmt: skip
        self.tiles, self.stages, self.modes, self.smem = tuple(tiles), tuple(stages), tuple(modes), smem
        self._seeds = list(seeds) if seeds is not None else [FakeConfig(32, 2, "a")]
        self.checked: list[FakeConfig] = []

    def supports(self, problem: GemmProblem) -> str | None:
        return None if problem.k > 0 else "K must be positive"

    def space(self, problem: GemmProblem) -> Sequence[FakeConfig]:
        return [FakeConfig(t, s, m) for t, s, m in itertools.product(self.tiles, self.stages, self.modes)]

    def check(self, config: FakeConfig, problem: GemmProblem) -> str | None:
        self.checked.append(config)
        if config.tile * config.stages > self.smem:
            return f"tile*stages={config.tile * config.stages} exceeds smem {self.smem}"
        return None

    def seeds(self, problem: GemmProblem) -> Sequence[FakeConfig]:
        return [s for s in self._seeds if self.check(s, problem) is None]

    def config_to_dict(self, config: FakeConfig) -> dict[str, Any]:
        return asdict(config)

    def config_from_dict(self, d: dict[str, Any]) -> FakeConfig:
        return FakeConfig(**d)

    def compile(self, config: FakeConfig, problem: GemmProblem) -> GemmRunner:
        raise NotImplementedError

    def simplicity(self, config: FakeConfig) -> tuple[int, ...]:
        return (config.stages, int(config.mode == "b"), config.tile)


def timing(ms: float, spread: float = 0.0) -> Timing:
    return Timing(ms, ms - spread / 2, ms + spread / 2, 20)


def search_stop(stop_reason: str) -> str:
    """A ``TuneResult.stop_reason`` without its finals note: why the search and the polish stopped."""
    return stop_reason.split("; finals: ")[0]


Score = Callable[[dict[str, Any]], "float | tuple[str, str]"]
"""params -> median ms, or (state, reason) for a failure."""


class FakeEvaluator:
    """In-process ``Evaluator``: outcomes come from ``score``; records what it was asked.

    The finals time a config at ``finals_score`` (default: ``score``) and torch at
    ``finals_torch_ms`` (default: ``torch_ms``); ``finals_fail`` makes them return None (True: every
    call; a predicate of a config: every call with a config it accepts, a finalist that faults) (as the
    pipeline does on a timeout or a crash). ``finals_calls`` records the configs of each call.
    """

    def __init__(self, score: Score, capacity: int = 3, torch_ms: float = 1.0, *, finals_score: Score | None = None,
                 finals_torch_ms: float | None = None, finals_fail: Any = False, host_ms: float | None = None,
                 torch_host_ms: float | None = None, torch_variants: dict[str, float] | None = None) -> None:  # fmt: skip
        self.host_ms, self.torch_host_ms = host_ms, torch_host_ms  # the finals' host times (Timing.host_ms)
        self.torch_variants = dict(torch_variants or {})  # torch's ms in the op's baseline_variants (finals)
        self.score = score
        self._capacity = capacity
        self.torch_ms = torch_ms
        self.finals_score = finals_score or score
        self.finals_torch_ms = torch_ms if finals_torch_ms is None else finals_torch_ms
        self.finals_fail = finals_fail
        self.submitted: list[dict[str, Any]] = []
        self.finals_calls: list[list[dict[str, Any]]] = []
        self._queue: list[tuple[str, dict[str, Any]]] = []

    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def in_flight(self) -> int:
        return len(self._queue)

    def submit(self, problem: GemmProblem, key: str, params: dict[str, Any]) -> None:
        assert key == config_key(params)
        self.submitted.append(dict(params))
        self._queue.append((key, dict(params)))

    def poll(self, timeout_s: float) -> list[EvalOutcome]:
        out = []
        # finish one at a time, oldest first, like a serial benchmark worker
        if self._queue:
            key, params = self._queue.pop(0)
            s = self.score(params)
            if isinstance(s, tuple):
                out.append(EvalOutcome(key, params, s[0], s[1]))
            else:
                out.append(EvalOutcome(key, params, "ok", None, timing(s)))
        return out

    def baseline(self, problem: GemmProblem) -> EvalOutcome:
        return EvalOutcome("torch", {}, "ok", None, timing(self.torch_ms))

    def finals(self, problem: GemmProblem, configs: list[dict[str, Any]], rounds: int) -> FinalsOutcome | None:
        assert not self._queue, "finals while candidates are in flight"
        self.finals_calls.append([dict(c) for c in configs])
        if self.finals_fail is True or (callable(self.finals_fail) and any(self.finals_fail(c) for c in configs)):
            return None
        entries = []
        for params in configs:
            s = self.finals_score(params)
            if isinstance(s, tuple):
                entries.append(EvalOutcome(config_key(params), dict(params), s[0], s[1]))
            else:
                entries.append(EvalOutcome(config_key(params), dict(params), "ok", None,
                                           Timing(s, s, s, rounds, self.host_ms)))  # fmt: skip
        variants = {v: Timing(ms, ms, ms, rounds, self.torch_host_ms) for v, ms in self.torch_variants.items()}
        return FinalsOutcome(tuple(entries), Timing(self.finals_torch_ms, self.finals_torch_ms,
                                                    self.finals_torch_ms, rounds, self.torch_host_ms), rounds,
                             variants)  # fmt: skip

    def device(self) -> dict[str, Any]:
        return {"device": DEVICE.as_dict()}


@dataclass(frozen=True)
class FakeTrialRecord:
    id: int
    family: str
    config: dict[str, Any]
    config_key: str
    state: str
    median_ms: float | None
    p20_ms: float | None
    p80_ms: float | None
    problem_key: str
    hard_key: HardKey


@dataclass
class MemorySink:
    """In-memory ``TrialSink``; vendor records (``autocutlass.vendor``) go to ``vendor``, those of
    torch's variants to ``vendor_variants`` by (problem key, variant)."""

    records: list[FakeTrialRecord] = field(default_factory=list)
    best: dict[str, tuple[dict[str, Any], float, int | None]] = field(default_factory=dict)
    vendor: dict[str, tuple[HardKey, float]] = field(default_factory=dict)
    vendor_config: dict[str, dict[str, Any]] = field(default_factory=dict)
    vendor_variants: dict[tuple[str, str], tuple[HardKey, float]] = field(default_factory=dict)

    def record_trial(self, problem: GemmProblem, hard_key: HardKey, family: str, config: Any, state: str,
                     reason: str | None = None, median_ms: float | None = None, p20_ms: float | None = None,
                     p80_ms: float | None = None, tflops: float | None = None) -> int:  # fmt: skip
        rid = len(self.records) + 1
        self.records.append(FakeTrialRecord(rid, family, dict(config), config_key(config), str(state), median_ms,
                                            p20_ms, p80_ms, problem.key(), hard_key))  # fmt: skip
        return rid

    def record_best(self, problem: GemmProblem, hard_key: HardKey, family: str, config: Any, median_ms: float,
                    tflops: float, trial_id: int | None = None) -> None:  # fmt: skip
        if family == "torch":
            assert trial_id is None
            if variant_of(hard_key):
                self.vendor_variants[(problem.key(), variant_of(hard_key))] = (hard_key, median_ms)
                return
            self.vendor[problem.key()] = (hard_key, median_ms)
            self.vendor_config[problem.key()] = dict(config)
            return
        self.best[problem.key()] = (dict(config), median_ms, trial_id)

    def finished_config_keys(self, problem: GemmProblem, hard_key: HardKey, family: str) -> set[str]:
        return {r.config_key for r in self.records
                if r.problem_key == problem.key() and r.hard_key == hard_key and r.family == family}  # fmt: skip

    def trials(self, problem: GemmProblem | None = None, hard_key: HardKey | None = None) -> list[FakeTrialRecord]:
        return [r for r in self.records
                if (problem is None or r.problem_key == problem.key()) and (hard_key is None or r.hard_key == hard_key)]  # fmt: skip


# ---- worker handlers (run in child processes) ---------------------------------------------------
def make_echo_handler() -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Replies with the request; ``action`` in the request selects misbehaviour."""

    def handle(req: dict[str, Any]) -> dict[str, Any]:
        action = req.get("action")
        if action == "exit":
            os._exit(7)
        if action == "sleep":
            time.sleep(float(req.get("seconds", 60)))
        if action == "raise":
            raise ZeroDivisionError("a bug in the handler")
        return {"echo": req, "pid": os.getpid(), "cuda_visible": os.environ.get("CUDA_VISIBLE_DEVICES"),
                "arch": os.environ.get("CUTE_DSL_ARCH")}  # fmt: skip

    return handle


def _behaviour(config: dict[str, Any] | None) -> str:
    return "torch" if config is None else str(config.get("mode", "a"))


def make_fake_compile_handler() -> Callable[[dict[str, Any]], dict[str, Any]]:
    """mode 'compile_error' fails to compile; mode 'hang_compile' sleeps; others compile."""

    def handle(req: dict[str, Any]) -> dict[str, Any]:
        assert os.environ.get("CUDA_VISIBLE_DEVICES") == "", "compile workers must not see a GPU"
        mode = _behaviour(req["config"])
        if mode == "compile_error":
            return {"state": "compile_error", "reason": "fake DSL error", "seconds": 0.0}
        if mode == "hang_compile":
            time.sleep(60)
        return {"state": "ok", "reason": None, "seconds": 0.01}

    return handle


def _fake_final(req: dict[str, Any]) -> dict[str, Any]:
    """The ``final`` request: the first misbehaving config's mode decides the whole reply ('crash',
    'hang', 'fault'); 'wrong' is a wrong_result entry; others are timed like a bench request, in
    interleaved rounds."""
    from autocutlass.search.handlers import interleaved_rounds

    modes = [_behaviour(c) for c in req["configs"]]
    if "crash" in modes:
        os._exit(139)
    if "hang" in modes:
        time.sleep(60)
    if "fault" in modes:
        return {"state": "crash", "reason": "CUDA fault: illegal address", "entries": None, "torch": None, "exit": True}
    entries: list[dict[str, Any]] = []
    timers: list[Callable[[], float | None]] = []
    owners: list[int] = []
    for config, mode in zip(req["configs"], modes, strict=True):
        if mode == "wrong":
            entries.append({"state": "wrong_result", "reason": "relative error 1.0", "timing": None, "round_ms": []})
            continue
        entries.append({"state": "ok", "reason": None, "timing": None, "round_ms": []})
        owners.append(len(entries) - 1)
        timers.append(partial(float, 1.0 + config.get("tile", 0) / 1000))
    timers.append(partial(float, 2.0))
    per = interleaved_rounds(timers, req["rounds"])
    for i, ms in zip(owners, per[:-1], strict=True):
        assert ms is not None  # the fake's timers never fail
        entries[i].update(round_ms=ms, timing=summarize(ms).as_dict())
    torch_ms = per[-1] or []
    return {"state": "ok", "entries": entries, "torch": {"timing": summarize(torch_ms).as_dict(), "round_ms": torch_ms}}


def make_fake_bench_handler() -> Callable[[dict[str, Any]], dict[str, Any]]:
    """mode 'crash' exits the process; 'hang' sleeps; 'fault' reports a CUDA fault; 'wrong' is wrong."""

    def handle(req: dict[str, Any]) -> dict[str, Any]:
        if req["op"] == "device":
            return {"device": DEVICE.as_dict()}
        if req["op"] == "release":
            return {"state": "ok", "pid": os.getpid()}
        if req["op"] == "final":
            return _fake_final(req)
        mode = _behaviour(req["config"])
        if mode == "crash":
            os._exit(139)
        if mode == "hang":
            time.sleep(60)
        if mode == "fault":
            return {"state": "crash", "reason": "CUDA fault: illegal address", "timing": None, "exit": True}
        if mode == "wrong":
            return {"state": "wrong_result", "reason": "relative error 1.0", "timing": None}
        ms = 2.0 if mode == "torch" else 1.0 + req["config"].get("tile", 0) / 1000
        return {"state": "ok", "reason": None, "timing": timing(ms).as_dict()}

    return handle


def make_gpu_fault_handler() -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Triggers a device-side assert (out-of-bounds gather) and reports it the way the real
    benchmark handler does, through ``handlers._fault_types``."""

    def handle(req: dict[str, Any]) -> dict[str, Any]:
        import torch

        from autocutlass.search.handlers import _fault_types

        x = torch.zeros(4, device="cuda")
        try:
            idx = torch.tensor([1 << 20], device="cuda")
            x[idx].sum().item()
            torch.cuda.synchronize()
        except _fault_types() as e:
            return {"state": "crash", "reason": f"{type(e).__name__}: {e}", "exit": True}
        return {"state": "ok"}

    return handle

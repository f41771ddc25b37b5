"""The decision core, written once for every op: memo -> tuning database -> miss policy ->
compiled kernel -> launch.

The only module that imports ``kernels``, ``search`` and ``db`` together (each lazily, on the
first memo miss that needs it). Each public entry point is an op front-end
(``autocutlass.ops.base.FrontEnd``: ``ops.gemm.entries.MATMUL``, ``LINEAR``, ``GEMM``,
``SCALED_MM``; ``ops.conv.frontend.CONV2D``) that the core calls through ``Dispatcher.call``.

**Hit path** (``Dispatcher.call(front_end, *args)``): the front-end's memo key (a tuple of tensor
metadata: shapes, strides, dtypes, devices, base-address residues, flags; never values), one
dict lookup, and the memoised entry, a prepared launch closure (the views its plan needs,
``torch.empty`` for the output, the runner's launch on the current stream). No problem is built,
nothing synchronises, nothing allocates outside torch's caching allocator, so a tuned call can be
captured in a CUDA graph. Reads of the memo take no lock.

**Miss path** (under one re-entrant lock, so concurrent misses neither tune nor compile twice;
hits in other threads proceed): ``front_end.plan`` -> an ``OpProblem`` -> the kernel families
that serve it -> a config by policy -> ``family.compile`` -> a closure stored in the memo.
Policies (``AUTOCUTLASS_POLICY``, overridden per thread by ``autocutlass.policy``):

* ``tune``: the stored record of the problem or of its bucket; else record the miss, tune now
  (``search.tune_problem`` within ``Settings.tune_trials``/``tune_seconds``, recording into the
  user database) and run the winner. **Nothing tunes while tracing or capturing**: inside a CUDA
  graph capture, or while torch.compile / torch.jit traces with real tensors, a miss serves the
  best available config (a stored record, the nearest bucket's included, else the family's
  default), records the miss for ``autocutlass tune --pending`` and is not memoised, so the first
  call outside runs the policy in full. (That one config is still compiled, or loaded from the
  kernel cache, when no runner holds it yet; torch.compile's CUDA graphs run each shape eagerly
  before capturing it, so their captures hit the memo.)
* ``background``: as ``tune``, but the miss is served at once by the best config available (this
  GPU's nearest record, a sibling GPU's record, the winner of the nearest tuned problem of the same
  kernel class, else the family's default; or, when that config's kernel is not loaded in this
  process yet, by the torch op, so that no call waits for a compile) while the problem is tuned on
  the process's background tuner (``autocutlass.background``: one daemon thread, one
  tuning at a time, stopped at interpreter exit; its worker processes are those of ``tune``). The
  stand-in is memoised until that tuning ends; its completion drops the stand-in's memo entry
  (from the tuner's thread: a dict pop, nothing added to the hit path), so the next call looks the
  problem up and runs the winner. A tuning that fails is logged once and its stand-in stays; one
  that another process holds (the claim) is looked up again after ``RECHECK_S``. Timing while the
  application runs: the benchmark child times candidates while this process may launch its own
  kernels on the same GPU. One tuning at a time per process (the tuner) and per GPU across
  processes (the claim's host-wide GPU lock) keeps tunings from timing each other; the finals
  re-time the four fastest configs and torch in interleaved rounds, so interference spread over
  the rounds hits them alike; what remains (the application's own kernels during a timing) is
  noise that can mis-rank near-equal configs, so the ok trials of a background tuning are marked
  (``BACKGROUND_NOTE`` as their reason; ``db show`` says so), and an off-line ``autocutlass tune``
  of the problem re-times the finalists in a quiet process. Under a CUDA graph capture or a trace
  nothing is queued, as under ``tune``. A forked child forgets the parent's queued tunings (their
  waiting stand-ins are dropped) and queues its own on its next miss.
* ``cached``: any stored record (exact, bucket, nearest neighbour); else record the miss and run
  a sibling GPU's record, else the family's default config, ``family.seeds(problem)[0]``. Never
  tunes.

**Sibling GPUs.** A record measured on another GPU model of the same architecture and SM count
(``HardKey.is_sibling_of``: an H200's on an H100; the user database's or a shipped one's) is
looked up after every tier of this GPU's own records (``Store.lookup_sibling``: exact, bucket,
nearest). It never counts as this GPU's: the miss is still recorded (``tune --pending`` tunes it
here), nothing is copied into the user database, a tuning still runs under ``tune`` (the
sibling's config is one of its seeds, beside the nearest own record's), and where it serves (as
the stand-in of ``cached``, of a tuning that found nothing or runs elsewhere, or of a capture)
it is counted in ``Stats.sibling_hits``, not ``db_hits``, and logged once per sibling GPU.
* ``heuristic``: ``family.seeds(problem)[0]``; never reads the database.
* ``off``: torch, always (validated like the others; not counted as a fallback).

**Tuned-only families** (``KernelFamily.TUNED_ONLY``: hopper_grouped). Such a family serves a
problem only from this GPU's record of it or of its bucket, or a tuning's winner (vendor verdicts
still apply); wherever the tiers above would run a stand-in config of it (a nearest problem's
record, a sibling GPU's, a class winner, the default), the torch op serves instead
(``Stats.torch_standins``; an info line once per problem), and the miss is recorded as usual.

**Records that do not fit.** A record of another problem of the same bucket (GEMM: another M of the
same quarter octave) serves as a hit only where its family expects its config to fit this problem
(``KernelFamily.fits``; the GEMM family's wave model: not where this M leaves its tiles a worse wave
fill, e.g. a third, nearly empty wave). Where not, it ranks as a nearest record (``Stats.misfits``;
an info line once per problem), and a nearest record that does not fit is treated alike:
``tune`` tunes the problem,
``background`` tunes it in the background, and a call that does not tune it now (``cached``, a
capture or a trace, a tuning under way elsewhere) records the miss and is served by the torch op
while vendor verdicts apply (``Stats.vendor_hits`` under ``cached``, ``Stats.torch_standins``
otherwise), else by that record's config.

**Recording a miss** (for ``autocutlass tune --pending``): under ``tune`` on the caller's thread,
before the tuning; where the call does not tune now (``cached``, ``background``, a capture or a
trace) on a short-lived daemon thread, so that the call never waits for the write (nor for the
first write's SQLAlchemy import); ``stats()`` waits for the writes under way
(``MISS_WRITE_WAIT_S`` at most), and so does interpreter exit.

**Vendor verdicts** (``autocutlass.vendor``). A tuning records torch's time for its problem
beside our winner. A record of this GPU's exact problem or bucket that serves (any policy but
``heuristic`` and ``off``), or a config a tuning just chose, is served by the torch op instead when
the vendor record of the same tuned problem is more than ``vendor.VENDOR_MARGIN`` faster
(``Stats.vendor_hits``; an info line once per problem). Never from a sibling's or a nearest record;
off with ``AUTOCUTLASS_VENDOR_VERDICTS=0``. A front-end's ``vendor_variant()`` names the variant of
torch's path the call would run (conv2d: cuDNN in benchmark mode, or ``heuristic`` without
``cudnn.benchmark``), and only that variant's vendor record judges (none: no verdict).

A problem several families serve (a pointwise convolution: the GEMM family through a lowering,
later a convolution family) is looked up under each family's hard key (each family's records
carry the hash of its own sources); the best-matching record wins (exact, then bucket, then
nearest; the earlier family on a tie). A miss is recorded and tuned under the first family.

**Fallback**: a call the front-end marks unsupported, a problem no family serves, or a config
that fails to compile runs the torch op. One log line per (entry point, reason); with
``AUTOCUTLASS_STRICT=1`` ``UnsupportedProblem`` is raised instead. A tuning database that cannot
be opened or read is logged once and behaves as a miss.

**The policy override** (``POLICY_OVERRIDE``, set by ``autocutlass.policy``) is per thread (a
``threading.local``; asyncio tasks of one thread share it) and is read by ``Dispatcher.call`` when
the call runs, never when a graph is traced: under ``torch.compile`` the entry points become
``torch.ops.autocutlass.*`` custom ops (``autocutlass.torch_ops``), whose fake kernels are pure
shape functions, and whose real kernels call the dispatcher when the compiled graph runs. So a
``with autocutlass.policy(...)`` around a compiled model's call applies to the misses of that
call; a CUDA graph replay runs no Python, so it replays what was chosen when it was captured.

Settings are read once, when a ``Dispatcher`` is made; ``reset()`` makes the default one anew.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any, Protocol

import torch

from autocutlass import background as background_mod
from autocutlass import settings as settings_mod
from autocutlass.background import BACKGROUND_NOTE, BackgroundTuner
from autocutlass.device import DeviceInfo, HardKey, current_device
from autocutlass.errors import (
    CantImplement,
    DatabaseError,
    KernelCompileError,
    UnsupportedProblem,
)
from autocutlass.keys import config_key
from autocutlass.ops.base import Entry, FrontEnd, OpProblem, Unsupported
from autocutlass.settings import Policy, Settings
from autocutlass.vendor import (
    MAIN_VARIANT,
    host_times,
    vendor_faster,
    vendor_hard_key,
    vendor_margin,
)

log = logging.getLogger("autocutlass")

MEMO_LIMIT = 16_384
"""Entries the memo holds before it is emptied (a workload with unbounded distinct shapes)."""


class _PolicyOverride(threading.local):
    """The per-thread policy override: ``policy`` is None (the settings' policy) or a ``Policy``.

    A ``threading.local`` rather than a ``ContextVar``: the hit path reads it as one attribute
    (no Python frame), and nothing that torch.compile traces reads it (see the module docstring)."""

    policy: Policy | None = None

    def get(self) -> Policy | None:
        """The override of the current thread (None: none)."""
        return self.policy


POLICY_OVERRIDE = _PolicyOverride()
"""Set by ``autocutlass.policy(...)``; per thread; ``.policy`` None: the settings' policy."""


@contextmanager
def policy(name: Policy | str) -> Iterator[Policy]:
    """Use miss policy ``name`` ('tune', 'background', 'cached', 'heuristic', 'off') inside the block.

    Nestable; affects only the current thread. It applies to the calls that run inside the block,
    compiled models' calls included (their ``torch.ops.autocutlass`` ops call the dispatcher when
    they run); wrap the compiled model's call, not code inside the compiled function (Dynamo does
    not trace the block). A CUDA graph replay runs the kernels chosen when it was captured."""
    try:
        p = Policy(name)
    except ValueError:
        raise ValueError(f"policy {name!r} is not one of: {', '.join(x.value for x in Policy)}") from None
    local = POLICY_OVERRIDE
    saved = local.policy
    local.policy = p
    try:
        yield p
    finally:
        local.policy = saved


# ---- seams: what the dispatcher needs from the layers below (tests inject fakes) ------------
class Family(Protocol):
    """The part of ``kernels.base.KernelFamily`` dispatch uses."""

    name: str

    def source_hash(self) -> str: ...
    def supports(self, problem: Any) -> str | None: ...
    def check(self, config: Any, problem: Any) -> str | None: ...
    def seeds(self, problem: Any) -> Sequence[Any]: ...
    def config_from_dict(self, d: dict[str, Any]) -> Any: ...
    def compile(self, config: Any, problem: Any) -> Callable[..., None]: ...


def _tuned_only(family: Family) -> bool:
    """``KernelFamily.TUNED_ONLY`` (False for a family that does not say)."""
    return bool(getattr(family, "TUNED_ONLY", False))


class Store(Protocol):
    """The part of ``db.LayeredStore`` dispatch uses; ``lookup`` may raise ``DatabaseError``."""

    def lookup(self, problem: Any, hard_key: HardKey) -> Any | None: ...
    def lookup_sibling(self, problem: Any, hard_key: HardKey) -> Any | None:
        """A record measured on a sibling GPU (``HardKey.is_sibling_of``), or None."""
        ...

    def class_winners(self, problem: Any, hard_key: HardKey, *, limit: int) -> Sequence[Any]:
        """Winners of the nearest tuned problems of the same op and kernel class (this GPU's or a
        sibling's), nearest first, one per config: the priors of a tuning."""
        ...

    def record_miss(self, problem: Any, hard_key: HardKey) -> None: ...


@dataclass(frozen=True)
class Layers:
    """The kernel, database and search layers, as callables."""

    get_family: Callable[[str], Family]
    families_for: Callable[[Any], Sequence[Family]]
    """The families that serve a problem, in preference order (empty: none does)."""
    open_store: Callable[[Settings], tuple[Store, Any]]
    """Returns (the store to look up in, the sink tuning records into). May raise DatabaseError."""
    tune: Callable[..., dict[str, Any] | None]
    """(problem, family, sink, hard key, device index, settings, *, seeds, stop): tunes ``problem``
    now within the settings' budgets, records into the sink, returns the winning config dict or None.
    ``seeds``: config dicts of ``family`` to evaluate first (priors from the database: the nearest
    tuned problem's winner, a sibling GPU's record), de-duplicated, possibly empty. ``stop``: None
    on the caller's thread; a background tuning's event, set at exit: return soon, record nothing
    more (``search.tune_problem(stop=...)``)."""
    why_unsupported: Callable[[Any], str] = lambda problem: "no family supports it"
    """The reason no family serves ``problem`` (asked only when ``families_for`` is empty)."""


def online_trials(s: Settings, seeds: Sequence[Any]) -> int:
    """The trial budget of an on-line tuning: ``tune_trials``, or with priors from the database
    (``seeds``: nearby problems' winners, a sibling's record, evaluated first) the smaller
    ``tune_trials_with_priors``."""
    return min(s.tune_trials, s.tune_trials_with_priors) if seeds else s.tune_trials


def _real_layers() -> Layers:
    def get_family(name: str) -> Family:
        from autocutlass import kernels

        return kernels.get_family(name)

    def families_for(problem: Any) -> Sequence[Family]:
        from autocutlass import kernels

        return kernels.families_for(problem)

    def open_store(s: Settings) -> tuple[Store, Any]:
        from autocutlass.campaign.sink import SharedTuningSink
        from autocutlass.db import LayeredStore, TuningStore
        from autocutlass.settings import DbTimeouts

        # lookups and misses, on the user's call: short lock waits (DbTimeouts.serving); the
        # tuning's records: the patient default (a trial must not be lost to a busy file)
        timeouts = DbTimeouts.from_env()
        serving = TuningStore(s.db_url, timeouts=timeouts.serving())
        return LayeredStore(serving, s.shipped_dbs_dir), SharedTuningSink(TuningStore(s.db_url, timeouts=timeouts))

    def tune(
        problem: Any, family: Family, sink: Any, hard_key: HardKey, device_index: int, s: Settings, *,
        seeds: Sequence[dict[str, Any]] = (), stop: threading.Event | None = None,
    ) -> dict[str, Any] | None:
        from autocutlass.search import pool, tune_problem

        try:
            with pool.shared(s.tune_pool_idle_s).evaluator(family.name, max(device_index, 0), cancel=stop) as ev:
                result = tune_problem(
                    problem, family, sink, trials=online_trials(s, seeds), seconds=s.tune_seconds, hard_key=hard_key,
                    evaluator=ev, seeds=seeds, stop=stop,
                )  # fmt: skip
        except pool.PoolClosed:  # interpreter exit while tuning: nothing more was recorded
            return None
        return result.best_config

    def why_unsupported(problem: Any) -> str:
        from autocutlass import kernels

        return kernels.unsupported_reason(problem)

    return Layers(get_family, families_for, open_store, tune, why_unsupported)


class _NullStore:
    """Stands in for a tuning database that could not be opened: every lookup misses."""

    def lookup(self, problem: Any, hard_key: HardKey) -> None:
        return None

    def lookup_sibling(self, problem: Any, hard_key: HardKey) -> None:
        return None

    def class_winners(self, problem: Any, hard_key: HardKey, *, limit: int) -> list[Any]:
        return []

    def record_miss(self, problem: Any, hard_key: HardKey) -> None:
        return None


# ---- statistics ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Stats:
    """Counters of one dispatcher (``autocutlass.stats()``: the default one).

    ``memo_hits`` is counted without a lock and may undercount under heavy threading; the
    others change under the miss lock. ``compiles`` counts ``family.compile`` calls (each may
    be served by the kernel layer's own memory or disk cache); ``fallbacks`` counts calls run
    by torch because autocutlass could not serve them (not policy ``off``).

    ``db_hits`` counts problems served by a record measured on this GPU; ``sibling_hits`` those
    served by a record a sibling GPU measured (same architecture and SM count, another model: a
    marked stand-in, see the module docstring), which ``db_hits`` does not include; ``class_hits``
    those served, while their tuning ran or after it found nothing, by the winner of another tuned
    problem of the same kernel class (other sizes); ``torch_standins`` those the torch op served
    while their tuning ran in the background because no stand-in kernel of theirs was loaded in
    this process yet, or because a tuned-only family (``KernelFamily.TUNED_ONLY``) has no record
    of theirs on this GPU (not ``fallbacks``); ``vendor_hits`` those the torch op serves because their
    tuning measured it faster than our best (vendor verdicts; not ``fallbacks``), or because the record
    of another problem that would serve them does not fit them (below) and nothing tunes them now.
    ``misfits`` counts the records of other problems (bucket or nearest) found not to fit the problem
    looked up (``KernelFamily.fits``). ``tunes`` counts tunings run (on the caller's thread or
    the background tuner's), ``background_tunes`` those queued under the ``background`` policy.
    ``site_torch`` counts training calls of ``autocutlass.nn.Conv2d`` layers that our kernels serve
    but that ran as ``F.conv2d`` because those kernels' vendor margins did not pay for our autograd
    node's host time (``nn.conv_site.NODE_HOST_MS``; each is a ``memo_hits`` too)."""

    memo_hits: int = 0
    memo_misses: int = 0
    db_lookups: int = 0
    db_hits: int = 0
    sibling_hits: int = 0
    misses_recorded: int = 0
    class_hits: int = 0
    torch_standins: int = 0
    vendor_hits: int = 0
    misfits: int = 0
    tunes: int = 0
    background_tunes: int = 0
    compiles: int = 0
    fallbacks: int = 0
    site_torch: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


class _Counters:
    __slots__ = tuple(Stats.__dataclass_fields__)

    def __init__(self) -> None:
        for name in self.__slots__:
            setattr(self, name, 0)

    def snapshot(self) -> Stats:
        return Stats(**{name: getattr(self, name) for name in self.__slots__})


def _is_cuda(t: Any) -> bool:
    return bool(t.is_cuda)


def _gpu_id(info: DeviceInfo) -> str:
    """The GPU's identity for host-wide locks: its UUID (the same in every process, whatever
    CUDA_VISIBLE_DEVICES says), else its index."""
    from autocutlass.campaign.gpus import normalize_uuid

    return normalize_uuid(info.uuid) if info.uuid else f"cuda{info.index}"


def _capturing(device_index: int) -> bool:
    return device_index >= 0 and torch.cuda.is_current_stream_capturing()


def _uncounted() -> None:
    """The per-call counting of a torch entry that counts nothing (a vendor verdict, a stand-in)."""


def _torch_served(entry: Entry, count: Callable[[], None]) -> Entry:
    """``entry`` (one that runs torch: a closure each front-end's ``torch_entry`` makes per call
    shape) marked for ``torch_served``; ``count`` counts one call of it."""
    entry.autocutlass_torch_served = count  # type: ignore[attr-defined]
    return entry


def torch_served(entry: Entry) -> Callable[[], None] | None:
    """For an entry of ``Dispatcher.entry`` that runs torch (a fallback, a vendor verdict, torch
    standing in for a background tuning): a function that does the counting one call of the entry
    does (``stats().fallbacks``) without running it, for a caller that computes the call together
    with others in one torch op; None for an entry that runs our kernels (or may expire)."""
    return getattr(entry, "autocutlass_torch_served", None)


def vendor_margin_of(entry: Entry) -> float | None:
    """For an entry of ``Dispatcher.entry`` that runs our kernel on a record of this GPU with a
    vendor record beside it: how much one call costs less than torch's, in ms (GPU time, plus host
    time where the tuning measured it; ``vendor.vendor_margin``); None otherwise."""
    return getattr(entry, "autocutlass_vendor_margin_ms", None)


def _main_variant() -> str:
    return MAIN_VARIANT


def _tracing() -> bool:
    """torch.compile (Dynamo, export) or torch.jit is tracing: a call reaching the dispatcher now
    runs on real tensors for a tracer (e.g. Dynamo's real-tensor propagation), not for the user."""
    return torch.compiler.is_compiling() or torch.jit.is_tracing()


_RANK = {"exact": 0, "bucket": 1, "nearest": 2}
"""How well a stored record matches the problem looked up (smaller is better)."""


def _better(rec: Any, found: _Stored) -> bool:
    """Whether record ``rec`` serves before ``found``: a better rank, or the same rank (exact or
    bucket) of the same problem and a shorter median time."""
    rank = _RANK[rec.source]
    if rank != found.rank:
        return rank < found.rank
    theirs = found.record
    if rank == _RANK["nearest"] or rec.problem != theirs.problem:
        return False
    return rec.median_ms is not None and theirs.median_ms is not None and rec.median_ms < theirs.median_ms

NEAREST_MAX_LOG2 = 3.0
"""A nearest-neighbour record serves (as a hit under ``cached``, as the stand-in otherwise) only
when its run-time dimension (GEMM's M, conv's N*P*Q, grouped GEMM's T) is within 2**this of the
problem's (``OpProblem.neighbour_distance``): a config tuned for 8192 rows served a one-row decode
GEMM with 16 CTAs at half torch's speed (Llama-3-8B decode on an H200, 2026-11-23); the family's
default, which knows M, serves instead, and the problem is recorded for ``tune --pending``. A far
record still seeds the tuning."""


PRIORS = 4
"""Winners of the nearest tuned problems of the same kernel class a tuning starts from (seeds),
beside the nearest own record and a sibling GPU's (``Store.class_winners``)."""

RECHECK_S = 5.0
"""Seconds a call served while another process tunes its problem keeps its memo entry; then the
next call looks the problem up again."""

MISS_WRITE_WAIT_S = 5.0
"""How long ``Dispatcher.stats()`` waits at most for the miss writes under way (a database that
hangs is bounded by its own timeouts; this bounds the wait for them)."""

_DEFERRED = object()
"""``Dispatcher._tune``'s answer when another process is tuning the problem."""


class _Memo(Enum):
    """How a new entry is memoised: kept, not at all (a stand-in chosen while tracing or capturing),
    for ``RECHECK_S`` seconds (a stand-in while another process tunes the problem), or until the
    background tuning of its problem ends (``WAIT``: a stand-in of the ``background`` policy)."""

    KEEP = "keep"
    SKIP = "skip"
    RECHECK = "recheck"
    WAIT = "wait"


@dataclass(frozen=True)
class _Choice:
    """What serves a problem: a family's config (``family`` None: torch, standing in while the
    problem is tuned in the background), how its entry may be memoised, and with ``_Memo.WAIT``
    the key of the background tuning it stands in for."""

    family: Family | None
    config: Any
    memo: _Memo = _Memo.KEEP
    waits_for: tuple[str, str] | None = None
    margin_ms: float | None = None
    """Where this GPU's vendor record of the served problem was read: how much a call of the config
    costs less than torch's (``vendor.vendor_margin``); kept on the entry (``vendor_margin_of``)."""


class _BgState(Enum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    DEFERRED = "deferred"


@dataclass
class _BgJob:
    """One background tuning of a dispatcher (mutable; under ``Dispatcher._bg_lock``): its state,
    the tuned config once done (None: nothing found, or it failed), the memo keys of the stand-ins
    waiting for it, and when a deferred one may be tried again."""

    state: _BgState = _BgState.QUEUED
    config: Any = None
    memo_keys: list[tuple[Any, ...]] = field(default_factory=list)
    retry_at: float = 0.0


class _BackgroundSink:
    """A tuning sink whose ok trials carry ``BACKGROUND_NOTE`` as their reason; the rest passes
    through to the sink it wraps."""

    def __init__(self, sink: Any) -> None:
        self._sink = sink

    def record_trial(self, problem: Any, hard_key: HardKey, family: str, config: Any, state: Any,
                     reason: str | None = None, **timing: Any) -> int:  # fmt: skip
        if reason is None and str(state) == "ok":
            reason = BACKGROUND_NOTE
        return self._sink.record_trial(problem, hard_key, family, config, state, reason, **timing)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sink, name)


_DISPATCHERS: weakref.WeakSet[Dispatcher] = weakref.WeakSet()
"""Every dispatcher of this process (``_after_fork_in_child``)."""


@dataclass(frozen=True)
class _Stored:
    """A stored record that can serve a problem: its family and typed config, its rank in
    ``_RANK`` and the record itself (``record.sibling``: measured on a sibling GPU)."""

    family: Family
    config: Any
    rank: int
    record: Any
    misfit: bool = False
    """Another problem's record (bucket or nearest) whose config the family does not expect to fit
    this problem (``KernelFamily.fits``): ranked as a nearest record, a stand-in."""


def _fits(family: Family, config: Any, tuned: Any, problem: Any) -> bool:
    """``KernelFamily.fits`` (True for a family that does not say, or a record without its problem)."""
    fits = getattr(family, "fits", None)
    return tuned is None or fits is None or bool(fits(config, tuned, problem))


def _unique(configs: Sequence[dict[str, Any]]) -> tuple[dict[str, Any], ...]:
    """``configs`` without repeats, first occurrence kept (by canonical key)."""
    seen: set[str] = set()
    out = []
    for c in configs:
        k = config_key(c)
        if k not in seen:
            seen.add(k)
            out.append(dict(c))
    return tuple(out)


class _PlanContext:
    """``ops.base.PlanContext`` from the dispatcher's seams."""

    __slots__ = ("device_info", "on_gpu")

    def __init__(self, on_gpu: Callable[[Any], bool], device_info: Callable[[int], DeviceInfo]) -> None:
        self.on_gpu = on_gpu
        self.device_info = device_info


class Dispatcher:
    """Memo, tuning database, miss policy and launch; see the module docstring.

    ``layers`` (kernels/db/search), ``device_info`` and ``on_gpu`` are seams for tests, which
    run the whole decision logic on CPU tensors with a fake kernel family."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        layers: Layers | None = None,
        device_info: Callable[[int], DeviceInfo] | None = None,
        on_gpu: Callable[[Any], bool] = _is_cuda,
        background: BackgroundTuner | None = None,
    ) -> None:
        self.settings = settings if settings is not None else settings_mod.current()
        self._policy = self.settings.policy
        self._layers = layers if layers is not None else _real_layers()
        self._device_info = device_info if device_info is not None else current_device
        self._ctx = _PlanContext(on_gpu, self._device_info)
        self._memo: dict[tuple[Any, ...], Entry] = {}
        self.epoch = 0
        """Bumped whenever memoised entries are dropped (cleared, expired, replaced by a background
        tuning's winner): a caller that remembers an entry (``call_remembered``) checks it first.
        Always bumped after the drop, never before: a ``call_remembered`` on another thread that
        reads the epoch between a bump and the drop would remember the dropped entry under the new
        epoch and run it for good (the drop-then-advance order)."""
        self._lock = threading.RLock()
        self._n = _Counters()
        self._store: tuple[Store, Any] | None = None
        self._runners: dict[tuple[str, Any, str], Callable[..., None]] = {}
        self._logged: set[tuple[str, str]] = set()
        self._background = background
        self._bg_lock = threading.Lock()
        self._bg_jobs: dict[tuple[str, str], _BgJob] = {}
        self._miss_lock = threading.Lock()
        self._miss_writers: list[threading.Thread] = []
        _DISPATCHERS.add(self)

    # ---- hot path --------------------------------------------------------------------------
    def call(self, fe: FrontEnd, *args: Any) -> Any:
        """Run entry point ``fe`` on ``args`` (its own arguments, positionally)."""
        pol = POLICY_OVERRIDE.policy or self._policy
        try:
            key = fe.memo_key(pol, *args)
            entry = self._memo.get(key)
        except (AttributeError, TypeError):
            fe.reject(*args)  # raises the error torch raises for these arguments
            raise
        if entry is None:
            entry = self._miss(fe, key, pol, args)
        else:
            self._n.memo_hits += 1
        return entry(*args)

    def call_remembered(self, fe: FrontEnd, *args: Any) -> tuple[Any, Entry | None, int, Policy]:
        """``call(fe, *args)``, with what a caller needs to run the same entry again without the
        dispatcher (``autocutlass.nn``'s per-module hit caches): the result, the entry it ran when
        that entry is memoised (else None), the ``epoch`` before the look-up and the policy the key
        was made under. The entry stays right for calls of the same memo key while ``epoch`` and
        the policy are unchanged."""
        epoch = self.epoch
        key, pol, entry = self._look_up(fe, args)
        out = entry(*args)
        return out, (entry if self._memo.get(key) is entry else None), epoch, pol

    def entry(self, fe: FrontEnd, *args: Any) -> Entry:
        """The entry ``call(fe, *args)`` would run, without running it (looked up, or built and
        memoised on a miss, counted as ``call`` counts). ``torch_served(entry)`` says whether it
        runs torch, so that a caller may merge such calls into one torch op (conv2d's eager
        backward: dgrad and wgrad in one ``aten.convolution_backward``)."""
        return self._look_up(fe, args)[2]

    def memoised(self, fe: FrontEnd, *args: Any) -> Entry | None:
        """The entry memoised for ``fe`` on ``args`` (what ``call`` would run on a memo hit), or
        None: looked up under the current policy, not counted, nothing built on a miss. A caller
        that read ``epoch`` before the call that memoised it may run it again for calls of the same
        memo key while ``epoch`` and the policy are unchanged (``autocutlass.nn``'s conv sites)."""
        return self._memo.get(fe.memo_key(POLICY_OVERRIDE.policy or self._policy, *args))

    def _look_up(self, fe: FrontEnd, args: tuple[Any, ...]) -> tuple[tuple[Any, ...], Policy, Entry]:
        """(memo key, policy, entry) of ``fe`` on ``args``: the memoised entry (a hit, counted) or
        the miss path's. ``call`` inlines the same steps (the hot path keeps its frames few)."""
        pol = POLICY_OVERRIDE.policy or self._policy
        try:
            key = fe.memo_key(pol, *args)
            entry = self._memo.get(key)
        except (AttributeError, TypeError):
            fe.reject(*args)
            raise
        if entry is None:
            return key, pol, self._miss(fe, key, pol, args)
        self._n.memo_hits += 1
        return key, pol, entry

    # ---- miss path -------------------------------------------------------------------------
    def _miss(self, fe: FrontEnd, key: tuple[Any, ...], pol: Policy, args: tuple[Any, ...]) -> Entry:
        with self._lock:
            entry = self._memo.get(key)
            if entry is not None:
                return entry
            self._n.memo_misses += 1
            call = fe.make_call(*args)
            if pol is Policy.OFF:
                fe.expected(call)  # the same errors as under the other policies
                entry, memo = _torch_served(fe.torch_entry(call), _uncounted), _Memo.KEEP
            else:
                entry, memo, waits_for = self._build(fe, call, fe.plan(call, self._ctx), pol)
            if memo is _Memo.WAIT:
                assert waits_for is not None
                self._memoise_waiting(key, entry, waits_for)
            elif memo is not _Memo.SKIP:
                self._memoise(key, entry if memo is _Memo.KEEP else self._expiring(key, entry))
            return entry

    def _memoise(self, key: tuple[Any, ...], entry: Entry) -> None:
        if len(self._memo) >= MEMO_LIMIT:
            self._memo.clear()
            self.epoch += 1  # after the drop (see ``epoch``)
        self._memo[key] = entry

    def _memoise_waiting(self, key: tuple[Any, ...], entry: Entry, job_key: tuple[str, str]) -> None:
        """Memoise a stand-in until the background tuning ``job_key`` ends (its completion drops
        the entry); not at all when it ended meanwhile (the next call looks the problem up anew)."""
        with self._bg_lock:
            job = self._bg_jobs.get(job_key)
            if job is None or job.state not in (_BgState.QUEUED, _BgState.RUNNING):
                return
            job.memo_keys.append(key)
            self._memoise(key, entry)

    def _expiring(self, key: tuple[Any, ...], entry: Entry) -> Entry:
        """``entry``, memoised for ``RECHECK_S`` seconds: then the next call misses again and looks
        the problem up anew (another process was tuning it; its record may be there now)."""
        deadline, memo = time.monotonic() + RECHECK_S, self._memo

        def run(*args: Any) -> Any:
            if time.monotonic() > deadline:
                memo.pop(key, None)
                self.epoch += 1  # after the drop (see ``epoch``)
            return entry(*args)

        return run

    def _build(self, fe: FrontEnd, call: Any, plan: Any, pol: Policy
               ) -> tuple[Entry, _Memo, tuple[str, str] | None]:  # fmt: skip
        """The entry for ``call``, how it may be memoised, and the background tuning a
        ``_Memo.WAIT`` entry waits for."""
        if isinstance(plan, Unsupported):
            return self._fallback(fe, call, plan.reason), _Memo.KEEP, None
        tuning = pol is Policy.TUNE or pol is Policy.BACKGROUND
        downgraded = tuning and (_capturing(plan.device_index) or _tracing())
        if downgraded:
            self._log_once(fe.name, "a tuning miss while capturing a CUDA graph or tracing runs the best stored "
                                    "or the default config and is recorded for `autocutlass tune --pending`")
        if plan.note is not None:
            self._log_once(fe.name, plan.note)
        variant = getattr(fe, "vendor_variant", _main_variant)() if self.settings.vendor_verdicts else None
        try:
            chosen = self._choose(plan.problem, pol, plan.device_index, may_tune=not downgraded, vendor=variant)
            if isinstance(chosen, str):
                return self._fallback(fe, call, chosen), _Memo.KEEP, None
            memo = _Memo.SKIP if downgraded else chosen.memo  # after a capture or trace, the policy in full
            if chosen.family is None:  # a vendor verdict, or torch standing in (a tuning, a tuned-only family)
                return _torch_served(fe.torch_entry(call), _uncounted), memo, chosen.waits_for
            runner = self._runner(chosen.family, chosen.config, plan.problem)
        except (CantImplement, KernelCompileError) as e:
            if self.settings.strict:
                raise
            return self._fallback(fe, call, f"no kernel could be built: {type(e).__name__}: {e}"), _Memo.KEEP, None
        entry = fe.kernel_entry(plan, runner, call)
        if chosen.margin_ms is not None:
            with contextlib.suppress(AttributeError):  # every front-end's entry is a fresh closure today
                entry.autocutlass_vendor_margin_ms = chosen.margin_ms  # type: ignore[attr-defined]
        return entry, memo, chosen.waits_for

    def _choose(self, problem: OpProblem, pol: Policy, device_index: int, *, may_tune: bool = True,
                vendor: str | None = None) -> _Choice | str:  # fmt: skip
        """What serves ``problem`` by policy, or the reason no family serves it. With ``may_tune``
        False, ``tune`` and ``background`` record the miss they would tune and serve the best
        record or the default. A stand-in is memoised for ``RECHECK_S`` while another process tunes
        the problem, and until the tuning ends under ``background``.

        Tiers: this GPU's records (exact, bucket, nearest); then a sibling GPU's (same tiers);
        under ``tune`` and ``background`` then the winner of the nearest tuned problem of the same
        kernel class (``Store.class_winners``); then the family's default. A record of this GPU's
        exact problem or bucket serves under ``tune`` and ``background``; anything less is a
        stand-in while the problem is tuned, and a seed of that tuning (with the other priors).
        With ``vendor`` (a variant of torch's path, not None), a serving record of this GPU's exact
        problem or bucket, or a tuning's winner, gives way to torch where that variant's vendor
        record says torch is faster (the module doc)."""
        vendor_ok = vendor is not None
        families = list(self._layers.families_for(problem))
        if not families:
            return f"no kernel family serves {problem.describe()}: {self._layers.why_unsupported(problem)}"
        first = families[0]
        if pol is Policy.HEURISTIC:
            return _Choice(first, self._default_config(first, problem))
        info = self._device_info(device_index)
        hard_key = info.hard_key(first.source_hash())
        found = self._stored(problem, families, info, sibling=False)
        near = self._near_enough(problem, found)  # what may serve; a far record only seeds the tuning
        tunes_now = pol is Policy.TUNE and may_tune  # else the caller must not wait for the miss's write
        if near is not None and (pol is Policy.CACHED or near.rank < _RANK["nearest"]):
            if near.rank == _RANK["nearest"]:  # a stand-in: tune --pending should tune the problem itself
                self._record_miss(problem, hard_key, wait=tunes_now)
                if near.misfit and vendor_ok:  # torch picks its own tiles for this M
                    return self._vendor_choice(problem, misfit=True)
                if _tuned_only(near.family):
                    return self._tuned_only_standin(problem, near.family, _Memo.KEEP, None)
            self._n.db_hits += 1
            verdict = (self._vendor_verdict(problem, near.record, info, vendor)
                       if near.rank < _RANK["nearest"] and vendor_ok else None)  # fmt: skip
            if verdict is not None and verdict[0]:
                return self._vendor_choice(problem)
            return _Choice(near.family, near.config, margin_ms=None if verdict is None else verdict[1])
        self._record_miss(problem, hard_key, wait=tunes_now)
        sibling = self._near_enough(problem, self._stored(problem, families, info, sibling=True))
        priors = self._priors(problem, hard_key) if pol in (Policy.TUNE, Policy.BACKGROUND) else []
        seeds = [c.record.config for c in (found, sibling, *priors) if c is not None and c.family is first]
        memo, waits_for = _Memo.KEEP, None
        if tunes_now:
            tuned = self._tune(problem, first, hard_key, info, seeds)
            if tuned is _DEFERRED:
                memo = _Memo.RECHECK
            elif tuned is not None:
                if vendor_ok:
                    rec = self._lookup(problem, hard_key)
                    verdict = (self._vendor_verdict(problem, rec, info, vendor)
                               if rec is not None and rec.source == "exact" else None)  # fmt: skip
                    if verdict is not None and verdict[0]:
                        return self._vendor_choice(problem)
                    return _Choice(first, tuned, margin_ms=None if verdict is None else verdict[1])
                return _Choice(first, tuned)
        elif pol is Policy.BACKGROUND and may_tune:
            bg = self._tune_in_background(problem, first, hard_key, info, seeds)
            if isinstance(bg, _Choice):
                return bg
            memo, waits_for = bg
        # the stand-in: this GPU's nearest record, a sibling's, the nearest class winner, the default
        chosen = near or sibling or (priors[0] if priors else None)
        if chosen is not None and chosen.misfit and vendor_ok:
            self._n.torch_standins += 1
            return _Choice(None, None, memo, waits_for)
        if _tuned_only(chosen.family if chosen else first):
            return self._tuned_only_standin(problem, chosen.family if chosen else first, memo, waits_for)
        family, config = (chosen.family, chosen.config) if chosen else (first, self._default_config(first, problem))
        if memo is _Memo.WAIT and (family.name, config, problem.kernel_class_key()) not in self._runners:
            # the background policy's stand-in would be compiled (or loaded) now: torch serves until
            # the tuning ends, so that no call waits for a compile
            self._n.torch_standins += 1
            return _Choice(None, None, memo, waits_for)
        if chosen is not None and chosen is sibling and near is None:
            self._n.sibling_hits += 1
            self._note_sibling(sibling, info)
        elif chosen is not None and near is None:
            self._n.class_hits += 1
        return _Choice(family, config, memo, waits_for)

    def _tuned_only_standin(self, problem: OpProblem, family: Family, memo: _Memo,
                            waits_for: tuple[str, str] | None) -> _Choice:  # fmt: skip
        """Torch in place of a stand-in config of a ``TUNED_ONLY`` family (``torch_standins``;
        logged once per problem): the problem has no record of this GPU yet."""
        self._n.torch_standins += 1
        if ("tuned-only", problem.key()) not in self._logged:
            self._logged.add(("tuned-only", problem.key()))
            log.info("autocutlass: torch serves %s: %s serves only problems tuned on this GPU (policy tune tunes "
                     "it on the call; `autocutlass tune --pending` tunes the recorded misses)",
                     problem.describe(), family.name)  # fmt: skip
        return _Choice(None, None, memo, waits_for)

    def _vendor_verdict(self, problem: OpProblem, rec: Any, info: DeviceInfo, variant: str = MAIN_VARIANT
                        ) -> tuple[bool, float] | None:  # fmt: skip
        """Against the vendor record of ``variant`` of ``rec``'s tuned problem (this GPU's; None
        without one, or for a sibling GPU's ``rec``): whether torch serves, being faster than ``rec`` by more than
        ``vendor.VENDOR_MARGIN`` (``vendor.vendor_faster``), and how much a call of ``rec``'s config
        costs less than torch's (``vendor.vendor_margin``). GPU plus host time of a call where the
        tuning measured both and ``Settings.vendor_host`` is on, else GPU time."""
        if rec.sibling:
            return None
        theirs = self._lookup(problem, vendor_hard_key(rec.hard_key, info.torch_version, info.cuda_runtime_version,
                                                       variant))  # fmt: skip
        if theirs is None or theirs.problem != rec.problem:
            return None
        host = host_times(getattr(theirs, "config", None)) if self.settings.vendor_host else None
        return vendor_faster(rec.median_ms, theirs.median_ms, host), vendor_margin(rec.median_ms, theirs.median_ms, host)

    def _vendor_choice(self, problem: OpProblem, *, misfit: bool = False) -> _Choice:
        """Torch serves ``problem``: its tuning measured torch faster, or (``misfit``) the record of
        another problem that would serve it is not expected to fit it and nothing tunes it now."""
        self._n.vendor_hits += 1
        if ("vendor", problem.key()) not in self._logged:
            self._logged.add(("vendor", problem.key()))
            why = ("the record that would serve it (another problem's) is not expected to fit it and it is not "
                   "tuned now (recorded for autocutlass tune --pending)") if misfit else "its tuning measured torch faster than our best kernel"
            log.info("autocutlass: torch serves %s: %s (AUTOCUTLASS_VENDOR_VERDICTS=0 serves ours)",
                     problem.describe(), why)  # fmt: skip
        return _Choice(None, None)

    def _near_enough(self, problem: OpProblem, stored: _Stored | None) -> _Stored | None:
        """``stored`` unless it is a nearest-neighbour record too far away to serve ``problem``
        (``NEAREST_MAX_LOG2``; logged once per problem)."""
        theirs = getattr(stored.record, "problem", None) if stored is not None else None
        if stored is None or stored.rank != _RANK["nearest"] or theirs is None:
            return stored
        if float(problem.neighbour_distance(theirs)[0]) <= NEAREST_MAX_LOG2:
            return stored
        self._log_once("db", f"the nearest tuned problem to {problem.describe()} ({theirs.describe()}) is too far "
                             f"away to serve it; the default config does, and the problem is recorded for "
                             f"autocutlass tune --pending")  # fmt: skip
        return None

    def _priors(self, problem: OpProblem, hard_key: HardKey) -> list[_Stored]:
        """The winners of the nearest tuned problems of ``problem``'s kernel class that can serve
        it (``Store.class_winners``, at most ``PRIORS``), nearest first."""
        store, _ = self._open_store()
        self._n.db_lookups += 1
        try:
            records = store.class_winners(problem, hard_key, limit=PRIORS)
        except DatabaseError as e:
            self._log_once("db", f"tuning database lookup failed, treated as a miss: {e}")
            return []
        out = []
        for rec in records:
            got = self._from_record(rec, problem, quiet=True)
            if got is not None:
                out.append(_Stored(got[0], got[1], _RANK["nearest"], rec))
        return out

    # ---- background tuning -----------------------------------------------------------------
    def _background_tuner(self) -> BackgroundTuner:
        if self._background is None:
            self._background = background_mod.shared()
        return self._background

    def _tune_in_background(self, problem: OpProblem, family: Family, hard_key: HardKey, info: DeviceInfo,
                            seeds: Sequence[dict[str, Any]]) -> _Choice | tuple[_Memo, tuple[str, str] | None]:  # fmt: skip
        """Queue the tuning of ``problem`` (once) and say how the stand-in is memoised: until the
        tuning ends (WAIT), for ``RECHECK_S`` (another process tunes it), or for good (a tuning of
        this process found nothing or failed). The winner of a tuning that ended here, when the
        database did not give it back (e.g. unusable meanwhile), as a ``_Choice``."""
        job_key = (problem.key(), hard_key.key())
        with self._bg_lock:
            job = self._bg_jobs.get(job_key)
            if job is not None:
                if job.state in (_BgState.QUEUED, _BgState.RUNNING):
                    return _Memo.WAIT, job_key
                if job.state is _BgState.DONE:
                    return _Choice(family, job.config) if job.config is not None else (_Memo.KEEP, None)
                if time.monotonic() < job.retry_at:  # deferred: another process tunes it
                    return _Memo.RECHECK, None
            job = _BgJob()
            self._bg_jobs[job_key] = job

        def run(stop: threading.Event) -> Any:
            with self._bg_lock:
                job.state = _BgState.RUNNING
            return self._tune(problem, family, hard_key, info, seeds, stop=stop)

        def done(result: Any, error: BaseException | None) -> None:
            self._background_done(job, result, error)

        if not self._background_tuner().submit((id(self), job_key), run, done):
            with self._bg_lock:  # shut down (interpreter exit): serve the stand-in for good
                job.state = _BgState.DONE
            return _Memo.KEEP, None
        self._n.background_tunes += 1
        return _Memo.WAIT, job_key

    def _background_done(self, job: _BgJob, result: Any, error: BaseException | None) -> None:
        """A background tuning ended (on the tuner's thread): record how, and drop the memo entries
        of the stand-ins that waited for it, so that their next call finds the winner."""
        with self._bg_lock:
            if error is None and result is _DEFERRED:
                job.state, job.retry_at = _BgState.DEFERRED, time.monotonic() + RECHECK_S
            else:
                job.state = _BgState.DONE
                job.config = result if error is None else None
            keys, job.memo_keys = job.memo_keys, []
        for key in keys:
            self._memo.pop(key, None)
        self.epoch += 1  # after the drop (see ``epoch``)

    def wait_background(self, timeout_s: float | None = None) -> bool:
        """Wait until the background tunings (of every dispatcher sharing this one's tuner) ended;
        False when ``timeout_s`` ran out first. For scripts, tests and probes: calls never need it."""
        return self._background is None or self._background.wait_idle(timeout_s)

    def _after_fork(self) -> None:
        """In a forked child: fresh locks (another thread may have held them at the fork), and the
        parent's background tunings forgotten (the parent's thread runs them; the child's stand-ins
        waiting for them are dropped, so its next call looks the problem up and queues its own)."""
        self._lock = threading.RLock()
        self._bg_lock = threading.Lock()
        self._miss_lock = threading.Lock()
        self._miss_writers = []  # the parent's threads, not running here
        jobs, self._bg_jobs = self._bg_jobs, {}
        for key, job in jobs.items():
            if job.state is _BgState.DONE:
                self._bg_jobs[key] = job
            else:
                for memo_key in job.memo_keys:
                    self._memo.pop(memo_key, None)
                self.epoch += 1  # after the drop (see ``epoch``)

    def _stored(self, problem: OpProblem, families: Sequence[Family], info: DeviceInfo, *, sibling: bool
                ) -> _Stored | None:  # fmt: skip
        """The best-matching usable record of ``problem`` among ``families``' (each under its own
        hard key): this GPU's, or with ``sibling`` a sibling GPU's. Exact before bucket before
        nearest; between records of one rank, the faster (two families tuned on the same problem:
        hopper_gemm and hopper_gemv on a decode GEMM), else the earlier family."""
        found: _Stored | None = None
        for family in families:
            rec = self._lookup(problem, info.hard_key(family.source_hash()), sibling=sibling)
            if rec is None or (found is not None and not _better(rec, found)):
                continue
            # a bucket or nearest record is another problem's: that its config does not fit this one
            # (a GEMV record's m_tile) is expected, not worth a warning
            got = self._from_record(rec, problem, quiet=rec.source != "exact")
            if got is None:
                continue
            tuned = getattr(rec, "problem", None)
            if rec.source != "exact" and not _fits(got[0], got[1], tuned, problem):
                found = _Stored(got[0], got[1], max(_RANK[rec.source], _RANK["nearest"]), rec, misfit=True)
                self._n.misfits += 1
                if ("misfit", problem.key()) not in self._logged:
                    self._logged.add(("misfit", problem.key()))
                    log.info("autocutlass: %s's record (%s) is not expected to fit %s (its tiles fill the GPU's waves "
                             "worse there): a stand-in, not a hit", tuned.describe(), got[0].name,
                             problem.describe())  # fmt: skip
            else:
                found = _Stored(got[0], got[1], _RANK[rec.source], rec)
        return found

    def _note_sibling(self, found: _Stored, info: DeviceInfo) -> None:
        """One info line per sibling GPU whose records serve here."""
        measured_on = found.record.hard_key.gpu_name
        if ("sibling", measured_on) not in self._logged:
            self._logged.add(("sibling", measured_on))
            log.info("autocutlass: problems without a record of this %s are served by records measured on a %s "
                     "(same architecture and SM count; `autocutlass tune` tunes them here)", info.gpu_name,
                     measured_on)  # fmt: skip

    # ---- helpers of the miss path ----------------------------------------------------------
    def _default_config(self, family: Family, problem: OpProblem) -> Any:
        seeds = family.seeds(problem)
        if not seeds:
            raise CantImplement(f"{family.name} has no default config for {problem.describe()}")
        return seeds[0]

    def _open_store(self) -> tuple[Store, Any]:
        if self._store is None:
            try:
                self._store = self._layers.open_store(self.settings)
            except DatabaseError as e:
                log.warning("autocutlass: tuning database unusable, every lookup misses: %s", e)
                self._store = (_NullStore(), None)
        return self._store

    def _lookup(self, problem: OpProblem, hard_key: HardKey, *, sibling: bool = False) -> Any | None:
        store, _ = self._open_store()
        self._n.db_lookups += 1
        try:
            return store.lookup_sibling(problem, hard_key) if sibling else store.lookup(problem, hard_key)
        except DatabaseError as e:
            self._log_once("db", f"tuning database lookup failed, treated as a miss: {e}")
            return None

    def _record_miss(self, problem: OpProblem, hard_key: HardKey, *, wait: bool = True) -> None:
        """Count a miss of ``problem`` in the user database (for ``autocutlass tune --pending``).
        ``wait`` False (a caller that will not tune now: ``cached``, ``background``, a capture or a
        trace) writes it on a short-lived daemon thread: the caller does not wait for the write,
        nor for the first write's SQLAlchemy import (0.2-1 s; lookups of SQLite files need none).
        ``stats()`` waits for the writes under way, so its counts include them."""
        if wait:
            self._write_miss(problem, hard_key)
            return
        writer = threading.Thread(target=self._write_miss, args=(problem, hard_key), name="autocutlass-miss",
                                  daemon=True)  # fmt: skip
        with self._miss_lock:
            self._miss_writers = [t for t in self._miss_writers if t.is_alive()]
            self._miss_writers.append(writer)
        writer.start()

    def _write_miss(self, problem: OpProblem, hard_key: HardKey) -> None:
        store, _ = self._open_store()
        try:
            store.record_miss(problem, hard_key)
            with self._miss_lock:
                self._n.misses_recorded += 1
        except DatabaseError as e:
            self._log_once("db", f"cannot record a tuning miss: {e}")

    def wait_for_miss_writes(self, timeout: float = MISS_WRITE_WAIT_S) -> None:
        """Wait (at most ``timeout`` seconds in all) for the miss writes under way to finish."""
        deadline = time.monotonic() + timeout
        with self._miss_lock:
            writers = list(self._miss_writers)
        for t in writers:
            t.join(max(0.0, deadline - time.monotonic()))

    def _from_record(self, rec: Any, problem: OpProblem, *, quiet: bool = False) -> tuple[Family, Any] | None:
        """The record's (family, config) if it still serves ``problem``; else None (logged, unless
        ``quiet``: a record of another problem, tried as a stand-in, may well not fit)."""
        try:
            family = self._layers.get_family(rec.family)
        except KeyError:
            self._log_once("db", f"stored record names unknown kernel family {rec.family!r}; ignored")
            return None
        try:
            config = family.config_from_dict(rec.config)
        except (KeyError, TypeError, ValueError) as e:
            self._log_once("db", f"stored {rec.family} config cannot be read ({type(e).__name__}: {e}); ignored")
            return None
        reason = family.supports(problem) or family.check(config, problem)
        if reason is not None:
            if not quiet:
                self._log_once("db", f"stored {rec.family} config no longer serves {problem.describe()}: {reason}")
            return None
        return family, config

    def _tune(self, problem: OpProblem, family: Family, hard_key: HardKey, info: DeviceInfo,
              seeds: Sequence[dict[str, Any]] = (), *, stop: threading.Event | None = None) -> Any:  # fmt: skip
        """The tuned config; None when tuning found none or could not record (logged);
        ``_DEFERRED`` when another process tunes the problem or times candidates on this GPU now
        (a sink with ``claim``, ``campaign.SharedTuningSink``: one process tunes, the others serve)."""
        _, sink = self._open_store()
        if sink is None:
            self._log_once("tune", "no usable tuning database to record into; not tuning")
            return None
        try:
            claim_fn = getattr(sink, "claim", None)
            claim = contextlib.nullcontext() if claim_fn is None else claim_fn(problem, hard_key, gpu=_gpu_id(info))
            if claim is None:
                self._log_once("tune", f"{problem.describe()} is being tuned by another process (or the GPU is "
                                       "busy timing candidates): serving the best available config meanwhile")  # fmt: skip
                return _DEFERRED
            self._n.tunes += 1
            where = " in the background" if stop is not None else ""
            log.info("autocutlass: tuning %s%s (%d trials, %d s at most)", problem.describe(), where,
                     self.settings.tune_trials, self.settings.tune_seconds)  # fmt: skip
            with claim:
                best = self._layers.tune(problem, family, sink if stop is None else _BackgroundSink(sink), hard_key,
                                         info.index, self.settings, seeds=_unique(seeds), stop=stop)  # fmt: skip
        except DatabaseError as e:
            self._log_once("tune", f"tuning could not record its results, not tuning: {e}")
            return None
        if best is None:
            if stop is None or not stop.is_set():
                self._log_once("tune", f"tuning found no working config for {problem.describe()}; using the default")
            return None
        config = family.config_from_dict(best)
        reason = family.check(config, problem)
        if reason is not None:
            raise CantImplement(f"tuning returned a config that fails check: {reason}")
        return config

    def _runner(self, family: Family, config: Any, problem: OpProblem) -> Callable[..., None]:
        key = (family.name, config, problem.kernel_class_key())
        runner = self._runners.get(key)
        if runner is None:
            self._n.compiles += 1
            runner = family.compile(config, problem)
            self._runners[key] = runner
        return runner

    def _fallback(self, fe: FrontEnd, call: Any, reason: str) -> Entry:
        if self.settings.strict:
            raise UnsupportedProblem(f"autocutlass.{fe.name}: {reason}")
        self._log_once(fe.name, f"served by torch: {reason}")
        run, n = fe.torch_entry(call), self._n

        def counted(*args: Any) -> Any:
            n.fallbacks += 1
            return run(*args)

        def count() -> None:
            n.fallbacks += 1

        return _torch_served(counted, count)

    def _log_once(self, where: str, message: str) -> None:
        if (where, message) not in self._logged:
            self._logged.add((where, message))
            log.warning("autocutlass.%s: %s", where, message)

    # ---- inspection ------------------------------------------------------------------------
    def stats(self) -> Stats:
        """The counters; the miss writes under way are waited for first (``wait_for_miss_writes``)."""
        if self._miss_writers:
            self.wait_for_miss_writes()
        return self._n.snapshot()

    def clear(self) -> None:
        """Forget memoised entries (not the counters, nor the compiled runners)."""
        with self._lock:
            self._memo.clear()
            self.epoch += 1  # after the drop (see ``epoch``)


def _finish_miss_writes() -> None:
    """At interpreter exit: let the miss writes under way finish (``MISS_WRITE_WAIT_S`` at most per
    dispatcher), so that a short script's misses reach ``autocutlass tune --pending``."""
    for d in list(_DISPATCHERS):
        if d._miss_writers:
            d.wait_for_miss_writes()


atexit.register(_finish_miss_writes)


def _after_fork_in_child() -> None:
    for d in list(_DISPATCHERS):
        d._after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)

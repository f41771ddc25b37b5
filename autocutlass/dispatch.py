"""From a call to a launch: memo -> tuning-database lookup -> miss policy -> compiled kernel.

The only module that imports ``kernels``, ``search`` and ``db`` together (each lazily, on the
first memo miss that needs it).

**Hit path** (``Dispatcher.matmul``/``linear``/``gemm``/``scaled_mm``): a tuple built from
tensor metadata (entry point, policy, then per tensor: shape, strides, dtype, device index,
``data_ptr() % 16``; plus autograd and TF32 flags and the epilogue choices; for ``scaled_mm`` the
shape, dtype and device of the scales and of ``scale_result``, never their values, ``out_dtype``
and ``use_fast_accum``) indexes
``Dispatcher._memo``, a dict of prepared launch closures. A hit is that tuple, one dict lookup,
the ``as_strided`` views the plan needs, ``torch.empty`` for the output and the runner's launch
on the current stream. No ``GemmProblem`` is built, nothing synchronises, nothing allocates outside
torch's caching allocator, so a tuned call can be captured in a CUDA graph. Reads of the memo
take no lock.

**fp8** (``scaled_mm``): its entries take ``(a, b, scale_a, scale_b, bias, out, scale_result)`` instead of the
other ops' ``(a, b, c, bias, out, alpha, beta)`` (the key's op says which kind a memo entry is),
and pass the user's scale tensors, as (1,) views, to the runner as ``scale_a``/``scale_b``; the
kernel reads them on the device, so nothing synchronises. The other ops' runners are called
exactly as before, without scale arguments.

**Miss path** (under one re-entrant lock, so concurrent misses neither tune nor compile twice;
hits in other threads proceed): ``validate.plan`` -> ``GemmProblem`` -> kernel family -> config by
policy -> ``family.compile`` -> a closure stored in the memo. Policies (``AUTOCUTLASS_POLICY``,
overridden per context by ``autocutlass.policy``):

* ``tune``: the stored record of the problem or of its M bucket; else record the miss, tune now
  (``search.tune_problem`` within ``Settings.tune_trials``/``tune_seconds``, recording into the
  user database) and run the winner. Inside a CUDA graph capture it acts as ``cached`` (and the
  result is not memoised, so the first call outside a capture tunes).
* ``cached``: any stored record (exact, bucket, nearest M); else record the miss and run the
  family's default config, ``family.seeds(problem)[0]``. Never tunes.
* ``heuristic``: ``family.seeds(problem)[0]``; never reads the database.
* ``off``: torch, always (validated like the others; not counted as a fallback).

**Fallback**: a call ``validate`` marks unsupported, a family that cannot serve the problem, or a
config that fails to compile runs the torch op. One log line per (entry point, reason); with
``AUTOCUTLASS_STRICT=1`` ``UnsupportedProblem`` is raised instead. A tuning database that cannot
be opened or read is logged once and behaves as a miss.

Settings are read once, when a ``Dispatcher`` is made; ``reset()`` makes the default one anew.
"""

from __future__ import annotations

import functools

import contextvars
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any, Protocol

import torch

from autocutlass import settings as settings_mod
from autocutlass.ops.gemm import frontend as validate
from autocutlass.device import DeviceInfo, HardKey, current_device
from autocutlass.errors import CantImplement, DatabaseError, KernelCompileError, UnsupportedProblem
from autocutlass.ops.gemm.problem import Activation, GemmProblem
from autocutlass.settings import Policy, Settings
from autocutlass.ops.gemm.frontend import Call, KernelPlan, Op, Unsupported

log = logging.getLogger("autocutlass")

MEMO_LIMIT = 16_384
"""Entries the memo holds before it is emptied (a workload with unbounded distinct shapes)."""

POLICY_OVERRIDE: contextvars.ContextVar[Policy | None] = contextvars.ContextVar("autocutlass_policy", default=None)
"""Set by ``autocutlass.policy(...)``; per thread and per asyncio task; None: the settings' policy."""


@contextmanager
def policy(name: Policy | str) -> Iterator[Policy]:
    """Use miss policy ``name`` ('tune', 'cached', 'heuristic', 'off') inside the block.

    Nestable; affects only the current thread (or asyncio task)."""
    try:
        p = Policy(name)
    except ValueError:
        raise ValueError(f"policy {name!r} is not one of: {', '.join(x.value for x in Policy)}") from None
    token = POLICY_OVERRIDE.set(p)
    try:
        yield p
    finally:
        POLICY_OVERRIDE.reset(token)


# ---- seams: what the dispatcher needs from the layers below (tests inject fakes) ------------
class Family(Protocol):
    """The part of ``kernels.base.KernelFamily`` dispatch uses."""

    name: str

    def supports(self, problem: GemmProblem) -> str | None: ...
    def check(self, config: Any, problem: GemmProblem) -> str | None: ...
    def seeds(self, problem: GemmProblem) -> Sequence[Any]: ...
    def config_from_dict(self, d: dict[str, Any]) -> Any: ...
    def compile(self, config: Any, problem: GemmProblem) -> Callable[..., None]: ...


class Store(Protocol):
    """The part of ``db.LayeredStore`` dispatch uses; ``lookup`` may raise ``DatabaseError``."""

    def lookup(self, problem: GemmProblem, hard_key: HardKey) -> Any | None: ...
    def record_miss(self, problem: GemmProblem, hard_key: HardKey) -> None: ...


@dataclass(frozen=True)
class Layers:
    """The kernel, database and search layers, as callables."""

    get_family: Callable[[str], Family]
    default_family_for: Callable[[GemmProblem], Family | None]
    open_store: Callable[[Settings], tuple[Store, Any]]
    """Returns (the store to look up in, the sink tuning records into). May raise DatabaseError."""
    tune: Callable[[GemmProblem, Family, Any, HardKey, int, Settings], dict[str, Any] | None]
    """(problem, family, sink, hard key, device index, settings): tunes ``problem`` now within the
    settings' budgets, records into the sink, returns the winning config dict or None."""
    why_unsupported: Callable[[GemmProblem], str] = lambda problem: "no family supports it"
    """The reason no family serves ``problem`` (asked only when ``default_family_for`` gives None)."""


def _real_layers() -> Layers:
    def get_family(name: str) -> Family:
        from autocutlass import kernels

        return kernels.get_family(name)

    def default_family_for(problem: GemmProblem) -> Family | None:
        from autocutlass import kernels

        return kernels.default_family_for(problem)

    def open_store(s: Settings) -> tuple[Store, Any]:
        from autocutlass.db import LayeredStore, TuningStore

        user = TuningStore(s.db_url)
        return LayeredStore(user, s.shipped_dbs_dir), user

    def tune(
        problem: GemmProblem, family: Family, sink: Any, hard_key: HardKey, device_index: int, s: Settings
    ) -> dict[str, Any] | None:
        from autocutlass.search import tune_problem

        result = tune_problem(
            problem, family, sink, trials=s.tune_trials, seconds=s.tune_seconds, hard_key=hard_key,
            device_index=max(device_index, 0),
        )  # fmt: skip
        return result.best_config

    def why_unsupported(problem: GemmProblem) -> str:
        from autocutlass import kernels

        return kernels.unsupported_reason(problem)

    return Layers(get_family, default_family_for, open_store, tune, why_unsupported)


class _NullStore:
    """Stands in for a tuning database that could not be opened: every lookup misses."""

    def lookup(self, problem: GemmProblem, hard_key: HardKey) -> None:
        return None

    def record_miss(self, problem: GemmProblem, hard_key: HardKey) -> None:
        return None


# ---- statistics ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Stats:
    """Counters of one dispatcher (``autocutlass.stats()``: the default one).

    ``memo_hits`` is counted without a lock and may undercount under heavy threading; the
    others change under the miss lock. ``compiles`` counts ``family.compile`` calls (each may
    be served by the kernel layer's own memory or disk cache); ``fallbacks`` counts calls run
    by torch because autocutlass could not serve them (not policy ``off``)."""

    memo_hits: int = 0
    memo_misses: int = 0
    db_lookups: int = 0
    db_hits: int = 0
    misses_recorded: int = 0
    tunes: int = 0
    compiles: int = 0
    fallbacks: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


class _Counters:
    __slots__ = tuple(Stats.__dataclass_fields__)

    def __init__(self) -> None:
        for name in self.__slots__:
            setattr(self, name, 0)

    def snapshot(self) -> Stats:
        return Stats(**{name: getattr(self, name) for name in self.__slots__})


Entry = Callable[..., torch.Tensor]
"""A memo entry. ``matmul``/``linear``/``gemm``: (a, b, c, bias, out, alpha, beta) -> result;
``scaled_mm``: (a, b, scale_a, scale_b, bias, out, scale_result) -> result. The key's op says which."""


def _tf32_allowed() -> bool:
    return torch.backends.cuda.matmul.fp32_precision == "tf32"


def _is_cuda(t: torch.Tensor) -> bool:
    return t.is_cuda


def _capturing(t: torch.Tensor) -> bool:
    return t.is_cuda and torch.cuda.is_current_stream_capturing()


def _overlaps(p: int, span: int, q: int, qspan: int) -> bool:
    return span > 0 and qspan > 0 and p < q + qspan and q < p + span


_F32 = torch.float32
_GRAD = torch.is_grad_enabled


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
        on_gpu: Callable[[torch.Tensor], bool] = _is_cuda,
    ) -> None:
        self.settings = settings if settings is not None else settings_mod.current()
        self._policy = self.settings.policy
        self._layers = layers if layers is not None else _real_layers()
        self._device_info = device_info if device_info is not None else current_device
        self._on_gpu = on_gpu
        self._memo: dict[tuple[Any, ...], Entry] = {}
        self._lock = threading.RLock()
        self._n = _Counters()
        self._store: tuple[Store, Any] | None = None
        self._runners: dict[tuple[str, Any, str], Callable[..., None]] = {}
        self._logged: set[tuple[str, str]] = set()

    # ---- hot path --------------------------------------------------------------------------
    def matmul(self, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        try:
            key = (
                Op.MATMUL,
                POLICY_OVERRIDE.get() or self._policy,
                _GRAD() and (a.requires_grad or b.requires_grad),
                a.dtype is _F32 and _tf32_allowed(),
                a.shape, a.stride(), a.dtype, a.get_device(), a.data_ptr() & 15,
                b.shape, b.stride(), b.dtype, b.get_device(), b.data_ptr() & 15,
                None if out is None else (out.shape, out.stride(), out.dtype, out.get_device(), out.data_ptr() & 15),
            )  # fmt: skip
        except AttributeError:
            validate.expected_result(Call(Op.MATMUL, a, b, out=out))  # raises the TypeError
            raise
        entry = self._memo.get(key)
        if entry is None:
            entry = self._miss(key, Call(Op.MATMUL, a, b, out=out))
        else:
            self._n.memo_hits += 1
        return entry(a, b, None, None, out, 1.0, 0.0)

    def linear(
        self,
        x: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor | None = None,
        activation: Activation | str | None = None,
    ) -> torch.Tensor:
        try:
            key = (
                Op.LINEAR,
                POLICY_OVERRIDE.get() or self._policy,
                _GRAD() and (x.requires_grad or weight.requires_grad or (bias is not None and bias.requires_grad)),
                x.dtype is _F32 and _tf32_allowed(),
                x.shape, x.stride(), x.dtype, x.get_device(), x.data_ptr() & 15,
                weight.shape, weight.stride(), weight.dtype, weight.get_device(), weight.data_ptr() & 15,
                None if bias is None else (bias.shape, bias.stride(), bias.dtype, bias.get_device(), bias.data_ptr() & 15),
                activation,
            )  # fmt: skip
        except AttributeError:
            validate.expected_result(Call(Op.LINEAR, x, weight, bias=bias))
            raise
        entry = self._memo.get(key)
        if entry is None:
            act = validate.parse_activation(activation)
            entry = self._miss(key, Call(Op.LINEAR, x, weight, bias=bias, activation=act))
        else:
            self._n.memo_hits += 1
        return entry(x, weight, None, bias, None, 1.0, 0.0)

    def gemm(
        self,
        a: torch.Tensor,
        b: torch.Tensor,
        c: torch.Tensor | None = None,
        alpha: float = 1.0,
        beta: float = 0.0,
        out: torch.Tensor | None = None,
    ) -> torch.Tensor:
        try:
            key = (
                Op.GEMM,
                POLICY_OVERRIDE.get() or self._policy,
                _GRAD() and (a.requires_grad or b.requires_grad or (c is not None and c.requires_grad)),
                a.dtype is _F32 and _tf32_allowed(),
                a.shape, a.stride(), a.dtype, a.get_device(), a.data_ptr() & 15,
                b.shape, b.stride(), b.dtype, b.get_device(), b.data_ptr() & 15,
                None if c is None else (c.shape, c.stride(), c.dtype, c.get_device(), c.data_ptr() & 15),
                beta != 0,
                None if out is None else (out.shape, out.stride(), out.dtype, out.get_device(), out.data_ptr() & 15),
            )  # fmt: skip
        except AttributeError:
            validate.expected_result(Call(Op.GEMM, a, b, c=c, out=out))
            raise
        entry = self._memo.get(key)
        if entry is None:
            entry = self._miss(key, Call(Op.GEMM, a, b, c=c, out=out, alpha=float(alpha), beta=float(beta)))
        else:
            self._n.memo_hits += 1
        return entry(a, b, c, None, out, float(alpha), float(beta))

    def scaled_mm(
        self,
        a: torch.Tensor,
        b: torch.Tensor,
        scale_a: torch.Tensor,
        scale_b: torch.Tensor,
        bias: torch.Tensor | None = None,
        out_dtype: torch.dtype | None = None,
        out: torch.Tensor | None = None,
        activation: Activation | str | None = None,
        use_fast_accum: bool = False,
        scale_result: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``autocutlass.scaled_mm`` (whose signature is torch._scaled_mm's); ``out_dtype=None``
        is torch's default (fp8 output, run by torch)."""
        try:
            key = (
                Op.SCALED_MM,
                POLICY_OVERRIDE.get() or self._policy,
                _GRAD() and (a.requires_grad or b.requires_grad or scale_a.requires_grad or scale_b.requires_grad
                             or (bias is not None and bias.requires_grad)),
                False,  # the TF32 flag of the other ops' keys: fp8 has no such choice
                a.shape, a.stride(), a.dtype, a.get_device(), a.data_ptr() & 15,
                b.shape, b.stride(), b.dtype, b.get_device(), b.data_ptr() & 15,
                scale_a.shape, scale_a.dtype, scale_a.get_device(),
                scale_b.shape, scale_b.dtype, scale_b.get_device(),
                None if bias is None else (bias.shape, bias.stride(), bias.dtype, bias.get_device(), bias.data_ptr() & 15),
                out_dtype,
                None if out is None else (out.shape, out.stride(), out.dtype, out.get_device(), out.data_ptr() & 15),
                activation,
                # True/False themselves: 1 == True would share True's entry (torch rejects non-bools)
                use_fast_accum if use_fast_accum.__class__ is bool else (type(use_fast_accum), use_fast_accum),
                None if scale_result is None else (scale_result.shape, scale_result.dtype, scale_result.get_device()),
            )  # fmt: skip
            entry = self._memo.get(key)  # TypeError for an unhashable out_dtype, activation or use_fast_accum
        except (AttributeError, TypeError):
            validate.expected_result(
                Call(Op.SCALED_MM, a, b, bias=bias, out=out, scale_a=scale_a, scale_b=scale_b,
                     scale_result=scale_result, out_dtype=out_dtype, fast_accum=use_fast_accum)
            )  # raises the error naming the argument
            validate.parse_activation(activation)
            raise
        if entry is None:
            act = validate.parse_activation(activation)
            call = Call(Op.SCALED_MM, a, b, bias=bias, out=out, activation=act, scale_a=scale_a, scale_b=scale_b,
                        scale_result=scale_result, out_dtype=out_dtype, fast_accum=use_fast_accum)  # fmt: skip
            entry = self._miss(key, call)
        else:
            self._n.memo_hits += 1
        return entry(a, b, scale_a, scale_b, bias, out, scale_result)

    # ---- miss path -------------------------------------------------------------------------
    def _miss(self, key: tuple[Any, ...], call: Call) -> Entry:
        with self._lock:
            entry = self._memo.get(key)
            if entry is not None:
                return entry
            self._n.memo_misses += 1
            pol, grad, tf32 = key[1], key[2], key[3]  # every key starts (op, policy, grad, tf32, ...)
            if pol is Policy.OFF:
                validate.expected_result(call)  # the same errors as under the other policies
                entry, memoise = self._torch_entry(call, count=False), True
            else:
                ctx = validate.Context(on_gpu=self._on_gpu, device_info=self._device_info, grad=grad, tf32=tf32)
                entry, memoise = self._build(call, validate.plan(call, ctx), pol)
            if memoise:
                if len(self._memo) >= MEMO_LIMIT:
                    self._memo.clear()
                self._memo[key] = entry
            return entry

    def _build(self, call: Call, plan: KernelPlan | Unsupported, pol: Policy) -> tuple[Entry, bool]:
        """The entry for ``call`` and whether it may be memoised."""
        if isinstance(plan, Unsupported):
            return self._fallback(call, plan.reason), True
        problem = plan.problem
        downgraded = pol is Policy.TUNE and _capturing(call.a)
        if downgraded:
            self._log_once(call.op, "a tuning miss inside a CUDA graph capture runs the stored or default config")
            pol = Policy.CACHED
        if plan.a is not None and plan.a.copy:
            self._log_once(call.op, "x's leading dimensions do not merge into M: x is copied on every call")
        try:
            chosen = self._choose(problem, pol, plan.device_index)
            if isinstance(chosen, str):
                return self._fallback(call, chosen), True
            family, config = chosen
            runner = self._runner(family, config, problem)
        except (CantImplement, KernelCompileError) as e:
            if self.settings.strict:
                raise
            return self._fallback(call, f"no kernel could be built: {type(e).__name__}: {e}"), True
        if call.op is Op.SCALED_MM:
            return _scaled_kernel_entry(plan, runner, call), not downgraded
        return _kernel_entry(plan, runner, call), not downgraded

    def _choose(self, problem: GemmProblem, pol: Policy, device_index: int) -> tuple[Family, Any] | str:
        """(family, config) by policy, or the reason no family serves ``problem``."""
        family = self._layers.default_family_for(problem)
        if family is None:
            return f"no kernel family serves {problem.describe()}: {self._layers.why_unsupported(problem)}"
        reason = family.supports(problem)
        if reason is not None:
            return reason
        if pol is Policy.HEURISTIC:
            return family, self._default_config(family, problem)
        hard_key = self._device_info(device_index).hard_key()
        rec = self._lookup(problem, hard_key)
        found = self._from_record(rec, problem) if rec is not None else None
        if found is not None and (pol is Policy.CACHED or rec.source != "nearest_m"):
            self._n.db_hits += 1
            return found
        self._record_miss(problem, hard_key)
        if pol is Policy.TUNE:
            tuned = self._tune(problem, family, hard_key, device_index)
            if tuned is not None:
                return family, tuned
        if found is not None:
            return found
        return family, self._default_config(family, problem)

    # ---- helpers of the miss path ----------------------------------------------------------
    def _default_config(self, family: Family, problem: GemmProblem) -> Any:
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

    def _lookup(self, problem: GemmProblem, hard_key: HardKey) -> Any | None:
        store, _ = self._open_store()
        self._n.db_lookups += 1
        try:
            return store.lookup(problem, hard_key)
        except DatabaseError as e:
            self._log_once("db", f"tuning database lookup failed, treated as a miss: {e}")
            return None

    def _record_miss(self, problem: GemmProblem, hard_key: HardKey) -> None:
        store, _ = self._open_store()
        try:
            store.record_miss(problem, hard_key)
            self._n.misses_recorded += 1
        except DatabaseError as e:
            self._log_once("db", f"cannot record a tuning miss: {e}")

    def _from_record(self, rec: Any, problem: GemmProblem) -> tuple[Family, Any] | None:
        """The record's (family, config) if it still serves ``problem``; else None (logged)."""
        try:
            family = self._layers.get_family(rec.family)
        except KeyError:
            self._log_once("db", f"stored record names unknown kernel family {rec.family!r}; ignored")
            return None
        config = family.config_from_dict(rec.config)
        reason = family.supports(problem) or family.check(config, problem)
        if reason is not None:
            self._log_once("db", f"stored {rec.family} config no longer serves {problem.describe()}: {reason}")
            return None
        return family, config

    def _tune(self, problem: GemmProblem, family: Family, hard_key: HardKey, device_index: int) -> Any | None:
        """The tuned config, or None when tuning found none or could not record (logged)."""
        _, sink = self._open_store()
        if sink is None:
            self._log_once("tune", "no usable tuning database to record into; not tuning")
            return None
        self._n.tunes += 1
        log.info("autocutlass: tuning %s (%d trials, %d s at most)", problem.describe(),
                 self.settings.tune_trials, self.settings.tune_seconds)  # fmt: skip
        try:
            best = self._layers.tune(problem, family, sink, hard_key, device_index, self.settings)
        except DatabaseError as e:
            self._log_once("tune", f"tuning could not record its results, not tuning: {e}")
            return None
        if best is None:
            self._log_once("tune", f"tuning found no working config for {problem.describe()}; using the default")
            return None
        config = family.config_from_dict(best)
        reason = family.check(config, problem)
        if reason is not None:
            raise CantImplement(f"tuning returned a config that fails check: {reason}")
        return config

    def _runner(self, family: Family, config: Any, problem: GemmProblem) -> Callable[..., None]:
        key = (family.name, config, problem.kernel_class_key() + f"|l{int(problem.l > 1)}")
        runner = self._runners.get(key)
        if runner is None:
            self._n.compiles += 1
            runner = family.compile(config, problem)
            self._runners[key] = runner
        return runner

    def _fallback(self, call: Call, reason: str) -> Entry:
        if self.settings.strict:
            raise UnsupportedProblem(f"autocutlass.{call.op.value}: {reason}")
        self._log_once(call.op, f"served by torch: {reason}")
        return self._torch_entry(call, count=True)

    def _torch_entry(self, call: Call, *, count: bool) -> Entry:
        n = self._n
        op, act = call.op, call.activation
        if op is Op.SCALED_MM:
            out_dtype, fast = call.out_dtype, call.fast_accum

            def run_scaled(
                a: Any, b: Any, scale_a: Any, scale_b: Any, bias: Any, out: Any, scale_result: Any = None
            ) -> torch.Tensor:
                if count:
                    n.fallbacks += 1
                return validate.torch_call(
                    Call(op, a, b, None, bias, out, activation=act, scale_a=scale_a, scale_b=scale_b,
                         scale_result=scale_result, out_dtype=out_dtype, fast_accum=fast)
                )  # fmt: skip

            return run_scaled

        def run(a: Any, b: Any, c: Any, bias: Any, out: Any, alpha: float, beta: float) -> torch.Tensor:
            if count:
                n.fallbacks += 1
            return validate.torch_call(Call(op, a, b, c, bias, out, alpha, beta, act))

        return run

    def _log_once(self, where: str, message: str) -> None:
        if (where, message) not in self._logged:
            self._logged.add((where, message))
            log.warning("autocutlass.%s: %s", where, message)

    # ---- inspection ------------------------------------------------------------------------
    def stats(self) -> Stats:
        return self._n.snapshot()

    def clear(self) -> None:
        """Forget memoised entries (not the counters, nor the compiled runners)."""
        with self._lock:
            self._memo.clear()


@functools.cache
def _single_gpu() -> bool:
    """One visible CUDA device: the current device is then always the tensors' device."""
    return torch.cuda.device_count() == 1


def _kernel_entry(plan: KernelPlan, runner: Callable[..., None], call: Call) -> Entry:
    """The launch closure of a served call: views, output allocation, one runner call."""
    av, bv, cv, dv = plan.a, plan.b, plan.c, plan.d
    shape, dtype, device = plan.out_shape, plan.out_dtype, call.a.device
    with_c = plan.problem.epilogue.with_c
    span_a, span_b, span_c, span_d = plan.spans
    op, act = call.op, call.activation

    # The B view of the last weight seen: inference calls pass the same parameter every time,
    # and re-deriving its transposed view costs about a microsecond per call. The data pointer is
    # compared too, so that `param.data = other` (new storage, same object) is never served stale.
    b_seen: tuple[Any, Any, int] = (None, None, 0)  # (weight, its view, its data_ptr), swapped whole

    def run(a: Any, b: Any, c: Any, bias: Any, out: Any, alpha: float, beta: float) -> torch.Tensor:
        nonlocal b_seen
        if out is None:
            out = torch.empty(shape, dtype=dtype, device=device)
        else:
            o = out.data_ptr()
            if (
                _overlaps(o, span_d, a.data_ptr(), span_a)
                or _overlaps(o, span_d, b.data_ptr(), span_b)
                or (with_c and _overlaps(o, span_d, c.data_ptr(), span_c)
                    and not (c.data_ptr() == o and c.stride() == out.stride()))
            ):  # fmt: skip
                # out= aliases an input: let torch compute into fresh memory, then copy.
                r = validate.torch_call(Call(op, a, b, c, bias, None, alpha, beta, act))
                return out.copy_(r)
        if av is not None:
            a = a.reshape(av.shape) if av.copy else a.as_strided(av.shape, av.stride)
        if bv is not None:
            seen = b_seen
            ptr = b.data_ptr()
            if b is seen[0] and ptr == seen[2]:
                b = seen[1]
            else:
                b_seen = (b, b.as_strided(bv.shape, bv.stride), ptr)
                b = b_seen[1]
        if not with_c:
            c = None
        elif cv is not None:
            c = c.as_strided(cv.shape, cv.stride)
        runner(a, b, out if dv is None else out.as_strided(dv.shape, dv.stride), c=c, bias=bias, alpha=alpha, beta=beta)
        return out

    return _on_device(run, plan.device_index)


def _on_device(run: Entry, dev: int) -> Entry:
    """``run`` itself with one visible GPU (or no device index); otherwise ``run`` made current on
    the operands' device first, since a runner launches on the current device's stream."""
    if dev < 0 or _single_gpu():
        return run

    def guarded(*args: Any) -> torch.Tensor:
        if torch.cuda.current_device() != dev:
            with torch.cuda.device(dev):
                return run(*args)
        return run(*args)

    return guarded


def _scaled_kernel_entry(plan: KernelPlan, runner: Callable[..., None], call: Call) -> Entry:
    """``_kernel_entry`` of ``scaled_mm``: the runner also gets the two scale tensors, (1,) views of
    the user's one-element tensors (their values stay on the device). No C, alpha or beta; the
    entry's ``scale_result`` is always None (a call with one is never served)."""
    av, bv, dv = plan.a, plan.b, plan.d
    shape, dtype, device = plan.out_shape, plan.out_dtype, call.a.device
    span_a, span_b, _, span_d = plan.spans
    assert call.scale_a is not None and call.scale_b is not None
    span_bias, span_sa, span_sb = (validate.byte_span(t) for t in (call.bias, call.scale_a, call.scale_b))
    view_sa, view_sb = call.scale_a.dim() != 1, call.scale_b.dim() != 1  # () or (1, 1): viewed as (1,)
    act = call.activation

    def run(a: Any, b: Any, scale_a: Any, scale_b: Any, bias: Any, out: Any, scale_result: Any = None) -> torch.Tensor:
        if out is None:
            out = torch.empty(shape, dtype=dtype, device=device)
        else:
            o = out.data_ptr()
            if (
                _overlaps(o, span_d, a.data_ptr(), span_a)
                or _overlaps(o, span_d, b.data_ptr(), span_b)
                or (bias is not None and _overlaps(o, span_d, bias.data_ptr(), span_bias))
                or _overlaps(o, span_d, scale_a.data_ptr(), span_sa)
                or _overlaps(o, span_d, scale_b.data_ptr(), span_sb)
            ):  # out= aliases an input: torch computes into fresh memory, then copies.
                r = validate.torch_call(
                    Call(Op.SCALED_MM, a, b, None, bias, None, activation=act, scale_a=scale_a, scale_b=scale_b,
                         out_dtype=dtype, fast_accum=True)
                )  # fmt: skip
                return out.copy_(r)
        if av is not None:
            a = a.as_strided(av.shape, av.stride)
        if bv is not None:
            b = b.as_strided(bv.shape, bv.stride)
        if view_sa:
            scale_a = scale_a.reshape(1)
        if view_sb:
            scale_b = scale_b.reshape(1)
        d = out if dv is None else out.as_strided(dv.shape, dv.stride)
        runner(a, b, d, bias=bias, scale_a=scale_a, scale_b=scale_b)
        return out

    return _on_device(run, plan.device_index)

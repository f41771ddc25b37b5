"""Every AUTOCUTLASS_* environment knob, typed, read in one place.

``Settings.from_env()`` reads the environment when called (never at import time); callers that
need the settings call ``current()``, which re-reads them so that tests and users may change
the environment between calls. Context managers (``autocutlass.policy``) override the policy
on top of this. A value autocutlass cannot use raises ``SettingsError`` (a ``ValueError``) naming
the variable, the value and what is accepted.

=========================  =============================================================  ===========================
variable                   meaning                                                        default
=========================  =============================================================  ===========================
AUTOCUTLASS_DB             path or SQLAlchemy URL of the user's tuning database           ~/.cache/autocutlass/tuning.sqlite
AUTOCUTLASS_CACHE_DIR      directory for the DB default and the compiled-kernel cache     $XDG_CACHE_HOME/autocutlass
AUTOCUTLASS_SHIPPED_DBS    directory of read-only per-GPU DBs (``off`` disables them)     the package's tuning_dbs/
AUTOCUTLASS_POLICY         miss policy: tune | background | cached | heuristic | off      tune
AUTOCUTLASS_STRICT         1: raise UnsupportedProblem instead of falling back to torch   0
AUTOCUTLASS_TUNE_TRIALS    trial budget of an on-line (miss-policy) tuning                16
AUTOCUTLASS_TUNE_SECONDS   wall-clock budget of an on-line tuning                         60
AUTOCUTLASS_LOG            log level of the ``autocutlass`` logger                        WARNING
AUTOCUTLASS_GROUPED_KERNELS  0: ``grouped_mm`` never runs the hopper_grouped kernels        1
                           (on, they serve only problems tuned on this GPU)
AUTOCUTLASS_CONV_DGRAD     0: never serve conv2d dgrad with ``hopper_conv_dgrad`` (the      1
                           fprop kernel on dY, stride 1); cuDNN does
AUTOCUTLASS_CONV_DGRAD_STRIDED  1: strided conv2d dgrad runs ``hopper_conv_dgrad_strided``  0
                           on layers tuned here (off: it ran at 0.55-0.90x cuDNN)
AUTOCUTLASS_CONV_WGRAD     0: never serve conv2d wgrad with the implicit-GEMM wgrad kernel  1
                           (``hopper_conv_wgrad``; on, it serves only problems tuned here)
AUTOCUTLASS_VENDOR_VERDICTS  0: our kernels serve every tuned problem, even where its tuning  1
                           measured torch faster (``autocutlass.vendor``)
AUTOCUTLASS_VENDOR_HOST    0: verdicts compare GPU time alone, not GPU plus host time of   1
                           a call (``autocutlass.vendor``)
AUTOCUTLASS_GATED_KERNELS  0: ``linear(..., mul=)`` never runs the hopper_gemm_gated         1
                           kernels (torch computes ``act(F.linear(...)) * mul``)
AUTOCUTLASS_SWIGLU_KERNELS 0: ``linear(..., activation="swiglu")`` never runs the          1
                           hopper_gemm_swiglu kernels and ``swap_gated_mlp_`` does not pack
AUTOCUTLASS_GEMV_KERNELS   0: decode GEMMs (M <= 16) never run the hopper_gemv kernels     1
AUTOCUTLASS_PREWARM        0: the model swaps do not start the tuning processes ahead of    1
                           the first miss (``autocutlass.prewarm``)
=========================  =============================================================  ===========================

``AUTOCUTLASS_TUNE_TRIALS_WITH_PRIORS`` (8): the trial budget of an on-line tuning when the
database holds priors for it (``Settings.tune_trials_with_priors``). ``AUTOCUTLASS_TUNE_POOL_IDLE_S``
(300): seconds the on-line tuning processes wait for the next tuning (``Settings.tune_pool_idle_s``).
``AUTOCUTLASS_GROUPED_KERNELS=0`` switches the grouped-GEMM kernel family (``kernels.hopper_grouped``)
off: ``autocutlass.grouped_mm`` then runs ``torch._grouped_mm`` with a logged reason
(``kernels.families_for`` leaves the family out), and ``tune`` and ``bench`` of grouped problems
have no kernel to tune. On (the default), the family is tuned-only (``KernelFamily.TUNED_ONLY``):
a grouped problem without this GPU's record of it or of its bucket runs ``torch._grouped_mm``
until tuned.
"""

from __future__ import annotations

import logging
import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from autocutlass.errors import AutocutlassError


class Policy(StrEnum):
    """What dispatch does when the tuning database has no record for a problem."""

    TUNE = "tune"
    BACKGROUND = "background"
    CACHED = "cached"
    HEURISTIC = "heuristic"
    OFF = "off"


class SettingsError(AutocutlassError, ValueError):
    """An ``AUTOCUTLASS_*`` variable holds a value autocutlass cannot use; the message names the
    variable, the value and what is accepted (a ``ValueError``, as before this type existed)."""

    def __init__(self, name: str, raw: str, accepted: str) -> None:
        super().__init__(f"{name}={raw!r} is not valid: expected {accepted}")
        self.name, self.raw, self.accepted = name, raw, accepted


_TRUE, _FALSE = frozenset({"1", "true", "yes", "on"}), frozenset({"0", "false", "no", "off"})


def _flag(env: dict[str, str], name: str, default: bool = False) -> bool:
    raw = env.get(name)
    value = (raw or "").strip().lower()
    if value == "":
        return default
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise SettingsError(name, str(raw), "1, true, yes or on; 0, false, no or off (or unset)")


def _int(env: dict[str, str], name: str, default: int, *, minimum: int | None = None) -> int:
    """An integer (at least ``minimum`` when given), ``default`` when unset or empty."""
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    accepted = "an integer" if minimum is None else "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
    try:
        value = int(raw)
    except ValueError:
        raise SettingsError(name, raw, f"{accepted} (default {default})") from None
    if minimum is not None and value < minimum:
        raise SettingsError(name, raw, f"{accepted} (default {default})")
    return value


def _log_level(env: dict[str, str], name: str) -> str:
    raw = env.get(name)
    level = (raw or "WARNING").strip().upper()
    names = logging.getLevelNamesMapping()
    if level not in names:
        raise SettingsError(name, str(raw), "a logging level name: " + ", ".join(sorted(names, key=names.__getitem__)))
    return level


@dataclass(frozen=True)
class Settings:
    cache_dir: Path
    db_url: str
    shipped_dbs_dir: Path | None
    policy: Policy
    strict: bool
    tune_trials: int
    tune_seconds: int
    log_level: str
    tune_trials_with_priors: int = 8
    """Trial budget of an on-line tuning whose database holds priors (winners of nearby problems of
    the same kernel class, a sibling GPU's record): those are evaluated first, and a few more
    candidates suffice (at most ``tune_trials``)."""
    tune_pool_idle_s: float = 300.0
    """Seconds the on-line tuning processes (``search.pool``) stay up without a tuning; 0 closes
    them after every tuning."""
    grouped_kernels: bool = True
    """``AUTOCUTLASS_GROUPED_KERNELS`` (on unless 0): the hopper_grouped family serves grouped_mm
    calls (problems tuned on this GPU only: ``KernelFamily.TUNED_ONLY``)."""
    conv_dgrad_kernel: bool = True
    """``AUTOCUTLASS_CONV_DGRAD`` (on unless 0): the ``hopper_conv_dgrad`` family serves conv2d
    dgrad problems (its GPU tests, a whole training step's included, passed on an H100,
    2026-11-25)."""
    conv_dgrad_strided_kernel: bool = False
    """``AUTOCUTLASS_CONV_DGRAD_STRIDED`` (off unless 1): the ``hopper_conv_dgrad_strided`` family
    (one stride-1 convolution per stride phase) serves strided conv2d dgrad problems tuned on this
    GPU. Its GPU tests passed on an H200 (2026-11-28), but it ran at 0.55-0.90x of cuDNN on every
    strided layer tuned (``benchmarks/results/2026-11-28-h200-s35-c-*``), so it is off."""
    vendor_verdicts: bool = True
    """``AUTOCUTLASS_VENDOR_VERDICTS`` (on unless 0): torch serves a tuned problem whose tuning
    measured it faster than our best (``autocutlass.vendor``)."""
    vendor_host: bool = True
    """``AUTOCUTLASS_VENDOR_HOST`` (on unless 0): a verdict compares each side's GPU time plus the
    host time of one call where the tuning measured both (``autocutlass.vendor``); off, GPU time
    alone (for a workload known to keep the GPU busy whatever the host does)."""
    gated_kernels: bool = True
    """``AUTOCUTLASS_GATED_KERNELS`` (on unless 0): the ``hopper_gemm_gated`` family serves
    ``linear(..., mul=)`` (its GPU tests passed on an H100, 2026-11-25); off, torch computes
    ``act(F.linear(...)) * mul``."""
    swiglu_kernels: bool = True
    """``AUTOCUTLASS_SWIGLU_KERNELS`` (on unless 0): the ``hopper_gemm_swiglu`` family serves
    ``linear(..., activation="swiglu")`` and ``GatedMLP`` packs its gate and up weights (its GPU
    tests passed on an H100, 2026-11-25); off, torch computes ``silu(gate) * up`` of
    ``F.linear``'s (M, 2N) result and ``GatedMLP`` keeps its two-GEMM path."""
    gemv_kernels: bool = True
    """``AUTOCUTLASS_GEMV_KERNELS`` (on unless 0): the ``hopper_gemv`` family serves decode GEMMs
    (M <= 16) where its record is the fastest, and misses of at most 4 rows are tuned under it (its
    GPU tests passed on an H200 and an H100, 2026-11-25)."""
    prewarm: bool = True
    """``AUTOCUTLASS_PREWARM`` (on unless 0): the model swaps (``swap_linear_``, ``swap_conv2d_``,
    ``swap_gated_mlp_``) start the on-line tuning processes under the tuning policies
    (``autocutlass.prewarm``)."""
    conv_wgrad_kernel: bool = True
    """``AUTOCUTLASS_CONV_WGRAD`` (on unless 0): the ``hopper_conv_wgrad`` family serves conv2d
    wgrad problems tuned on this GPU (``KernelFamily.TUNED_ONLY``; its GPU tests pass on an H100,
    and with several taps per tile and workspace split-K its tuned suite reads x1.013 vs cuDNN,
    2026-11-27); any other wgrad runs cuDNN."""

    @property
    def kernel_cache_dir(self) -> Path:
        return self.cache_dir / "kernels"

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> Settings:
        e = dict(os.environ if env is None else env)
        cache_dir = cache_dir_from_env(e)
        db = e.get("AUTOCUTLASS_DB") or str(cache_dir / "tuning.sqlite")
        shipped_raw = e.get("AUTOCUTLASS_SHIPPED_DBS")
        if shipped_raw is not None and shipped_raw.strip().lower() == "off":
            shipped: Path | None = None
        elif shipped_raw:
            shipped = Path(shipped_raw).expanduser()
        else:
            shipped = default_shipped_dir()
        raw_policy = e.get("AUTOCUTLASS_POLICY") or Policy.TUNE.value
        try:
            policy = Policy(raw_policy.strip().lower())
        except ValueError:
            raise SettingsError("AUTOCUTLASS_POLICY", raw_policy, "one of " + ", ".join(p.value for p in Policy)) from None
        return cls(
            cache_dir=cache_dir,
            db_url=db,
            shipped_dbs_dir=shipped,
            policy=policy,
            strict=_flag(e, "AUTOCUTLASS_STRICT"),
            tune_trials=_int(e, "AUTOCUTLASS_TUNE_TRIALS", 16, minimum=1),
            tune_seconds=_int(e, "AUTOCUTLASS_TUNE_SECONDS", 60, minimum=1),
            log_level=_log_level(e, "AUTOCUTLASS_LOG"),
            tune_trials_with_priors=_int(e, "AUTOCUTLASS_TUNE_TRIALS_WITH_PRIORS", 8, minimum=1),
            tune_pool_idle_s=_seconds(e, "AUTOCUTLASS_TUNE_POOL_IDLE_S", 300.0, zero="closing them after every tuning"),
            grouped_kernels=_flag(e, "AUTOCUTLASS_GROUPED_KERNELS", default=True),
            conv_dgrad_kernel=_flag(e, "AUTOCUTLASS_CONV_DGRAD", default=True),
            conv_dgrad_strided_kernel=_flag(e, "AUTOCUTLASS_CONV_DGRAD_STRIDED", default=False),
            conv_wgrad_kernel=_flag(e, "AUTOCUTLASS_CONV_WGRAD", default=True),
            vendor_verdicts=_flag(e, "AUTOCUTLASS_VENDOR_VERDICTS", default=True),
            vendor_host=_flag(e, "AUTOCUTLASS_VENDOR_HOST", default=True),
            gated_kernels=_flag(e, "AUTOCUTLASS_GATED_KERNELS", default=True),
            swiglu_kernels=_flag(e, "AUTOCUTLASS_SWIGLU_KERNELS", default=True),
            gemv_kernels=_flag(e, "AUTOCUTLASS_GEMV_KERNELS", default=True),
            prewarm=_flag(e, "AUTOCUTLASS_PREWARM", default=True),
        )


def default_shipped_dir() -> Path | None:
    """The ``tuning_dbs`` directory shipped with the package (wheel) or beside the source tree."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "tuning_dbs", here.parent / "tuning_dbs"):
        if candidate.is_dir():
            return candidate
    return None


def cache_dir_from_env(env: Mapping[str, str] | None = None) -> Path:
    """``AUTOCUTLASS_CACHE_DIR``, else ``$XDG_CACHE_HOME/autocutlass`` (``~/.cache/autocutlass``)."""
    e = os.environ if env is None else env
    xdg = e.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(e.get("AUTOCUTLASS_CACHE_DIR") or Path(xdg) / "autocutlass").expanduser()


def current() -> Settings:
    """The settings as the environment says now."""
    return Settings.from_env()


# ---- tuning-database timeouts ------------------------------------------------------------------
# AUTOCUTLASS_DB_CONNECT_TIMEOUT    seconds to wait for a database server to accept a connection   3
# AUTOCUTLASS_DB_STATEMENT_TIMEOUT  seconds one statement may run on a database server             5
# (PostgreSQL; 0 means no limit. SQLite files keep their own lock wait, db.engine.SQLITE_BUSY_TIMEOUT_MS.)


def _seconds(env: dict[str, str], name: str, default: float, zero: str = "no limit") -> float:
    """A non-negative number of seconds, ``default`` when unset or empty (``zero``: what 0 means,
    for the error message)."""
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise SettingsError(name, raw, f"a number of seconds >= 0, 0 for {zero} (default {default:g})")
    return value


def _serving_busy_s() -> float:
    from autocutlass.db.location import SERVING_BUSY_S  # the database layer's constant

    return SERVING_BUSY_S


@dataclass(frozen=True)
class DbTimeouts:
    """How long one call may wait on a tuning-database server, in seconds (0: no limit).

    ``connect_s`` bounds establishing a connection (libpq ``connect_timeout``, whole seconds,
    at least 2 in libpq; per address when a host name has several), ``statement_s`` one
    statement (``statement_timeout``). After a failure, ``db.LayeredStore`` leaves the database
    alone for a while (its backoff), so dispatch waits at most this long once per outage."""

    connect_s: float = 3.0
    statement_s: float = 5.0
    busy_s: float = 30.0
    """How long one SQLite statement waits for another process's lock (``busy_timeout``)."""
    attempts: int = 8
    """Attempts of one transaction that keeps failing with a transient lock error."""

    def serving(self) -> DbTimeouts:
        """These timeouts for the store a user's call reads and records misses through: a SQLite
        lock held by another process (a campaign writing, ``db merge``) is waited for
        ``db.location.SERVING_BUSY_S`` and retried once, then the call goes on without the database (its
        backoff), instead of waiting 30 s a statement, 8 times."""
        return dataclasses.replace(self, busy_s=min(self.busy_s, _serving_busy_s()), attempts=2)

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> DbTimeouts:
        e = dict(os.environ if env is None else env)
        return cls(
            connect_s=_seconds(e, "AUTOCUTLASS_DB_CONNECT_TIMEOUT", cls.connect_s),
            statement_s=_seconds(e, "AUTOCUTLASS_DB_STATEMENT_TIMEOUT", cls.statement_s),
        )

"""Every AUTOCUTLASS_* environment knob, typed, read in one place.

``Settings.from_env()`` reads the environment when called (never at import time); callers that
need the settings call ``current()``, which re-reads them so that tests and users may change
the environment between calls. Context managers (``autocutlass.policy``) override the policy
on top of this.

=========================  =============================================================  ===========================
variable                   meaning                                                        default
=========================  =============================================================  ===========================
AUTOCUTLASS_DB             path or SQLAlchemy URL of the user's tuning database           ~/.cache/autocutlass/tuning.sqlite
AUTOCUTLASS_CACHE_DIR      directory for the DB default and the compiled-kernel cache     $XDG_CACHE_HOME/autocutlass
AUTOCUTLASS_SHIPPED_DBS    directory of read-only per-GPU DBs (``off`` disables them)     the package's tuning_dbs/
AUTOCUTLASS_POLICY         miss policy: tune | cached | heuristic | off                   tune
AUTOCUTLASS_STRICT         1: raise UnsupportedProblem instead of falling back to torch   0
AUTOCUTLASS_TUNE_TRIALS    trial budget of an on-line (miss-policy) tuning                16
AUTOCUTLASS_TUNE_SECONDS   wall-clock budget of an on-line tuning                         60
AUTOCUTLASS_LOG            log level of the ``autocutlass`` logger                        WARNING
=========================  =============================================================  ===========================
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path


class Policy(StrEnum):
    """What dispatch does when the tuning database has no record for a problem."""

    TUNE = "tune"
    CACHED = "cached"
    HEURISTIC = "heuristic"
    OFF = "off"


def _flag(value: str | None) -> bool:
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}


def _int(env: dict[str, str], name: str, default: int) -> int:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not an integer") from None


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

    @property
    def kernel_cache_dir(self) -> Path:
        return self.cache_dir / "kernels"

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> Settings:
        e = dict(os.environ if env is None else env)
        xdg = e.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        cache_dir = Path(e.get("AUTOCUTLASS_CACHE_DIR") or Path(xdg) / "autocutlass").expanduser()
        db = e.get("AUTOCUTLASS_DB") or str(cache_dir / "tuning.sqlite")
        shipped_raw = e.get("AUTOCUTLASS_SHIPPED_DBS")
        if shipped_raw is not None and shipped_raw.strip().lower() == "off":
            shipped: Path | None = None
        elif shipped_raw:
            shipped = Path(shipped_raw).expanduser()
        else:
            shipped = default_shipped_dir()
        raw_policy = (e.get("AUTOCUTLASS_POLICY") or Policy.TUNE.value).strip().lower()
        try:
            policy = Policy(raw_policy)
        except ValueError:
            choices = ", ".join(p.value for p in Policy)
            raise ValueError(f"AUTOCUTLASS_POLICY={raw_policy!r} is not one of: {choices}") from None
        return cls(
            cache_dir=cache_dir,
            db_url=db,
            shipped_dbs_dir=shipped,
            policy=policy,
            strict=_flag(e.get("AUTOCUTLASS_STRICT")),
            tune_trials=_int(e, "AUTOCUTLASS_TUNE_TRIALS", 16),
            tune_seconds=_int(e, "AUTOCUTLASS_TUNE_SECONDS", 60),
            log_level=(e.get("AUTOCUTLASS_LOG") or "WARNING").upper(),
        )


def default_shipped_dir() -> Path | None:
    """The ``tuning_dbs`` directory shipped with the package (wheel) or beside the source tree."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "tuning_dbs", here.parent / "tuning_dbs"):
        if candidate.is_dir():
            return candidate
    return None


def current() -> Settings:
    """The settings as the environment says now."""
    return Settings.from_env()

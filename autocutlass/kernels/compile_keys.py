"""Compile keys: the on-disk kernel cache's file names, computed without the DSL.

A key is the first 24 hex digits of the sha256 of a JSON payload (sorted keys, no spaces) that
covers everything the generated code depends on: the family, its plan (enums by value), the DSL
version, the family's source hash and the target architecture (``CUTE_DSL_ARCH``, sm_90a by
default). ``hopper_gemm.compile`` and ``hopper_conv.compile`` state the same payloads themselves
(their files are hashed into shipped records' keys, so they are left as they are).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from enum import Enum
from typing import Any

from autocutlass.device import dsl_version

ARCH = "sm_90a"


def target_arch() -> str:
    """The architecture kernels are compiled for: ``CUTE_DSL_ARCH``, else sm_90a."""
    return os.environ.get("CUTE_DSL_ARCH", ARCH)


def digest(payload: dict[str, Any]) -> str:
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _plain(v: Any) -> Any:
    if isinstance(v, Enum):
        return v.value
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    return v


def plan_key(family: str, plan: Any, src: str) -> str:
    """The compile key of ``plan`` (a dataclass) of ``family`` with kernel sources ``src``."""
    return digest({"family": family, "plan": _plain(dataclasses.asdict(plan)), "dsl": dsl_version(), "src": src,
                   "arch": target_arch()})  # fmt: skip

"""Canonical text and identities of plain data, shared by every layer that stores or compares
keys (problem fingerprints, config identities in the tuner and the database). Pure Python."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any


def canonical_json(obj: Any) -> str:
    """The one canonical JSON text of plain data: sorted keys, no whitespace, ASCII only."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def config_key(config: Mapping[str, Any]) -> str:
    """Stable identity of a config dict: sha256 of its canonical JSON, 32 hex digits."""
    return hashlib.sha256(canonical_json(dict(config)).encode()).hexdigest()[:32]

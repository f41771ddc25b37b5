"""The files whose code decides what the decode GEMV family generates, and their hash (part of
its records' hard key and of its compile-cache keys). Paths are relative to ``autocutlass/kernels``."""

from __future__ import annotations

import functools

from autocutlass.device import source_hash as _hash

SOURCE_FILES = (
    "epilogue_math.py",
    "hopper_gemv/config.py",
    "hopper_gemv/plan.py",
    "hopper_gemv/kernel.py",
    "hopper_gemv/compile.py",
)


@functools.cache
def source_hash() -> str:
    return _hash(SOURCE_FILES)

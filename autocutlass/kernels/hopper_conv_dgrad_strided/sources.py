"""The files whose code decides what the strided conv dgrad family generates, and their hash.

The fprop family's kernel sources (the scatter kernel subclasses its kernel), the phase
decomposition (which sub-filters and paddings each phase runs with) and the scatter kernel and
its compile. Feasibility rules, space, seeds and the launcher are left out, as in the other
families. Paths are relative to ``autocutlass/kernels``.
"""

from __future__ import annotations

import functools

from autocutlass.device import source_hash as _hash
from autocutlass.kernels.hopper_conv.sources import SOURCE_FILES as _FPROP_SOURCES

SOURCE_FILES = (
    *_FPROP_SOURCES,
    "hopper_conv_dgrad_strided/compile.py",
    "hopper_conv_dgrad_strided/kernel.py",
    "hopper_conv_dgrad_strided/phases.py",
)


@functools.cache
def source_hash() -> str:
    """The family's source hash: part of its records' hard key and of its compile-cache keys."""
    return _hash(SOURCE_FILES)

"""The files whose code decides what the Hopper conv dgrad family generates, and their hash.

The family runs the fprop family's kernel (``hopper_conv``) on a problem derived from the dgrad
problem, so its sources are hopper_conv's and the mapping that derives that problem and the
weight it reads (``lowering``). Feasibility rules, the search space, seeds and the Python launcher
are left out, as in the other families. Paths are relative to ``autocutlass/kernels``.
"""

from __future__ import annotations

import functools

from autocutlass.device import source_hash as _hash
from autocutlass.kernels.hopper_conv.sources import SOURCE_FILES as _FPROP_SOURCES

SOURCE_FILES = (*_FPROP_SOURCES, "hopper_conv_dgrad/lowering.py")


@functools.cache
def source_hash() -> str:
    """The family's source hash: part of its records' hard key."""
    return _hash(SOURCE_FILES)

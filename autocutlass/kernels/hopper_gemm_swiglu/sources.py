"""The files whose code decides what the SwiGLU GEMM family generates, and their hash:
``hopper_gemm``'s (the kernel it extends) and its own kernel and compile modules. Paths are
relative to ``autocutlass/kernels``."""

from __future__ import annotations

import functools

from autocutlass.device import source_hash as _hash
from autocutlass.kernels.hopper_gemm.sources import SOURCE_FILES as GEMM_SOURCE_FILES

SOURCE_FILES = (*GEMM_SOURCE_FILES, "hopper_gemm_swiglu/kernel.py", "hopper_gemm_swiglu/compile.py")


@functools.cache
def source_hash() -> str:
    """The family's source hash: part of its records' hard key and of its compile-cache keys."""
    return _hash(SOURCE_FILES)

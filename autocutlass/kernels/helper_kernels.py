"""The helper kernels launched besides our GEMMs, fetched without the DSL.

The split-K reduce (``hopper_gemm.reduce``), the 32-bit transpose (``transpose``) and the
grouped output's tail zeroing (``tail_zero``, for ``torch._grouped_mm``'s result) are CuTe DSL
modules that import the DSL when imported. Their users ask for them here instead:
``get_reduce``, ``get_transpose`` and ``get_tail_zero`` compute the same compile keys as those
modules, without importing them, and look in the same caches (``ObjectCache`` of the same prefix: one state per
process); only a miss imports the kernel's module, which compiles (and imports the DSL).

The keys are restated here, not imported: ``reduce_key`` is ``reduce.reduce_compile_key``,
``transpose_key`` is ``transpose.transpose_compile_key`` and ``tail_zero_key`` is
``tail_zero.tail_zero_compile_key`` (the payload fields, the constants of the kernel it covers, the GEMM family's source hash, the DSL version from the package
metadata and the target architecture); tests/test_cold_start.py checks that they agree. Should
they drift apart, a lookup here misses and the kernel's module serves the call (compiled or
loaded under its own key): slower, never wrong.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from autocutlass.device import dsl_version
from autocutlass.kernels.compile_keys import digest, target_arch
from autocutlass.kernels.hopper_gemm.sources import source_hash as gemm_source_hash
from autocutlass.kernels.object_cache import ObjectCache
from autocutlass.ops.gemm.problem import Activation, DType

REDUCE_PREFIX = "splitk_reduce"
REDUCE_FUNCTION = "autocutlass_splitk_reduce"
"""``hopper_gemm.reduce``'s cache prefix and exported function name."""

TRANSPOSE_PREFIX = "transpose32"
TRANSPOSE_FUNCTION = "autocutlass_transpose32"
TRANSPOSE_SOURCE = Path(__file__).resolve().with_name("transpose.py")
TRANSPOSE_KEY_CONSTANTS = {"tile": 64, "threads": 256, "swizzle": 7}
"""``transpose``'s cache prefix, exported function name, source file and the constants its key
covers (``TILE``, ``THREADS``, ``SWIZZLE_MASK``)."""

TAIL_ZERO_PREFIX = "tail_zero"
TAIL_ZERO_FUNCTION = "autocutlass_tail_zero"
TAIL_ZERO_SOURCE = Path(__file__).resolve().with_name("tail_zero.py")
TAIL_ZERO_KEY_CONSTANTS = {"threads": 256, "max_ctas": 264}
"""``tail_zero``'s cache prefix, exported function name, source file and the constants its key
covers (``THREADS``, ``MAX_CTAS``)."""

_REDUCE = ObjectCache(REDUCE_PREFIX, REDUCE_FUNCTION)
_TRANSPOSE = ObjectCache(TRANSPOSE_PREFIX, TRANSPOSE_FUNCTION)
_TAIL_ZERO = ObjectCache(TAIL_ZERO_PREFIX, TAIL_ZERO_FUNCTION)


def reduce_key(splits: int, d_dtype: DType, c_dtype: DType | None, bias: bool, activation: Activation, rank: int,
               transposed: bool = False) -> str:
    """``hopper_gemm.reduce.reduce_compile_key`` of a valid class, without the DSL."""
    cls = {
        "splits": splits,
        "d_dtype": DType(d_dtype).value,
        "c_dtype": None if c_dtype is None else DType(c_dtype).value,
        "bias": bool(bias),
        "activation": Activation(activation).value,
        "rank": rank,
        **({"transposed": True} if transposed else {}),
    }
    return digest({"family": REDUCE_PREFIX, "class": cls, "dsl": dsl_version(), "src": gemm_source_hash(),
                    "arch": target_arch()})  # fmt: skip


def _file_hash(path: Path) -> str:
    """sha256 of a kernel module's file, 16 hex digits (its ``own_source_hash()``)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def transpose_source_hash() -> str:
    """``transpose.own_source_hash()``: sha256 of the transpose module's file, 16 hex digits."""
    return _file_hash(TRANSPOSE_SOURCE)


def transpose_key(rank: int) -> str:
    """``transpose.transpose_compile_key(rank)`` for rank 2 or 3, without the DSL."""
    return digest({"family": TRANSPOSE_PREFIX, "rank": rank, **TRANSPOSE_KEY_CONSTANTS, "dsl": dsl_version(),
                    "self": transpose_source_hash(), "arch": target_arch()})  # fmt: skip


def get_reduce(
    splits: int,
    d_dtype: DType,
    c_dtype: DType | None,
    bias: bool,
    activation: Activation,
    rank: int,
    cache_dir: Path | None,
    transposed: bool = False,
) -> Any:
    """``hopper_gemm.reduce.get_reduce``: from memory or disk without the DSL, else through it."""
    fn = _REDUCE.find(reduce_key(splits, d_dtype, c_dtype, bias, activation, rank, transposed), cache_dir)
    if fn is not None:
        return fn
    from autocutlass.kernels.hopper_gemm.reduce import get_reduce as compile_reduce

    return compile_reduce(splits, d_dtype, c_dtype, bias, activation, rank, cache_dir, transposed)


def get_transpose(rank: int, cache_dir: Path | None) -> Any:
    """``transpose.get_transpose``: from memory or disk without the DSL, else through it."""
    fn = _TRANSPOSE.find(transpose_key(rank), cache_dir) if rank in (2, 3) else None
    if fn is not None:
        return fn
    from autocutlass.kernels.transpose import get_transpose as compile_transpose

    return compile_transpose(rank, cache_dir)


def tail_zero_key(width: int) -> str:
    """``tail_zero.tail_zero_compile_key(width)`` for width 16 or 32, without the DSL."""
    return digest({"family": TAIL_ZERO_PREFIX, "width": width, **TAIL_ZERO_KEY_CONSTANTS, "dsl": dsl_version(),
                    "self": _file_hash(TAIL_ZERO_SOURCE), "arch": target_arch()})  # fmt: skip


def get_tail_zero(width: int, cache_dir: Path | None) -> Any:
    """``tail_zero.get_tail_zero``: from memory or disk without the DSL, else through it."""
    fn = _TAIL_ZERO.find(tail_zero_key(width), cache_dir) if width in (16, 32) else None
    if fn is not None:
        return fn
    from autocutlass.kernels.tail_zero import get_tail_zero as compile_tail_zero

    return compile_tail_zero(width, cache_dir)

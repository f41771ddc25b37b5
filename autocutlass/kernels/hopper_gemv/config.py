"""The decode GEMV family's config: which kernel, and how one CTA splits the weight rows and K.

``GemvConfig`` is frozen and plain (JSON through ``as_dict`` / ``from_dict``). A CTA has
``warps_n * warps_k`` warps; warp (wn, wk) owns ``rows`` consecutive weight rows (output columns)
and every ``warps_k``-th step of K (``unroll`` 16-byte loads per row and lane in flight per step);
``m_tile`` is the most activation rows (tokens) the compiled kernel handles.

``kind``: ``"simt"`` (``kernel.GemvKernel``: CUDA-core FMAs, ``rows`` in ``ROWS``, each lane
owning 8-element chunks of K, ``rows * m_tile`` fp32 accumulators per lane) or ``"mma"``
(``kernel.GemvMmaKernel``: ``mma.sync.m16n8k16``, ``rows`` in ``MMA_ROWS``, ``m_tile`` in
``MMA_M_TILES``, a warp reading K in groups of 32 elements).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

KINDS = ("simt", "mma")
M_TILES = (1, 2, 4, 8, 16)
ROWS = (1, 2, 4, 8)
MMA_M_TILES = (8, 16)
MMA_ROWS = (16, 32)
WARPS = (1, 2, 4, 8, 16)
UNROLL = (1, 2, 4)
MAX_WARPS = 16
"""Warps per CTA at most (512 threads)."""
MAX_ACC = 64
"""``rows * m_tile`` fp32 accumulators per lane at most (beyond this the kernel spills)."""
MAX_LOADS = 16
"""``rows * unroll`` 16-byte weight loads in flight per lane at most."""
VEC_BYTES = 16
"""Bytes one lane loads per weight row and chunk: 8 bf16/fp16 elements."""


@dataclass(frozen=True)
class GemvConfig:
    m_tile: int = 1
    rows: int = 4
    warps_n: int = 4
    warps_k: int = 1
    unroll: int = 2
    kind: str = "simt"

    @property
    def warps(self) -> int:
        return self.warps_n * self.warps_k

    @property
    def threads(self) -> int:
        return 32 * self.warps

    @property
    def rows_per_cta(self) -> int:
        return self.rows * self.warps_n

    def short(self) -> str:
        return (f"gemv {self.kind} m{self.m_tile} rows={self.rows} warps={self.warps_n}x{self.warps_k} "
                f"unroll={self.unroll}")  # fmt: skip

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> GemvConfig:
        fields = {"m_tile", "rows", "warps_n", "warps_k", "unroll", "kind"}
        extra = set(d) - fields
        if extra:
            raise KeyError(f"GemvConfig has no field(s) {sorted(extra)}")
        out = cls(**{k: d[k] for k in fields if k in d})
        if out.kind not in KINDS:
            raise ValueError(f"GemvConfig.kind={out.kind!r} is not one of {KINDS}")
        for name in fields - {"kind"}:
            v = getattr(out, name)
            if isinstance(v, bool) or not isinstance(v, int):
                raise TypeError(f"GemvConfig.{name}={v!r} is not an int")
        return out

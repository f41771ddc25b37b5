"""The unfolded families' config: the inner family's config and T, the filter rows each unfolded
pixel holds (``lowering``), one frozen dataclass with a flat dict form (the inner config's fields
and ``rows``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

C = TypeVar("C")


@dataclass(frozen=True, order=True)
class UnfoldedConfig(Generic[C]):
    inner: C
    """The inner family's config (``hopper_conv``'s or ``hopper_conv_wgrad``'s), for the lowered layer."""
    rows: int = 1
    """T: filter rows per unfolded pixel (``lowering.unfold_rows`` lists a layer's)."""

    def short(self) -> str:
        s = self.inner.short()  # type: ignore[attr-defined]
        return s if self.rows == 1 else f"{s} rows{self.rows}"

    def as_dict(self) -> dict[str, Any]:
        return {**self.inner.as_dict(), "rows": self.rows}  # type: ignore[attr-defined]

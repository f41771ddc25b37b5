"""The unfolded families' config: the inner family's config and T, the filter rows each unfolded
pixel holds (``lowering``), one frozen dataclass with a flat dict form (the inner config's fields
and ``rows``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

C = TypeVar("C")


@dataclass(frozen=True, order=True)
class UnfoldedConfig(Generic[C]):
    inner: C
    """The inner family's config (``hopper_conv``'s or ``hopper_conv_wgrad``'s), for the lowered layer."""
    rows: int = 1
    """T: filter rows per unfolded pixel (``lowering.unfold_rows`` lists a layer's)."""
    channels: int = 0
    """The multiple C' is rounded up to: 0, whole 16-byte units (the default), or
    ``lowering.WIDE_CHANNELS`` (the wgrad family's tiles across the taps). Left out of the dict form
    when 0, so the records from before it keep their keys."""
    assemble: str = "gather"
    """The row-unfolding kernel (``unfold.ASSEMBLIES``): "gather" (``unfold_kernel``, the first
    build: each element of x' locates its source) or "slots" (``unfold_slots_kernel``: a thread's
    offsets computed once; the space and the seeds offer only it). Left out of the dict form when
    "gather", so the records from before it keep their keys and their kernel."""

    def short(self) -> str:
        s = self.inner.short()  # type: ignore[attr-defined]
        s = s if self.rows == 1 else f"{s} rows{self.rows}"
        s = s if not self.channels else f"{s} c'{self.channels}x"
        return s if self.assemble == "gather" else f"{s} {self.assemble}"

    OWN_FIELDS: ClassVar[tuple[str, ...]] = ("rows", "channels", "assemble")
    """The fields of the flat dict form that are this config's, not the inner one's."""

    def own_fields(self) -> dict[str, Any]:
        """This config's fields of the flat dict form: ``rows`` always, ``channels`` when not 0,
        ``assemble`` when not "gather"."""
        return {"rows": self.rows, **({"channels": self.channels} if self.channels else {}),
                **({"assemble": self.assemble} if self.assemble != "gather" else {})}

    def as_dict(self) -> dict[str, Any]:
        return {**self.inner.as_dict(), **self.own_fields()}  # type: ignore[attr-defined]

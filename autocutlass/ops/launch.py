"""Helpers every op's launch closures share: the device guard, the ``out=`` overlap test and the
weakly held view of the last weight seen."""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import Any

import torch

from autocutlass.ops.base import Entry


@functools.cache
def single_gpu() -> bool:
    """One visible CUDA device: the current device is then always the tensors' device."""
    return torch.cuda.device_count() == 1


def on_device(run: Entry, dev: int) -> Entry:
    """``run`` itself with one visible GPU (or no device index); otherwise ``run`` made current on
    the operands' device first, since a runner launches on the current device's stream."""
    if dev < 0 or single_gpu():
        return run

    def guarded(*args: Any) -> Any:
        if torch.cuda.current_device() != dev:
            with torch.cuda.device(dev):
                return run(*args)
        return run(*args)

    return guarded


def overlaps(p: int, span: int, q: int, qspan: int) -> bool:
    """Whether the byte ranges [p, p + span) and [q, q + qspan) share a byte."""
    return span > 0 and qspan > 0 and p < q + qspan and q < p + span


def meta(t: torch.Tensor | None) -> tuple[Any, ...] | None:
    """A tensor's memo-key metadata: shape, strides, dtype, device index, base-address residue."""
    if t is None:
        return None
    return (t.shape, t.stride(), t.dtype, t.get_device(), t.data_ptr() & 15)


NO_VIEW: tuple[Any, Any, Any] = (lambda: None, None, 0)
"""An empty weight-view slot (``remember_view``): its reference resolves to no tensor."""


def remember_view(slot: list[tuple[Any, Any, Any]], w: torch.Tensor, view: torch.Tensor, ptr: Any) -> torch.Tensor:
    """Keep ``view`` (a launch's view of the weight ``w`` at data pointer ``ptr``) in ``slot[0]``
    for the next call with the same weight, holding ``w`` weakly: when ``w`` dies the slot is
    emptied, so that a memoised entry does not keep a deleted model's weight (nor, through the
    view, its storage) alive. ``view`` must be a view of ``w.detach()``, not of ``w``: a view keeps
    its base object alive. A caller checks ``seen[0]() is w and ptr == seen[2]`` (the data pointer
    catches ``param.data = other``; ``ptr`` may be any key of the weight's state, e.g. with its
    version counter); the slot is swapped whole. Returns ``view``."""

    def dead(ref: Any, slot: list[tuple[Any, Any, Any]] = slot) -> None:
        if slot[0][0] is ref:
            slot[0] = NO_VIEW

    try:
        ref: Any = weakref.ref(w, dead)
    except TypeError:  # not weakly referenceable: held as before
        ref = lambda w=w: w  # noqa: E731
    slot[0] = (ref, view, ptr)
    return view


def derived_per_version(slot: list[tuple[Any, Any, Any]], w: torch.Tensor,
                        derive: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:  # fmt: skip
    """A tensor derived from the weight ``w`` (a transformed copy: ``derive(w.detach())``), kept in
    ``slot`` (``remember_view``) for the last weight seen, keyed by the weight object, its storage
    address and its version counter (``Tensor._version``, which every in-place update through
    autograd-visible ops bumps, e.g. ``torch.optim``'s steps): a call with the same weight at the
    same version reuses it. Writes through ``.data`` do not bump the version: a weight updated that
    way between two calls is read stale, so one weight only is kept. Nothing is kept while a CUDA
    graph is captured (the capture then records the transform, so each replay transforms the weight
    it reads)."""
    seen = slot[0]
    at = (w.data_ptr(), w._version)
    if seen[0]() is w and at == seen[2]:
        return seen[1]  # type: ignore[no-any-return]
    out = derive(w.detach())
    if not (w.is_cuda and torch.cuda.is_current_stream_capturing()):
        remember_view(slot, w, out, at)
    return out

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


def current_raw_stream(index: int) -> int:
    """The handle (``cudaStream_t`` as an int) of device ``index``'s current stream. torch's own
    binding returns it without building a ``torch.cuda.Stream`` object, which took 5-12 us of a
    split wgrad call's host time (H100, 2026-11-27,
    ``benchmarks/results/2026-11-27-h100-s23-conv-entry-host.txt``); builds without it ask
    ``torch.cuda.current_stream``."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return int(raw(index))
    return int(torch.cuda.current_stream(index).cuda_stream)


_DEFAULT_STREAMS: dict[int, int] = {}


def on_default_stream(index: int) -> bool:
    """Whether device ``index``'s current stream is its default stream. CUDA-graph capture and
    torch.compile's cudagraph trees (their warm-up runs and their recording) run on side streams
    whose allocations go to the graph's private pool: a buffer made there and kept across calls is
    a live tensor the graph does not own ("tensors in the cudagraph pool not tracked as outputs"),
    so scratch and derived copies are kept only on the default stream."""
    default = _DEFAULT_STREAMS.get(index)
    if default is None:
        default = _DEFAULT_STREAMS[index] = int(torch.cuda.default_stream(index).cuda_stream)
    return current_raw_stream(index) == default


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
    way between two calls is read stale, so one weight only is kept. Nothing is kept off the
    default stream (``on_default_stream``): while a CUDA graph is captured the capture records the
    transform, so each replay transforms the weight it reads, and a copy made in the warm-up of
    torch.compile's cudagraph trees would sit in the graph's pool untracked (the training step of
    ``torch.compile(mode="reduce-overhead")`` then raised, H100, 2026-11-28,
    ``benchmarks/results/2026-11-28-h100-s32-b-train-unet-compiled.txt``)."""
    seen = slot[0]
    at = (w.data_ptr(), w._version)
    if seen[0]() is w and at == seen[2]:
        return seen[1]  # type: ignore[no-any-return]
    out = derive(w.detach())
    if not w.is_cuda or on_default_stream(w.get_device()):
        remember_view(slot, w, out, at)
    return out

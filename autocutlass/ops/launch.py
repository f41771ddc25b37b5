"""Helpers every op's launch closures share: the device guard and the ``out=`` overlap test."""

from __future__ import annotations

import functools
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

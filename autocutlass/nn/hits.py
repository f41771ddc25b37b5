"""``LinearHits``: one call site's last memoised ``autocutlass.linear`` entry, run again without the
dispatcher while nothing that decides it changed.

A module calls ``autocutlass.linear`` with the same weight, bias and activation every time, and in
eager inference (an LLM's decode step) with inputs of the same shape every step. The dispatcher's
hit path then rebuilds the same memo key (about twenty fields of tensor metadata) and looks it up
on every call: in a host-bound decode step on an H200 an ``autocutlass.nn.Linear`` forward cost
42 us of host time against 24 us for ``nn.Linear``
(``benchmarks/results/2026-11-25-h200-s14-decode-host-before.json``). ``LinearHits.linear`` keeps the entry
the last call ran (``Dispatcher.call_remembered``) with what it was chosen for and runs it directly
when the next call matches:

* the same dispatcher (``autocutlass.reset()`` makes a new one), whose ``epoch`` has not moved
  (no memoised entry was dropped since: cleared, expired, replaced by a background tuning's
  winner) and the same policy (``autocutlass.policy(...)`` overrides it per thread);
* autograd not recording, no autocast, no torch.compile tracing (those calls take
  ``autocutlass.linear``, which routes them to the custom ops);
* the input's shape, strides, dtype, device and 16-byte alignment residue, the very weight and
  bias tensors with the same data pointers (a ``param.data = ...`` moves them), shapes, strides
  and dtypes: everything of the memo key that can differ between calls of one call site.

Measured on a CPU with a no-op compiled function: a module call costs 6% less host time (13.7
vs 14.5 us, interleaved medians); in the H200's decode step the ratio of our Linear forward's host
time to ``nn.Linear``'s did not move measurably (1.74 before, 1.73 after:
``benchmarks/results/2026-11-25-h200-s14-decode-host-{before,after}.json``): the rest of the gap is Python frames and tensor ops of
the launch itself.

Float32 inputs always take the dispatcher (their key depends on torch's TF32 setting too). The
counters count a remembered call as a memo hit. Nothing is remembered across ``copy.deepcopy`` or
pickling (a copy starts empty).
"""

from __future__ import annotations

from typing import Any

import torch

from autocutlass import api
from autocutlass.dispatch import POLICY_OVERRIDE
from autocutlass.ops.gemm.entries import LINEAR

_COMPILING = torch.compiler.is_compiling
_GRAD = torch.is_grad_enabled
_AUTOCAST = torch._C._is_any_autocast_enabled  # autocast for any device: such calls take api.linear
_F32 = torch.float32


class LinearHits:
    """The last memoised entry of one ``autocutlass.linear`` call site (see the module docstring)."""

    __slots__ = ("_hit",)

    def __init__(self) -> None:
        self._hit: tuple[Any, ...] | None = None
        """(dispatcher, its epoch, policy, weight, bias, activation, input metadata, weight and bias
        metadata, entry): one tuple, swapped whole, so that a thread never reads one call's entry
        with another's metadata. Tensors are compared by identity, never with ``==``."""

    def __deepcopy__(self, memo: dict[int, Any]) -> LinearHits:
        return LinearHits()

    def __reduce__(self) -> tuple[type[LinearHits], tuple[()]]:
        return LinearHits, ()

    def linear(self, x: Any, w: Any, b: Any = None, activation: Any = None) -> torch.Tensor:
        """``autocutlass.linear(x, w, b, activation=activation)``."""
        if _COMPILING() or _AUTOCAST() or _GRAD():
            return api.linear(x, w, b, activation=activation)
        hit = self._hit
        if hit is not None:
            d = hit[0]
            if (d.epoch == hit[1] and d is api._default and (POLICY_OVERRIDE.policy or d._policy) is hit[2]
                    and hit[3] is w and hit[4] is b and (hit[5] is activation or (type(activation) is str and hit[5] == activation))
                    and hit[6] == (x.shape, x.stride(), x.dtype, x.get_device(), x.data_ptr() & 15)
                    and hit[7] == (w.data_ptr(), w.shape, w.stride(), w.dtype, None if b is None else (b.data_ptr(), b.shape, b.stride(), b.dtype))):  # fmt: skip
                d._n.memo_hits += 1
                return hit[8](x, w, b, activation)
        if not isinstance(x, torch.Tensor) or x.dtype is _F32:
            return api.linear(x, w, b, activation=activation)
        d = api.dispatcher()
        y, entry, epoch, pol = d.call_remembered(LINEAR, x, w, b, activation, None, None)
        if entry is not None:
            self._hit = (d, epoch, pol, w, b, activation, (x.shape, x.stride(), x.dtype, x.get_device(), x.data_ptr() & 15),
                         (w.data_ptr(), w.shape, w.stride(), w.dtype, None if b is None else (b.data_ptr(), b.shape, b.stride(), b.dtype)),
                         entry)  # fmt: skip
        return y

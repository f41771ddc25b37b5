"""The rows of ``torch._grouped_mm``'s output past ``offs[-1]``, zeroed.

``torch._grouped_mm`` of the ``2d_3d`` form leaves the output rows past the last group end
unwritten; ``autocutlass.grouped_mm`` returns them as zeros on every path (its kernel stores
them as zeros). ``zero_tail(y, offs)`` zeroes them in place on the torch path, without reading
``offs`` on the host (no synchronisation; a CUDA graph replays it with other offsets):

* on an sm_90 GPU, for a 2-D output with unit last stride and 2- or 4-byte elements: the
  ``tail_zero`` helper kernel (``kernels.tail_zero``), one launch that reads ``offs[-1]`` on the
  GPU and writes only the tail's rows (none in the usual routing, where ``offs[-1]`` is T);
* elsewhere (CPU tensors, other GPUs, other layouts), or while the kernel is not ready on this
  device: a ``masked_fill_`` over the whole output of the rows' group mask (a read and a write
  of all of it: measured at 17-23% of a Mixtral-sized expert GEMM on an H100, 2026-11-25).

**First use per device and width.** The kernel is fetched (the on-disk cache, without the DSL;
compiled on a miss) and then checked once on a small probe against the expected result (a
padded row stride, a tail, no tail, an end past T), which synchronises that one time. A kernel
that cannot be fetched or fails the check is logged once and the masked fill serves that device
and width for the rest of the process. Neither happens while a CUDA graph is being captured: a
first use there takes the masked fill, and the kernel is readied at the first use outside one.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import torch

from autocutlass.ops.gemm.frontend import SERVED_CC

log = logging.getLogger("autocutlass")

Launcher = Callable[[torch.Tensor, torch.Tensor], Any]
"""``fn(out_bits, offs)``: the compiled kernel on an int16/int32 view of the output."""

_BITS = {2: torch.int16, 4: torch.int32}
_lock = threading.Lock()
_ready: dict[tuple[int, int], Launcher | None] = {}
"""(device index, element bytes) -> the checked kernel, or None where the masked fill serves."""


def _fetch(width: int) -> Launcher:
    """The compiled kernel of ``width`` bits (``kernels.helper_kernels.get_tail_zero``)."""
    from autocutlass.kernels.helper_kernels import get_tail_zero
    from autocutlass.settings import current

    return get_tail_zero(width, current().kernel_cache_dir)  # type: ignore[no-any-return]


fetch: Callable[[int], Launcher] = _fetch
"""How the kernel is fetched (replaced by tests)."""


def _masked_fill(y: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    from autocutlass.ops.grouped.frontend import group_rows

    rows = group_rows(offs, y.shape[0])
    return y.masked_fill_((rows >= offs.shape[0]).unsqueeze(1), 0)


def check(fn: Launcher, device: torch.device, bits: torch.dtype) -> str | None:
    """Run ``fn`` on probes on ``device`` and compare with the expected rows: None when every
    probe matches, else what differed."""
    for name, ends, tail_from in (("a tail", [1, 4], 4), ("no tail", [2, 7], 7), ("an end past T", [3, 9], 7),
                                  ("an empty last group", [5, 5], 5)):  # fmt: skip
        buf = torch.full((7, 8), 7, dtype=bits, device=device)
        y = buf[:, :5]  # a row stride of 8 > N = 5: the padding must stay untouched
        fn(y, torch.tensor(ends, dtype=torch.int32, device=device))
        want = torch.full((7, 8), 7, dtype=bits)
        want[tail_from:, :5] = 0
        got = buf.cpu()
        if not torch.equal(got, want):
            return f"with {name} (offs {ends}, T 7) it wrote rows {got[:, :5].tolist()}"
    return None


def _launcher(y: torch.Tensor) -> Launcher | None:
    """The checked kernel for ``y``'s device and element size, None where the masked fill serves."""
    size = y.element_size()
    if y.device.type != "cuda" or size not in _BITS or y.dim() != 2 or y.stride(1) != 1:
        return None
    key = (y.device.index if y.device.index is not None else torch.cuda.current_device(), size)
    found = _ready.get(key, False)
    if found is not False:
        return found  # type: ignore[return-value]
    if torch.cuda.is_current_stream_capturing():
        return None  # readied at the first use outside a capture
    with _lock:
        if key not in _ready:
            _ready[key] = _prepare(key[0], size)
        return _ready[key]


def _prepare(index: int, size: int) -> Launcher | None:
    if torch.cuda.get_device_capability(index) != SERVED_CC:
        return None
    try:
        fn = fetch(8 * size)
        with torch.cuda.device(index):
            problem = check(fn, torch.device("cuda", index), _BITS[size])
    except Exception as e:  # a fetch, compile or launch failure: the masked fill serves
        log.warning("grouped_mm: the tail-zeroing kernel is unavailable on cuda:%d (%s: %s); the rows past "
                    "offs[-1] are zeroed by a masked fill of the whole output", index, type(e).__name__, e)  # fmt: skip
        return None
    if problem is not None:
        log.error("grouped_mm: the tail-zeroing kernel failed its check on cuda:%d (%s); the rows past offs[-1] "
                  "are zeroed by a masked fill of the whole output", index, problem)  # fmt: skip
        return None
    return fn


def zero_tail(y: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    """``y`` (T, N) with the rows past ``offs[-1]`` (clamped into [0, T]) zeroed in place; ``offs``
    int32 (E,), E >= 1, on ``y``'s device."""
    if y.numel() == 0:
        return y
    fn = _launcher(y) if offs.numel() > 0 else None
    if fn is None:
        return _masked_fill(y, offs)
    fn(y.view(_BITS[y.element_size()]), offs if offs.stride(0) == 1 else offs.contiguous())
    return y


def reset() -> None:
    """Forget the readied kernels (tests)."""
    with _lock:
        _ready.clear()

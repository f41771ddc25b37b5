"""``autocutlass.prewarm``: start on-line tuning's worker processes before the first miss.

Under the tuning policies (``tune``, ``background``) the first problem a process tunes also
waits for the tuning pool's children to start (``search.pool``: compile children that import
torch and the DSL, a benchmark child that makes a CUDA context): seconds that the first miss of
every fresh process pays on top of its tuning. ``prewarm()`` starts them now, without waiting
for them, so that their start-up overlaps whatever the program does next (loading weights,
building the model). ``swap_linear_``, ``swap_conv2d_`` and ``swap_gated_mlp_`` call it when they swap a layer
(unless ``AUTOCUTLASS_PREWARM=0``): a model is about to run on autocutlass, and its first calls
are likely to miss.

It starts nothing (and returns False) under the other policies, without a CUDA GPU of the
served architecture (sm_90), without the DSL, or when the pool closes its children after every
tuning (``AUTOCUTLASS_TUNE_POOL_IDLE_S=0``). Started children that no tuning uses close after
the pool's idle time (``AUTOCUTLASS_TUNE_POOL_IDLE_S``, 300 s), as after a tuning. By default only
the compile children start (processes on the CPU); ``bench=True`` starts the device's benchmark
child too, which holds a CUDA context (GPU memory) until the pool closes it.
"""

from __future__ import annotations

import importlib.util
import logging

import torch

from autocutlass import settings as settings_mod
from autocutlass.dispatch import POLICY_OVERRIDE
from autocutlass.ops.gemm.frontend import SERVED_CC
from autocutlass.settings import Policy

log = logging.getLogger("autocutlass")

TUNING_POLICIES = (Policy.TUNE, Policy.BACKGROUND)


def _why_not(index: int) -> str | None:
    s = settings_mod.current()
    pol = POLICY_OVERRIDE.policy or s.policy
    if pol not in TUNING_POLICIES:
        return f"the policy is {pol.value!r}, which never tunes"
    if s.tune_pool_idle_s <= 0:
        return "AUTOCUTLASS_TUNE_POOL_IDLE_S=0 closes the tuning processes after every tuning"
    if not torch.cuda.is_available():
        return "no CUDA GPU"
    cc = torch.cuda.get_device_capability(index)
    if cc != SERVED_CC:
        return f"cuda:{index} has compute capability {cc[0]}.{cc[1]}; the kernels need 9.0"
    if importlib.util.find_spec("cutlass") is None:
        return "the CuTe DSL (nvidia-cutlass-dsl) is not installed"
    return None


def _index(device: int | str | torch.device | None) -> int:
    """The CUDA device index ``device`` names (None: the current device); ValueError for another."""
    if device is None:
        return torch.cuda.current_device() if torch.cuda.is_available() else 0
    try:
        d = torch.device("cuda", device) if isinstance(device, int) else torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise ValueError(f"autocutlass.prewarm: device={device!r} is not a CUDA device: {e}") from None
    if d.type != "cuda":
        raise ValueError(f"autocutlass.prewarm: device={device!r} is not a CUDA device")
    if d.index is None:
        return torch.cuda.current_device() if torch.cuda.is_available() else 0
    return d.index


def prewarm(device: int | str | torch.device | None = None, *, bench: bool = False) -> bool:
    """Start the on-line tuning processes now, without waiting for them; True when started
    (see the module docstring for when nothing starts). ``device``: the CUDA device whose GPU
    the tunings will time on (default: the current one); ``bench``: also start its benchmark
    child (a CUDA context on that GPU)."""
    index = _index(device)
    why = _why_not(index)
    if why is not None:
        log.debug("autocutlass.prewarm: nothing started: %s", why)
        return False
    from autocutlass.search import pool

    started = pool.shared(settings_mod.current().tune_pool_idle_s).warm(index if bench else None)
    if started:
        log.debug("autocutlass.prewarm: the tuning processes are starting (cuda:%d)", index)
    return started


def after_swap(swapped: int) -> None:
    """The model swaps' call: ``prewarm()`` when they swapped a layer and ``AUTOCUTLASS_PREWARM``
    allows it. Never raises (a swap must not fail for it)."""
    if swapped == 0 or not settings_mod.current().prewarm:
        return
    try:
        prewarm()
    except Exception as e:  # a process that cannot start is a tuning's problem, reported there
        log.debug("autocutlass.prewarm after a swap failed: %s: %s", type(e).__name__, e)

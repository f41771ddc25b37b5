"""Which GPUs a worker runs on, and the identity GPU locks agree on.

A worker never initialises CUDA itself: it reads the GPUs it may use from ``CUDA_VISIBLE_DEVICES``
(or ``--gpus``, same syntax: indices or UUIDs) and from ``nvidia-smi``, and gives each benchmark
child one of them through that child's ``CUDA_VISIBLE_DEVICES``. Locks are keyed by the GPU's
UUID, which every process of the host sees alike whatever its ``CUDA_VISIBLE_DEVICES``
(``device_uuid`` reads it through torch in a process that already uses CUDA, e.g. a server
tuning on-line). Without ``nvidia-smi`` the key falls back to ``<host>:<index>``.
"""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

Runner = Callable[[Sequence[str]], str | None]
"""Runs a command, returns its stdout, or None when it cannot run (a seam for tests)."""


def normalize_uuid(uuid: str) -> str:
    """``GPU-6A0F1E2D-...`` (nvidia-smi) and ``6a0f1e2d-...`` (torch) -> ``6a0f1e2d...``: lower-case
    hex digits without dashes, the form locks are keyed by (a MIG UUID keeps its ``mig`` prefix)."""
    return uuid.strip().lower().removeprefix("gpu-").replace("-", "")


@dataclass(frozen=True)
class Gpu:
    """A GPU a worker may use: ``visible`` is what its child's ``CUDA_VISIBLE_DEVICES`` is set to,
    ``uuid`` its normalised UUID (None when unknown)."""

    visible: str
    uuid: str | None

    def lock_id(self) -> str:
        """The identity of the GPU lock: its UUID, else ``<host>:<visible>``."""
        return self.uuid or f"{socket.gethostname()}:{self.visible}"

    def label(self) -> str:
        return self.visible if self.uuid is None else f"{self.visible} ({self.uuid[:8]})"


def _nvidia_smi(cmd: Sequence[str]) -> str | None:
    try:
        done = subprocess.run(list(cmd), capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def _physical(run: Runner) -> list[tuple[str, str]] | None:
    """(index, normalised uuid) of every GPU ``nvidia-smi`` lists, or None without it."""
    out = run(["nvidia-smi", "--query-gpu=index,uuid", "--format=csv,noheader"])
    if out is None:
        return None
    rows = []
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0].isdigit():
            rows.append((parts[0], normalize_uuid(parts[1])))
    return rows


def visible_gpus(selection: str | None = None, *, env: Mapping[str, str] | None = None,
                 run: Runner = _nvidia_smi, count: Callable[[], int] | None = None) -> list[Gpu]:  # fmt: skip
    """The GPUs to run on: ``selection`` (``--gpus``), else ``CUDA_VISIBLE_DEVICES``, else every
    GPU ``nvidia-smi`` lists (without it: ``count()``, torch's NVML-based device count)."""
    e = os.environ if env is None else env
    spec = selection if selection is not None else e.get("CUDA_VISIBLE_DEVICES")
    physical = _physical(run)
    if spec is None:
        if physical is not None:
            return [Gpu(index, uuid) for index, uuid in physical]
        n = (count or _torch_count)()
        return [Gpu(str(i), None) for i in range(n)]
    gpus = []
    for entry in (s.strip() for s in spec.split(",")):
        if not entry or entry == "-1":
            break  # CUDA stops at the first invalid entry
        uuid = None
        if entry.isdigit():
            uuid = dict(physical or []).get(entry)
        elif entry.lower().startswith(("gpu-", "mig-")):
            want = normalize_uuid(entry)
            uuid = next((u for _, u in physical or [] if u.startswith(want)), want)
        gpus.append(Gpu(entry, uuid))
    return gpus


def _torch_count() -> int:
    import torch

    return int(torch.cuda.device_count())  # NVML where it can: no CUDA context is made


def device_uuid(index: int) -> str:
    """The normalised UUID of CUDA device ``index`` of this process (which uses CUDA already)."""
    import torch

    return normalize_uuid(str(torch.cuda.get_device_properties(index).uuid))


__all__ = ["Gpu", "device_uuid", "normalize_uuid", "visible_gpus"]

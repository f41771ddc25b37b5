"""Tuning campaigns on a fleet: many processes, GPUs and hosts tuning into one database.

Above ``search`` and ``db`` (it uses both; neither imports it):

* ``worker``: ``run_worker`` takes a campaign's problems from the queue (``db.queue``) until none
  is left, one lane per GPU (``search.lanes``: a benchmark child per GPU, compile children
  shared), each problem tuned once per toolchain, under its problem and GPU locks.
* ``sink``: ``SharedTuningSink``, the ``TrialSink`` for processes sharing a database: winners are
  arbitrated (``merge_best``) and ``claim`` decides which process tunes a problem on-line while
  the others serve the best config available.
* ``gpus``: the GPUs a worker may use and the identity (UUID) GPU locks are keyed by.

The command line is ``autocutlass tune --enqueue / --worker / --status`` (``cli.tune``).

The names below are imported on first use: dispatch imports ``sink`` on every process's first
database open, and ``worker`` pulls in the search layer and Optuna, which only tuning needs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from autocutlass._lazy import lazy_exports

if TYPE_CHECKING:
    from autocutlass.campaign.gpus import Gpu, device_uuid, visible_gpus
    from autocutlass.campaign.sink import SharedTuningSink, TuningClaim
    from autocutlass.campaign.worker import (
        NoSuchCampaign,
        PipelineLanes,
        ProblemReport,
        RegistryFamilies,
        WorkerOptions,
        run_worker,
    )


__all__ = [
    "Gpu",
    "NoSuchCampaign",
    "PipelineLanes",
    "ProblemReport",
    "RegistryFamilies",
    "SharedTuningSink",
    "TuningClaim",
    "WorkerOptions",
    "device_uuid",
    "run_worker",
    "visible_gpus",
]

_LAZY = {
    "Gpu": "gpus", "device_uuid": "gpus", "visible_gpus": "gpus",
    "SharedTuningSink": "sink", "TuningClaim": "sink",
    "NoSuchCampaign": "worker", "PipelineLanes": "worker", "ProblemReport": "worker", "RegistryFamilies": "worker",
    "WorkerOptions": "worker", "run_worker": "worker",
}  # fmt: skip


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())

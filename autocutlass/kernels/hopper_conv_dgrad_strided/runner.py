"""The strided dgrad runner: one scatter-kernel launch per computed stride phase, after a fill of
dx with zeros where some phase receives no tap.

Calling convention (conv dgrad): ``runner(dy, w, dx, **_)`` with torch CUDA tensors, all
channels_last: dy (N, K, P, Q), w (K, C, R, S), dx (N, C, H, W) written, never read (every pixel
of dx belongs to exactly one phase).

The launches run in phase order on the current stream, each on the whole GPU (its persistent
grid as large as the resident clusters allow), sharing one split-K scratch (each launch leaves its
turnstiles at zero for the next). Launching the phases side by side instead (side streams forked
from the current one, the resident clusters shared out among the phases by work) ran slower on an
H200 (ResNet-50 b128's stage-3 3x3 stride-2 layer 0.55x cuDNN against 0.75x one after another,
``benchmarks/results/2026-11-28-h200-s35-d-*``), so it is not done.

One runner serves every shape of its layer class (as the other conv runners: a record of one
batch or image size serves its neighbours): the stride, padding and filter size are the class's,
N, H, W, C, K are read from the tensors, and the phases of each shape are derived on its first
call. A phase's sub-filter size (its taps along H and W) depends on the class alone; the kernel
of each is compiled once (``get_compiled``: one per distinct size).

The phases' sub-filters (``phases.phase_weight``: small gathers and copies) are kept for the
last weight seen at its version, as ``hopper_conv_dgrad.runner`` keeps its flipped filter
(``ops.launch.derived_per_version``: one weight, bypassed off the default stream).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autocutlass.kernels.hopper_conv.config import HopperConvConfig
from autocutlass.kernels.hopper_conv.plan import ConvPlan, implicit_gemm
from autocutlass.kernels.hopper_conv.runner import dense_channels_last
from autocutlass.kernels.hopper_conv_dgrad_strided.compile import get_compiled
from autocutlass.kernels.hopper_conv_dgrad_strided.phases import (
    Phase,
    phase_band,
    phase_problem,
    phase_view,
    phase_weight,
    phases,
)
from autocutlass.kernels.hopper_gemm.plan import make_plan as make_gemm_plan
from autocutlass.kernels.hopper_gemm.runner import SplitKWorkspace, max_active_clusters, scratch_slots
from autocutlass.ops.launch import NO_VIEW, derived_per_version

if TYPE_CHECKING:
    from autocutlass.ops.conv.problem import ConvProblem


def phase_plan(config: HopperConvConfig, problem: ConvProblem, phase: Phase) -> ConvPlan:
    """The scatter kernel's compile-time plan for one computed phase (checked by the family)."""
    gemm = make_gemm_plan(config.gemm_config(), implicit_gemm(phase_problem(problem, phase)))
    return ConvPlan(gemm=gemm, r=phase.h.taps, s=phase.w.taps)


class StridedDgradRunner:
    """Strided conv dgrad runner for one (config, layer class); see the module docstring."""

    def __init__(self, config: HopperConvConfig, problem: ConvProblem, cache_dir: Path | None) -> None:
        self.config = config
        self.problem = problem
        self._cache_dir = cache_dir
        self._fns: dict[tuple[int, int], Any] = {}
        self._shapes: dict[tuple[int, ...], tuple[ConvProblem, list[Phase]]] = {}
        for ph in self._phases(problem.n, problem.c, problem.h, problem.w, problem.k)[1]:
            if ph.computed:
                self._kernel(problem, ph)
        self._clusters: dict[int, int] = {}
        self._workspace = SplitKWorkspace() if config.split_k > 1 or config.stream_k else None
        self._seen = [NO_VIEW]  # (weight, weakly; {sub-filter taps: the sub-filter}; (data_ptr, version))

    def _phases(self, n: int, c: int, h: int, w: int, k: int) -> tuple[ConvProblem, list[Phase]]:
        """The class's problem of dx (N, C, H, W) and K output channels, and its non-empty phases:
        derived on a shape's first call only."""
        got = self._shapes.get((n, c, h, w, k))
        if got is None:
            pr = dataclasses.replace(self.problem, n=n, c=c, h=h, w=w, k=k)
            got = self._shapes[(n, c, h, w, k)] = (pr, [ph for ph in phases(pr) if not ph.empty])
        return got

    def _kernel(self, problem: ConvProblem, phase: Phase) -> Any:
        fn = self._fns.get(phase.filter_rs)
        if fn is None:
            fn = self._fns[phase.filter_rs] = get_compiled(phase_plan(self.config, problem, phase), self._cache_dir)
        return fn

    def weights(self, w: Any) -> Any:
        """The sub-filters of ``w`` by phase (``Phase.h``/``w`` residues and taps: the same for every
        shape of the class), computed once per weight version."""

        def derive(t: Any) -> Any:
            return {(ph.h.r0, ph.w.r0, ph.filter_rs): phase_weight(t, self.problem, ph).permute(0, 2, 3, 1)
                    for ph in phases(self.problem) if ph.h.taps and ph.w.taps}  # fmt: skip

        return derived_per_version(self._seen, w, derive)

    def poison_scratch(self) -> None:
        """Verification's hook: NaN in the split-K partials (``SplitKWorkspace.poison``)."""
        if self._workspace is not None:
            self._workspace.poison()

    def __call__(self, dy: Any, w: Any, dx: Any, **_: Any) -> None:
        import torch

        cls = self.problem
        pr, phs = self._phases(*dx.shape, w.shape[0])
        want = {"dy": (pr.n, pr.k, pr.p, pr.q), "w": (pr.k, pr.c, pr.r, pr.s)}
        for name, t in (("dy", dy), ("w", w)):
            if tuple(t.shape) != want[name]:
                raise ValueError(f"{name} shape {tuple(t.shape)} != {want[name]} for dx {tuple(dx.shape)} of "
                                 f"{cls.describe()}")  # fmt: skip
        if not dx.is_contiguous(memory_format=torch.channels_last):
            raise ValueError(f"dx must be a channels_last-contiguous (N, C, H, W) tensor, got strides {dx.stride()}")
        if dx.numel() == 0:
            return
        dyv = dense_channels_last(dy).permute(0, 2, 3, 1)
        dxd = dense_channels_last(dx)
        subs = self.weights(w)
        dev = dx.get_device()
        clusters = self._clusters.get(dev)
        if clusters is None:
            clusters = max_active_clusters(max(dev, 0), self.config.cluster_size)
            self._clusters[dev] = clusters
        if not all(ph.computed for ph in phs):
            # Pixels no tap reaches (a 1x1 stride-2 layer's odd rows and columns: three quarters of
            # dx): one dense fill of dx, faster than filling the phases' strided views, then the
            # computed phases overwrite theirs.
            dx.zero_()
        work = count = None
        if self._workspace is not None:
            # One scratch for all phases, sized for the largest (serial split-K: a slot per tile).
            cfg = self.config
            rows = max((ph.h.rows * ph.w.rows for ph in phs if ph.computed), default=1)
            slots = scratch_slots(cfg, pr.n * rows, pr.c, 1, clusters)
            work, count = self._workspace.get(dx.device, slots * cfg.tile_m * cfg.tile_n, slots)
        for ph in phs:
            if ph.computed:
                sub = subs[(ph.h.r0, ph.w.r0, ph.filter_rs)]
                view = phase_view(dxd, pr, ph)
                self._kernel(pr, ph)(phase_band(dyv, ph), sub, view, work, count, *ph.pads, clusters)

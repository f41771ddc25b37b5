"""A strided conv2d dgrad as one stride-1 convolution per stride phase, in pure Python (no torch
at import).

For y = conv(x, w; stride s, padding p, dilation 1) along one spatial axis,

    y[o] = sum_r x[o*s - p + r] * w[r],   so   dx[i] = sum_{r, o: o*s - p + r = i} dy[o] * w[r].

An input row i = phi + j*s of phase phi (0 <= phi < s) is reached only by the taps r = r0 + t*s
with r0 = (phi + p) mod s, t = 0 .. T-1 (T = ceil((R - r0) / s), possibly 0), from the output row
o = j + base - t with base = (phi + p - r0) / s. Flipping the taps (u = T-1-t) makes that a
stride-1 correlation of dy with the phase's sub-filter g[u] = w[r0 + (T-1-u)*s]:

    dx_phi[j] = sum_u dy[j - lo + u] * g[u],   lo = T-1 - base,

over the phase's rows j = 0 .. H_phi - 1 (H_phi = ceil((H - phi) / s)), dy read as zero outside
0 .. P-1: a convolution padded ``lo`` rows before and ``hi = H_phi - P - lo + T - 1`` after (hi
may differ from lo, so the two are kept apart). Where lo or hi comes out negative (a padding
beyond the filter's reach, a stride above the filter size) the phase reads a band of dy: its
first -lo rows and last -hi rows are never read, so dy is sliced (``skip`` rows, ``keep`` kept)
and padded by 0 on that side; a band of no rows leaves the phase all zeros. Per 2-D phase
(phi_h, phi_w) that is the fprop
kernel's implicit GEMM with M = N*H_phi*W_phi, N_gemm = C, K_gemm = K*T_h*T_w: every multiply is
a real one (the phases' taps add up to R*S), none by the zeros a stride-dilated dy would hold.
A phase with no taps (T = 0: a 1x1 filter's odd rows at stride 2) is all zeros.

The phase's rows of dx are every s-th pixel of dx: the kernel writes them through a strided
(N, H_phi, W_phi, C) view of dx (``kernel``'s scatter store), so no temporary is made.

Served: dilation 1 (with a dilation the taps of a phase are no arithmetic progression in
general).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from autocutlass.kernels.budgets import TMA_ALIGN_BYTES
from autocutlass.kernels.hopper_conv.check import IM2COL_CORNER_MAX, IM2COL_CORNER_MIN
from autocutlass.ops.conv.problem import ConvDirection, ConvProblem
from autocutlass.ops.types import Epilogue

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class AxisPhase:
    """One spatial axis of a phase: rows ``phi``, ``phi + s``, ... of dx."""

    phi: int
    """The first input row (column) of the phase."""
    rows: int
    """H_phi: how many rows of dx the phase holds."""
    r0: int
    """The phase's first filter tap."""
    taps: int
    """T: its taps r0, r0 + s, ... (0: the phase is all zeros)."""
    lo: int
    """Rows of zeros before the read band of dy (the correlation's lower padding)."""
    hi: int
    """Rows of zeros after it."""
    skip: int
    """dy rows before the band (never read by the phase)."""
    keep: int
    """dy rows in the band (0: the phase reads nothing and is all zeros)."""

    @property
    def reads(self) -> bool:
        return self.taps > 0 and self.keep > 0


def axis_phases(size: int, out: int, taps: int, stride: int, pad: int) -> list[AxisPhase]:
    """The ``stride`` phases of one axis: ``size`` input rows (H), ``out`` output rows (P), a
    filter of ``taps`` taps (R), padding ``pad``, dilation 1."""
    phases = []
    for phi in range(stride):
        rows = max(0, -(-(size - phi) // stride))
        r0 = (phi + pad) % stride
        t = max(0, -(-(taps - r0) // stride))
        base = (phi + pad - r0) // stride
        lo = t - 1 - base
        hi = rows - out - lo + t - 1
        skip, cut = max(0, -lo), max(0, -hi)
        phases.append(AxisPhase(phi=phi, rows=rows, r0=r0, taps=t, lo=max(lo, 0), hi=max(hi, 0), skip=skip,
                                keep=max(0, out - skip - cut)))  # fmt: skip
    return phases


@dataclass(frozen=True)
class Phase:
    """One 2-D stride phase of a strided dgrad."""

    h: AxisPhase
    w: AxisPhase

    @property
    def empty(self) -> bool:
        """No dx pixel belongs to the phase."""
        return self.h.rows == 0 or self.w.rows == 0

    @property
    def zero(self) -> bool:
        """The phase's pixels receive no tap or read no dy pixel (dx is zero there)."""
        return not self.empty and not (self.h.reads and self.w.reads)

    @property
    def computed(self) -> bool:
        return not self.empty and not self.zero

    @property
    def filter_rs(self) -> tuple[int, int]:
        """The sub-filter's (T_h, T_w): compile-time in the kernel."""
        return self.h.taps, self.w.taps

    @property
    def pads(self) -> tuple[int, int, int, int]:
        """(lo_h, hi_h, lo_w, hi_w), the kernel's run-time padding arguments."""
        return self.h.lo, self.h.hi, self.w.lo, self.w.hi


def phases(problem: ConvProblem) -> list[Phase]:
    """Every (phi_h, phi_w) phase of ``problem``'s dgrad, phi_h major."""
    along_h = axis_phases(problem.h, problem.p, problem.r, problem.stride_h, problem.pad_h)
    along_w = axis_phases(problem.w, problem.q, problem.s, problem.stride_w, problem.pad_w)
    return [Phase(h=ph, w=pw) for ph in along_h for pw in along_w]


def unsupported(problem: Any) -> str | None:
    """Why ``problem`` is not a strided dgrad this family decomposes into phases, or None."""
    if getattr(problem, "op", None) != "conv2d":
        return f"op {getattr(problem, 'op', None)!r} is not conv2d"
    if problem.direction is not ConvDirection.DGRAD:
        return f"hopper_conv_dgrad_strided computes dgrad only (dx from dy and w), not {problem.direction.value}"
    if (problem.stride_h, problem.stride_w) == (1, 1):
        return "stride 1x1: hopper_conv_dgrad serves stride-1 dgrads (this family decomposes strided ones)"
    if problem.groups != 1:
        return f"groups={problem.groups}: hopper_conv_dgrad_strided serves dense convolutions (groups = 1) only"
    if (problem.dil_h, problem.dil_w) != (1, 1):
        return (f"dilation {problem.dil_h}x{problem.dil_w} with stride {problem.stride_h}x{problem.stride_w}: the "
                "stride phases' taps are an arithmetic progression only at dilation 1")  # fmt: skip
    if problem.epilogue != Epilogue():
        return "a dgrad has no epilogue (no bias, residual or activation)"
    if problem.p < 1 or problem.q < 1:
        return f"the forward output is empty (P={problem.p}, Q={problem.q})"
    for ph in phases(problem):
        if not ph.computed:
            continue
        for axis, a in (("h", ph.h), ("w", ph.w)):
            if a.lo > -IM2COL_CORNER_MIN or not IM2COL_CORNER_MIN <= a.hi - (a.taps - 1) <= IM2COL_CORNER_MAX:
                return (f"phase ({ph.h.phi}, {ph.w.phi}) pads dy by ({a.lo}, {a.hi}) along {axis.upper()}: a 4-D "
                        f"im2col TMA descriptor's corners lie in [{IM2COL_CORNER_MIN}, {IM2COL_CORNER_MAX}]")  # fmt: skip
    return None


def phase_problem(problem: ConvProblem, phase: Phase) -> ConvProblem:
    """The forward convolution a computed phase runs, for the fprop family's rules and seeds:
    x' = dy (K channels), w' = the phase's sub-filter (C, K, T_h, T_w), y' = the phase's pixels of
    dx (N, C, H_phi, W_phi). ``ConvProblem`` pads both sides alike, so x' is given keep + hi - lo
    rows (and columns) padded by lo: the output is then exactly H_phi x W_phi, so the implicit
    GEMM's M is the phase's. (The kernel reads dy's band with lo and hi apart; ``unsupported``
    checks those corners.)"""
    elt = problem.w_dtype.bytes
    w_row = problem.k * elt
    return dataclasses.replace(
        problem,
        direction=ConvDirection.FPROP,
        h=max(phase.h.keep + phase.h.hi - phase.h.lo, 0), w=max(phase.w.keep + phase.w.hi - phase.w.lo, 0),
        c=problem.k, k=problem.c, r=phase.h.taps, s=phase.w.taps,
        stride_h=1, stride_w=1, pad_h=phase.h.lo, pad_w=phase.w.lo,
        align_x=problem.align_y, align_w=TMA_ALIGN_BYTES if w_row % TMA_ALIGN_BYTES == 0 else w_row & -w_row,
        align_y=problem.align_x,
    )  # fmt: skip


def phase_weight(w: torch.Tensor, problem: ConvProblem, phase: Phase) -> torch.Tensor:
    """The phase's sub-filter (C, K, T_h, T_w), channels_last: taps r0 + (T-1-u)*s of ``w``
    (K, C, R, S) along each axis, flipped, the channel axes swapped."""
    import torch

    sh, sw = problem.stride_h, problem.stride_w
    rows = [phase.h.r0 + (phase.h.taps - 1 - u) * sh for u in range(phase.h.taps)]
    cols = [phase.w.r0 + (phase.w.taps - 1 - u) * sw for u in range(phase.w.taps)]
    sub = w[:, :, rows][:, :, :, cols]
    return sub.transpose(0, 1).contiguous(memory_format=torch.channels_last)


def phase_band(dy: torch.Tensor, phase: Phase) -> torch.Tensor:
    """The band of dy (N, P, Q, K: channels last) a computed phase reads."""
    return dy[:, phase.h.skip : phase.h.skip + phase.h.keep, phase.w.skip : phase.w.skip + phase.w.keep, :]


def phase_view(dx: torch.Tensor, problem: ConvProblem, phase: Phase) -> torch.Tensor:
    """The phase's pixels of dx (N, C, H, W; channels_last) as an (N, H_phi, W_phi, C) view."""
    return dx.permute(0, 2, 3, 1)[:, phase.h.phi :: problem.stride_h, phase.w.phi :: problem.stride_w, :]

"""The callable a compiled Hopper conv wgrad kernel becomes: torch tensors in, one launch on the
current stream.

Calling convention (conv wgrad): ``runner(dy, x, dw, **_)`` with torch CUDA tensors, all
channels_last in memory: dy logical (N, K, P, Q), x (N, C, H, W), dw (K, C, R, S) written and
never read (every element: taps, channels and output channels past the tiles are clipped, none
is skipped). Launches on ``torch.cuda.current_stream()``, never synchronises.

Every operand is handed to the kernel as a view (dy as (N*P*Q, K), x as (N, H, W, C), dw as
(K, R*S, C)); a dy or dw that is not channels_last-contiguous is refused (ValueError), never
copied. The stride, padding and dilation are the problem's; N, H, W, C and K are read from the
tensors. Split-K and stream-K scratch (fp32 partials and zeroed turnstiles; workspace split-K's
slabs) is kept per device and stream (``hopper_gemm.runner.SplitKWorkspace``); workspace split-K
launches a second kernel after the wgrad, the slab sum (``slab_sum``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from autocutlass.kernels.hopper_conv.runner import dense_channels_last
from autocutlass.kernels.hopper_conv_wgrad.compile import get_compiled
from autocutlass.kernels.hopper_conv_wgrad.config import HopperConvWgradConfig, SplitMode
from autocutlass.kernels.hopper_conv_wgrad.slab_sum import get_slab_sum
from autocutlass.kernels.hopper_gemm.runner import SplitKWorkspace, max_active_clusters, scratch_slots

if TYPE_CHECKING:
    from autocutlass.ops.conv.problem import ConvProblem


def _channels_last_rows(t: Any, rows: int, cols: int, name: str) -> Any:
    """``t`` (A, B, C, D) channels_last-contiguous, as the (A*C*D, B) row-major matrix it is in
    memory; anything else is refused."""
    v = t.permute(0, 2, 3, 1)
    if not v.is_contiguous():
        raise ValueError(f"{name} must be channels_last-contiguous, got shape {tuple(t.shape)} with strides {t.stride()}")
    return v.view(rows, cols)


class HopperConvWgradRunner:
    """Conv wgrad runner for one (config, kernel class); see the module docstring."""

    def __init__(self, config: HopperConvWgradConfig, problem: ConvProblem, cache_dir: Path | None) -> None:
        self.config = config
        self.problem = problem
        self._geometry = (problem.stride_h, problem.stride_w, problem.pad_h, problem.pad_w, problem.dil_h, problem.dil_w)
        self._fn = get_compiled(config, problem, cache_dir)
        self._clusters: dict[int, int] = {}
        self._workspace = SplitKWorkspace() if config.split_k > 1 or config.stream_k else None
        self._slabs = config.split_k > 1 and config.split_mode is SplitMode.WORKSPACE
        # The slab sum's view of dw: one (K, R*S*C) matrix with several taps per tile, else
        # (R*S, K, C) batched over the taps (batch stride C).
        self._sum = (
            get_slab_sum(config.split_k, problem.w_dtype, 2 if config.tap_channels else 3, cache_dir, config.slab_groups)
            if self._slabs else None
        )  # fmt: skip

    def poison_scratch(self) -> None:
        """Verification's hook: NaN in the split-K partials (``SplitKWorkspace.poison``)."""
        if self._workspace is not None:
            self._workspace.poison()

    def __call__(self, dy: Any, x: Any, dw: Any, **_: Any) -> None:
        n, k, p, q = dy.shape
        kw, c, r, s = dw.shape
        sh, sw, ph, pw, dh, dwl = self._geometry
        want = (n, k, (x.shape[2] + 2 * ph - dh * (r - 1) - 1) // sh + 1, (x.shape[3] + 2 * pw - dwl * (s - 1) - 1) // sw + 1)
        if (n, k, p, q) != want or (x.shape[0], x.shape[1]) != (n, c) or kw != k:
            raise ValueError(f"dy {tuple(dy.shape)}, x {tuple(x.shape)} and dw {tuple(dw.shape)} do not make a convolution "
                             f"with stride {(sh, sw)}, padding {(ph, pw)}, dilation {(dh, dwl)}")  # fmt: skip
        if k == 0 or c == 0:
            return
        if self.config.tap_channels and c != self.problem.c:
            raise ValueError(f"this wgrad kernel's tiles span the taps of C={self.problem.c} channels; "
                             f"dw {tuple(dw.shape)} has C={c}")  # fmt: skip
        if n * p * q == 0:  # an empty sum
            dw.zero_()
            return
        dy2 = _channels_last_rows(dy, n * p * q, k, "dy")
        dw3 = _channels_last_rows(dw, k * r * s, c, "dw").view(k, r * s, c)
        xv = dense_channels_last(x).permute(0, 2, 3, 1)
        dev = dw3.get_device()
        clusters = self._clusters.get(dev)
        if clusters is None:
            clusters = max_active_clusters(max(dev, 0), self.config.cluster_size)
            self._clusters[dev] = clusters
        work = count = None
        if self._workspace is not None:
            cfg = self.config
            # the kernel's GEMM (M, N, L): dw as one (K, R*S*C) matrix with several taps per tile, else
            # (K, C) per tap (``plan.implicit_gemm``)
            m_, n_, l_ = (k, r * s * c, 1) if cfg.tap_channels else (k, c, r * s)
            if self._slabs:
                # Workspace split-K: S raw fp32 slabs (S, L, M, N_pad), summed in split order into dw
                # (the slab sum's view of it: (M, N) or (L, M, N)) by the slab sum (``slab_sum``).
                work, slabs = self._workspace.slabs(dw3.device, cfg.split_k, l_, m_, n_)
                self._fn(dy2, xv, dw3, work, None, *self._geometry, clusters)
                self._sum(slabs, dw3.view(m_, n_) if cfg.tap_channels else dw3.permute(1, 0, 2))
                return
            slots = scratch_slots(cfg, m_, n_, l_, clusters)
            work, count = self._workspace.get(dw3.device, slots * cfg.tile_m * cfg.tile_n, slots)
        self._fn(dy2, xv, dw3, work, count, *self._geometry, clusters)

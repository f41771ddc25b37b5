"""The callable a compiled Hopper conv kernel becomes: torch tensors in, one launch on the current
stream.

Calling convention (conv ops): ``runner(x, w, y, *, bias=None, residual=None, alpha=1.0,
beta=0.0)`` with torch CUDA tensors, all channels_last in memory: x logical (N, C, H, W), w
(K, C, R, S), y (N, K, P, Q), written and never read; ``residual`` like y (read when the
problem's epilogue has ``with_c``: y = act(alpha * conv + beta * residual + bias)); ``bias`` (K,)
contiguous, in y's dtype. Launches on ``torch.cuda.current_stream()``, never synchronises.

Every operand is handed to the kernel as a view (x as (N, H, W, C), w as (K, R, S, C), y and the
residual as (N*P*Q, K)); a y or residual that is not channels_last-contiguous is refused
(ValueError), never copied. x and w may have any strides whose channel stride is 1 and whose
other strides are whole 16-byte units (a size-1 dimension's stride is made so,
``dense_channels_last``). The stride, padding and dilation are the problem's; N, H,
W, C and K are read from the tensors (one runner serves every shape of its kernel class).

Workspace split-K (``split_mode``): the conv kernel writes the splits' raw fp32 partials to slabs
(S, 1, N*P*Q, K) and the GEMM family's reduce kernel, launched right after on the same stream,
sums them in split order and runs the epilogue into y (two launches). Serial split-K and stream-K
(``stream_k``) keep their partial tiles and turnstiles in a ``SplitKWorkspace`` (one slot per
output tile, or per CTA of the stream-K grid: ``hopper_gemm.runner.scratch_slots``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from autocutlass.kernels.helper_kernels import get_reduce
from autocutlass.kernels.hopper_conv.compile import get_compiled
from autocutlass.kernels.hopper_conv.config import HopperConvConfig, SplitMode
from autocutlass.kernels.hopper_gemm.runner import SplitKWorkspace, max_active_clusters, scratch_slots

if TYPE_CHECKING:
    from autocutlass.ops.conv.problem import ConvProblem


def dense_channels_last(t: Any) -> Any:
    """``t`` (channels_last-contiguous) with the strides a dense channels_last tensor of its shape
    has: ``t`` itself, or where a dimension of size 1 carries another stride (an (N, C, 1, 1) tensor
    made NCHW-contiguous has H and W strides of 1 element; torch calls it channels_last-contiguous)
    the same elements through ``as_strided``. The TMA descriptors take every stride, size-1
    dimensions' included, as a whole number of 16-byte units."""
    n, c, h, w = t.shape
    dense = (c * h * w, 1, w * c, c)
    return t if t.stride() == dense else t.as_strided(t.shape, dense)


def _pixel_rows(t: Any, m: int, k: int, name: str) -> Any:
    """``t`` (N, K, P, Q), channels_last-contiguous, as the (N*P*Q, K) row-major matrix it is in
    memory; anything else is refused (a view of another layout would be read or written wrongly)."""
    rows = t.permute(0, 2, 3, 1)
    if not rows.is_contiguous():
        raise ValueError(f"{name} must be a channels_last-contiguous (N, K, P, Q) tensor, got shape "
                         f"{tuple(t.shape)} with strides {t.stride()}")  # fmt: skip
    return rows.view(m, k)


class HopperConvRunner:
    """Conv runner for one (config, kernel class); see the module docstring."""

    def __init__(self, config: HopperConvConfig, problem: ConvProblem, cache_dir: Path | None) -> None:
        self.config = config
        self.problem = problem
        self._geometry = (problem.stride_h, problem.stride_w, problem.pad_h, problem.pad_w, problem.dil_h, problem.dil_w)
        self._with_c = problem.epilogue.with_c
        self._bias = problem.epilogue.bias
        self._fn = get_compiled(config, problem, cache_dir)
        self._clusters: dict[int, int] = {}
        self._workspace = SplitKWorkspace() if config.split_k > 1 or config.stream_k else None
        self._reduce = None
        if config.split_k > 1 and config.split_mode is SplitMode.WORKSPACE:
            ep = problem.epilogue
            self._reduce = get_reduce(config.split_k, problem.y_dtype, problem.y_dtype if ep.with_c else None, ep.bias,
                                      ep.activation, 2, cache_dir)  # fmt: skip

    def poison_scratch(self) -> None:
        """Verification's hook: NaN in the split-K partials (``SplitKWorkspace.poison``)."""
        if self._workspace is not None:
            self._workspace.poison()

    def __call__(
        self,
        x: Any,
        w: Any,
        y: Any,
        *,
        bias: Any | None = None,
        residual: Any | None = None,
        alpha: float = 1.0,
        beta: float = 0.0,
    ) -> None:
        if self._with_c and residual is None:
            raise ValueError("this conv kernel's epilogue adds a residual (with_c): pass residual=")
        if self._bias and bias is None:
            raise ValueError("this conv kernel's epilogue adds a bias: pass bias=")
        n, k, p, q = y.shape
        sh, sw, ph, pw, dh, dw = self._geometry
        r, s = w.shape[2], w.shape[3]
        want = (x.shape[0], w.shape[0], (x.shape[2] + 2 * ph - dh * (r - 1) - 1) // sh + 1,
                (x.shape[3] + 2 * pw - dw * (s - 1) - 1) // sw + 1)  # fmt: skip
        if (n, k, p, q) != want:
            raise ValueError(f"y shape {(n, k, p, q)} != {want}, the output of x {tuple(x.shape)} and w {tuple(w.shape)}"
                             f" with stride {(sh, sw)}, padding {(ph, pw)}, dilation {(dh, dw)}")  # fmt: skip
        m = n * p * q
        if m == 0 or k == 0:
            return
        xv = dense_channels_last(x).permute(0, 2, 3, 1)
        wv = dense_channels_last(w).permute(0, 2, 3, 1)
        d = _pixel_rows(y, m, k, "y")
        c = None
        if self._with_c:
            if residual.shape != y.shape:
                raise ValueError(f"residual shape {tuple(residual.shape)} != y shape {tuple(y.shape)}")
            c = _pixel_rows(residual, m, k, "residual")
        bias = bias if self._bias else None
        dev = d.get_device()
        clusters = self._clusters.get(dev)
        if clusters is None:
            clusters = max_active_clusters(max(dev, 0), self.config.cluster_size)
            self._clusters[dev] = clusters
        work = count = None
        if self._reduce is not None:
            # Workspace split-K: S raw fp32 slabs, then the reduce kernel sums them in split order
            # and runs the epilogue into y.
            work, slabs = self._workspace.slabs(d.device, self.config.split_k, 1, m, k)
            self._fn(xv, wv, d, c, bias, work, None, alpha, beta, *self._geometry, clusters)
            self._reduce(slabs, d, c, bias, alpha, beta)
            return
        if self._workspace is not None:
            # Serial split-K: a partial tile and a turnstile per output tile; stream-K: per CTA.
            cfg = self.config
            slots = scratch_slots(cfg, m, k, 1, clusters)
            work, count = self._workspace.get(d.device, slots * cfg.tile_m * cfg.tile_n, slots)
        self._fn(xv, wv, d, c, bias, work, count, alpha, beta, *self._geometry, clusters)

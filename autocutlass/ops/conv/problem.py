"""The fingerprint of a conv2d call: a frozen ``ConvProblem``, its key, bucket and neighbours.

Pure Python, no torch. Conventions (PyTorch's, in NHWC memory):

* x is (N, C, H, W) logically and channels_last in memory (N, H, W, C contiguous); the filter
  w is (K, C/groups, R, S), also channels_last (K, R, S, C); the output y is (N, K, P, Q) with
  P = (H + 2*pad_h - dil_h*(R-1) - 1) // stride_h + 1 and Q likewise.
* ``direction``: ``fprop`` computes y from x and w; ``dgrad`` dx from dy and w; ``wgrad`` dw
  from dy and x. The fields always describe the forward convolution (x, w, y shapes, and the
  forward's dtypes and alignments: a gradient has the dtype and alignment of the tensor it is
  the gradient of, dx those of x, dy those of y, dw those of w); the direction says which of the
  three tensors is computed. ``x_dtype`` is what the tensor cores read (TF32 for float32
  tensors), ``y_dtype`` the storage of a float32 layer's tensors (FP32), so an fp32 layer's three
  directions share (TF32, TF32, FP32) as its fprop does.
* The epilogue applies to the computed tensor: ``with_c`` adds a residual of its shape (times
  beta), ``bias`` one value per output channel, then the activation. The backward directions
  are planned with a plain epilogue (db is a reduction of dy, not part of a kernel).
* As implicit GEMMs: fprop M = N*P*Q output pixels, N_gemm = K, K_gemm = C*R*S; dgrad M = N*H*W
  input pixels, N_gemm = C, K_gemm = K*R*S; wgrad M = K, N_gemm = C*R*S, K_gemm = N*P*Q.

**Bucket rule** (``ConvProblem.bucket``): the batch N is what varies at run time (a server's
batch, a training run's last batch); it is rounded up to a power of two (at least 1). The
spatial size H, W varies in some models (diffusion at several resolutions) but changes the
layer's shape class, so it stays exact in the bucket. Channels, filter size, stride, padding,
dilation, groups, dtypes, alignments and the epilogue never vary for a layer and stay exact.
``neighbour_key`` drops N, H and W: the nearest tuned layer by GEMM rows (N*P*Q, in log2
distance, ties to the larger) serves a bucket that was never tuned.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar

from autocutlass.ops.gemm.problem import GemmProblem, bucket_pow2
from autocutlass.ops.types import (
    DType,
    Epilogue,
    Major,
    ProblemFields,
    check_alignments,
    check_dims,
)


class ConvDirection(StrEnum):
    FPROP = "fprop"
    DGRAD = "dgrad"
    WGRAD = "wgrad"


@dataclass(frozen=True)
class ConvProblem(ProblemFields):
    """One conv2d call's fingerprint; see the module docstring."""

    direction: ConvDirection
    n: int
    h: int
    w: int
    c: int
    k: int
    r: int
    s: int
    stride_h: int = 1
    stride_w: int = 1
    pad_h: int = 0
    pad_w: int = 0
    dil_h: int = 1
    dil_w: int = 1
    groups: int = 1
    x_dtype: DType = DType.BF16
    w_dtype: DType = DType.BF16
    y_dtype: DType = DType.BF16
    acc_dtype: DType = DType.FP32
    align_x: int = 16
    align_w: int = 16
    align_y: int = 16
    epilogue: Epilogue = field(default_factory=Epilogue)

    op: ClassVar[str] = "conv2d"
    RUNTIME_DIMS: ClassVar[tuple[str, ...]] = ("n", "h", "w")
    """The dimensions ``neighbour_key`` drops (see the bucket rule)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "direction", ConvDirection(self.direction))
        for name in ("x_dtype", "w_dtype", "y_dtype", "acc_dtype"):
            object.__setattr__(self, name, DType(getattr(self, name)))
        check_dims(self, ("n", "h", "w", "c", "k", "r", "s", "pad_h", "pad_w"), minimum=0)
        check_dims(self, ("stride_h", "stride_w", "dil_h", "dil_w", "groups"), minimum=1)
        check_alignments(self, ("align_x", "align_w", "align_y"))
        if self.c % self.groups or self.k % self.groups:
            raise ValueError(f"ConvProblem: C={self.c} and K={self.k} must be multiples of groups={self.groups}")

    # ---- derived sizes ---------------------------------------------------------------------
    @property
    def p(self) -> int:
        """Output height."""
        return (self.h + 2 * self.pad_h - self.dil_h * (self.r - 1) - 1) // self.stride_h + 1

    @property
    def q(self) -> int:
        """Output width."""
        return (self.w + 2 * self.pad_w - self.dil_w * (self.s - 1) - 1) // self.stride_w + 1

    @property
    def flops(self) -> int:
        """2 * N*P*Q * K * (C/groups)*R*S, the same for all three directions."""
        return 2 * self.n * self.p * self.q * self.k * (self.c // self.groups) * self.r * self.s

    @property
    def min_bytes(self) -> int:
        """x, w and y once each (and the residual when read)."""
        x = self.n * self.h * self.w * self.c * self.x_dtype.bytes
        w = self.k * (self.c // self.groups) * self.r * self.s * self.w_dtype.bytes
        y = self.n * self.p * self.q * self.k * self.y_dtype.bytes
        return x + w + y + (y if self.epilogue.with_c else 0)

    # ---- keys ------------------------------------------------------------------------------
    def bucket(self) -> ConvProblem:
        return dataclasses.replace(self, n=bucket_pow2(self.n, floor=1))

    def neighbour_distance(self, other: ConvProblem) -> tuple[float, int]:
        """log2 distance of the GEMM rows N*P*Q, then the larger."""
        mine, theirs = self.n * self.p * self.q, other.n * other.p * other.q
        return (abs(math.log2(max(mine, 1)) - math.log2(max(theirs, 1))), -theirs)

    def dims(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in ("n", "h", "w", "c", "k", "r", "s")}

    def kernel_class_key(self) -> str:
        return self._class_key(*self.RUNTIME_DIMS)

    def describe(self) -> str:
        """'conv2d fprop 32x14x14x1024 k256 1x1' (N x H x W x C, K, R x S, then what is not 1)."""
        extra = []
        if (self.stride_h, self.stride_w) != (1, 1):
            extra.append(f"stride {self.stride_h}x{self.stride_w}")
        if (self.pad_h, self.pad_w) != (0, 0):
            extra.append(f"pad {self.pad_h}x{self.pad_w}")
        if (self.dil_h, self.dil_w) != (1, 1):
            extra.append(f"dil {self.dil_h}x{self.dil_w}")
        if self.groups != 1:
            extra.append(f"groups {self.groups}")
        tail = (" " + " ".join(extra)) if extra else ""
        return (f"conv2d {self.direction.value} {self.n}x{self.h}x{self.w}x{self.c} k{self.k} {self.r}x{self.s}"
                f"{tail} {self.x_dtype.value}")  # fmt: skip

    # ---- the GEMM view ---------------------------------------------------------------------
    def has_pointwise_geometry(self) -> bool:
        """1x1 filter, stride 1, no padding, one group (any direction): in NHWC every direction of
        such a convolution is exactly a GEMM."""
        return (self.r, self.s, self.stride_h, self.stride_w, self.pad_h, self.pad_w, self.groups) == (1, 1, 1, 1, 0, 0, 1)

    def is_pointwise(self) -> bool:
        """A pointwise fprop (``has_pointwise_geometry``): in NHWC exactly a GEMM."""
        return self.direction is ConvDirection.FPROP and self.has_pointwise_geometry()

    def gemm_lowering(self) -> GemmLowering | None:
        """This convolution as a GEMM, or None when it is not one (``has_pointwise_geometry``).

        fprop: y (NHW, K) = x (NHW, C) @ w^T (C, K); dgrad: dx (NHW, C) = dy (NHW, K) @ w (K, C);
        wgrad: dw (K, C) = dy^T (K, NHW) @ x (NHW, C), whose GEMM K is the N*H*W pixels (long:
        split-K and stream-K are in the GEMM family's space for it)."""
        if not self.has_pointwise_geometry():
            return None
        pixels = self.n * self.h * self.w
        io, out = self.x_dtype, self.y_dtype  # the tensor cores' operand dtype, the results' storage
        if self.direction is ConvDirection.FPROP:
            gemm = GemmProblem(
                m=pixels, n=self.k, k=self.c,
                a_dtype=self.x_dtype, b_dtype=self.w_dtype, d_dtype=self.y_dtype, acc_dtype=self.acc_dtype,
                c_dtype=self.y_dtype if self.epilogue.with_c else None,
                a_major=Major.ROW, b_major=Major.COL,
                align_a=self.align_x, align_b=self.align_w, align_c=self.align_y, align_d=self.align_y,
                epilogue=self.epilogue,
            )  # fmt: skip
        elif self.direction is ConvDirection.DGRAD:
            gemm = GemmProblem(
                m=pixels, n=self.c, k=self.k, a_dtype=io, b_dtype=self.w_dtype, d_dtype=out, acc_dtype=self.acc_dtype,
                c_dtype=out if self.epilogue.with_c else None, a_major=Major.ROW, b_major=Major.ROW,
                align_a=self.align_y, align_b=self.align_w, align_c=self.align_x, align_d=self.align_x,
                epilogue=self.epilogue,
            )  # fmt: skip
        else:
            gemm = GemmProblem(
                m=self.k, n=self.c, k=pixels, a_dtype=io, b_dtype=self.x_dtype, d_dtype=out, acc_dtype=self.acc_dtype,
                c_dtype=out if self.epilogue.with_c else None, a_major=Major.COL, b_major=Major.ROW,
                align_a=self.align_y, align_b=self.align_x, align_c=self.align_w, align_d=self.align_w,
                epilogue=self.epilogue,
            )  # fmt: skip
        return GemmLowering(gemm, self.direction)


@dataclass(frozen=True)
class GemmLowering:
    """A pointwise NHWC convolution seen as ``gemm`` (``ConvProblem.gemm_lowering``):

    * fprop: A = x as (N*H*W, C), B = w as (C, K) (K-contiguous: ``w.view(K, C).t()``), D = y as
      (N*H*W, K), C = the residual like D;
    * dgrad: A = dy as (N*H*W, K), B = w as (K, C) (row-major: the weight's own rows), D = dx as
      (N*H*W, C);
    * wgrad: A = dy^T as (K, N*H*W) (K-contiguous, i.e. column-major), B = x as (N*H*W, C),
      D = dw as (K, C), row-major like the channels_last weight.

    ``runner`` adapts a GEMM runner to the conv runner convention (``ops.conv.evaluation``)
    ``runner(a, b, out, *, bias=None, residual=None, alpha=1.0, beta=0.0)``, (a, b, out) being
    (x, w, y) for fprop, (dy, w, dx) for dgrad and (dy, x, dw) for wgrad. Its tensors must be
    channels_last-contiguous with logical shapes (N, C, H, W), (K, C, 1, 1), (N, K, H, W) (the
    conv front-ends' memo keys hold their strides, so dispatch only ever passes such tensors):
    each becomes its GEMM operand by one ``as_strided``, and the weight's view (fprop and dgrad:
    b is the weight) is kept while the same weight (object and storage) comes back, as the GEMM
    front-ends do."""

    gemm: GemmProblem
    direction: ConvDirection = ConvDirection.FPROP

    def runner(self, gemm_runner: Any) -> Any:
        from autocutlass.ops.launch import NO_VIEW, remember_view  # imports torch: not at module load

        g = self.gemm
        wgrad = self.direction is ConvDirection.WGRAD
        # the GEMM dimension of the pixels (fprop and dgrad: M; wgrad: K) is read from the tensors at
        # every call: one runner serves every batch and resolution of its kernel class (dispatch
        # keeps runners per ConvProblem.kernel_class_key, which leaves N, H and W out)
        fixed = g.m if wgrad else g.k  # the other dimension of A: K output channels (wgrad), C or K
        n = g.n
        a_row = g.a_major is Major.ROW
        b_col = g.b_major is Major.COL
        cache_b = not wgrad  # b is the weight
        w_seen = [NO_VIEW]  # (weight, weakly; its view; its data_ptr): ops.launch.remember_view

        def run(a: Any, w: Any, y: Any, *, bias: Any = None, residual: Any = None, alpha: float = 1.0,
                beta: float = 0.0) -> None:  # fmt: skip
            pixels = a.numel() // fixed
            m, k = (fixed, pixels) if wgrad else (pixels, fixed)
            seen, ptr = w_seen[0], w.data_ptr()
            if cache_b and seen[0]() is w and ptr == seen[2]:
                b = seen[1]
            else:
                # a view of the detached tensor: a view of w itself would keep the object w alive
                b = w.detach().as_strided((k, n), (1, k) if b_col else (n, 1))
                if cache_b:
                    remember_view(w_seen, w, b, ptr)
            c = None if residual is None else residual.as_strided((m, n), (n, 1))
            gemm_runner(a.as_strided((m, k), (k, 1) if a_row else (1, m)), b, y.as_strided((m, n), (n, 1)), c=c,
                        bias=bias, alpha=alpha, beta=beta)  # fmt: skip

        hook = getattr(gemm_runner, "poison_scratch", None)
        if hook is not None:  # verification's (ops.guards.poison_scratch)
            run.poison_scratch = hook  # type: ignore[attr-defined]
        return run

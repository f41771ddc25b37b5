"""The CuTe DSL kernel of the row unfolding (``unfold``: what it computes, how it is cached).
Imports the DSL; ``unfold`` imports this module only to compile."""

import cuda.bindings.driver as cuda
import cutlass
from cutlass import cute

THREADS = 256
"""Threads per block of the flat 1-D grid."""
VEC = 8
"""Output elements per thread: one 16-byte store of 16-bit elements (C' is a multiple of it)."""


class RowUnfoldKernel:
    """Compile-time object for one layer class: C input channels, S filter taps along W, stride,
    padding and dilation along W, C' unfolded channels (a multiple of ``VEC``)."""

    def __init__(self, c: int, s: int, channels: int, stride_w: int, pad_w: int, dil_w: int) -> None:
        self.c, self.s, self.channels = c, s, channels
        self.stride_w, self.pad_w, self.dil_w = stride_w, pad_w, dil_w
        self.used = s * c
        self.vecs = channels // VEC

    @cute.jit
    def __call__(self, x: cute.Tensor, out: cute.Tensor, stream: cuda.CUstream):
        row_vecs = out.shape[1] // VEC
        total = out.shape[0] * row_vecs
        blocks = cutlass.max((total + THREADS - 1) // THREADS, 1)
        self.kernel(x, out, row_vecs, total).launch(grid=[blocks, 1, 1], block=[THREADS, 1, 1], stream=stream)

    @cute.kernel
    def kernel(self, mX: cute.Tensor, mOut: cute.Tensor, row_vecs: cutlass.Int32, total: cutlass.Int32):
        tidx, _, _ = cute.arch.thread_idx()
        bidx, _, _ = cute.arch.block_idx()
        g = bidx * THREADS + tidx
        if g < total:
            v = g % row_vecs
            row = g // row_vecs
            q = v // self.vecs
            e0 = (v - q * self.vecs) * VEC
            width = mX.shape[1] // self.c
            left = q * self.stride_w - self.pad_w
            frag = cute.make_rmem_tensor((VEC,), cutlass.Int16)
            for i in cutlass.range_constexpr(VEC):
                e = e0 + i
                tap = e // self.c
                w = left + tap * self.dil_w
                val = cutlass.Int16(0)
                if e < self.used and w >= 0 and w < width:
                    val = mX[row, w * self.c + (e - tap * self.c)]
                frag[i] = val
            cute.autovec_copy(frag, cute.local_tile(mOut[(row, None)], (VEC,), (v,)))

"""The CuTe DSL kernel of the row unfolding (``unfold``: what it computes, how it is cached).
Imports the DSL; ``unfold`` imports this module only to compile.

One CTA writes ``columns`` output columns q of one x' row (n, h') (``unfold.columns_per_cta``: 128,
or fewer where the staged span would not fit ``unfold.STAGING_BYTES``): it first copies the input
pixels those columns read, of each of its T input rows, into shared memory (consecutive threads
read consecutive 2-byte elements of one contiguous span per row, zeros where the span leaves the
image; the loop is unrolled so that a thread issues all its loads before the first one must land),
then each thread assembles 8 consecutive elements of x' from shared memory and stores them as one
16-byte vector. Every input element is read from global memory once per CTA that needs it. (The
first build gathered each element of x' with its own global load: about 1 TB/s written; a build
with 32 columns per CTA and a rolled staging loop wrote about 1.2 TB/s, latency-bound.)"""

import cuda.bindings.driver as cuda
import cutlass
from cutlass import cute

THREADS = 128
"""Threads per CTA."""
VEC = 8
"""Output elements per thread and step: one 16-byte store of 16-bit elements (C' is a multiple of it)."""


class RowUnfoldKernel:
    """Compile-time object for one layer class: C input channels, S filter taps along W, T filter
    rows per unfolded pixel, C' unfolded channels (a multiple of ``VEC``), the stride, padding and
    dilation along W and (T > 1) the padding and dilation along H and the row step (x' row h' starts
    at input row h'*step - pad_h)."""

    def __init__(self, c: int, s: int, rows: int, channels: int, stride_w: int, pad_w: int, dil_w: int, pad_h: int,
                 dil_h: int, step: int, columns: int) -> None:  # fmt: skip
        self.c, self.s, self.rows, self.channels, self.step = c, s, rows, channels, step
        self.stride_w, self.pad_w, self.dil_w, self.pad_h, self.dil_h = stride_w, pad_w, dil_w, pad_h, dil_h
        self.row_elems = s * c
        self.used = rows * s * c
        self.vecs = channels // VEC
        self.columns = columns
        # the elements of the input pixels one CTA's output columns read from one row
        self.span = ((columns - 1) * stride_w + (s - 1) * dil_w + 1) * c
        self.staged = rows * self.span
        self.stage_steps = -(-self.staged // THREADS)
        self.store_steps = -(-(columns * self.vecs) // THREADS)

    @cute.jit
    def __call__(self, x: cute.Tensor, out: cute.Tensor, stream: cuda.CUstream):
        q_ext = out.shape[2] // self.channels
        chunks = cutlass.max((q_ext + self.columns - 1) // self.columns, 1)
        rows = cutlass.max(out.shape[0] * out.shape[1], 1)
        self.kernel(x, out, q_ext).launch(grid=[rows, chunks, 1], block=[THREADS, 1, 1], stream=stream)

    @cute.kernel
    def kernel(self, mX: cute.Tensor, mOut: cute.Tensor, q_ext: cutlass.Int32):
        tidx, _, _ = cute.arch.thread_idx()
        bidx, chunk, _ = cute.arch.block_idx()
        allocator = cutlass.memory.SmemAllocator()
        sBuf = allocator.allocate_tensor(cutlass.Int16, cute.make_layout(self.staged), byte_alignment=16)
        heights = mOut.shape[1]
        if bidx < mOut.shape[0] * heights:
            hp = bidx % heights
            n = bidx // heights
            q0 = chunk * self.columns
            width = mX.shape[2] // self.c
            height = mX.shape[1]
            first = q0 * self.stride_w - self.pad_w  # the span's first input pixel

            # ---- stage: the span of each of the T input rows, zeros outside the image
            for it in cutlass.range_constexpr(self.stage_steps):  # unrolled: every load issued before any waits
                idx = tidx + it * THREADS
                if idx < self.staged:
                    t = idx // self.span
                    j = idx - t * self.span
                    pixel = j // self.c
                    w = first + pixel
                    h = hp
                    if cutlass.const_expr(self.rows > 1):
                        h = hp * self.step - self.pad_h + t * self.dil_h
                    val = cutlass.Int16(0)
                    if w >= 0 and w < width and h >= 0 and h < height:
                        val = mX[n, h, w * self.c + (j - pixel * self.c)]
                    sBuf[idx] = val

            cute.arch.sync_threads()

            # ---- assemble: 8 consecutive elements of x' per thread and step, one 16-byte store
            for it in cutlass.range_constexpr(self.store_steps):
                v = tidx + it * THREADS
                ql = v // self.vecs
                e0 = (v - ql * self.vecs) * VEC
                if v < self.columns * self.vecs and q0 + ql < q_ext:
                    frag = cute.make_rmem_tensor((VEC,), cutlass.Int16)
                    for i in cutlass.range_constexpr(VEC):
                        e = e0 + i
                        t = e // self.row_elems
                        rem = e - t * self.row_elems
                        tap = rem // self.c
                        val = cutlass.Int16(0)
                        if e < self.used:
                            val = sBuf[t * self.span + (ql * self.stride_w + tap * self.dil_w) * self.c
                                       + (rem - tap * self.c)]
                        frag[i] = val
                    cute.autovec_copy(frag, cute.local_tile(mOut[(n, hp, None)], (VEC,), ((q0 + ql) * self.vecs
                                                                                           + e0 // VEC,)))

"""The CuTe DSL kernel of the row unfolding with per-thread slots (``unfold``'s ``assemble="slots"``).
Imports the DSL; ``unfold`` imports this module only to compile.

The same map and the same CTA work as ``unfold_kernel`` (one CTA per ``columns`` output columns of
one x' row, their input span staged in shared memory), assembled another way. There every element
of x' located its source in the staged span with two divisions and a bounds test of its own; the
stem's wgrad unfolding (C' = 64, 52.7 MB written) took 32 us on an H200, about 1.9 TB/s, bound by
those instructions (session 37 call d). Here a thread keeps one 16-byte slot of C' (``slot``, 8
channels) for every column it writes: the staged offsets of its 8 elements, and which of them are
padding, are computed once, and each column then costs 8 shared-memory loads at those offsets plus
the column's offset and one 16-byte store. ``THREADS // vecs`` columns are written per step, their
slots by consecutive threads (contiguous 16-byte stores). The staging loop walks the T rows at
compile time (one division per element)."""

import cutlass
from cutlass import cute

from autocutlass.kernels.hopper_conv_unfold.unfold_kernel import THREADS, VEC, RowUnfoldKernel


class SlotUnfoldKernel(RowUnfoldKernel):
    """The first kernel's layer class, geometry and launch (``RowUnfoldKernel``: one CTA per
    ``columns`` output columns of one x' row), with its own staging and assembly."""

    def __init__(self, c: int, s: int, rows: int, channels: int, stride_w: int, pad_w: int, dil_w: int, pad_h: int,
                 dil_h: int, step: int, columns: int) -> None:  # fmt: skip
        super().__init__(c, s, rows, channels, stride_w, pad_w, dil_w, pad_h, dil_h, step, columns)
        self.span_steps = -(-self.span // THREADS)
        self.lanes = THREADS // self.vecs  # columns per store step
        self.store_steps = -(-columns // self.lanes)

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

            # ---- stage: the span of each of the T input rows (rows unrolled), zeros outside the image
            for t in cutlass.range_constexpr(self.rows):
                h = hp
                if cutlass.const_expr(self.rows > 1):
                    h = hp * self.step - self.pad_h + t * self.dil_h
                for it in cutlass.range_constexpr(self.span_steps):  # unrolled: every load issued before any waits
                    j = tidx + it * THREADS
                    if j < self.span:
                        w = first + j // self.c
                        val = cutlass.Int16(0)
                        if h >= 0 and h < height and w >= 0 and w < width:
                            val = mX[n, h, first * self.c + j]
                        sBuf[t * self.span + j] = val

            cute.arch.sync_threads()

            # ---- assemble: one slot of 8 elements per thread, its staged offsets computed once
            slot = tidx % self.vecs
            lane = tidx // self.vecs
            if lane < self.lanes:
                offsets = []
                valid = []
                for i in cutlass.range_constexpr(VEC):
                    e = slot * VEC + i
                    t = e // self.row_elems
                    rem = e - t * self.row_elems
                    tap = rem // self.c
                    offsets.append(t * self.span + tap * self.dil_w * self.c + (rem - tap * self.c))
                    valid.append(e < self.used)
                for it in cutlass.range_constexpr(self.store_steps):
                    ql = lane + it * self.lanes
                    if ql < self.columns and q0 + ql < q_ext:
                        base = ql * (self.stride_w * self.c)
                        frag = cute.make_rmem_tensor((VEC,), cutlass.Int16)
                        for i in cutlass.range_constexpr(VEC):
                            val = cutlass.Int16(0)
                            if valid[i]:
                                val = sBuf[offsets[i] + base]
                            frag[i] = val
                        cute.autovec_copy(frag, cute.local_tile(mOut[(n, hp, None)], (VEC,),
                                                                ((q0 + ql) * self.vecs + slot,)))

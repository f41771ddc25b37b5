"""The conv kernel with a scatter store: one stride phase of a strided dgrad (``phases``).

It is ``hopper_conv.kernel.HopperConvKernel`` unchanged (im2col producer over dy, the GEMM
family's consumers, serial split-K and stream-K) with two differences:

* The im2col box is padded apart before and after (``pad_lo``, ``pad_hi``: a phase's sub-filter
  reads dy with different paddings on the two sides); stride and dilation are 1.
* The output is the phase's pixels of dx, every s-th pixel of every s-th row: an (N, H_phi,
  W_phi, C) view with strides (H*W*C, s_h*W*C, s_w*C, 1) that no (M, N) matrix describes, so no
  TMA store. The implicit GEMM still runs over M = N*H_phi*W_phi rows (``mD`` only sizes the tile
  grid and the predicates), and the epilogue stores each output row (a pixel: C contiguous
  channels) through the 4-D view, one division of its row index into (image, row, column) of
  the phase per row. Two stores (the config's ``store`` axis): DIRECT, registers to global memory
  (each thread its accumulator's pairs of columns: 4-byte stores); TMA, staged: each column chunk
  of the tile goes to shared memory through stmatrix as for the TMA store, and then every
  epilogue thread copies 16-byte pieces of its rows to global memory (a chunk row's 32 columns
  are 64 contiguous bytes of a pixel). The inherited set-up still encodes a TMA store descriptor
  over ``mD``; it is never issued.

The 4-D view reaches the consumers in the residual's slot (a dgrad has no residual), and
``_consumer`` moves it to ``self.scatter_view`` before the inherited consumer runs (every method
the kernel calls is traced inline, so the store below reads it).
"""

import cuda.bindings.driver as cuda
import cutlass
from cutlass import cute

from autocutlass.kernels.budgets import THREADS_PER_WARPGROUP
from autocutlass.kernels.hopper_conv.kernel import CUTLASS_DTYPES, HopperConvKernel
from autocutlass.kernels.hopper_gemm.kernel import HopperGemmKernel

__all__ = ["CUTLASS_DTYPES", "HopperConvScatterKernel"]


class HopperConvScatterKernel(HopperConvKernel):
    """Compile-time object: all attributes derive from the frozen ``ConvPlan`` (no residual, bias,
    activation or workspace split)."""

    @cute.jit
    def __call__(
        self,
        x: cute.Tensor,
        w: cute.Tensor,
        d: cute.Tensor,
        workspace: cute.Tensor | None,
        counters: cute.Tensor | None,
        pad_lo_h: cutlass.Int32,
        pad_hi_h: cutlass.Int32,
        pad_lo_w: cutlass.Int32,
        pad_hi_w: cutlass.Int32,
        max_active_clusters: cutlass.Int32,
        stream: cuda.CUstream,
    ):
        one = cutlass.Int32(1)
        self._launch(x, w, d, None, None, workspace, counters, cutlass.Float32(1.0), cutlass.Float32(0.0),
                     (pad_lo_w, pad_lo_h), (pad_hi_w, pad_hi_h), (one, one), (one, one), max_active_clusters,
                     stream)  # fmt: skip

    @cute.jit
    def _output_views(self, d: cute.Tensor, c: cute.Tensor | None):
        """(mD, the 4-D view): mD is the (N*H_phi*W_phi, C, 1) matrix the tile grid covers, laid
        out as if dense (only its shape is read: the store goes through the view)."""
        n_img, rows, cols, chans = d.shape
        mD = cute.make_tensor(d.iterator, cute.make_layout((n_img * rows * cols, chans, 1), stride=(chans, 1, 0)))
        return mD, d

    @cute.jit
    def _consumer(self, ring, tiled_mma, sA, sB, k_tiles, storage, d_staged, tma_d, mD_tma, mD, mC, mBias,
                  mWork, mCount, alpha, beta, tidx, warp_idx, wg_idx, sched_params, geom, cluster_coord, cta_rank):
        self.scatter_view = mC
        HopperGemmKernel._consumer(
            self, ring, tiled_mma, sA, sB, k_tiles, storage, d_staged, tma_d, mD_tma, mD, None, mBias, mWork, mCount,
            alpha, beta, tidx, warp_idx, wg_idx, sched_params, geom, cluster_coord, cta_rank,
        )  # fmt: skip

    @cute.jit
    def _store_fragment(self, frag, thr_mma_c, mDst, tCcD, tile, extent):
        """Registers -> the phase's pixels of dx. The WGMMA accumulator gives each thread two
        rows (r and r + 8) per 64-row atom and pairs of adjacent columns: each row is located
        once (pixel m -> image, row, column of the phase), then its columns are stored, those
        past C skipped."""
        view = self.scatter_view
        cols = view.shape[2]
        rows = view.shape[1]
        atoms_m = cute.size(frag, mode=[1])
        atoms_n = cute.size(frag, mode=[2])
        groups = cute.size(frag.shape[0][2])
        for am in cutlass.range_constexpr(atoms_m):
            for half in cutlass.range_constexpr(2):
                m = tCcD[((0, half, 0), am, 0)][0]
                if m < extent[0]:
                    q = m % cols
                    t = m // cols
                    pixel = view[t // rows, t % rows, q, None]
                    for an in cutlass.range_constexpr(atoms_n):
                        for g in cutlass.range_constexpr(groups):
                            # The pair's first column is even and C a multiple of 8: both or neither fit.
                            n = cute.assume(tCcD[((0, half, g), am, an)][1], divby=2)
                            if n < extent[1]:
                                pair = cute.make_rmem_tensor((2,), self.d_dtype)
                                pair[0] = frag[((0, half, g), am, an)]
                                pair[1] = frag[((1, half, g), am, an)]
                                cute.autovec_copy(pair, cute.make_tensor(pixel.iterator + n, cute.make_layout(2)))

    @cute.jit
    def _store_tma(self, acc, tRS_acc, tRS_chunk, tRS_out, chunk_size, r2s, tRS_sD, sD, gD, tma_d,
                   tile, tiles_done, group, warp_idx, store_warp, epi_barrier):
        """Registers -> shared memory (stmatrix) -> the phase's pixels, column chunk by chunk: after
        a chunk is staged, the epilogue's threads take its 16-byte pieces (8 columns of one row)
        round-robin, locate each piece's pixel and store it; a second barrier frees the buffer."""
        p = self.plan
        view = self.scatter_view
        cols = view.shape[2]
        rows = view.shape[1]
        m_end = view.shape[0] * rows * cols
        n_end = view.shape[3]
        tidx, _, _ = cute.arch.thread_idx()
        # The thread's index in its epilogue group (the consumers' threads start after the producer warpgroup).
        group_tidx = tidx % THREADS_PER_WARPGROUP if cutlass.const_expr(p.pingpong) else tidx - THREADS_PER_WARPGROUP
        epi_m, epi_n = self.epi_tile
        per_row = epi_n // 8
        pieces = epi_m * per_row
        gD_epi = cute.zipped_divide(gD[(None, None, *tile)], self.epi_tile)
        n_chunks = cute.size(gD_epi, mode=[1])
        chunk_grid = gD_epi.shape[1]
        chunk_layout = cute.make_layout(chunk_grid, stride=(chunk_grid[1], 1))
        for ci in cutlass.range_constexpr(n_chunks):
            for v in cutlass.range_constexpr(chunk_size):
                tRS_chunk[v] = tRS_acc[ci * chunk_size + v]
            tRS_out.store(tRS_chunk.load().to(self.d_dtype))
            buf = (tiles_done * n_chunks + ci) % p.epi_stages + group * p.epi_stages
            cute.copy(r2s, tRS_out, tRS_sD[(None, None, None, buf)])
            epi_barrier.arrive_and_wait()
            cm, cn = chunk_layout.get_hier_coord(ci)
            row0 = tile[0] * p.tile_m + cm * epi_m
            col0 = tile[1] * p.tile_n + cn * epi_n
            staged = cute.zipped_divide(sD[(None, None, buf)], (1, 8))
            for it in cutlass.range_constexpr((pieces + self.epi_threads - 1) // self.epi_threads):
                piece = it * self.epi_threads + group_tidx
                r = piece // per_row
                c8 = piece - r * per_row
                m = row0 + r
                n = cute.assume(col0 + c8 * 8, divby=8)
                if piece < pieces and m < m_end and n < n_end:
                    t = m // cols
                    pixel = view[t // rows, t % rows, m - t * cols, None]
                    part = cute.make_rmem_tensor((8,), self.d_dtype)
                    cute.autovec_copy(staged[((0, None), (r, c8))], part)
                    cute.autovec_copy(part, cute.make_tensor(pixel.iterator + n, cute.make_layout(8)))
            epi_barrier.arrive_and_wait()

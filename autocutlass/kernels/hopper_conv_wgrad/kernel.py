"""The sm_90a implicit-GEMM conv2d wgrad kernel, written in CuTe DSL.

It is the GEMM family's warp-specialised persistent kernel (``hopper_gemm.kernel``) with another
producer, as the fprop kernel (``hopper_conv.kernel``) is: the consumers (WGMMA over the
shared-memory ring, cooperative or ping-pong), serial split-K, stream-K and the epilogue with its
stmatrix + TMA store (or direct store) are inherited unchanged; this module replaces the
host-side set-up (``__call__``), the kernel entry (``kernel``) and the producer
(``_wgrad_producer``).

The implicit GEMM, batched over the filter taps (``plan``): for tap l = r*S + s, D_l (K x C) =
dy^T (K x NPQ) @ im2col_l(x) (NPQ x C); the GEMM's K loop walks blocks of ``tile_k`` output
pixels. Per K block the producer issues

* A: one tiled TMA load (multicast across ``cluster_n``) of dy^T, ``tile_m`` output channels x
  ``tile_k`` output pixels, from dy viewed as (K, N*P*Q) with the channels contiguous
  (M-major for WGMMA);
* B: one im2col TMA load (multicast across ``cluster_m``) of x, ``tile_k`` output pixels x
  ``tile_n`` channels at filter offset (r, s): the descriptor is the fprop kernel's (bounding box
  of the filter's top-left corner, lower corner -pad, upper corner pad - (R-1)*dilation,
  traversal stride = the convolution stride, filter offsets scaled by the dilation), the box is
  pixels x channels with the channels contiguous, so the shared-memory tile is B N-major
  (channels contiguous), the same bytes that the fprop kernel's K-major A tile of pixels x
  channels holds. The TMA atom is built on B's staged layout with its two modes swapped
  (pixels first), and the producer writes through that view of the ring.

Pixels past N*P*Q arrive as zeros in A (so they add nothing), padding pixels as zeros in B,
channels past C as zeros in B (their columns of D are clipped by the TMA store), output channels
past K as zeros in A (their rows clipped).

D is dw as (K, C, R*S): the channels_last filter (K, R, S, C) viewed with the tap as the batch
mode (stride C); with ``tap_channels`` (tiles across the taps) as one (K, R*S*C) matrix whose
tiles hold ``tile_n / tap_channels`` im2col boxes of ``tap_channels`` channels each, box g being
channel block g % (C / tap_channels) of tap g // (C / tap_channels): a 320-channel layer's
192-wide tiles cover its 2880 columns in 15 tiles, where one tap per tile needs 2 of 192 per tap
(18 tiles, a sixth of their columns past C). R and S are compile-time; stride, padding and dilation are run-time arguments;
N, H, W, C, K are symbolic.

Tensors, in torch's channels_last views: dy as (N*P*Q, K) (K contiguous), x as (N, H, W, C) (C
contiguous), dw as (K, R*S, C) (C contiguous).
"""

import cuda.bindings.driver as cuda
import cutlass
import cutlass.utils.hopper_helpers as sm90_utils
from cutlass import cute, pipeline, utils
from cutlass.pipeline import pipeline_init_arrive, pipeline_init_wait
from cutlass.tensor_utils import LayoutEnum

from autocutlass.kernels.budgets import (
    PRODUCER_REGS,
    SMEM_BUFFER_ALIGN,
    THREADS_PER_WARPGROUP,
)
from autocutlass.kernels.hopper_conv_wgrad.plan import WgradPlan
from autocutlass.kernels.hopper_gemm.kernel import (
    CUTLASS_DTYPES,
    HopperGemmKernel,
    _to_mkl,
)

__all__ = ["CUTLASS_DTYPES", "HopperConvWgradKernel"]


class HopperConvWgradKernel(HopperGemmKernel):
    """Compile-time object: all attributes derive from the frozen ``WgradPlan``."""

    def __init__(self, plan: WgradPlan) -> None:
        super().__init__(plan.gemm)
        self.wgrad_plan = plan
        self.filter_rs = (plan.r, plan.s)

    # ------------------------------------------------------------------ host side
    @cute.jit
    def __call__(
        self,
        dy: cute.Tensor,
        x: cute.Tensor,
        dw: cute.Tensor,
        workspace: cute.Tensor | None,
        counters: cute.Tensor | None,
        stride_h: cutlass.Int32,
        stride_w: cutlass.Int32,
        pad_h: cutlass.Int32,
        pad_w: cutlass.Int32,
        dil_h: cutlass.Int32,
        dil_w: cutlass.Int32,
        max_active_clusters: cutlass.Int32,
        stream: cuda.CUstream,
    ):
        p = self.plan
        taps_r, taps_s = self.filter_rs
        tap_c = self.wgrad_plan.tap_channels
        # dy (NPQ, K) -> A = dy^T as (K, NPQ, 1), K contiguous; dw (K, R*S, C) -> D as (K, C, R*S),
        # or with tiles across the taps as one (K, R*S*C, 1) matrix (dw is dense, C = tap_c * blocks).
        mA = _to_mkl(dy, (2, 1, 0))
        if cutlass.const_expr(tap_c > 0):
            columns = taps_r * taps_s * tap_c * self.wgrad_plan.channel_blocks
            mD = cute.make_tensor(
                dw.iterator,
                cute.make_layout((dw.shape[0], columns, 1), stride=(dw.stride[0], 1, dw.stride[0])),
            )
        else:
            mD = cute.make_tensor(dw.iterator, cute.select(dw.layout, mode=[0, 2, 1]))
        # x (N, H, W, C) -> the im2col TMA's ((W, H, N), C).
        n_img, h_img, w_img, chans = x.shape
        mX = cute.make_tensor(
            x.iterator,
            cute.make_layout(((w_img, h_img, n_img), chans), stride=((x.stride[2], x.stride[1], x.stride[0]), 1)),
        )

        self.a_dtype = mA.element_type
        self.b_dtype = mX.element_type
        self.d_dtype = mD.element_type
        self.acc_dtype = cutlass.Float32
        # A is M-major (dy's channels contiguous), B N-major (x's channels contiguous), D row-major.
        self.a_layout = LayoutEnum.COL_MAJOR
        self.b_layout = LayoutEnum.COL_MAJOR
        self.d_layout = LayoutEnum.from_tensor(mD)

        self.tiled_mma = sm90_utils.make_trivial_tiled_mma(
            self.a_dtype,
            self.b_dtype,
            self.a_layout.sm90_mma_major_mode(),
            self.b_layout.sm90_mma_major_mode(),
            self.acc_dtype,
            (p.mma_atoms_m, 1, 1),
            tiler_mn=(64, p.tile_n),
        )
        self.cta_layout_mnk = cute.make_layout((*self.cluster_mn, 1))
        a_staged, b_staged, d_staged = self._smem_layouts()

        tma_a, tA = self._tma_load(mA, a_staged, (p.tile_m, p.tile_k), p.cluster_n)
        # B's stage as (pixels, channels): the box the im2col TMA loads, channels contiguous. With
        # several taps per tile the box is one tap's tap_c channels: the stage's first tap_c / 64
        # swizzle-atom columns, laid out as the stage lays them out.
        b_box_n = p.tile_n
        b_pixels_first = cute.select(cute.slice_(b_staged, (None, None, 0)), mode=[1, 0])
        if cutlass.const_expr(tap_c > 0):
            b_box_n = tap_c
            b_atom = cute.nvgpu.warpgroup.make_smem_layout_atom(
                sm90_utils.get_smem_layout_atom(self.b_layout, self.b_dtype, p.tile_n), self.b_dtype
            )
            b_pixels_first = cute.select(cute.tile_to_shape(b_atom, (tap_c, p.tile_k), order=(1, 0)), mode=[1, 0])
        b_op = (
            cute.nvgpu.cpasync.CopyBulkTensorIm2ColG2SOp()
            if p.cluster_m == 1
            else cute.nvgpu.cpasync.CopyBulkTensorIm2ColG2SMulticastOp()
        )
        tma_b, tB = cute.nvgpu.cpasync.make_im2col_tma_atom(
            b_op,
            mX,
            b_pixels_first,
            (p.tile_k, b_box_n),
            lower_corner_whd=(-pad_w, -pad_h),
            upper_corner_whd=(pad_w - (taps_s - 1) * dil_w, pad_h - (taps_r - 1) * dil_h),
            lower_padding_whd=(pad_w, pad_h),
            upper_padding_whd=(pad_w, pad_h),
            stride_whd=(stride_w, stride_h),
            lower_srt=(0, 0),
            stride_srt=(dil_w, dil_h),
            num_multicast=p.cluster_m,
        )
        d_one = cute.slice_(d_staged, (None, None, 0))
        tma_d, tD = cute.nvgpu.cpasync.make_tiled_tma_atom(
            cute.nvgpu.cpasync.CopyBulkTensorTileS2GOp(), mD, d_one, self.epi_tile
        )

        gD = cute.zipped_divide(mD, tiler=(p.tile_m, p.tile_n))
        tiles_mnl = gD[(0, (None, None, None))].shape
        # Work units (K tile, C tile, tap * split_k); unit (m, n, u) is split u % split_k of tap u // split_k.
        units_mnl = (tiles_mnl[0], tiles_mnl[1], tiles_mnl[2] * p.split_k)
        sched_params = utils.PersistentTileSchedulerParams(
            units_mnl, (*self.cluster_mn, 1), p.swizzle, p.raster_along_m
        )
        if cutlass.const_expr(p.stream_k):
            k_iters = cutlass.max((mA.shape[1] + p.tile_k - 1) // p.tile_k, 1)
            total = (
                (tiles_mnl[0] + p.cluster_m - 1) // p.cluster_m
                * ((tiles_mnl[1] + p.cluster_n - 1) // p.cluster_n)
                * tiles_mnl[2] * k_iters
            )
            grid = (*self.cluster_mn, cutlass.max(cutlass.min(max_active_clusters, total), 1))
        else:
            grid = utils.StaticPersistentTileScheduler.get_grid_shape(sched_params, max_active_clusters)

        self._define_shared_storage(a_staged, b_staged, d_staged)
        self.kernel(
            tma_a, tA, tma_b, tB, tma_d, tD, mD, workspace, counters, self.tiled_mma, self.cta_layout_mnk,
            a_staged, b_staged, d_staged, sched_params,
        ).launch(
            grid=grid,
            block=[self.threads, 1, 1],
            cluster=(*self.cluster_mn, 1),
            min_blocks_per_mp=1,
            stream=stream,
        )

    def _define_shared_storage(self, a_staged, b_staged, d_staged) -> None:
        """The ring, the ping-pong order barriers, the operand buffers and (TMA store) the
        epilogue's staging buffers, as the inherited consumers expect them."""
        if not self.plan.smem_epilogue:

            @cute.struct
            class SharedStorageDirect:
                ring_barriers: cute.struct.MemRange[cutlass.Int64, self.plan.stages * 2]
                order_barriers: cute.struct.MemRange[cutlass.Int64, 2]
                sA: cute.struct.Align[cute.struct.MemRange[self.a_dtype, cute.cosize(a_staged)], SMEM_BUFFER_ALIGN]
                sB: cute.struct.Align[cute.struct.MemRange[self.b_dtype, cute.cosize(b_staged)], SMEM_BUFFER_ALIGN]

            self.shared_storage = SharedStorageDirect
        else:

            @cute.struct
            class SharedStorage:
                ring_barriers: cute.struct.MemRange[cutlass.Int64, self.plan.stages * 2]
                order_barriers: cute.struct.MemRange[cutlass.Int64, 2]
                sA: cute.struct.Align[cute.struct.MemRange[self.a_dtype, cute.cosize(a_staged)], SMEM_BUFFER_ALIGN]
                sB: cute.struct.Align[cute.struct.MemRange[self.b_dtype, cute.cosize(b_staged)], SMEM_BUFFER_ALIGN]
                sD: cute.struct.Align[cute.struct.MemRange[self.d_dtype, cute.cosize(d_staged)], SMEM_BUFFER_ALIGN]

            self.shared_storage = SharedStorage

    # ------------------------------------------------------------------ device side
    @cute.kernel
    def kernel(
        self,
        tma_a: cute.CopyAtom,
        mA: cute.Tensor,
        tma_b: cute.CopyAtom,
        mB: cute.Tensor,
        tma_d: cute.CopyAtom,
        mD_tma: cute.Tensor,
        mD: cute.Tensor,
        mWork: cute.Tensor | None,
        mCount: cute.Tensor | None,
        tiled_mma: cute.TiledMma,
        cta_layout_mnk: cute.Layout,
        a_staged: cute.ComposedLayout,
        b_staged: cute.ComposedLayout,
        d_staged: cute.ComposedLayout,
        sched_params: utils.PersistentTileSchedulerParams,
    ):
        p = self.plan
        tidx, _, _ = cute.arch.thread_idx()
        warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        wg_idx = cute.arch.make_warp_uniform(tidx // THREADS_PER_WARPGROUP)

        if warp_idx == 0:
            cute.nvgpu.cpasync.prefetch_descriptor(tma_a)
            cute.nvgpu.cpasync.prefetch_descriptor(tma_b)
            cute.nvgpu.cpasync.prefetch_descriptor(tma_d)

        cta_rank = cute.arch.make_warp_uniform(cute.arch.block_idx_in_cluster())
        cluster_coord = cta_layout_mnk.get_flat_coord(cta_rank)
        a_mask = cute.make_layout_image_mask(cta_layout_mnk, cluster_coord, mode=1) if self.a_mcast else 0
        b_mask = cute.make_layout_image_mask(cta_layout_mnk, cluster_coord, mode=0) if self.b_mcast else 0

        tx_bytes = cute.size_in_bytes(self.a_dtype, cute.slice_(a_staged, (None, None, 0))) + cute.size_in_bytes(
            self.b_dtype, cute.slice_(b_staged, (None, None, 0))
        )

        smem = cutlass.utils.SmemAllocator()
        storage = smem.allocate(self.shared_storage)

        mcast_peers = p.cluster_m + p.cluster_n - 1
        ring = pipeline.PipelineTmaAsync.create(
            barrier_storage=storage.ring_barriers.data_ptr(),
            num_stages=p.stages,
            producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
            consumer_group=pipeline.CooperativeGroup(
                pipeline.Agent.Thread, mcast_peers * self.readers_per_stage * 4
            ),
            tx_count=tx_bytes,
            cta_layout_vmnk=cute.make_layout((1, *cta_layout_mnk.shape)),
            defer_sync=True,
        )
        if cutlass.const_expr(p.pingpong):
            # The inherited ping-pong consumers alternate their mainloops on these two barriers.
            if tidx == 0:
                order = storage.order_barriers.data_ptr()
                cute.arch.mbarrier_init(order, THREADS_PER_WARPGROUP)
                cute.arch.mbarrier_init(order + 1, THREADS_PER_WARPGROUP)
            cute.arch.mbarrier_init_fence()
        pipeline_init_arrive(cluster_shape_mn=self.cluster_mn, is_relaxed=True)

        sA = storage.sA.get_tensor(a_staged.outer, swizzle=a_staged.inner)
        sB = storage.sB.get_tensor(b_staged.outer, swizzle=b_staged.inner)
        # The producer writes B through its (pixels, channels, stage) view, the im2col box order;
        # with several taps per tile, (pixels, tap_c channels, 1, taps of the tile, stage).
        sB_px = cute.make_tensor(sB.iterator, cute.select(sB.layout, mode=[1, 0, 2]))
        tap_c = self.wgrad_plan.tap_channels
        b_box_n = p.tile_n
        if cutlass.const_expr(tap_c > 0):
            b_box_n = tap_c
            sB_px = cute.flat_divide(sB_px, (p.tile_k, tap_c))

        # A: (tile_m, tile_k, K tiles, pixel blocks, 1) of dy^T coordinates;
        # B: (tile_k, (box channels, 1, 1), pixel blocks, channel tiles, S, R) of im2col coordinates.
        gA = cute.local_tile(mA, (p.tile_m, p.tile_k), (None, None, None))
        gB = cute.local_tile(mB, (p.tile_k, (b_box_n, 1, 1)), (None, (None, None, None)))
        k_tiles = cute.size(gA, mode=[3])
        geom = None
        if cutlass.const_expr(p.stream_k):
            tiles_m = (mD.shape[0] + p.tile_m - 1) // p.tile_m
            tiles_n = (mD.shape[1] + p.tile_n - 1) // p.tile_n
            geom = self._stream_geometry(tiles_m, tiles_n, mD.shape[2], k_tiles)

        pipeline_init_wait(cluster_shape_mn=self.cluster_mn)

        if wg_idx == 0:
            cute.arch.setmaxregister_decrease(PRODUCER_REGS)
            if warp_idx == 0:
                self._wgrad_producer(
                    ring, tma_a, tma_b, sA, sB_px, gA, gB, k_tiles, a_mask, b_mask,
                    cta_layout_mnk, cluster_coord, sched_params, geom,
                )
        else:
            cute.arch.setmaxregister_increase(p.consumer_regs)
            self._consumer(
                ring, tiled_mma, sA, sB, k_tiles, storage, d_staged, tma_d, mD_tma, mD, None, None,
                mWork, mCount, cutlass.Float32(1.0), cutlass.Float32(0.0), tidx, warp_idx, wg_idx, sched_params, geom,
                cluster_coord, cta_rank,
            )

    # ------------------------------------------------------------------ producer
    @cute.jit
    def _wgrad_producer(self, ring, tma_a, tma_b, sA, sB_px, gA, gB, k_tiles, a_mask, b_mask,
                        cta_layout_mnk, cluster_coord, sched_params, geom):
        """One warp: for each of the CTA's work units (output-channel tile, input-channel tile,
        tap, and split or stream-K segment), its pixel blocks, each a tiled load of dy^T and an
        im2col load of x at the unit's tap into one ring stage (with several taps per tile, one
        im2col load per tap of the tile, into its columns of the stage)."""
        taps_r, taps_s = self.filter_rs
        tap_c = self.wgrad_plan.tap_channels
        n_taps = self.plan.tile_n // tap_c if tap_c > 0 else 1  # boxes per tile
        blocks = self.wgrad_plan.channel_blocks
        a_cta_layout = cute.make_layout(cute.slice_(cta_layout_mnk, (0, None, 0)).shape)
        tAsA, tAgA = cute.nvgpu.cpasync.tma_partition(
            tma_a, cluster_coord[1], a_cta_layout, cute.group_modes(sA, 0, 2), cute.group_modes(gA, 0, 2)
        )
        b_cta_layout = cute.make_layout(cute.slice_(cta_layout_mnk, (None, 0, 0)).shape)
        tBsB, tBgB = cute.nvgpu.cpasync.tma_partition(
            tma_b, cluster_coord[0], b_cta_layout, cute.group_modes(sB_px, 0, 2), cute.group_modes(gB, 0, 2)
        )
        sched = utils.StaticPersistentTileScheduler.create(
            sched_params, cute.arch.block_idx(), cute.arch.grid_dim()
        )
        work = sched.initial_work_tile_info()
        it, end = cutlass.Int32(0), cutlass.Int32(0)
        valid = work.is_valid_tile
        if cutlass.const_expr(self.plan.stream_k):
            it, end = self._stream_span(geom, cute.arch.block_idx()[2])
            valid = it < end
        state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, self.plan.stages)
        while valid:
            if cutlass.const_expr(self.plan.stream_k):
                tile, kt0, count = self._stream_unit(geom, it, end, cluster_coord)
                tap = tile[2]
                kt_count = cutlass.max(cutlass.min(count, k_tiles - kt0), 0)
            else:
                tile = work.tile_idx
                tap, kt0, kt_count = self._split_range(tile, k_tiles)
            tAgA_t = tAgA[(None, tile[0], None, 0)]
            if cutlass.const_expr(tap_c > 0):
                # The tile's boxes, side by side: n_taps boxes of tap_c channels per K block over the
                # flattened R*S*C columns, box g being channel block g % blocks of tap g // blocks (with
                # blocks = 1, box g is tap g). The last tile's boxes past R*S*C load the last box again
                # (their columns are past dw's, clipped).
                first = tile[1] * n_taps
                for kt in range(kt_count):
                    kb = self._k_tile(kt0, kt)
                    ring.producer_acquire(state)
                    barrier = ring.producer_get_barrier(state)
                    cute.copy(tma_a, tAgA_t[(None, kb)], tAsA[(None, state.index)], tma_bar_ptr=barrier,
                              mcast_mask=a_mask)
                    for j in cutlass.range_constexpr(n_taps):
                        t = cutlass.min(first + j, taps_r * taps_s * blocks - 1)
                        cb = 0
                        if cutlass.const_expr(blocks > 1):
                            g = t
                            t = g // blocks
                            cb = g - t * blocks
                        r = t // taps_s
                        s = t - r * taps_s
                        cute.copy(tma_b, tBgB[(None, kb, cb, s, r)], tBsB[(None, 0, j, state.index)],
                                  tma_bar_ptr=barrier, mcast_mask=b_mask)
                    ring.producer_commit(state)
                    state.advance()
            else:
                r = tap // taps_s
                s = tap - r * taps_s
                tBgB_t = tBgB[(None, None, tile[1], s, r)]
                for kt in range(kt_count):
                    kb = self._k_tile(kt0, kt)
                    ring.producer_acquire(state)
                    barrier = ring.producer_get_barrier(state)
                    cute.copy(tma_a, tAgA_t[(None, kb)], tAsA[(None, state.index)], tma_bar_ptr=barrier,
                              mcast_mask=a_mask)
                    cute.copy(tma_b, tBgB_t[(None, kb)], tBsB[(None, state.index)], tma_bar_ptr=barrier,
                              mcast_mask=b_mask)
                    ring.producer_commit(state)
                    state.advance()
            if cutlass.const_expr(self.plan.stream_k):
                it = it + count
                valid = it < end
            else:
                sched.advance_to_next_work()
                work = sched.get_current_work()
                valid = work.is_valid_tile
        ring.producer_tail(state)

"""The CuTe DSL kernel of the wgrad slab sum (``slab_sum``: what it computes, how it is cached).
Imports the DSL; ``slab_sum`` imports this module only to compile."""

import cuda.bindings.driver as cuda
import cutlass
from cutlass import cute

THREADS = 128
"""Threads per block of the flat 1-D grid."""
COLUMNS = 4
"""dw columns per thread: one 16-byte load of fp32 per slab."""


class SlabSumKernel:
    """Compile-time object: ``splits`` slabs summed in split order, ``in_flight`` loads issued
    before their adds, into dw of ``dtype`` (a cutlass type) and ``rank`` (2 or 3)."""

    def __init__(self, splits: int, dtype, rank: int, vec: int, in_flight: int) -> None:
        self.splits = splits
        self.dtype = dtype
        self.rank = rank
        self.vec = COLUMNS  # ``vec`` (16 bytes of dw) is the alignment of dw's rows, not the work split
        # split order in groups: [1, 1 + in_flight), [1 + in_flight, ...), ..., split 0 first
        self.groups = [(a, min(a + in_flight, splits)) for a in range(1, splits, in_flight)]

    @cute.jit
    def __call__(self, ws: cute.Tensor, d: cute.Tensor, stream: cuda.CUstream):
        vecs = d.shape[self.rank - 1] // self.vec
        total = ws.shape[1] * ws.shape[2] * vecs
        blocks = cutlass.max((total + THREADS - 1) // THREADS, 1)
        self.kernel(ws, d, vecs, total).launch(grid=[blocks, 1, 1], block=[THREADS, 1, 1], stream=stream,
                                               use_pdl=True)

    @cute.kernel
    def kernel(self, mWs: cute.Tensor, mD: cute.Tensor, vecs: cutlass.Int32, total: cutlass.Int32):
        tidx, _, _ = cute.arch.thread_idx()
        bidx, _, _ = cute.arch.block_idx()
        g = bidx * THREADS + tidx
        # Launched as a programmatic dependent of the wgrad kernel before it: wait until that grid
        # has finished and its slabs are visible.
        cute.arch.griddepcontrol_wait()
        if g < total:
            v = g % vecs
            row = g // vecs
            mi = row % mWs.shape[2]
            li = row // mWs.shape[2]
            acc = self._slab(mWs, 0, li, mi, v)
            for gi in cutlass.range_constexpr(len(self.groups)):
                lo, hi = self.groups[gi]
                loaded = [self._slab(mWs, s, li, mi, v) for s in range(lo, hi)]
                for part in loaded:
                    acc.store(acc.load() + part.load())
            self._store(mD, acc, li, mi, v)

    @cute.jit
    def _slab(self, mWs: cute.Tensor, s, li, mi, v) -> cute.Tensor:
        """Slab ``s``'s vector ``v`` of row (l, m), in registers (16-byte loads)."""
        frag = cute.make_rmem_tensor((self.vec,), cutlass.Float32)
        cute.autovec_copy(cute.local_tile(mWs[(s, li, mi, None)], (self.vec,), (v,)), frag)
        return frag

    @cute.jit
    def _store(self, mD: cute.Tensor, acc: cute.Tensor, li, mi, v) -> None:
        """The fp32 sum ``acc`` of vector ``v`` of row (l, m), converted to dw's dtype and stored."""
        out = cute.make_rmem_tensor((self.vec,), self.dtype)
        out.store(acc.load().to(self.dtype))
        if cutlass.const_expr(self.rank == 2):
            dst = mD[(mi, None)]
        else:
            dst = mD[(li, mi, None)]
        cute.autovec_copy(out, cute.local_tile(dst, (self.vec,), (v,)))


LANES = 32
"""dw vectors per block of the grouped slab sum: one per lane; each warp of the block sums one group."""


class GroupedSlabSumKernel(SlabSumKernel):
    """Compile-time object: the ``splits`` slabs cut into ``groups`` consecutive groups, each summed
    in split order by one warp of a block (``in_flight`` loads issued before their adds), the group
    sums then added in group order by the first warp through shared memory, into dw of ``dtype``
    and ``rank``. A block covers 32 dw vectors (4 columns each) with ``groups`` warps, so a split
    count S puts S/groups loads per thread in flight on groups times as many threads as
    ``SlabSumKernel``: for few outputs and many slabs (a pointwise wgrad: 64 slabs of a 256x64
    filter) that one runs on 32 CTAs, latency-bound. The order of the additions is fixed: the same
    bits on every run (not those of ``SlabSumKernel``, which adds in one chain). Its slab loads and
    the final store are ``SlabSumKernel``'s."""

    def __init__(self, splits: int, dtype, rank: int, vec: int, in_flight: int, groups: int) -> None:
        self.splits = splits
        self.dtype = dtype
        self.rank = rank
        self.vec = COLUMNS
        self.parts = groups
        bounds = [j * splits // groups for j in range(groups + 1)]
        # per group: its first slab, then its further slabs in chunks of ``in_flight``
        self.plan = [(bounds[j], [(a, min(a + in_flight, bounds[j + 1])) for a in range(bounds[j] + 1, bounds[j + 1],
                                                                                          in_flight)])
                     for j in range(groups)]  # fmt: skip

    @cute.jit
    def __call__(self, ws: cute.Tensor, d: cute.Tensor, stream: cuda.CUstream):
        vecs = d.shape[self.rank - 1] // self.vec
        total = ws.shape[1] * ws.shape[2] * vecs
        blocks = cutlass.max((total + LANES - 1) // LANES, 1)
        self.kernel(ws, d, vecs, total).launch(grid=[blocks, 1, 1], block=[LANES * self.parts, 1, 1], stream=stream,
                                               use_pdl=True)

    @cute.kernel
    def kernel(self, mWs: cute.Tensor, mD: cute.Tensor, vecs: cutlass.Int32, total: cutlass.Int32):
        tidx, _, _ = cute.arch.thread_idx()
        bidx, _, _ = cute.arch.block_idx()
        warp = tidx // LANES
        lane = tidx - warp * LANES
        allocator = cutlass.memory.SmemAllocator()
        sPart = allocator.allocate_tensor(cutlass.Float32, cute.make_layout(self.parts * LANES * self.vec),
                                          byte_alignment=16)  # fmt: skip
        g = bidx * LANES + lane
        # a lane past the end sums the last vector again (its loads stay in bounds), never stores
        gl = cutlass.min(g, total - 1)
        v = gl % vecs
        row = gl // vecs
        mi = row % mWs.shape[2]
        li = row // mWs.shape[2]
        # Launched as a programmatic dependent of the wgrad kernel before it: wait until that grid
        # has finished and its slabs are visible.
        cute.arch.griddepcontrol_wait()
        for j in cutlass.range_constexpr(self.parts):
            if warp == j:
                first, chunks = self.plan[j]
                acc = self._slab(mWs, first, li, mi, v)
                for ci in cutlass.range_constexpr(len(chunks)):
                    lo, hi = chunks[ci]
                    loaded = [self._slab(mWs, s, li, mi, v) for s in range(lo, hi)]
                    for part in loaded:
                        acc.store(acc.load() + part.load())
                for i in cutlass.range_constexpr(self.vec):
                    sPart[(j * LANES + lane) * self.vec + i] = acc[i]
        cute.arch.sync_threads()
        if warp == 0 and g < total:
            acc = cute.make_rmem_tensor((self.vec,), cutlass.Float32)
            for i in cutlass.range_constexpr(self.vec):
                acc[i] = sPart[lane * self.vec + i]
            for j in cutlass.range_constexpr(1, self.parts):
                part = cute.make_rmem_tensor((self.vec,), cutlass.Float32)
                for i in cutlass.range_constexpr(self.vec):
                    part[i] = sPart[(j * LANES + lane) * self.vec + i]
                acc.store(acc.load() + part.load())
            self._store(mD, acc, li, mi, v)

"""The TF32 warpgroup MMA atom (``wgmma.mma_async ... .tf32``), which nvidia-cutlass-dsl 4.8.1
does not expose in ``cute.nvgpu.warpgroup`` (it has the f16/bf16, f8 and i8 forms).

The atom is built the way the DSL builds its own: an ``MmaAtomSM90Type`` with tf32 operand
types, an fp32 accumulator and an instruction shape of 64 x N x 8. PTX allows only K-major
shared-memory operands for tf32 (no transpose bit). B is always read from shared memory; A is
read from shared memory (K-major) or from registers (``a_from_regs``: the consumers load an
M-major A tile from shared memory into the WGMMA's register fragment themselves, which is how an
M-major A is served without a transposing copy). Operands reach shared memory as fp32 bits (TMA
copies bytes); the tensor core reads the top 19 bits of each.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import cutlass
import cutlass.cute as cute
from cutlass._mlir import ir
import cutlass._mlir.dialects.cute_nvgpu as _cute_nvgpu_ir
from cutlass.cute.atom import make_atom
from cutlass.cute.core import _pack_shape, rank
from cutlass.cute.nvgpu.common import OperandMajorMode
from cutlass.cute.nvgpu.warpgroup.mma import MmaOp, MmaTraits, OperandSource
from cutlass.cutlass_dsl import DSLUserCodeError

INSTRUCTION_K = 8
"""K extent of one tf32 WGMMA (32 bytes of each operand row)."""


@dataclass(frozen=True)
class MmaTF32Op(MmaOp):
    """TF32 x TF32 -> F32 warpgroup MMA; B K-major in shared memory, A K-major in shared memory
    or in registers (``a_src``)."""

    descriptive_name = "warpgroup TF32 MMA Operation"

    def __init__(
        self,
        acc_dtype: Any,
        instruction_shape: Any,
        a_major_mode: Any,
        b_major_mode: Any,
        a_src: OperandSource = OperandSource.SMEM,
    ) -> None:
        super().__init__(
            cutlass.TFloat32,
            cutlass.TFloat32,
            acc_dtype,
            instruction_shape,
            a_src,
            a_major_mode,
            b_major_mode,
        )
        self._verify()

    def _verify(self) -> None:
        if self.acc_dtype is not cutlass.Float32:
            raise DSLUserCodeError("tf32 WGMMA accumulates in Float32 only")
        if self.a_major_mode != OperandMajorMode.K or self.b_major_mode != OperandMajorMode.K:
            raise DSLUserCodeError("tf32 WGMMA needs K-major A and B (PTX has no transpose for tf32)")
        shape = self.shape_mnk
        if rank(shape) == 2:
            object.__setattr__(self, "shape_mnk", (*shape, INSTRUCTION_K))
        elif shape[2] != INSTRUCTION_K:
            raise DSLUserCodeError(f"tf32 WGMMA has K = {INSTRUCTION_K}, got {shape[2]}")

    def _make_trait(
        self, *, loc: Optional[ir.Location] = None, ip: Optional[ir.InsertionPoint] = None, **kwargs: Any
    ) -> "MmaTF32Trait":
        shape_mnk = _pack_shape(self.shape_mnk, loc=loc, ip=ip)
        ty = _cute_nvgpu_ir.MmaAtomSM90Type.get(
            shape_mnk.type.attribute,
            self.a_major_mode._to_ir(),
            self.b_major_mode._to_ir(),
            self.a_dtype.mlir_type,
            self.b_dtype.mlir_type,
            self.acc_dtype.mlir_type,
            self.a_src._to_ir(),
        )
        return MmaTF32Trait(make_atom(ty, [cutlass.Boolean(False).ir_value(loc=loc, ip=ip)], loc=loc, ip=ip))


class MmaTF32Trait(MmaTraits):
    pass


def make_tf32_tiled_mma(atom_layout_mnk: tuple[int, int, int], tile_n: int, a_from_regs: bool = False) -> cute.TiledMma:
    """A tiled MMA of 64 x tile_n x 8 tf32 atoms laid out ``atom_layout_mnk`` (warpgroups along M),
    A read from registers when ``a_from_regs``."""
    src = OperandSource.RMEM if a_from_regs else OperandSource.SMEM
    op = MmaTF32Op(cutlass.Float32, (64, tile_n), OperandMajorMode.K, OperandMajorMode.K, src)
    return cute.make_tiled_mma(cute.make_mma_atom(op), atom_layout_mnk)

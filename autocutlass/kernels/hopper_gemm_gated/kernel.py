"""The gated GEMM kernel: ``hopper_gemm``'s kernel with a multiplying epilogue (CuTe DSL).

``D = act(alpha * acc + bias) * C``: the same mainloop, schedules, split-K (serial) and
stream-K paths and both stores as ``HopperGemmKernel``; only the register epilogue differs. C is
read at the element's output coordinate clamped into the matrix, as the additive epilogue reads
it (rows and columns past M / N read a valid neighbour; the store drops their results), in C's
dtype, and multiplied in float32 after the activation. The plan's ``with_c`` is set (C is
passed and read); ``beta`` is ignored. Imports the DSL when imported.
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute

from autocutlass.kernels.hopper_gemm.kernel import CUTLASS_DTYPES, HopperGemmKernel

__all__ = ["CUTLASS_DTYPES", "HopperGemmGatedKernel"]


class HopperGemmGatedKernel(HopperGemmKernel):
    """``HopperGemmKernel`` whose epilogue multiplies by C after the activation."""

    @cute.jit
    def _epilogue_math(self, acc, tCcD, mD, mC, mBias, alpha, beta):
        """acc <- act(alpha * acc + bias) * C, element by element, in registers."""
        p = self.plan
        m_last = mD.shape[0] - 1
        n_last = mD.shape[1] - 1
        for i in cutlass.range_constexpr(cute.size(acc)):
            x = acc[i] * alpha
            crd = tCcD[i]
            n_in = cutlass.min(crd[1], n_last)
            m_in = cutlass.min(crd[0], m_last)
            if cutlass.const_expr(p.bias):
                # One value per column of the caller's D: the kernel's rows when swapped.
                if cutlass.const_expr(p.swap_ab):
                    x = x + mBias[m_in].to(cutlass.Float32)
                else:
                    x = x + mBias[n_in].to(cutlass.Float32)
            x = self._activation(x)
            acc[i] = x * mC[m_in, n_in, crd[2]].to(cutlass.Float32)

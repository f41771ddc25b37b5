"""The grouped GEMM op of mixture-of-experts layers: ``problem`` (GroupedGemmProblem), ``frontend``
(``autocutlass.grouped_mm``: validation, planning, the torch fallback) and ``evaluation`` (inputs
with a routing, the float32 reference, the ``torch._grouped_mm`` baseline)."""

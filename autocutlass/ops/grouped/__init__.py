"""The grouped GEMM op of mixture-of-experts layers: ``problem`` (GroupedGemmProblem)."""

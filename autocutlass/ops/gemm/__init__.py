"""The dense GEMM op: ``problem`` (GemmProblem), ``frontend`` (matmul, linear, gemm, scaled_mm),
``evaluation`` (inputs, reference, tolerance, torch baseline)."""

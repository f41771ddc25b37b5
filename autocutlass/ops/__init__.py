"""One package per op: its problem type (the fingerprint), its front-end (tensors -> problem and
launch plan) and its evaluation (inputs, reference, tolerance, torch baseline).

``gemm`` (matmul, linear, gemm, scaled_mm), ``conv`` (conv2d), ``grouped`` (grouped_mm).
``base`` states the contracts; ``registry`` finds an op's pieces by its name. Importing this
package imports neither torch nor any op: the database layer reads stored problems through
``registry.problem_from_dict`` without loading a front-end.
"""

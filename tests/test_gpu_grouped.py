"""The hopper_grouped family on the GPU, against a float32 per-expert reference on random data
with NaN-poisoned outputs: balanced, skewed (Zipf), empty-expert and one-expert routings, rows past
the last offset (zeros), residues (rows per expert not a tile multiple, N not a tile multiple, K
not a multiple of tile_k), both weight majors, every table tier (E < 64, < 256, < 1024), bias and
every activation, fp16 and fp32 outputs, a sample of the space; CUDA-graph capture replayed with
changing routings; and ``autocutlass.grouped_mm`` end to end (served by the kernel when
AUTOCUTLASS_GROUPED_KERNELS=1, memo hits across routings, a capturable hit path, autograd)."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

import autocutlass
from autocutlass.kernels.hopper_gemm.config import Raster, Schedule, Store
from autocutlass.kernels.hopper_grouped import HopperGroupedConfig as C
from autocutlass.kernels.hopper_grouped import HopperGroupedFamily, check
from autocutlass.ops.compare import compare
from autocutlass.ops.grouped import evaluation
from autocutlass.ops.grouped.problem import GroupedGemmProblem
from autocutlass.ops.types import Activation, DType, Epilogue, Major

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("isolated_env")]

BF16, FP16, FP32 = DType.BF16, DType.FP16, DType.FP32
TMA = Store.TMA
ROW, COL = Major.ROW, Major.COL
E, A = Epilogue, Activation


def prob(experts: int, t: int, n: int, k: int, major: Major = COL, *, dtype: DType = BF16, out: DType | None = None,
         epilogue: Epilogue | None = None) -> GroupedGemmProblem:  # fmt: skip
    return GroupedGemmProblem(experts=experts, t=t, n=n, k=k, x_dtype=dtype, w_dtype=dtype, out_dtype=out or dtype,
                              w_major=major, epilogue=epilogue or Epilogue())  # fmt: skip


CASES = [
    # 125 rows per expert: every expert ends in a partial 64-row tile
    (C(64, 128, 64), prob(8, 1000, 512, 512), "balanced"),
    (C(64, 128, 64), prob(8, 1000, 512, 512), "skewed"),
    (C(64, 128, 64), prob(8, 1000, 512, 512), "empty-even"),
    (C(64, 128, 64), prob(8, 1000, 512, 512), "one-expert"),
    # N = 200 (a partial column tile), K = 200 (a K block of 8), an N-contiguous weight
    (C(128, 128, 64), prob(8, 1000, 200, 200, ROW), "skewed"),
    # large tiles, bias + SiLU
    (C(128, 256, 64), prob(16, 4000, 768, 1024, epilogue=E(bias=True, activation=A.SILU)), "skewed"),
    # decode: 2 rows per expert, 128 experts (the 256-entry tables)
    (C(64, 256, 128), prob(128, 256, 1536, 2048), "skewed"),
    (C(64, 128, 64), prob(128, 256, 1536, 2048), "balanced"),
    # 300 experts (the 1024-entry tables), bias + GELU, N-contiguous weight
    (C(64, 128, 64), prob(300, 700, 256, 256, ROW, epilogue=E(bias=True, activation=A.GELU)), "skewed"),
    # fp16 in, fp32 out, tiles walked along N, bias + ReLU
    (C(128, 96, 128, Raster.ALONG_N), prob(8, 513, 288, 384, dtype=FP16, out=FP32,
                                           epilogue=E(bias=True, activation=A.RELU)), "balanced"),
    # ping-pong: consumers alternate tiles (an odd number of tiles per CTA, tail tiles, empty experts)
    (C(128, 128, 64, schedule=Schedule.PINGPONG), prob(16, 4000, 768, 1024, epilogue=E(bias=True, activation=A.SILU)),
     "skewed"),
    (C(64, 256, 64, schedule=Schedule.PINGPONG), prob(128, 256, 1536, 2048), "empty-even"),
    (C(64, 128, 128, Raster.ALONG_N, Schedule.PINGPONG), prob(8, 1000, 200, 200, ROW), "one-expert"),
    # a handful of rows: every expert inside one tile, GELU (tanh)
    (C(128, 192, 64), prob(4, 10, 384, 128, ROW, epilogue=E(activation=A.GELU_TANH)), "balanced"),
    (C(64, 64, 64), prob(8, 1, 64, 64), "one-expert"),
    # clusters of two sharing the weight tile (2x1) or the tokens' tile (1x2): odd row-tile
    # counts (the pair's second CTA holds no rows of the expert), an odd column-tile count (the
    # last pair's second CTA lies past N), empty experts, an N-contiguous weight, ping-pong, bias
    (C(128, 256, 64, cluster_m=2), prob(16, 4000, 768, 1024, epilogue=E(bias=True, activation=A.SILU)), "skewed"),
    (C(64, 128, 64, cluster_m=2), prob(8, 1000, 512, 512), "balanced"),
    (C(64, 128, 64, cluster_m=2), prob(8, 1000, 512, 512), "empty-even"),
    (C(128, 128, 64, schedule=Schedule.PINGPONG, cluster_m=2), prob(8, 1000, 200, 200, ROW), "skewed"),
    (C(64, 256, 128, Raster.ALONG_N, cluster_m=2), prob(128, 256, 1536, 2048), "skewed"),
    (C(128, 192, 64, cluster_m=2), prob(4, 10, 384, 128, epilogue=E(activation=A.GELU_TANH)), "one-expert"),
    (C(128, 256, 64, cluster_n=2), prob(16, 4000, 768, 1024, epilogue=E(bias=True, activation=A.SILU)), "skewed"),
    (C(64, 128, 64, cluster_n=2), prob(8, 1000, 640, 512), "empty-even"),
    (C(128, 128, 64, schedule=Schedule.PINGPONG, cluster_n=2), prob(8, 1000, 200, 200, ROW), "skewed"),
    (C(64, 128, 128, Raster.ALONG_N, cluster_n=2), prob(300, 700, 256, 256, ROW, epilogue=E(bias=True, activation=A.GELU)),
     "skewed"),
    (C(128, 96, 128, Raster.ALONG_N, cluster_n=2), prob(8, 513, 288, 384, dtype=FP16, out=FP32,
                                                        epilogue=E(bias=True, activation=A.RELU)), "balanced"),
    # TMA stores of whole tiles beside register stores of the tiles that end an expert (250 rows
    # per expert: one whole 128-row tile and a partial one), clipped at N, the tail's zeros,
    # ping-pong's two staging halves, fp32 output, clusters
    (C(128, 256, 64, store=TMA), prob(16, 4000, 768, 1024, epilogue=E(bias=True, activation=A.SILU)), "skewed"),
    (C(128, 128, 64, store=TMA), prob(8, 2000, 200, 200, ROW), "balanced"),
    (C(64, 128, 64, schedule=Schedule.PINGPONG, store=TMA), prob(8, 1000, 512, 512), "empty-even"),
    (C(128, 256, 64, cluster_n=2, store=TMA), prob(8, 4096, 1536, 512), "balanced"),
    (C(128, 128, 64, schedule=Schedule.PINGPONG, cluster_m=2, store=TMA), prob(8, 3000, 640, 256, dtype=FP16, out=FP32,
                                                                             epilogue=E(bias=True, activation=A.GELU)),
     "skewed"),
    (C(64, 96, 128, Raster.ALONG_N, cluster_n=2, store=TMA), prob(8, 1000, 288, 384), "one-expert"),
]  # fmt: skip


def _id(case: tuple[C, GroupedGemmProblem, str]) -> str:
    cfg, p, routing = case
    return f"{cfg.short()}-E{p.experts}-T{p.t}-N{p.n}-K{p.k}-{p.w_major.value}-{routing}"


def _run(cfg: C, p: GroupedGemmProblem, inputs: evaluation.GroupedInputs) -> tuple[bool, str | None]:
    assert check(cfg, p) is None, check(cfg, p)
    runner = HopperGroupedFamily().compile(cfg, p)
    ref = evaluation.reference(p, inputs)
    return evaluation.verify(runner, p, inputs, ref)


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_matches_the_reference(case: tuple[C, GroupedGemmProblem, str]) -> None:
    cfg, p, routing = case
    inputs = evaluation.make_inputs(p, device="cuda", routing=routing)
    ok, why = _run(cfg, p, inputs)
    assert ok, why


def test_rows_past_the_last_offset_are_zero() -> None:
    """offs[-1] = 900 < T = 1000: the kernel's tail tiles store zeros over the poison."""
    cfg, p = C(64, 128, 64), prob(8, 1000, 512, 512, epilogue=E(bias=True, activation=A.SILU))
    for cfg in (cfg, C(64, 128, 64, cluster_m=2), C(64, 128, 64, cluster_n=2), C(64, 128, 64, store=TMA)):
        inputs = evaluation.make_inputs(p, device="cuda")
        short = evaluation.offsets(900, 8, "skewed", device="cuda")
        inputs = dataclasses.replace(inputs, offs=short)
        ok, why = _run(cfg, p, inputs)
        assert ok, f"{cfg.short()}: {why}"
        # (verify's later routings reuse the output: run the short routing once more, alone)
        inputs.poison()
        inputs.run(HopperGroupedFamily().compile(cfg, p))
        torch.cuda.synchronize()
        assert not inputs.out[900:].any(), cfg.short()
        assert not inputs.out[:900].isnan().any(), cfg.short()


@pytest.mark.parametrize("major", [COL, ROW])
def test_a_sample_of_the_space(major: Major) -> None:
    p = prob(16, 2000, 640, 704, major)
    fam = HopperGroupedFamily()
    feasible = [c for c in fam.space(p) if check(c, p) is None]
    inputs = evaluation.make_inputs(p, device="cuda", routing="skewed")
    ref = evaluation.reference(p, inputs)
    for cfg in random.Random(19).sample(feasible, 6) + list(fam.seeds(p))[:2]:
        ok, why = evaluation.verify(fam.compile(cfg, p), p, inputs, ref)
        assert ok, f"{cfg.short()}: {why}"


def test_cuda_graph_replays_with_changing_routings() -> None:
    """One capture, then new offsets copied into the captured tensor: each replay is correct."""
    cfg, p = C(64, 128, 64), prob(32, 1500, 384, 512, epilogue=E(bias=True))
    runner = HopperGroupedFamily().compile(cfg, p)
    inputs = evaluation.make_inputs(p, device="cuda", routing="balanced")
    runner(inputs.x, inputs.w, inputs.offs, inputs.out, bias=inputs.bias)  # warm-up (loads the module)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        runner(inputs.x, inputs.w, inputs.offs, inputs.out, bias=inputs.bias)
    for routing in ("skewed", "empty-even", "one-expert", "balanced"):
        inputs.offs.copy_(evaluation.offsets(p.t, p.experts, routing, device="cuda"))
        inputs.poison()
        graph.replay()
        torch.cuda.synchronize()
        ok, why = evaluation.check_output(p, inputs.out, evaluation.reference(p, inputs))
        assert ok, f"{routing}: {why}"


# ---- the public entry point ------------------------------------------------------------------------
@pytest.fixture()
def kernels_on(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("AUTOCUTLASS_GROUPED_KERNELS", "1")
    autocutlass.reset()
    yield
    autocutlass.reset()


def _loop(x: torch.Tensor, w: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    out, start = torch.zeros(x.shape[0], w.shape[-1], device=x.device), 0
    for g, end in enumerate(int(v) for v in offs.tolist()):
        out[start:end] = x[start:end].float() @ w[g].float()
        start = end
    return out


@pytest.mark.usefixtures("kernels_on")
def test_grouped_mm_is_served_by_the_kernel_across_routings() -> None:
    x = torch.randn(2048, 1024, device="cuda", dtype=torch.bfloat16)
    w = (torch.randn(64, 512, 1024, device="cuda", dtype=torch.bfloat16) / 32).transpose(-2, -1)  # (E, N, K) storage
    before = autocutlass.stats()
    for routing in ("balanced", "skewed", "empty-even"):
        offs = evaluation.offsets(2048, 64, routing, device="cuda")
        y = autocutlass.grouped_mm(x, w, offs)
        assert compare(y, _loop(x, w, offs), 1e-2, "bf16") == (True, None), routing
    s = autocutlass.stats()
    assert s.fallbacks == before.fallbacks and s.compiles == before.compiles + 1 and s.memo_misses == before.memo_misses + 1
    with pytest.raises(RuntimeError, match="past T"):  # a new fingerprint reads device offsets once
        autocutlass.grouped_mm(x[:100], w, evaluation.offsets(2048, 64, device="cuda"))


@pytest.mark.usefixtures("kernels_on")
def test_the_hit_path_is_capturable() -> None:
    x = torch.randn(512, 256, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(8, 256, 128, device="cuda", dtype=torch.bfloat16) / 16
    b = torch.randn(8, 128, device="cuda", dtype=torch.bfloat16)
    offs = evaluation.offsets(512, 8, device="cuda")
    autocutlass.grouped_mm(x, w, offs, bias=b, activation="relu")  # the miss: plans, compiles
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = autocutlass.grouped_mm(x, w, offs, bias=b, activation="relu")
    offs.copy_(evaluation.offsets(512, 8, "skewed", device="cuda"))
    graph.replay()
    torch.cuda.synchronize()
    ref = torch.relu(_loop(x, w, offs) + b.float()[evaluation_groups(offs, 512)])
    assert compare(y, ref, 1e-2, "bf16") == (True, None)


def evaluation_groups(offs: torch.Tensor, rows: int) -> torch.Tensor:
    return torch.searchsorted(offs, torch.arange(rows, device=offs.device, dtype=torch.int32), right=True)


@pytest.mark.usefixtures("kernels_on")
def test_autograd_runs_dx_on_the_kernel() -> None:
    x = torch.randn(600, 256, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    w = (torch.randn(8, 256, 192, device="cuda", dtype=torch.bfloat16) / 16).requires_grad_()
    offs = evaluation.offsets(600, 8, "skewed", device="cuda")
    y = autocutlass.grouped_mm(x, w, offs, activation="silu")
    dy = torch.randn_like(y)
    y.backward(dy)
    xr, wr = x.detach().float().requires_grad_(), w.detach().float().requires_grad_()
    start, outs = 0, []
    for g, end in enumerate(int(v) for v in offs.tolist()):
        outs.append(torch.nn.functional.silu(xr[start:end] @ wr[g]))
        start = end
    torch.cat(outs).backward(dy.float())
    assert compare(x.grad, xr.grad, 2e-2, "bf16") == (True, None)
    assert compare(w.grad, wr.grad, 2e-2, "bf16") == (True, None)


def test_bench_a_tiny_grouped_suite_on_the_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``autocutlass bench`` on two routings of one small MoE layer, served by the kernel (policy
    'heuristic'), against torch._grouped_mm and the loop."""
    import json

    from autocutlass import cli

    monkeypatch.setenv("AUTOCUTLASS_GROUPED_KERNELS", "1")
    monkeypatch.setenv("AUTOCUTLASS_DB", str(tmp_path / "db.sqlite"))
    autocutlass.reset()
    f = tmp_path / "grouped.json"
    layer = {"E": 16, "T": 1024, "N": 512, "K": 1024, "dtype": "bf16"}
    f.write_text(json.dumps({"cases": [{"name": "balanced", **layer}, {"name": "skewed", **layer,
                                                                         "routing": "skewed"}]}))  # fmt: skip
    out = tmp_path / "out"
    try:
        rc = cli.main(["bench", "--shapes", str(f), "--policy", "heuristic", "--no-first-call", "--rounds", "2",
                       "--out", str(out)])  # fmt: skip
    finally:
        autocutlass.reset()
    assert rc == 0
    rows = {r["name"]: r for r in json.loads((out / "bench.json").read_text())["cases"]}
    for r in rows.values():
        assert r["status"] == "ok" and r["verified"] and r["path"] in ("heuristic", "memo"), r
        assert r["ratio_vs_grouped_mm"] > 0 and r["ratio_vs_loop"] > 0 and len(r["rounds_ms"]["loop"]) == 2


# ---- the torch path's tail zeroing (kernels.tail_zero through ops.grouped.tail) -------------
def _poisoned(t: int, n: int, ld: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """A (t, ld) buffer of random non-zero values (NaNs in fp32) and its (t, n) view."""
    buf = torch.randn(t, ld, device="cuda").to(dtype)
    buf[buf == 0] = 1
    if dtype is torch.float32:
        buf[::3, ::2] = float("nan")
    return buf, buf[:, :n]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_the_tail_zeroing_kernel_writes_only_the_tail(dtype: torch.dtype) -> None:
    from autocutlass.ops.grouped import tail

    tail.reset()
    for t, n, ld in ((1, 1, 1), (7, 5, 8), (1000, 768, 768), (4097, 14336, 14336), (300, 3, 16)):
        for ends in ([t], [0], [t // 3, t // 2], [t // 2, t + 5], [-4], [t // 2] * 3):
            buf, y = _poisoned(t, n, ld, dtype)
            before = buf.clone()
            got = tail.zero_tail(y, torch.tensor(ends, dtype=torch.int32, device="cuda"))
            torch.cuda.synchronize()
            end = min(max(ends[-1], 0), t)
            want = before.clone()
            want[end:, :n] = 0
            assert got is y and torch.equal(buf.view(torch.uint8), want.view(torch.uint8)), (t, n, ld, ends)
    assert tail._ready[(torch.cuda.current_device(), torch.empty((), dtype=dtype).element_size())] is not None


def test_the_tail_zeroing_kernel_replays_in_a_cuda_graph_with_other_offsets() -> None:
    from autocutlass.ops.grouped import tail

    tail.reset()
    buf, y = _poisoned(512, 256, 256, torch.bfloat16)
    offs = torch.tensor([100, 512], dtype=torch.int32, device="cuda")
    tail.zero_tail(y, offs)  # readies the kernel outside the capture
    source = buf.clone()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        buf.copy_(source)
        tail.zero_tail(y, offs)
    for end in (512, 300, 0, 511):
        offs.copy_(torch.tensor([min(end, 100), end], dtype=torch.int32))
        graph.replay()
        torch.cuda.synchronize()
        want = source.clone()
        want[end:] = 0
        assert torch.equal(buf, want), end


def test_torch_path_grouped_mm_zeroes_the_tail_without_a_full_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """autocutlass.grouped_mm served by torch (the kernels gated off): the rows past offs[-1] are
    zero, the others torch._grouped_mm's, and no masked_fill runs."""
    from torch.profiler import ProfilerActivity, profile

    monkeypatch.delenv("AUTOCUTLASS_GROUPED_KERNELS", raising=False)
    autocutlass.reset()

    x = torch.randn(1000, 512, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(8, 768, 512, device="cuda", dtype=torch.bfloat16).transpose(-2, -1)
    offs = torch.tensor([100, 200, 300, 400, 500, 600, 700, 800], dtype=torch.int32, device="cuda")
    y = autocutlass.grouped_mm(x, w, offs)  # the miss: plans and readies the kernel
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        y = autocutlass.grouped_mm(x, w, offs)
        torch.cuda.synchronize()
    names = [e.name for e in prof.events()]
    assert not any("masked_fill" in n for n in names), names
    ref = torch._grouped_mm(x, w, offs)
    assert torch.equal(y[:800], ref[:800]) and not y[800:].any()

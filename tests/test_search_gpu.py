"""GPU tests of the search layer: the timing protocol, verification on CUDA tensors, a CUDA fault
contained in a worker, the finals of two configs in the real benchmark child (and a conv2d's with
cuDNN's default mode timed beside benchmark mode), and one small
problem tuned end to end with the real family and pipeline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from autocutlass.ops.gemm.problem import Major, GemmProblem

pytestmark = pytest.mark.gpu


def test_time_callable_on_torch_matmul() -> None:
    import torch

    from autocutlass.search.timing import time_callable

    a = torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16)
    d = torch.empty(2048, 2048, device="cuda", dtype=torch.bfloat16)
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    t = time_callable(lambda: torch.matmul(a, b, out=d), flush_bytes=2 * l2)
    assert 10 <= t.n <= 200
    assert 0 < t.p20_ms <= t.median_ms <= t.p80_ms < 10
    tflops = t.tflops(2 * 2048**3)
    assert 50 < tflops < 2000, tflops
    assert t.host_ms is not None and 0 < t.host_ms < 1.0, t  # issuing one torch.matmul: microseconds


def test_verify_on_cuda() -> None:
    import torch

    from autocutlass.ops.gemm.evaluation import make_inputs, reference, verify

    p = GemmProblem(m=300, n=200, k=136, b_major=Major.COL)
    inp = make_inputs(p, device="cuda")
    ref = reference(p, inp)

    def good(a: Any, b: Any, d: Any, *, alpha: float = 1.0, **kw: Any) -> None:
        d.copy_(torch.matmul(a.float(), b.float()) * alpha)

    def drops_alpha(a: Any, b: Any, d: Any, **kw: Any) -> None:
        torch.matmul(a, b, out=d)

    def half_written(a: Any, b: Any, d: Any, **kw: Any) -> None:
        d[: d.shape[0] // 2] = torch.matmul(a[: d.shape[0] // 2], b)

    assert verify(good, p, inp, ref) == (True, None)
    ok, reason = verify(drops_alpha, p, inp, ref)  # right at alpha = 1, wrong at ALPHA_CHECK
    assert not ok and reason.startswith("alpha="), reason
    ok, reason = verify(half_written, p, inp, ref)
    assert not ok and "NaN" in reason


def test_cuda_fault_is_contained_in_the_worker() -> None:
    import torch

    from autocutlass.search.workers import IsolatedWorker

    x = torch.ones(8, device="cuda")  # this process's CUDA context
    w = IsolatedWorker("_search_fakes:make_gpu_fault_handler", name="fault")
    try:
        reply = w.call({}, timeout_s=120)
    finally:
        w.close()
    assert reply.kind in ("result", "died")
    if reply.kind == "result":
        assert reply.result is not None and reply.result["state"] == "crash" and reply.result["exit"]
    assert float((x * 2).sum()) == 16.0  # still usable


def test_finals_of_two_configs_in_the_real_benchmark_child(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from autocutlass.kernels import get_family
    from autocutlass.search.workers import CandidatePipeline

    monkeypatch.setenv("AUTOCUTLASS_CACHE_DIR", str(tmp_path / "cache"))  # the bench child compiles itself
    fam = get_family("hopper_gemm")
    p = GemmProblem(m=256, n=512, k=256, b_major=Major.COL)
    configs = [fam.config_to_dict(c) for c in fam.seeds(p)[:2]]
    assert len(configs) == 2
    with CandidatePipeline(fam.name, compile_workers=1) as pipe:
        out = pipe.finals(p, configs, rounds=3)
    assert out is not None and out.rounds == 3
    assert [e.params for e in out.entries] == configs
    for e in out.entries:
        assert e.state == "ok", (e.params, e.state, e.reason)
        assert e.timing is not None and e.timing.n == 3
        assert 0 < e.timing.p20_ms <= e.timing.median_ms <= e.timing.p80_ms
        assert e.timing.host_ms is not None and e.timing.host_ms > 0  # the rounds' host times travel back
    assert out.torch is not None and out.torch.n == 3 and out.torch.median_ms > 0
    assert out.torch.host_ms is not None and out.torch.host_ms > 0


def test_conv_finals_time_cudnns_default_mode_on_a_thread_of_its_own(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """A conv2d's finals in the real benchmark child also time cuDNN outside benchmark mode (the
    ``heuristic`` variant, ``ops.conv.evaluation.baseline_variants``), which comes back beside
    torch's benchmark-mode time."""
    from autocutlass.kernels import get_family
    from autocutlass.ops.conv.problem import ConvProblem
    from autocutlass.ops.types import DType
    from autocutlass.search.workers import CandidatePipeline

    monkeypatch.setenv("AUTOCUTLASS_CACHE_DIR", str(tmp_path / "cache"))
    fam = get_family("hopper_conv")
    bf = DType.BF16
    p = ConvProblem(direction="fprop", n=4, h=28, w=28, c=128, k=128, r=3, s=3, stride_h=1, stride_w=1, pad_h=1,
                    pad_w=1, dil_h=1, dil_w=1, x_dtype=bf, w_dtype=bf, y_dtype=bf)  # fmt: skip
    configs = [fam.config_to_dict(fam.seeds(p)[0])]
    with CandidatePipeline(fam.name, compile_workers=1) as pipe:
        out = pipe.finals(p, configs, rounds=3)
    assert out is not None and out.entries[0].state == "ok", out
    assert out.torch is not None and out.torch.median_ms > 0
    assert set(out.variants) == {"heuristic"}
    heuristic = out.variants["heuristic"]
    assert heuristic.n == 3 and heuristic.median_ms > 0 and heuristic.host_ms is not None


def test_tune_one_small_problem_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from autocutlass.db import TuningStore
    from autocutlass.kernels import get_family
    from autocutlass.search import tune_problem

    monkeypatch.setenv("AUTOCUTLASS_CACHE_DIR", str(tmp_path / "cache"))  # the children's kernel cache
    store = TuningStore(tmp_path / "tuning.sqlite")
    fam = get_family("hopper_gemm")
    p = GemmProblem(m=256, n=512, k=256, b_major=Major.COL)
    r = tune_problem(p, fam, store, trials=4, compile_workers=2)
    assert r.evaluated == 4, r
    assert r.best is not None, [(f.config, f.state, f.reason) for f in r.failures]
    assert r.states.get("wrong_result", 0) == 0, [(f.config, f.reason) for f in r.failures]
    assert r.torch is not None and r.vs_torch is not None
    if r.states.get("ok", 0) >= 2:  # the finals decided, and the recorded best has their timing
        from autocutlass.search.tuner import FINAL_ROUNDS

        assert r.finals and r.best.timing is not None and r.best.timing.n == FINAL_ROUNDS, r.stop_reason
    rec = store.lookup(p, r.hard_key)
    assert rec is not None and rec.config == r.best.config
    if r.finals:  # the vendor record keeps both host times of the finals
        from autocutlass.vendor import VENDOR_FAMILY, host_times

        vend = [b for b in store.bests(vendor=True) if b.family == VENDOR_FAMILY and b.problem == p]
        assert len(vend) == 1 and host_times(vend[0].config) is not None, vend
    assert len(store.trials(p, r.hard_key)) == 4
    assert any((tmp_path / "cache").rglob("*.o")), "compile workers should have filled the kernel cache"
    # resume: nothing evaluated twice
    r2 = tune_problem(p, fam, store, trials=2, compile_workers=1)
    assert r2.skipped == 4 and len(store.finished_config_keys(p, r.hard_key, fam.name)) == 6

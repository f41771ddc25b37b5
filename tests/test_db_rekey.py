"""``autocutlass db rekey``: records are carried over a kernel-source change only where the code they
launch is byte for byte what it was.

The end-to-end test builds an "old" source tree from this one with two edits: a comment in the GEMM
kernel (the family's source hash changes, no generated code does) and the split-K reduce kernel's
block size (its code changes). A database holds two records measured "with the old tree": a plain
GEMM config, which must be carried to the installed sources, and a workspace split-K config, whose
reduce kernel changed, which must stay retired. Needs the DSL (compiles, no GPU)."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autocutlass.cli.db_rekey import decide
from autocutlass.db import TuningStore
from autocutlass.db.engine import release
from autocutlass.db.transfer import merge_snapshots, pruned, read_file, rekeyed
from autocutlass.device import HardKey, dsl_version
from autocutlass.kernels import ALL_GATES
from autocutlass.kernels import code_digest
from autocutlass.ops.gemm.problem import GemmProblem

REPO = Path(__file__).resolve().parents[1]
PLAIN = {"tile_m": 128, "tile_n": 128, "tile_k": 64}
SPLIT = {"tile_m": 128, "tile_n": 128, "tile_k": 64, "split_k": 4, "split_mode": "workspace"}


def hard_key(kernel_hash: str) -> HardKey:
    return HardKey("NVIDIA H100 80GB HBM3", "9.0", 132, dsl_version(), kernel_hash, 1)


def store_with(path: Path, records: list[tuple[GemmProblem, HardKey, str, dict, float]]) -> None:  # type: ignore[type-arg]
    store = TuningStore(path)
    try:
        for problem, hk, family, config, ms in records:
            tid = store.record_trial(problem, hk, family, config, "ok", median_ms=ms, tflops=1.0)
            store.record_best(problem, hk, family, config, ms, 1.0, trial_id=tid)
    finally:
        release(store.url)


def test_digest_gates_are_the_registry_gates() -> None:
    assert set(code_digest.GATES) == {var for _, var in ALL_GATES.values()}


def test_rekeyed_copies_the_picked_records_and_their_trials(tmp_path: Path) -> None:
    p1, p2 = GemmProblem(m=256, n=256, k=4096), GemmProblem(m=512, n=512, k=4096)
    old, vendor = hard_key("0000000000000old"), hard_key("torch-000000000000")
    store_with(tmp_path / "in.sqlite", [(p1, old, "hopper_gemm", PLAIN, 0.05), (p1, vendor, "torch", {}, 0.04),
                                        (p2, old, "hopper_gemm", SPLIT, 0.07)])  # fmt: skip
    snap = read_file(tmp_path / "in.sqlite")
    i = next(k for k, b in enumerate(snap.bests) if b.problem.key() == p1.key() and b.family == "hopper_gemm")
    merge_snapshots(snap, rekeyed(snap, {i: "0000000000000new"}), tmp_path / "out.sqlite")
    out = read_file(tmp_path / "out.sqlite")
    assert len(out.bests) == 4 and len(out.trials) == 4  # the three kept, one copy with its trial
    new = [b for b in out.bests if b.hard_key.kernel_hash == "0000000000000new"]
    assert len(new) == 1 and new[0].problem.key() == p1.key() and new[0].config == PLAIN and new[0].median_ms == 0.05
    assert new[0].trial is not None and out.trials[new[0].trial].hard_key == new[0].hard_key
    assert any(b.family == "torch" and b.hard_key == vendor for b in out.bests)


def test_pruned_drops_only_records_the_installed_sources_replace(tmp_path: Path) -> None:
    """p1 has a record of old sources and one of the installed: the old goes. p2 has only the old
    one: it stays (its problem's last record of ours), and so do its hard key's trials, p1's old
    trial included. A third hard key whose only best is replaced loses its trials and device. The
    vendor verdict stays. ``db prune`` writes the same and refuses to overwrite without --force."""
    from autocutlass.kernels import get_family

    installed = get_family("hopper_gemm").source_hash()
    p1, p2, p3 = (GemmProblem(m=256 * i, n=256, k=4096) for i in (1, 2, 3))
    old, older, new = hard_key("0000000000000old"), hard_key("00000000000older"), hard_key(installed)
    vendor = hard_key("torch-000000000000")
    store_with(tmp_path / "in.sqlite", [
        (p1, old, "hopper_gemm", PLAIN, 0.05), (p1, new, "hopper_gemm", SPLIT, 0.04), (p1, vendor, "torch", {}, 0.03),
        (p2, old, "hopper_gemm", SPLIT, 0.07), (p3, older, "hopper_gemm", PLAIN, 0.09), (p3, new, "hopper_gemm", PLAIN, 0.08),
    ])  # fmt: skip
    want = {(p1.key(), installed, "hopper_gemm"), (p1.key(), vendor.kernel_hash, "torch"),
            (p2.key(), "0000000000000old", "hopper_gemm"), (p3.key(), installed, "hopper_gemm")}  # fmt: skip
    snap, bests, trials = pruned(read_file(tmp_path / "in.sqlite"), {"hopper_gemm": installed})
    assert (bests, trials) == (2, 1)
    assert {(b.problem.key(), b.hard_key.kernel_hash, b.family) for b in snap.bests} == want
    assert sorted(t.hard_key.kernel_hash for t in snap.trials) == sorted(["0000000000000old"] * 2 + [installed] * 2 + [vendor.kernel_hash])
    assert {d.hard_key for d in snap.devices} == {old, new, vendor}
    for b in snap.bests:  # each best still points at its own trial
        t = snap.trials[b.trial] if b.trial is not None else None
        assert t is not None and t.hard_key == b.hard_key and t.problem.key() == b.problem.key()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "autocutlass.cli", "db", "prune", str(tmp_path / "in.sqlite"), "-o", str(tmp_path / "out.sqlite")]
    r = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0 and "2 best record(s)" in r.stdout, (r.stdout, r.stderr[-2000:])
    out = read_file(tmp_path / "out.sqlite")
    assert {(b.problem.key(), b.hard_key.kernel_hash, b.family) for b in out.bests} == want
    r = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 2 and "--force" in r.stderr


def test_decide_names_why_a_record_stays_retired() -> None:
    same = {"src": "new", "digests": ["a", "b"], "error": None}
    assert decide("old", "new", {**same, "src": "old"}, same) is None
    assert "changed" in (decide("old", "new", {"src": "old", "digests": ["a", "c"], "error": None}, same) or "")
    assert "--old-src has kernel sources" in (decide("old", "new", {**same, "src": "other"}, same) or "")
    assert "compile failed" in (decide("old", "new", {"src": None, "digests": [], "error": "boom"}, same) or "")


@pytest.mark.skipif(importlib.util.find_spec("cutlass") is None, reason="needs the CuTe DSL (compiles, no GPU)")
def test_rekey_carries_only_records_whose_code_is_unchanged(tmp_path: Path) -> None:
    old_tree = tmp_path / "old"
    shutil.copytree(REPO / "autocutlass", old_tree / "autocutlass", ignore=shutil.ignore_patterns("__pycache__"))
    kernel = old_tree / "autocutlass/kernels/hopper_gemm/kernel.py"
    kernel.write_text(kernel.read_text() + "\n# an edit that changes the source hash, not the code\n")
    reduce = old_tree / "autocutlass/kernels/hopper_gemm/reduce.py"
    text = reduce.read_text()
    assert "\nTHREADS = 128\n" in text
    reduce.write_text(text.replace("\nTHREADS = 128\n", "\nTHREADS = 64\n"))
    env = {**os.environ, "PYTHONPATH": str(old_tree), "CUDA_VISIBLE_DEVICES": ""}
    r = subprocess.run([sys.executable, "-c", "from autocutlass.kernels import get_family; "
                        "print(get_family('hopper_gemm').source_hash())"],
                       env=env, cwd=tmp_path, capture_output=True, text=True, check=True)  # fmt: skip
    old_hash = r.stdout.strip()
    from autocutlass.kernels import get_family

    installed = get_family("hopper_gemm").source_hash()
    assert old_hash != installed
    problem = GemmProblem(m=256, n=256, k=4096)
    split_problem = dataclasses.replace(problem, m=512)
    store_with(tmp_path / "in.sqlite", [(problem, hard_key(old_hash), "hopper_gemm", PLAIN, 0.05),
                                        (split_problem, hard_key(old_hash), "hopper_gemm", SPLIT, 0.07)])  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO), "CUDA_VISIBLE_DEVICES": ""}
    r = subprocess.run([sys.executable, "-m", "autocutlass.cli", "db", "rekey", str(tmp_path / "in.sqlite"),
                        "--old-src", str(old_tree), "-o", str(tmp_path / "out.sqlite"), "--workers", "2"],
                       env=env, cwd=tmp_path, capture_output=True, text=True, timeout=900, check=False)  # fmt: skip
    assert r.returncode == 0, r.stderr[-4000:]
    assert "1 carried" in r.stdout and "its generated code changed" in r.stdout, r.stdout
    out = read_file(tmp_path / "out.sqlite")
    carried = [b for b in out.bests if b.hard_key.kernel_hash == installed]
    assert [(b.problem.key(), b.config) for b in carried] == [(problem.key(), PLAIN)]
    assert len([b for b in out.bests if b.hard_key.kernel_hash == old_hash]) == 2  # nothing of the input lost
    # a second pass finds the carried record's problem served by the installed sources: nothing to compile
    r = subprocess.run([sys.executable, "-m", "autocutlass.cli", "db", "rekey", str(tmp_path / "out.sqlite"),
                        "--old-src", str(old_tree), "-o", str(tmp_path / "again.sqlite"), "--workers", "2"],
                       env=env, cwd=tmp_path, capture_output=True, text=True, timeout=900, check=False)  # fmt: skip
    assert r.returncode == 0 and "1 best record(s) of other kernel sources" in r.stdout, (r.stdout, r.stderr[-2000:])


@pytest.mark.skipif(importlib.util.find_spec("cutlass") is None, reason="needs the CuTe DSL (compiles, no GPU)")
def test_digests_of_one_kernel_class_in_one_process_are_both_compiled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two problems whose kernel is one compile (shapes are symbolic) digested by one worker: the
    second must compile again into its own directory, not be served from the process's memory
    (which left 50 records of the shipped H100 file unrekeyed: "no object was compiled")."""
    for name, value in code_digest.environment().items():
        monkeypatch.setenv(name, value)
    first = GemmProblem(m=256, n=256, k=4096)
    second = dataclasses.replace(first, m=512, k=8192)
    jobs = [["hopper_gemm", PLAIN, first.as_dict()], ["hopper_gemm", PLAIN, second.as_dict()]]
    a, b = (code_digest.digest_job(j) for j in jobs)
    assert a["error"] is None and b["error"] is None, (a, b)
    assert a["digests"] and a["digests"] == b["digests"]


def test_rekey_refuses_a_tree_without_the_package_and_an_existing_output(tmp_path: Path) -> None:
    store_with(tmp_path / "in.sqlite", [(GemmProblem(m=256, n=256, k=4096), hard_key("0000000000000old"), "hopper_gemm",
                                         PLAIN, 0.05)])  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO), "CUDA_VISIBLE_DEVICES": ""}

    def rekey(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "autocutlass.cli", "db", "rekey", str(tmp_path / "in.sqlite"), *args],
                              env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)  # fmt: skip

    r = rekey("--old-src", str(tmp_path), "-o", str(tmp_path / "out.sqlite"))
    assert r.returncode == 2 and "no autocutlass package" in r.stderr, r.stderr
    (tmp_path / "out.sqlite").write_text("")
    r = rekey("--old-src", str(REPO), "-o", str(tmp_path / "out.sqlite"))
    assert r.returncode == 2 and "exists" in r.stderr and (tmp_path / "out.sqlite").read_text() == "", r.stderr


def test_digest_time_limit_grows_with_the_jobs() -> None:
    """A GEMM kernel change retires ~250 records a shipped file: one compile process takes longer
    than the fixed hour over them, so the limit grows by DIGEST_JOB_S a job (per worker)."""
    from autocutlass.cli.db_rekey import DIGEST_JOB_S, DIGEST_TIMEOUT_S, digest_timeout

    assert digest_timeout(10, 1) == DIGEST_TIMEOUT_S
    assert digest_timeout(252, 1) == 252 * DIGEST_JOB_S > DIGEST_TIMEOUT_S
    assert digest_timeout(252, 4) == max(DIGEST_TIMEOUT_S, 252 * DIGEST_JOB_S / 4)
    assert digest_timeout(252, 0) == digest_timeout(252, 1)

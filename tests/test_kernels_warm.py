"""``autocutlass kernels warm``: the kernels of stored records compiled into the kernel cache without
a GPU, so that a fresh process serving those records loads them instead of compiling: one compile
per (family, config, kernel class), records of other kernel sources or DSL versions skipped and
counted, a second run finds everything cached, a database that cannot be read is a one-line error.
Two GEMM compiles and the tail-zeroing helper's two (CUTE_DSL_ARCH=sm_90a), about 30 s."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from autocutlass.cli import main
from autocutlass.device import TIMING_PROTOCOL_VERSION, HardKey, dsl_version
from autocutlass.ops.gemm.problem import GemmProblem

os.environ.setdefault("CUTE_DSL_ARCH", "sm_90a")
pytestmark = pytest.mark.compile


def _hard_key(kernel_hash: str, gpu: str = "NVIDIA H100 80GB HBM3") -> HardKey:
    return HardKey(gpu_name=gpu, cc="9.0", sm_count=132, dsl_version=dsl_version(), kernel_hash=kernel_hash,
                   protocol_version=TIMING_PROTOCOL_VERSION)  # fmt: skip


def test_warm_compiles_the_records_kernels_for_a_fresh_process(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("cutlass")
    from autocutlass.db import TuningStore
    from autocutlass.kernels.hopper_gemm import HopperGemmFamily

    fam = HopperGemmFamily(cache_dir=None)
    p1, p2 = GemmProblem(m=256, n=512, k=1024), GemmProblem(m=300, n=512, k=1024)  # one kernel class
    cfg = fam.config_to_dict(fam.seeds(p1)[0])
    db = tmp_path / "records.sqlite"
    store = TuningStore(db)
    here = _hard_key(fam.source_hash())
    store.record_best(p1, here, fam.name, cfg, 0.01, 100.0)
    store.record_best(p2, dataclasses.replace(here, gpu_name="NVIDIA H200"), fam.name, cfg, 0.01, 100.0)
    store.record_best(GemmProblem(m=64, n=64, k=64), _hard_key("0123456789abcdef"), fam.name, cfg, 0.01, 1.0)
    cache = tmp_path / "kernels"
    args = ["kernels", "warm", "--db", str(db), "--cache-dir", str(cache), "--workers", "1"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "skipped 1 record(s): measured with other kernel sources" in out, out
    assert "1 kernel(s) of 3 record(s)" in out and "2 compiled, 0 already cached, 0 failed" in out, out
    assert len(list(cache.glob("hopper_gemm-*.o"))) == 1 and len(list(cache.glob("tail_zero-*.o"))) == 2

    # a fresh process serving the record finds its kernel in the cache: nothing compiles there
    child = textwrap.dedent(f"""
        import json, sys
        from autocutlass.kernels.hopper_gemm import HopperGemmFamily, compile as c
        from autocutlass.ops.registry import problem_from_dict
        fam = HopperGemmFamily(cache_dir=__import__("pathlib").Path({str(cache)!r}))
        fam.compile(fam.config_from_dict(json.loads(sys.argv[1])), problem_from_dict(json.loads(sys.argv[2])))
        print(c.STATS.compiled, c.STATS.disk_hits)
    """)
    import json

    r = subprocess.run([sys.executable, "-c", child, json.dumps(cfg), json.dumps(p2.as_dict())], capture_output=True,
                       text=True, timeout=300, check=False)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split()[-2:] == ["0", "1"], r.stdout

    assert main(args) == 0  # again: everything is there
    assert "0 compiled, 2 already cached, 0 failed" in capsys.readouterr().out


def test_an_unreadable_database_is_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "not-a-db.sqlite"
    bad.write_bytes(b"this is not sqlite" * 100)
    assert main(["kernels", "warm", "--db", str(bad), "--cache-dir", str(tmp_path / "k"), "--workers", "1"]) != 0
    err = capsys.readouterr().err
    assert "cannot read the records of" in err and str(bad) in err and "Traceback" not in err


def test_a_missing_database_is_named_and_not_created(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nowhere.sqlite"
    assert main(["kernels", "warm", "--db", str(missing), "--cache-dir", str(tmp_path / "k"), "--workers", "1"]) != 0
    assert "cannot read the records of" in capsys.readouterr().err and not missing.exists()


def test_shipped_objects_serve_a_fresh_cache_without_compiling(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Objects warmed into a shipped archive (``AUTOCUTLASS_SHIPPED_KERNELS``; by default the
    shipped databases' ``kernels.tar.xz``) serve a process whose own kernel cache is empty: written
    into it and loaded, nothing compiled; with the shipped kernels off, the same call compiles."""
    pytest.importorskip("cutlass")
    import json

    from autocutlass.db import TuningStore
    from autocutlass.kernels.hopper_gemm import HopperGemmFamily

    fam = HopperGemmFamily(cache_dir=None)
    p = GemmProblem(m=512, n=256, k=512)
    cfg = fam.config_to_dict(fam.seeds(p)[0])
    db = tmp_path / "records.sqlite"
    TuningStore(db).record_best(p, _hard_key(fam.source_hash()), fam.name, cfg, 0.01, 100.0)
    shipped = tmp_path / "shipped" / "kernels.tar.xz"
    assert main(["kernels", "warm", "--db", str(db), "--archive", str(shipped), "--workers", "1"]) == 0
    assert "3 objects into" in capsys.readouterr().out  # the GEMM and the tail-zeroing helper's two
    import tarfile

    with tarfile.open(shipped) as tar:
        assert all(m.mtime == 0 and m.name.endswith(".o") for m in tar.getmembers())
    child = textwrap.dedent("""
        import json, sys
        from pathlib import Path
        from autocutlass.kernels.hopper_gemm import HopperGemmFamily, compile as c
        from autocutlass.ops.registry import problem_from_dict
        fam = HopperGemmFamily(cache_dir=Path(sys.argv[3]))
        fam.compile(fam.config_from_dict(json.loads(sys.argv[1])), problem_from_dict(json.loads(sys.argv[2])))
        print(c.STATS.compiled, c.STATS.shipped_hits)
    """)
    for setting, want in ((str(shipped), ["0", "1"]), ("off", ["1", "0"])):
        user = tmp_path / f"user-{setting == 'off'}"
        env = {**os.environ, "AUTOCUTLASS_SHIPPED_KERNELS": setting}
        r = subprocess.run([sys.executable, "-c", child, json.dumps(cfg), json.dumps(p.as_dict()), str(user)],
                           capture_output=True, text=True, timeout=300, check=False, env=env)  # fmt: skip
        assert r.returncode == 0, r.stderr[-2000:]
        assert r.stdout.split()[-2:] == want, (setting, r.stdout)
        assert len(list(user.glob("hopper_gemm-*.o"))) == 1  # copied (or compiled) into the user's cache


def test_an_archive_rewritten_from_an_older_one_keeps_only_the_kernels_in_use(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """Warming into an archive reuses the shipped archive it replaces (unpacked whole into the
    fresh directory), but packs only the objects the records' and seeds' kernels loaded or compiled:
    an object no record names any more (older kernel sources, a replaced record) is dropped."""
    pytest.importorskip("cutlass")
    import tarfile

    from autocutlass.cli.kernels_warm import write_archive
    from autocutlass.db import TuningStore
    from autocutlass.kernels.hopper_gemm import HopperGemmFamily

    fam = HopperGemmFamily(cache_dir=None)
    p = GemmProblem(m=512, n=256, k=512)
    db = tmp_path / "records.sqlite"
    TuningStore(db).record_best(p, _hard_key(fam.source_hash()), fam.name, fam.config_to_dict(fam.seeds(p)[0]), 0.01,
                                100.0)  # fmt: skip
    first = tmp_path / "first.tar.xz"
    assert main(["kernels", "warm", "--db", str(db), "--archive", str(first), "--workers", "1"]) == 0
    objects = tmp_path / "objects"
    objects.mkdir()
    with tarfile.open(first) as tar:
        tar.extractall(objects, filter="data")
        kept = sorted(tar.getnames())
    (objects / "hopper_gemm-0123456789abcdef01234567.o").write_bytes(b"a kernel of older sources")
    old = tmp_path / "old.tar.xz"
    assert write_archive(objects, old) == len(kept) + 1
    monkeypatch.setenv("AUTOCUTLASS_SHIPPED_KERNELS", str(old))
    capsys.readouterr()
    new = tmp_path / "new.tar.xz"
    assert main(["kernels", "warm", "--db", str(db), "--archive", str(new), "--workers", "1"]) == 0
    assert "0 compiled" in capsys.readouterr().out  # every kernel came from the old archive
    with tarfile.open(new) as tar:
        assert sorted(tar.getnames()) == kept


def test_shipped_objects_come_from_an_archive_or_a_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             caplog: pytest.LogCaptureFixture) -> None:  # fmt: skip
    import logging

    from autocutlass.cli.kernels_warm import write_archive
    from autocutlass.kernels.object_cache import ObjectCache, shipped_object

    objects = tmp_path / "objects"
    objects.mkdir()
    (objects / "fam-k1.o").write_bytes(b"one")
    (objects / "fam-k2.o").write_bytes(b"two")
    (objects / "fam-k2.so").write_bytes(b"not shipped")
    archive = tmp_path / "kernels.tar.xz"
    assert write_archive(objects, archive) == 2
    first = archive.read_bytes()
    assert write_archive(objects, archive) == 2 and archive.read_bytes() == first  # the same bytes again
    for source in (archive, objects):
        assert shipped_object(source, "fam-k2.o") == b"two" and shipped_object(source, "fam-k3.o") is None
    assert shipped_object(tmp_path / "nowhere.tar.xz", "fam-k1.o") is None
    bad = tmp_path / "bad.tar.xz"
    bad.write_bytes(b"not an archive" * 10)
    monkeypatch.setenv("AUTOCUTLASS_SHIPPED_KERNELS", str(bad))
    with caplog.at_level(logging.WARNING, logger="autocutlass"):
        assert ObjectCache("fam", "f")._from_shipped("k1", tmp_path / "cache") is None  # a miss: it compiles
    assert any("cannot use the shipped compiled kernel fam-k1.o" in m for m in caplog.messages)
    monkeypatch.setenv("AUTOCUTLASS_SHIPPED_KERNELS", "off")
    assert ObjectCache("fam", "f")._from_shipped("k1", tmp_path / "cache") is None


def test_compile_workers_turn_every_gated_family_on() -> None:
    """A stored record of a family switched off by default (the wgrad kernel) still has its kernel
    compiled: the compile processes turn on every gate there is."""
    from autocutlass.cli.kernels_warm import GATE_VARIABLES, _init_worker
    from autocutlass.kernels import GATES

    assert {var for _, var in GATES.values()} | {"AUTOCUTLASS_CONV_WGRAD"} == set(GATE_VARIABLES)
    saved = {k: os.environ.get(k) for k in (*GATE_VARIABLES, "CUTE_DSL_ARCH", "CUDA_VISIBLE_DEVICES")}
    try:
        for var in GATE_VARIABLES:
            os.environ[var] = "0"
        _init_worker("sm_90a")
        from autocutlass.settings import current

        s = current()
        assert s.grouped_kernels and s.conv_dgrad_kernel and s.conv_wgrad_kernel and s.gated_kernels
        assert s.conv_dgrad_strided_kernel
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def test_seed_jobs_are_the_seeds_of_each_case_family_once(tmp_path: Path) -> None:
    """``--seeds FILE``: the tuner's first candidates (``family.seeds``) of every case, one job per
    (family, config, kernel class): two cases of one class share their jobs."""
    import json

    from autocutlass.cli.kernels_warm import seed_jobs
    from autocutlass.kernels import get_family
    from autocutlass.ops.registry import problem_from_dict

    f = tmp_path / "shapes.json"
    f.write_text(json.dumps({"cases": [
        {"name": "a", "M": 4097, "N": 4096, "K": 4096, "dtype": "bf16", "layout": "nt"},
        {"name": "b", "M": 4100, "N": 4096, "K": 4096, "dtype": "bf16", "layout": "nt"},
        {"name": "c", "M": 4097, "N": 4096, "K": 4096, "dtype": "bf16", "layout": "nn"},
    ]}))  # fmt: skip
    jobs, n = seed_jobs([str(f)])
    fam = get_family("hopper_gemm")
    by_class: dict[object, set[str]] = {}
    for name, cfg, prob in jobs:
        assert name == "hopper_gemm"
        by_class.setdefault(problem_from_dict(prob).kernel_class_key(), set()).add(json.dumps(cfg, sort_keys=True))
    assert n == 3 and len(by_class) == 2  # nt and nn: two kernel classes
    a = problem_from_dict(jobs[0][2])
    assert by_class[a.kernel_class_key()] == {json.dumps(fam.config_to_dict(c), sort_keys=True) for c in fam.seeds(a)}


def test_seeds_of_a_missing_shapes_file_is_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "empty.sqlite"
    from autocutlass.db import TuningStore

    TuningStore(db)
    assert main(["kernels", "warm", "--db", str(db), "--cache-dir", str(tmp_path / "k"), "--seeds", str(tmp_path / "nope.json")]) != 0
    assert "--seeds" in capsys.readouterr().err


def test_an_archive_is_unpacked_once_into_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first shipped miss of a process unpacks every object of the archive into the kernel
    cache in one pass; later misses find them there (no second pass), keys the archive lacks are
    misses, objects already in the cache are kept, and a cleared cache is unpacked again."""
    from autocutlass.cli.kernels_warm import write_archive
    from autocutlass.kernels import object_cache as oc

    objects = tmp_path / "objects"
    objects.mkdir()
    for i in range(3):
        (objects / f"fam-k{i}.o").write_bytes(f"object {i}".encode())
    archive = tmp_path / "kernels.tar.xz"
    assert write_archive(objects, archive) == 3
    monkeypatch.setenv("AUTOCUTLASS_SHIPPED_KERNELS", str(archive))
    passes: list[int] = []
    real = oc.unpack_archive

    def counting(source: Path, dest: Path) -> tuple[frozenset[str], int]:
        names, written = real(source, dest)
        passes.append(written)
        return names, written

    monkeypatch.setattr(oc, "unpack_archive", counting)
    loaded: list[Path] = []
    monkeypatch.setattr(oc.ObjectCache, "_load", lambda self, path: loaded.append(path) or path.read_bytes())
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "fam-k2.o").write_bytes(b"mine")  # already in the user's cache: kept
    c = oc.ObjectCache("fam", "f")
    assert c._from_shipped("k0", cache) == b"object 0"
    assert passes == [2] and sorted(p.name for p in cache.iterdir()) == ["fam-k0.o", "fam-k1.o", "fam-k2.o"]
    assert c._from_shipped("k1", cache) == b"object 1" and c._from_shipped("k9", cache) is None
    assert passes == [2] and (cache / "fam-k2.o").read_bytes() == b"mine"
    (cache / "fam-k1.o").unlink()  # the cache was cleared meanwhile
    assert c._from_shipped("k1", cache) == b"object 1" and passes == [2, 1]
    names, written = real(archive, cache)
    assert names == {"fam-k0.o", "fam-k1.o", "fam-k2.o"} and written == 0

"""The lookups of a SQLite tuning database through the standard library (``db.sqlite_read``).

* Every lookup the store answers through ``sqlite3`` (exact, bucket, nearest, sibling, class
  winners, hard keys) equals the SQLAlchemy path's answer on the same file, for GEMM and conv
  problems, torch's recorded times and records of other GPUs and toolchains among them.
* A child process with SQLAlchemy unimportable opens the user database over shipped ones, looks
  records up and finds the same answers; a lookup creates no user database; its first write then
  imports SQLAlchemy and creates it.
* The reader's checks raise what the SQLAlchemy path raises (another schema version, another
  database's tables, a corrupt file); a file that appears after a first empty read is found; a
  connection inherited through fork is not used by the child; threads share one reader.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from autocutlass.db import LayeredStore, TuningStore, export
from autocutlass.db.location import resolve
from autocutlass.device import HardKey
from autocutlass.errors import DatabaseError, SchemaMismatch
from autocutlass.ops.conv.problem import ConvDirection, ConvProblem
from autocutlass.ops.gemm.problem import DType, GemmProblem, Major
from autocutlass.vendor import VENDOR_FAMILY

REPO = Path(__file__).resolve().parents[1]


def hk(gpu: str = "NVIDIA H100 80GB HBM3", kernel_hash: str = "k0") -> HardKey:
    return HardKey(gpu_name=gpu, cc="9.0", sm_count=132, dsl_version="4.8.1", kernel_hash=kernel_hash,
                   protocol_version=1)  # fmt: skip


H100, H200, OTHER_HASH = hk(), hk("NVIDIA H200"), hk(kernel_hash="k1")
VENDOR_KEY = hk(kernel_hash="torch-abc")


def conv(n: int, c: int, k: int, hw: int = 56, direction: ConvDirection = ConvDirection.FPROP) -> ConvProblem:
    return ConvProblem(direction=direction, n=n, h=hw, w=hw, c=c, k=k, r=3, s=3, pad_h=1, pad_w=1)


STORED: list[tuple[Any, HardKey, str, float]] = [
    (GemmProblem(m=256, n=4096, k=4096), H100, "hopper_gemm", 1.0),
    (GemmProblem(m=256, n=4096, k=4096), VENDOR_KEY, VENDOR_FAMILY, 0.9),
    (GemmProblem(m=200, n=4096, k=4096), H100, "hopper_gemm", 1.1),
    (GemmProblem(m=1024, n=4096, k=4096), H100, "hopper_gemm", 2.0),
    (GemmProblem(m=64, n=4096, k=4096), H200, "hopper_gemm", 0.5),
    (GemmProblem(m=8192, n=8192, k=8192), H200, "hopper_gemm", 9.0),
    (GemmProblem(m=256, n=4096, k=4096), OTHER_HASH, "hopper_gemm", 1.2),
    (GemmProblem(m=512, n=512, k=512, a_major=Major.COL), H100, "hopper_gemm", 0.2),
    (GemmProblem(m=512, n=512, k=512, a_dtype=DType.FP16, b_dtype=DType.FP16, d_dtype=DType.FP16), H100,
     "hopper_gemm", 0.3),
    (conv(32, 256, 256), H100, "hopper_conv", 1.5),
    (conv(64, 256, 256), H200, "hopper_conv", 2.5),
    (conv(32, 256, 256, direction=ConvDirection.DGRAD), H100, "hopper_conv_dgrad", 1.6),
]  # fmt: skip

QUERIES: list[Any] = [
    GemmProblem(m=256, n=4096, k=4096),  # exact
    GemmProblem(m=250, n=4096, k=4096),  # bucket
    GemmProblem(m=100, n=4096, k=4096),  # nearest (or a sibling's)
    GemmProblem(m=64, n=4096, k=4096),  # only a sibling's exact record
    GemmProblem(m=8000, n=8192, k=8192),
    GemmProblem(m=512, n=512, k=512, a_major=Major.COL),
    GemmProblem(m=500, n=512, k=512, a_dtype=DType.FP16, b_dtype=DType.FP16, d_dtype=DType.FP16),
    GemmProblem(m=3, n=5, k=7),  # nothing near
    conv(32, 256, 256),
    conv(16, 256, 256),
    conv(64, 256, 256),
    conv(32, 256, 256, direction=ConvDirection.DGRAD),
    conv(32, 256, 256, direction=ConvDirection.WGRAD),
]


def _fill(store: TuningStore) -> None:
    for i, (problem, key, family, ms) in enumerate(STORED):
        store.record_best(problem, key, family, {"tile": i}, ms, 100.0 / ms)


def _without_reader(path: Path, **kw: Any) -> TuningStore:
    store = TuningStore(path, **kw)
    store._reader = None  # the SQLAlchemy path, to compare with
    return store


def _answers(store: TuningStore | LayeredStore) -> list[Any]:
    out: list[Any] = []
    for q in QUERIES:
        for key in (H100, H200, OTHER_HASH, VENDOR_KEY):
            out.append(("lookup", q.key(), key.gpu_name, store.lookup(q, key)))
            out.append(("sibling", q.key(), key.gpu_name, store.lookup_sibling(q, key)))
            out.append(("class", q.key(), key.gpu_name, store.class_winners(q, key, limit=3)))
    return out


@pytest.fixture
def filled(tmp_path: Path) -> Path:
    path = tmp_path / "t.sqlite"
    _fill(TuningStore(path))
    return path


def test_every_lookup_equals_the_sqlalchemy_paths(filled: Path) -> None:
    fast, slow = TuningStore(filled), _without_reader(filled)
    assert fast._reader is not None
    got, want = _answers(fast), _answers(slow)
    assert got == want
    assert sum(a[-1] is not None and a[-1] != [] for a in got) > 30  # the queries do find records
    assert {a[-1].source for a in got if a[0] == "lookup" and a[-1]} == {"exact", "bucket", "nearest"}
    assert any(a[0] == "sibling" and a[-1] is not None and a[-1].sibling for a in got)
    assert sorted(k.key() for k in fast.hard_keys()) == sorted(k.key() for k in slow.hard_keys())
    ro, ro_slow = TuningStore(filled, read_only=True), _without_reader(filled, read_only=True)
    assert _answers(ro) == _answers(ro_slow) == want


def test_layered_lookups_equal_the_sqlalchemy_paths(tmp_path: Path, filled: Path) -> None:
    shipped_dir = tmp_path / "tuning_dbs"
    shipped_dir.mkdir()
    export(TuningStore(filled), shipped_dir / "a.sqlite")
    user = tmp_path / "user.sqlite"
    TuningStore(user).record_best(GemmProblem(m=128, n=4096, k=4096), H100, "hopper_gemm", {"tile": "user"}, 1.0, 1.0)
    fast = LayeredStore(TuningStore(user), shipped_dir)
    slow = LayeredStore(_without_reader(user), shipped_dir)
    slow._shipped = [(_without_reader(s.display, read_only=True, immutable=True), keys)
                     for s, keys in slow._shipped_stores()]  # fmt: skip
    assert _answers(fast) == _answers(slow)


_CHILD = """
import importlib.abc, json, sys
class _Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "sqlalchemy":
            raise ImportError("sqlalchemy is blocked")
sys.meta_path.insert(0, _Block())
from pathlib import Path
from autocutlass.db import LayeredStore, TuningStore
from autocutlass.db.records import hard_key_from_json
from autocutlass.ops.registry import problem_from_dict
args = json.loads(sys.argv[1])
user = TuningStore(args["user"])
layered = LayeredStore(user, Path(args["shipped"]))
out = []
for p, k in args["queries"]:
    rec = layered.lookup(problem_from_dict(p), hard_key_from_json(k))
    out.append(None if rec is None else [rec.config, rec.source, rec.origin])
    rec = layered.lookup_sibling(problem_from_dict(p), hard_key_from_json(k))
    out.append(None if rec is None else [rec.config, rec.source, rec.hard_key.gpu_name])
imported = sorted(m for m in sys.modules if m.startswith("sqlalchemy"))
created = Path(args["user"]).exists()
sys.meta_path.pop(0)
layered.record_miss(problem_from_dict(args["queries"][0][0]), hard_key_from_json(args["queries"][0][1]))
print(json.dumps({"answers": out, "imported": imported, "created_by_lookups": created,
                  "created_by_miss": Path(args["user"]).exists(), "sqlalchemy_after_miss": "sqlalchemy" in sys.modules}))
"""


def test_a_process_that_only_looks_up_never_imports_sqlalchemy(tmp_path: Path, filled: Path) -> None:
    shipped_dir = tmp_path / "tuning_dbs"
    shipped_dir.mkdir()
    export(TuningStore(filled), shipped_dir / "a.sqlite")
    user = tmp_path / "new" / "user.sqlite"
    queries = [(q.as_dict(), k.key()) for q in QUERIES for k in (H100, H200)]
    ref = LayeredStore(_without_reader(tmp_path / "ref-user.sqlite"), shipped_dir)  # empty, as the child's
    ref._shipped = [(_without_reader(s.display, read_only=True, immutable=True), keys)
                    for s, keys in ref._shipped_stores()]  # fmt: skip
    want = []
    for q in QUERIES:
        for k in (H100, H200):
            rec = ref.lookup(q, k)
            want.append(None if rec is None else [rec.config, rec.source, rec.origin])
            rec = ref.lookup_sibling(q, k)
            want.append(None if rec is None else [rec.config, rec.source, rec.hard_key.gpu_name])
    user.parent.mkdir()
    arg = json.dumps({"user": str(user), "shipped": str(shipped_dir), "queries": queries})
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(_CHILD), arg], cwd=REPO, capture_output=True, text=True,
                       timeout=300, check=False)  # fmt: skip
    assert r.returncode == 0, r.stderr[-4000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["answers"] == json.loads(json.dumps(want)) and any(out["answers"])
    assert out["imported"] == [] and out["created_by_lookups"] is False
    assert out["created_by_miss"] is True and out["sqlalchemy_after_miss"] is True  # the first write


def test_lookups_of_a_missing_file_find_nothing_and_create_nothing(tmp_path: Path) -> None:
    path = tmp_path / "later.sqlite"
    store = TuningStore(path)
    assert store.lookup(QUERIES[0], H100) is None and store.hard_keys() == [] and not path.exists()
    _fill(TuningStore(path))  # another store (another process) creates it: the next lookup finds it
    assert store.lookup(QUERIES[0], H100) is not None
    with pytest.raises(DatabaseError, match="does not exist"):
        TuningStore(tmp_path / "missing.sqlite", read_only=True).lookup(QUERIES[0], H100)


def test_checks_raise_what_the_sqlalchemy_path_raises(tmp_path: Path, filled: Path) -> None:
    def both(path: Path) -> tuple[str, str]:
        errs = []
        for store in (TuningStore(path, read_only=True), _without_reader(path, read_only=True)):
            with pytest.raises(DatabaseError) as info:
                store.lookup(QUERIES[0], H100)
            errs.append(f"{type(info.value).__name__}: {info.value}")
        return errs[0], errs[1]

    old = tmp_path / "old.sqlite"
    with sqlite3.connect(filled) as src, sqlite3.connect(old) as dst:
        src.backup(dst)  # the WAL's pages too
    with sqlite3.connect(old) as c:
        c.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    fast, slow = both(old)
    assert fast == slow and "SchemaMismatch" in fast and "autocutlass db upgrade --db" in fast
    with pytest.raises(SchemaMismatch):
        TuningStore(old).lookup(QUERIES[0], H100)

    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as c:
        c.execute("CREATE TABLE things (x)")
    fast, slow = both(other)
    assert fast == slow and "not an autocutlass tuning database" in fast

    corrupt = tmp_path / "corrupt.sqlite"
    corrupt.write_text("garbage, not sqlite\n" * 50)
    fast, slow = both(corrupt)
    assert fast == slow and "corrupt" in fast


_SHARED: list[TuningStore] = []


def _child_lookup(queue: Any) -> None:
    """In a forked child: a lookup through the store the parent had already used."""
    try:
        rec = _SHARED[0].lookup(QUERIES[0], H100)
        queue.put(None if rec is None else rec.config)
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        queue.put(f"{type(e).__name__}: {e}")


@pytest.mark.skipif(sys.platform != "linux", reason="fork")
def test_a_forked_child_opens_its_own_connection(filled: Path) -> None:
    store = TuningStore(filled)
    assert store.lookup(QUERIES[0], H100) is not None  # the parent's connection is open
    parent_conn = store._reader._conn  # type: ignore[union-attr]
    assert parent_conn is not None
    _SHARED[:] = [store]
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_child_lookup, args=(queue,))
    child.start()
    got = queue.get(timeout=60)
    child.join(60)
    assert got == {"tile": 0} and child.exitcode == 0
    assert store._reader._conn is parent_conn and store.lookup(QUERIES[0], H100) is not None  # type: ignore[union-attr]


def test_threads_share_one_reader(filled: Path) -> None:
    store = TuningStore(filled)
    want = [store.lookup(q, H100) for q in QUERIES]
    errors: list[BaseException] = []
    results: list[list[Any]] = []

    def work() -> None:
        try:
            for _ in range(20):
                results.append([store.lookup(q, H100) for q in QUERIES])
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(results) == 80 and all(r == want for r in results)


def test_sqlite_urls_resolve_without_sqlalchemy_as_sqlalchemy_reads_them(tmp_path: Path) -> None:
    from sqlalchemy.engine import make_url

    for raw in (f"sqlite:///{tmp_path}/a.sqlite", "sqlite:///rel/a.sqlite", f"sqlite:///{tmp_path}/a b#c@d.sqlite",
                f"sqlite:///{tmp_path}/a%20b.sqlite", "sqlite:///:memory:", "sqlite://"):  # fmt: skip
        loc = resolve(raw)
        db = make_url(raw).database
        if db and db != ":memory:":
            assert loc.sqlite_path == Path(db).expanduser().resolve(), raw
        else:
            assert loc.sqlite_path is None, raw
    assert os.fspath(resolve(tmp_path / "x.sqlite").sqlite_path) == str((tmp_path / "x.sqlite").resolve())


def test_a_row_whose_problem_is_not_json_is_skipped_not_raised(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "t.sqlite"
    store = TuningStore(path)
    store.record_best(GemmProblem(m=256, n=4096, k=4096), H100, "hopper_gemm", {"tile": "exact"}, 1.0, 1.0)
    store.record_best(GemmProblem(m=200, n=4096, k=4096), H100, "hopper_gemm", {"tile": "bucket"}, 1.0, 1.0)
    with sqlite3.connect(path) as c:
        c.execute("""UPDATE problems SET problem = '{not json' WHERE "key" = ?""", (QUERIES[0].key(),))
    rec = TuningStore(path).lookup(QUERIES[0], H100)
    assert rec is not None and rec.source == "bucket" and rec.config == {"tile": "bucket"}
    assert any("cannot read" in r.getMessage() for r in caplog.records)

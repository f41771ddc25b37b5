"""The kernel-source hash that keys tuning records: code counts, comments and docstrings do not."""

from __future__ import annotations

from pathlib import Path

import pytest

from autocutlass import device

SOURCE = '''"""Module doc."""
X = 1  # a comment
"""Attribute doc of X."""


def f(a):  # trailing
    """Function doc,
    two lines."""
    s = "a string that is code"
    return a + X  # why

class K:
    """Ünïcode doc."""; y = 2
'''


def test_code_only_drops_comments_docstrings_and_blank_lines() -> None:
    code = device.code_only(SOURCE)
    assert code.splitlines() == [
        "X = 1", "def f(a):", '    s = "a string that is code"', "    return a + X", "class K:", "    ; y = 2",
    ]


@pytest.mark.parametrize(
    "edit,same",
    [
        (lambda s: s.replace("# why", "# because"), True),
        (lambda s: s.replace("Function doc,", "Function docstring, reworded,"), True),
        (lambda s: s.replace("\n\n\n", "\n\n"), True),
        (lambda s: s.replace("a + X", "a - X"), False),
        (lambda s: s.replace("a string that is code", "another string"), False),
    ],
)
def test_hash_follows_code_not_prose(tmp_path: Path, edit, same: bool) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "kernel.py").write_text(SOURCE, encoding="utf-8")
    before = device.source_hash(["kernel.py"], tmp_path)
    (tmp_path / "kernel.py").write_text(edit(SOURCE), encoding="utf-8")
    assert (device.source_hash(["kernel.py"], tmp_path) == before) is same


def test_the_gemm_hash_reproduces_the_shipped_databases_hash_rule(tmp_path: Path) -> None:
    """The per-family hash over the GEMM family's files is the hash the single kernel hash was:
    the same files, paths and code-only text give the same value."""
    from autocutlass.kernels.hopper_gemm.sources import SOURCE_FILES, source_hash

    assert device.source_hash(SOURCE_FILES) == source_hash()
    assert device.source_hash(reversed(SOURCE_FILES)) == source_hash()  # order-free


def _copy_kernels(dst: Path) -> Path:
    import shutil

    shutil.copytree(device.KERNELS_DIR, dst / "kernels", ignore=shutil.ignore_patterns("__pycache__"))
    return dst / "kernels"


def test_a_second_family_never_changes_the_gemm_hash(tmp_path: Path) -> None:
    """Adding and editing another family's sources leaves the GEMM family's hash (and with it the
    hard key of every GEMM record) unchanged; editing a GEMM source changes it."""
    from autocutlass.kernels.hopper_gemm.sources import SOURCE_FILES

    root = _copy_kernels(tmp_path)
    gemm = device.source_hash(SOURCE_FILES, root)
    (root / "other_family").mkdir()
    (root / "other_family" / "kernel.py").write_text("def conv():\n    return 1\n", encoding="utf-8")
    conv_files = ("budgets.py", "other_family/kernel.py")
    conv = device.source_hash(conv_files, root)
    assert device.source_hash(SOURCE_FILES, root) == gemm
    (root / "other_family" / "kernel.py").write_text("def conv():\n    return 2\n", encoding="utf-8")
    assert device.source_hash(conv_files, root) != conv and device.source_hash(SOURCE_FILES, root) == gemm
    kernel = root / "hopper_gemm" / "kernel.py"
    kernel.write_text(kernel.read_text(encoding="utf-8") + "\nEXTRA = 1\n", encoding="utf-8")
    assert device.source_hash(SOURCE_FILES, root) != gemm


NOT_GENERATED = {"object_cache.py", "base.py", "hopper_gemm/sources.py", "hopper_gemm/__init__.py", "hopper_gemm/check.py"}
"""Kernel-package files a GEMM source may import that decide nothing the kernel generates: the
on-disk cache of compiled objects, the family ABC, the source list itself, the package, and the
feasibility rules (``check``: which problems map onto which ``Plan``; the plan, hashed, is what
is compiled, and the compile cache is keyed on it)."""


def test_the_gemm_family_hashes_every_kernel_file_its_sources_import() -> None:
    """A shared file the kernel imports but the hash misses would let an edit go unnoticed."""
    import ast

    from autocutlass.kernels.hopper_gemm.sources import SOURCE_FILES

    missing = set()
    for rel in SOURCE_FILES:
        tree = ast.parse((device.KERNELS_DIR / rel).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("autocutlass.kernels"):
                parts = node.module.split(".")[2:]
                names = [parts] if parts else [[a.name] for a in node.names]
                for p in names:
                    path = "/".join(p) + ".py"
                    if not (device.KERNELS_DIR / path).exists():
                        path = "/".join(p) + "/__init__.py"
                    if path not in SOURCE_FILES and path not in NOT_GENERATED:
                        missing.add(f"{rel} imports {path}")
    assert not missing, sorted(missing)


# ---- remembered across processes --------------------------------------------------------------
@pytest.fixture
def hash_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("AUTOCUTLASS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(device, "_KNOWN", None)
    return tmp_path / "cache" / "source-hashes.json"


def test_a_later_process_reads_the_hash_instead_of_parsing(tmp_path: Path, hash_cache: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """A first call paid 0.1-0.2 s of parsing per family; the hash is now remembered on disk."""
    (tmp_path / "k.py").write_text(SOURCE)
    first = device.source_hash(["k.py"], tmp_path)
    assert hash_cache.is_file()
    monkeypatch.setattr(device, "_KNOWN", None)  # a new process: only the file remains
    device._code_of_text.cache_clear()
    monkeypatch.setattr(device, "code_only", lambda s: pytest.fail("parsed again"))
    assert device.source_hash(["k.py"], tmp_path) == first


def test_an_edited_file_is_hashed_anew_even_at_the_same_size_and_time(tmp_path: Path, hash_cache: Path) -> None:
    import os

    f = tmp_path / "k.py"
    f.write_text(SOURCE)
    before = device.source_hash(["k.py"], tmp_path)
    st = f.stat()
    f.write_text(SOURCE.replace("a + X", "a - X"))  # same size
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))  # same modification time
    assert device.source_hash(["k.py"], tmp_path) != before
    f.write_text(SOURCE.replace("# why", "# how"))  # prose only: the same hash as the original
    assert device.source_hash(["k.py"], tmp_path) == before


def test_a_damaged_or_unwritable_cache_is_ignored(tmp_path: Path, hash_cache: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    (tmp_path / "k.py").write_text(SOURCE)
    want = device.source_hash(["k.py"], tmp_path)
    hash_cache.write_text("{not json")
    monkeypatch.setattr(device, "_KNOWN", None)
    assert device.source_hash(["k.py"], tmp_path) == want
    monkeypatch.setenv("AUTOCUTLASS_CACHE_DIR", str(tmp_path / "k.py" / "not-a-dir"))
    monkeypatch.setattr(device, "_KNOWN", None)
    assert device.source_hash(["k.py"], tmp_path) == want
    with pytest.raises(FileNotFoundError):
        device.source_hash(["missing.py"], tmp_path)

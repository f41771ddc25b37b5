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
def test_hash_follows_code_not_prose(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, edit, same: bool) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "kernel.py").write_text(SOURCE, encoding="utf-8")
    monkeypatch.setattr(device, "KERNELS_DIR", tmp_path)
    device.kernel_source_hash.cache_clear()
    try:
        before = device.kernel_source_hash()
        (tmp_path / "kernel.py").write_text(edit(SOURCE), encoding="utf-8")
        device.kernel_source_hash.cache_clear()
        assert (device.kernel_source_hash() == before) is same
    finally:
        device.kernel_source_hash.cache_clear()

"""The wheel holds every package: ``pyproject.toml`` lists packages by hand (for the tuning_dbs
mapping), so a new package directory must be added there. An editable install (CI's) finds
unlisted packages anyway; ``pip install .`` (README's main job) would not, and
``autocutlass.kernels`` would fail to import."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_directory_is_listed_in_pyproject() -> None:
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for init in (ROOT / "autocutlass").rglob("__init__.py")
        if "__pycache__" not in init.parts
    }
    assert found - listed == set(), f"packages missing from pyproject.toml: {sorted(found - listed)}"
    assert listed - found - {"autocutlass.tuning_dbs"} == set(), f"listed but absent: {sorted(listed - found)}"

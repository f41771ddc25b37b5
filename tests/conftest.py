"""Shared pytest set-up: tests marked ``gpu`` are skipped cleanly when torch sees no CUDA GPU;
``isolated_env`` gives a test module its own cache directory and environment."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

# Compiled kernels come from each test's own cache, never from the shipped ones (tuning_dbs/kernels):
# tests count compiles. A test of the shipped kernels sets its own directory.
os.environ.setdefault("AUTOCUTLASS_SHIPPED_KERNELS", "off")

import autocutlass  # noqa: E402
from autocutlass.device import gpu_available  # noqa: E402


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_items or gpu_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (torch.cuda.is_available() is False)")
    for item in gpu_items:
        item.add_marker(skip)


@pytest.fixture(scope="module")
def isolated_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One cache dir (database + compiled kernels) for the module, so kernels compile once; no
    shipped DBs, the heuristic policy, no strict mode; the environment is restored afterwards.
    Use with ``pytestmark = pytest.mark.usefixtures("isolated_env")``."""
    root = tmp_path_factory.mktemp("autocutlass")
    saved = dict(os.environ)
    os.environ.update({"AUTOCUTLASS_CACHE_DIR": str(root), "AUTOCUTLASS_SHIPPED_DBS": "off",
                       "AUTOCUTLASS_POLICY": "heuristic"})  # fmt: skip
    os.environ.pop("AUTOCUTLASS_STRICT", None)
    autocutlass.reset()
    yield root
    os.environ.clear()
    os.environ.update(saved)
    autocutlass.reset()


@pytest.fixture
def fresh_autocutlass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A test's own cache dir, no shipped databases, the default policy and no strict mode or log
    setting from the environment, and a new default dispatcher before and after the test.
    Use with ``pytestmark = pytest.mark.usefixtures("fresh_autocutlass")``."""
    for name in ("AUTOCUTLASS_POLICY", "AUTOCUTLASS_STRICT", "AUTOCUTLASS_LOG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AUTOCUTLASS_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("AUTOCUTLASS_SHIPPED_DBS", "off")
    autocutlass.reset()
    yield
    autocutlass.reset()

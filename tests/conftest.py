"""Shared pytest set-up: tests marked ``gpu`` are skipped cleanly when torch sees no CUDA GPU."""

from __future__ import annotations

import pytest

from autocutlass.device import gpu_available


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_items or gpu_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (torch.cuda.is_available() is False)")
    for item in gpu_items:
        item.add_marker(skip)

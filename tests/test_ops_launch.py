"""``ops.launch``'s weight-derived copies (``derived_per_version``): kept for the next call with the
same weight at the same version, and never kept off the device's default stream (CUDA-graph
capture, torch.compile's cudagraph trees), on CPU with a stand-in for a CUDA weight."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from autocutlass.ops import launch


class CudaWeight:
    """What ``derived_per_version`` reads of a CUDA weight: a device, a data pointer, a version."""

    is_cuda = True

    def __init__(self) -> None:
        self.t = torch.randn(4, 4)
        self._version = 0

    def get_device(self) -> int:
        return 0

    def data_ptr(self) -> int:
        return self.t.data_ptr()

    def detach(self) -> torch.Tensor:
        return self.t


def _derive_counted() -> tuple[list[int], Any]:
    made: list[int] = []

    def derive(w: torch.Tensor) -> torch.Tensor:
        made.append(1)
        return w.flip(0)

    return made, derive


@pytest.mark.parametrize("default_stream", [True, False])
def test_a_derived_copy_is_kept_on_the_default_stream_only(default_stream: bool,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.setattr(launch, "on_default_stream", lambda index: default_stream)
    w, slot = CudaWeight(), [launch.NO_VIEW]
    made, derive = _derive_counted()
    first = launch.derived_per_version(slot, w, derive)  # type: ignore[arg-type]
    again = launch.derived_per_version(slot, w, derive)  # type: ignore[arg-type]
    assert torch.equal(first, w.t.flip(0)) and torch.equal(again, first)
    # the default stream reuses the copy; a side stream (a graph's warm-up or capture) makes it
    # again and keeps nothing, so no copy of it outlives the call in the graph's pool
    assert len(made) == (1 if default_stream else 2)
    assert (slot[0] is launch.NO_VIEW) is (not default_stream)


def test_a_new_version_of_the_weight_is_derived_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(launch, "on_default_stream", lambda index: True)
    w, slot = CudaWeight(), [launch.NO_VIEW]
    made, derive = _derive_counted()
    launch.derived_per_version(slot, w, derive)  # type: ignore[arg-type]
    w.t.mul_(2)
    w._version += 1  # an optimizer step
    out = launch.derived_per_version(slot, w, derive)  # type: ignore[arg-type]
    assert len(made) == 2 and torch.equal(out, w.t.flip(0))

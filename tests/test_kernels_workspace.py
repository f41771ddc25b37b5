"""Split-K / stream-K scratch (``hopper_gemm.runner.SplitKWorkspace``), on CPU with torch.cuda's
stream queries faked: reused across calls on the device's default stream, allocated per call on
any other (CUDA-graph capture, torch.compile's cudagraph trees: a buffer kept from there would be
a live tensor in the graph's private pool)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from autocutlass.kernels.hopper_gemm.runner import SplitKWorkspace


@dataclass(frozen=True)
class FakeStream:
    cuda_stream: int


DEFAULT, SIDE = FakeStream(0), FakeStream(7)


@pytest.fixture
def on(monkeypatch: pytest.MonkeyPatch) -> list[FakeStream]:
    current = [DEFAULT]
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: current[0])
    monkeypatch.setattr(torch.cuda, "default_stream", lambda device=None: DEFAULT)
    return current


def test_default_stream_reuses_its_buffers(on: list[FakeStream]) -> None:
    ws, dev = SplitKWorkspace(), torch.device("cpu")
    work, count = ws.get(dev, 64, 8)
    assert work.numel() == 64 and count.numel() == 8 and not count.any()
    again = ws.get(dev, 32, 4)  # smaller: the same buffers
    assert again[0] is work and again[1] is count
    bigger = ws.get(dev, 128, 8)  # larger: grown once, then kept
    assert bigger[0] is not work and bigger[0].numel() == 128 and ws.get(dev, 128, 8)[0] is bigger[0]


def test_other_streams_get_fresh_zeroed_buffers_every_call(on: list[FakeStream]) -> None:
    ws, dev = SplitKWorkspace(), torch.device("cpu")
    kept = ws.get(dev, 64, 8)
    on[0] = SIDE
    a, b = ws.get(dev, 64, 8), ws.get(dev, 64, 8)
    assert a[0] is not b[0] and a[1] is not b[1]  # nothing outlives the call that asked
    assert a[0] is not kept[0] and not a[1].any() and not b[1].any()  # turnstiles zeroed each time
    a[1].fill_(3)
    assert not ws.get(dev, 64, 8)[1].any()
    on[0] = DEFAULT
    assert ws.get(dev, 64, 8)[0] is kept[0]  # the default stream's cache is untouched


def test_the_raw_stream_binding_is_asked_when_torch_has_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where torch has ``_cuda_getCurrentRawStream`` (CUDA builds) the stream handle comes from it,
    never from a ``torch.cuda.Stream`` object (5-12 us per call); side streams still get fresh
    buffers and the default stream its kept ones."""
    current = [0]
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda index: current[0], raising=False)
    monkeypatch.setattr(torch.cuda, "default_stream", lambda device=None: DEFAULT)

    def no_stream_objects(device=None):  # noqa: ANN001, ANN202
        raise AssertionError("torch.cuda.current_stream asked although the raw binding exists")

    monkeypatch.setattr(torch.cuda, "current_stream", no_stream_objects)
    ws, dev = SplitKWorkspace(), torch.device("cpu")
    kept = ws.get(dev, 64, 8)
    assert ws.get(dev, 64, 8)[0] is kept[0]
    current[0] = SIDE.cuda_stream
    assert ws.get(dev, 64, 8)[0] is not kept[0]
    current[0] = DEFAULT.cuda_stream
    assert ws.get(dev, 64, 8)[0] is kept[0]


def test_slabs_view_the_kept_buffer_with_rows_padded_to_16_bytes(on: list[FakeStream]) -> None:
    """Workspace split-K's slabs (GEMM, conv forward, wgrad runners): (S, L, M, N_pad) over the
    front of the stream's kept buffer, N padded to 4 fp32 elements; the kernel gets the buffer."""
    ws, dev = SplitKWorkspace(), torch.device("cpu")
    work, slabs = ws.slabs(dev, 3, 2, 5, 6)
    assert slabs.shape == (3, 2, 5, 8) and slabs.is_contiguous()
    assert slabs.data_ptr() == work.data_ptr() and work.numel() >= 3 * 2 * 5 * 8
    assert ws.slabs(dev, 2, 1, 4, 8)[0] is work  # smaller: the same buffer, rows of 8 unpadded
    assert ws.slabs(dev, 2, 1, 4, 8)[1].shape == (2, 1, 4, 8)

"""How many clusters of a given size can be resident at once: the persistent kernels' grid bound.

``max_active_clusters(device_index, cluster_size)`` asks the driver
(``cuOccupancyMaxActiveClusters``) for an empty kernel using all the shared memory a block may
opt into, so one CTA fits per SM and the answer is the hardware's (how the GPCs split into
clusters). It is what ``cutlass.utils.HardwareInfo.get_max_active_clusters`` computes, with the
same launch configuration, but its empty kernel is hand-written PTX loaded by the driver
(``cuLibraryLoadData``; the driver's JIT compiles it in milliseconds) instead of one the DSL
compiles, so no DSL import and no DSL compile. Like that method, it uses the calling thread's
current CUDA context and raises ``RuntimeError`` (a CUDA error) or ``ValueError`` (a bad device
or cluster size). Nothing is cached here; ``hopper_gemm.runner`` keeps one answer per (device,
cluster size).
"""

from __future__ import annotations

import threading
from typing import Any

PROBE_NAME = "autocutlass_occupancy_probe"
PROBE_PTX = (
    b".version 7.8\n"
    b".target sm_90\n"
    b".address_size 64\n"
    b"\n"
    b".visible .entry " + PROBE_NAME.encode() + b"()\n"
    b"{\n"
    b"\tret;\n"
    b"}\n\0"
)
"""An empty kernel (PTX ISA 7.8, the first with sm_90 and clusters); NUL-terminated for the driver."""
PROBE_THREADS = 128
"""Threads per block of the occupancy query (HardwareInfo's)."""

_library: list[Any] = []
_library_lock = threading.Lock()


def _check(result: tuple[Any, ...]) -> Any:
    """The value of a ``cuda.bindings.driver`` call; raises RuntimeError on a CUDA error."""
    from cuda.bindings import driver

    err = result[0]
    if int(err) != 0:
        got, name = driver.cuGetErrorName(err)
        raise RuntimeError(f"CUDA error {int(err)} ({name.decode() if int(got) == 0 and name else 'unknown'})")
    if len(result) == 1:
        return None
    return result[1] if len(result) == 2 else result[1:]


def _probe_function() -> Any:
    """The empty kernel as a function of the current context (its library loaded once)."""
    from cuda.bindings import driver

    with _library_lock:
        if not _library:
            _library.append(_check(driver.cuLibraryLoadData(PROBE_PTX, None, None, 0, None, None, 0)))
    kernel = _check(driver.cuLibraryGetKernel(_library[0], PROBE_NAME.encode()))
    return _check(driver.cuKernelGetFunction(kernel))


def max_active_clusters(device_index: int, cluster_size: int) -> int:
    """Clusters of ``cluster_size`` one-CTA-per-SM blocks that fit on device ``device_index`` at
    once (the current context's device; see the module docstring)."""
    from cuda.bindings import driver

    count = _check(driver.cuDeviceGetCount())
    if device_index >= count:
        raise ValueError(f"Device ID {device_index} is out of range for device count {count}")
    if not 1 <= cluster_size <= 32:
        raise ValueError(f"Cluster size must be between 1 and 32, {cluster_size} is not supported")
    if _check(driver.cuDriverGetVersion()) < 11080:
        raise RuntimeError("CUDA Driver version < 11.8, cannot get max active clusters")
    device = _check(driver.cuDeviceGet(device_index))
    fn = _probe_function()
    attr = driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
    max_smem = _check(driver.cuDeviceGetAttribute(attr, device))
    _check(driver.cuFuncSetAttribute(fn, driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                     max_smem))  # fmt: skip
    dyn_smem = _check(driver.cuOccupancyAvailableDynamicSMemPerBlock(fn, 1, 1))
    blocks = _check(driver.cuOccupancyMaxActiveBlocksPerMultiprocessor(fn, 1, dyn_smem))
    _check(driver.cuFuncSetAttribute(fn, driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED,
                                     1))  # fmt: skip
    config = driver.CUlaunchConfig()
    config.blockDimX, config.blockDimY, config.blockDimZ = PROBE_THREADS, 1, 1
    config.sharedMemBytes = dyn_smem
    cluster = driver.CUlaunchAttribute()
    cluster.id = driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    value = driver.CUlaunchAttributeValue()
    value.clusterDim.x, value.clusterDim.y, value.clusterDim.z = cluster_size, 1, 1
    cluster.value = value
    config.numAttrs = 1
    config.attrs = [cluster]
    config.gridDimX, config.gridDimY, config.gridDimZ = cluster_size, blocks, 1
    return int(_check(driver.cuOccupancyMaxActiveClusters(fn, config)))

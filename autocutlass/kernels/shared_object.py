"""Exported CuTe DSL objects as shared libraries, loaded through TVM-FFI without the DSL.

The DSL's ``export_to_c`` writes a relocatable object (``.o``) holding the kernels' binary and a
TVM-FFI function ``__tvm_ffi_<name>``; its other undefined symbols live in the DSL's runtime
library (``libcute_dsl_runtime.so``: the wrappers that load the CUDA library and launch) and in
``libtvm_ffi.so``. The DSL loads such an object with its own JIT linker
(``cute.runtime.load_module``, an MLIR execution engine), which needs the whole DSL imported.
Here the object is linked once into a shared library beside it (``link``: the system C
compiler driver, ``cc -shared``, naming both runtime libraries and their folders) and opened
with ``tvm_ffi.load_module`` (``load``: a ``dlopen``, no DSL). The function returned is the kind
the DSL returns (a ``tvm_ffi.Function``) and is called the same way (torch tensors, the stream
read from torch's current stream).

The runtime library is the one the DSL itself loads: the ``libcute_dsl_runtime.so`` entry of
``CUTE_DSL_LIBS`` when that (the DSL's own variable) is set, else
``<nvidia_cutlass_dsl>/cu<N>/lib/`` of the newest toolkit flavour the CUDA driver supports (the
newest installed without a driver). It is opened before a library is, so a library linked in
another process binds to this process's choice (a dependency is matched by its soname).

Nothing here imports the DSL. ``can_link()`` is False without a C compiler driver or without
the runtime libraries; callers then load objects through the DSL as before.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.util
import logging
import os
import re
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

log = logging.getLogger("autocutlass")

RUNTIME_NAME = "libcute_dsl_runtime.so"
LINKERS = ("cc", "gcc", "clang")
"""C compiler drivers tried, in order, for ``cc -shared``."""
LINK_TIMEOUT_S = 120.0


class SharedObjectError(Exception):
    """An object could not be linked, or a linked library not loaded; the message says why."""


def library_path(object_path: Path) -> Path:
    """Where the shared library linked from ``object_path`` lives: beside it, suffix ``.so``."""
    return object_path.with_suffix(".so")


@functools.cache
def linker() -> str | None:
    """The C compiler driver that links (the first of ``LINKERS`` on PATH), or None."""
    for name in LINKERS:
        found = shutil.which(name)
        if found:
            return found
    return None


def _dsl_root() -> Path | None:
    """The ``nvidia_cutlass_dsl`` folder (found without importing the DSL), or None."""
    try:
        spec = importlib.util.find_spec("nvidia_cutlass_dsl")
    except (ImportError, ValueError):
        return None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    return Path(locations[0]) if locations else None


def _driver_cuda_major() -> int | None:
    """The CUDA major version the driver supports (``cuDriverGetVersion``), or None without one."""
    try:
        libcuda = ctypes.CDLL("libcuda.so.1")
        version = ctypes.c_int(0)
        if libcuda.cuDriverGetVersion(ctypes.byref(version)) == 0:
            return version.value // 1000
    except (OSError, AttributeError):
        pass
    return None


def choose_runtime(env_libs: str | None, root: Path | None, driver_major: int | None) -> Path | None:
    """The DSL's choice of runtime library: the ``RUNTIME_NAME`` entry of ``env_libs``
    (``CUTE_DSL_LIBS``) if any; else under ``root``, ``cu<N>/lib`` of the newest flavour N the
    driver supports (N <= ``driver_major``; any N without a driver), else ``lib``; else None."""
    if env_libs:
        for entry in env_libs.split(os.pathsep):
            if entry.endswith(RUNTIME_NAME):
                return Path(entry)
    if root is None:
        return None
    flavours = []
    for d in root.glob("cu*"):
        m = re.fullmatch(r"cu(\d+)", d.name)
        if m and (d / "lib" / RUNTIME_NAME).is_file():
            flavours.append(int(m.group(1)))
    usable = sorted((f for f in flavours if driver_major is None or driver_major >= f), reverse=True)
    if usable:
        return root / f"cu{usable[0]}" / "lib" / RUNTIME_NAME
    legacy = root / "lib" / RUNTIME_NAME
    return legacy if legacy.is_file() else None


@functools.cache
def runtime_libraries() -> tuple[Path, Path] | None:
    """(the DSL's runtime library, ``libtvm_ffi.so``) as the DSL would load them, or None."""
    runtime = choose_runtime(os.environ.get("CUTE_DSL_LIBS"), _dsl_root(), _driver_cuda_major())
    try:
        import tvm_ffi.libinfo

        ffi = Path(tvm_ffi.libinfo.find_libtvm_ffi())
    except (ImportError, RuntimeError, OSError):
        return None
    if runtime is None or not runtime.is_file() or not ffi.is_file():
        return None
    return runtime, ffi


def can_link() -> bool:
    """Whether objects can be linked and loaded here without the DSL."""
    return linker() is not None and runtime_libraries() is not None


def link(object_path: Path, out: Path) -> None:
    """Link the exported object ``object_path`` into the shared library ``out``, atomically (a
    temporary file in the same folder, then ``os.replace``). Every symbol must resolve against
    the two runtime libraries (``--no-undefined``) and is bound when the library is opened
    (``-z now``), so a mismatch fails here or in ``load``, never at a call. Raises
    ``SharedObjectError`` (the linker's message) and ``OSError`` (the folder)."""
    cc, libs = linker(), runtime_libraries()
    if cc is None or libs is None:
        raise SharedObjectError("no C compiler driver or no CuTe DSL runtime library to link with")
    runtime, ffi = libs
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=out.name, suffix=".tmp.so")
    os.close(fd)
    try:
        cmd = [cc, "-shared", "-o", tmp, str(object_path),
               f"-L{runtime.parent}", "-l:" + runtime.name, f"-L{ffi.parent}", "-l:" + ffi.name,
               f"-Wl,-rpath,{runtime.parent}", f"-Wl,-rpath,{ffi.parent}", "-Wl,--no-undefined", "-Wl,-z,now"]  # fmt: skip
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=LINK_TIMEOUT_S, check=False)
        except (subprocess.TimeoutExpired, OSError) as e:
            raise SharedObjectError(f"{Path(cc).name} -shared {object_path.name}: {e}") from e
        if r.returncode != 0:
            raise SharedObjectError(f"{Path(cc).name} -shared {object_path.name} failed: {r.stderr.strip()[-500:]}")
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


_opened: list[Any] = []
_open_lock = threading.Lock()


def _open_runtime_libraries() -> None:
    """Open the runtime libraries once, so every library binds to these (matched by soname)."""
    with _open_lock:
        if _opened:
            return
        libs = runtime_libraries()
        if libs is None:
            raise SharedObjectError("the CuTe DSL runtime library or libtvm_ffi.so was not found")
        _opened.extend(ctypes.CDLL(str(p)) for p in libs)


def load(path: Path, function_name: str) -> Any:
    """The TVM-FFI function ``function_name`` of the shared library at ``path``; the library stays
    loaded for the process's life. Raises ``SharedObjectError`` when it cannot be opened or has
    no such function."""
    import tvm_ffi

    try:
        _open_runtime_libraries()
        module = tvm_ffi.load_module(str(path))
        return getattr(module, function_name)
    except SharedObjectError:
        raise
    except Exception as e:  # noqa: BLE001 - dlopen and TVM-FFI raise several types; all mean "unusable"
        raise SharedObjectError(f"cannot load {path.name}: {type(e).__name__}: {e}") from e

"""The caches of compiled CuTe DSL functions: in the process, and on disk as exported objects.

``ObjectCache(prefix, function_name).get(key, cache_dir, build)`` returns the function of
``key``: from memory; else from ``<cache_dir>/<prefix>-<key>.o``; else ``build()``, exported to
that file atomically (a temp file in the same folder, then ``os.replace``) and loaded back.
``find(key, cache_dir)`` is the same without the build. One lock per prefix serialises builds; a
memory hit takes no lock. The caller's ``key`` must cover everything the generated code depends
on (DSL version, sources, class, target arch).

**Loading without the DSL.** An object is linked once into ``<prefix>-<key>.so`` beside it
(``kernels.shared_object``: ``cc -shared`` against the DSL's runtime library) and that library
is opened with TVM-FFI: a process that only serves cached kernels never imports the DSL. Where
no C compiler driver or runtime library is found, or linking or loading fails, the object is
loaded through the DSL (``cute.runtime.load_module``, TVM-FFI) as before. An object that neither
way can load is corrupt: reported, removed (with its library) and rebuilt. The ``.o`` is the
cache entry; the ``.so`` is derived from it and made again when missing or unusable.

Caches of one prefix share their state (memory, counters, lock) in a process, so a module that
serves from the cache without the DSL (``kernels.helpers``) and the module that compiles (and
imports the DSL) may each make one.

Used by ``hopper_gemm.compile`` (the GEMM), ``hopper_conv.compile``, ``hopper_gemm.reduce``
(split-K reduce), ``transpose`` and ``helpers``.

**Shipped kernels.** On a miss in ``cache_dir``, the object of the same key is looked for in
``shipped_kernels()`` (``tuning_dbs/kernels.tar.xz``: the kernels the shipped databases' records
run, compiled by ``autocutlass kernels warm --archive``; or a directory of objects): found, it is
written into ``cache_dir`` and loaded as a disk hit, so a fresh machine's first call loads instead of compiling. The key (DSL version,
sources, target architecture) decides, as for the user's own cache: an object of other sources
is never found. An archive is unpacked whole into ``cache_dir`` on the first such miss of a process
(``unpack_archive``: one pass, one decompression; objects already there are kept): an xz stream
cannot seek, so reading one member costs a decompression of everything before it, about 80 ms
per kernel for today's archive on a CPU core, paid by each new kernel a fresh process loaded.
"""

from __future__ import annotations

import logging
import lzma
import os
import tarfile
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autocutlass.kernels import shared_object

log = logging.getLogger("autocutlass")


DSL_FREE_LOAD_ENV = "AUTOCUTLASS_DSL_FREE_LOAD"
"""On unless ``0``: load cached kernels by linking each object into a shared library opened with
TVM-FFI, without importing the DSL (``kernels.shared_object``); where no linker is found, or with
``0``, objects load through the DSL's ``cute.runtime.load_module``. On by default since it served
the whole GPU test suite and the cold-start probe on an H200 (2026-11-23: first call 1.0-1.3 s after
the imports, the kernel's load 0.07 s of it)."""


def dsl_free_load() -> bool:
    """Whether cached kernels load without the DSL (unless ``AUTOCUTLASS_DSL_FREE_LOAD=0``)."""
    return os.environ.get(DSL_FREE_LOAD_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


@dataclass
class CacheStats:
    compiled: int = 0
    disk_hits: int = 0
    memory_hits: int = 0
    shipped_hits: int = 0
    """Disk hits whose object came from the shipped kernels (copied into the cache first)."""


SHIPPED_KERNELS_ENV = "AUTOCUTLASS_SHIPPED_KERNELS"
"""Compiled objects shipped beside the tuning databases: a ``.tar.xz`` of ``<prefix>-<key>.o``
files or a directory of them (default: the shipped databases' ``kernels.tar.xz``, none when
``AUTOCUTLASS_SHIPPED_DBS=off``); ``off`` disables them."""

SHIPPED_KERNELS_ARCHIVE = "kernels.tar.xz"


def shipped_kernels() -> Path | None:
    """Where shipped compiled objects are looked for on a cache miss (an archive or a directory),
    or None. Read at each miss (not on the hit path), from the environment."""
    raw = os.environ.get(SHIPPED_KERNELS_ENV)
    if raw is not None and raw.strip():
        return None if raw.strip().lower() == "off" else Path(raw).expanduser()
    from autocutlass.settings import current

    shipped = current().shipped_dbs_dir
    return None if shipped is None else shipped / SHIPPED_KERNELS_ARCHIVE


_ARCHIVE_NAMES: dict[tuple[Path, float], frozenset[str]] = {}
_ARCHIVE_LOCK = threading.Lock()


def shipped_object(source: Path, name: str) -> bytes | None:
    """The bytes of object ``name`` in ``source`` (an archive or a directory), or None."""
    if source.is_dir():
        path = source / name
        return path.read_bytes() if path.is_file() else None
    if not source.is_file():
        return None
    key = (source, source.stat().st_mtime)
    with _ARCHIVE_LOCK:  # the member list, read once per archive and process (one decompression)
        names = _ARCHIVE_NAMES.get(key)
        if names is None:
            with tarfile.open(source, "r:xz") as tar:
                names = frozenset(tar.getnames())
            _ARCHIVE_NAMES[key] = names
    if name not in names:
        return None
    with tarfile.open(source, "r:xz") as tar:
        member = tar.extractfile(name)
        return None if member is None else member.read()


_UNPACKED: dict[tuple[Path, float, Path], frozenset[str]] = {}
"""(archive, its mtime, cache dir) -> the object names this process unpacked from it (empty
after a failure: the archive is not read again)."""


def _write_atomic(path: Path, data: bytes) -> None:
    """``data`` into ``path`` through a temp file in the same folder and ``os.replace``."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp.o")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def unpack_archive(source: Path, dest: Path) -> tuple[frozenset[str], int]:
    """Write every object of the archive ``source`` that ``dest`` lacks into ``dest`` (each
    atomically), reading the archive once from start to end; returns the archive's object names
    and how many were written. Members other than plain ``*.o`` files at the archive's top level
    are skipped."""
    dest.mkdir(parents=True, exist_ok=True)
    names: set[str] = set()
    written = 0
    with tarfile.open(source, "r|xz") as tar:
        for member in tar:
            name = member.name
            if not member.isfile() or not name.endswith(".o") or Path(name).name != name or name.startswith("."):
                continue
            names.add(name)
            target = dest / name
            if target.exists():
                continue
            data = tar.extractfile(member)
            if data is not None:
                _write_atomic(target, data.read())
                written += 1
    return frozenset(names), written


def _unpacked(source: Path, dest: Path, name: str) -> bool:
    """Whether object ``name`` of the archive ``source`` is in ``dest``, unpacking the archive
    there the first time this process asks (again when a listed object went missing since: the
    cache was cleared). A failure is raised once; the archive is not read again."""
    key = (source, source.stat().st_mtime, dest)
    with _ARCHIVE_LOCK:
        names = _UNPACKED.get(key)
        if names is None or (name in names and not (dest / name).is_file()):
            _UNPACKED[key] = frozenset()
            names, written = unpack_archive(source, dest)
            _UNPACKED[key] = names
            log.debug("unpacked %d shipped compiled kernels from %s into %s", written, source, dest)
    return name in names and (dest / name).is_file()


@dataclass
class _State:
    memory: dict[str, Any] = field(default_factory=dict)
    stats: CacheStats = field(default_factory=CacheStats)
    lock: threading.Lock = field(default_factory=threading.Lock)


_STATES: dict[tuple[str, str], _State] = {}
_STATES_LOCK = threading.Lock()
_TOUCHED: set[str] = set()
"""File names of the objects this process loaded from a cache directory or wrote there
(``touched_objects``)."""


def touched_objects() -> frozenset[str]:
    """The names (``<prefix>-<key>.o``) of the objects this process has loaded from a cache
    directory (written there by a compile, or unpacked from the shipped kernels) or compiled
    into one: what ``kernels warm --archive`` packs, not every object an unpacked archive left
    beside them."""
    with _STATES_LOCK:
        return frozenset(_TOUCHED)


def _touch(path: Path) -> None:
    with _STATES_LOCK:
        _TOUCHED.add(path.name)
_no_linker_logged: list[bool] = []


class ObjectCache:
    """Compiled functions by key, in memory and as ``<prefix>-<key>.o`` files."""

    def __init__(self, prefix: str, function_name: str) -> None:
        self.prefix = prefix
        self.function_name = function_name
        with _STATES_LOCK:
            state = _STATES.setdefault((prefix, function_name), _State())
        self.memory = state.memory
        self.stats = state.stats
        self._lock = state.lock

    @staticmethod
    def total_compiled() -> int:
        """Functions compiled in this process, over every cache prefix."""
        with _STATES_LOCK:
            return sum(state.stats.compiled for state in _STATES.values())

    def path(self, cache_dir: Path, key: str) -> Path:
        return cache_dir / f"{self.prefix}-{key}.o"

    def find(self, key: str, cache_dir: Path | None) -> Any | None:
        """The function of ``key`` from memory or from disk, or None; never builds."""
        fn = self.memory.get(key)
        if fn is not None:
            self.stats.memory_hits += 1
            return fn
        if cache_dir is None:
            return None
        with self._lock:
            return self._find_locked(key, cache_dir)

    def _find_locked(self, key: str, cache_dir: Path | None) -> Any | None:
        fn = self.memory.get(key)
        if fn is None and cache_dir is not None:
            fn = self._load(self.path(cache_dir, key))
            if fn is None:
                fn = self._from_shipped(key, cache_dir)
            if fn is not None:
                self.stats.disk_hits += 1
                self.memory[key] = fn
                _touch(self.path(cache_dir, key))
        return fn

    def _from_shipped(self, key: str, cache_dir: Path) -> Any | None:
        """The shipped object of ``key`` (``shipped_kernels``), written into ``cache_dir``
        atomically and loaded from there (its linked library is made beside it: the shipped
        files may be read-only), or None when none is shipped or it cannot be used."""
        source = shipped_kernels()
        if source is None:
            return None
        path = self.path(cache_dir, key)
        try:
            if source.is_file():  # an archive: every object it holds, unpacked in one pass
                if not _unpacked(source, cache_dir, path.name):
                    return None
            else:
                data = shipped_object(source, path.name)
                if data is None:
                    return None
                path.parent.mkdir(parents=True, exist_ok=True)
                _write_atomic(path, data)
        except (OSError, tarfile.TarError, EOFError, lzma.LZMAError) as e:
            log.warning("cannot use the shipped compiled kernel %s from %s: %s", path.name, source, e)
            return None
        fn = self._load(path)
        if fn is not None:
            self.stats.shipped_hits += 1
        return fn

    def get(self, key: str, cache_dir: Path | None, build: Callable[[], Any]) -> Any:
        fn = self.memory.get(key)
        if fn is not None:
            self.stats.memory_hits += 1
            return fn
        with self._lock:
            fn = self._find_locked(key, cache_dir)
            if fn is not None:
                return fn
            fn = build()
            self.stats.compiled += 1
            if cache_dir is not None:
                path = self.path(cache_dir, key)
                try:
                    self._save(fn, path)
                    _touch(path)
                    loaded = self._load(path)
                    fn = loaded if loaded is not None else fn
                except OSError as e:
                    log.warning("cannot write compiled-kernel cache %s: %s", path, e)
            self.memory[key] = fn
            return fn

    def _load(self, path: Path) -> Any | None:
        """The cached function at ``path``, or None (missing, or corrupt: then reported and removed).
        Through the linked library without the DSL where possible, else through the DSL."""
        if not path.is_file():
            return None
        lib = shared_object.library_path(path)
        why_not = ""
        if dsl_free_load() and shared_object.can_link():
            try:
                return self._load_linked(path, lib)
            except (shared_object.SharedObjectError, OSError) as e:
                why_not = f"; without the DSL: {e}"
                log.info("compiled-kernel cache entry %s: not loadable without the DSL (%s); loading it "
                         "through the DSL", path, e)  # fmt: skip
        elif not _no_linker_logged:
            _no_linker_logged.append(True)
            log.info("no C compiler driver (%s) or CuTe DSL runtime library found: cached kernels are loaded "
                     "through the DSL, which is imported for it", "/".join(shared_object.LINKERS))  # fmt: skip
        try:
            return self._load_with_dsl(path)
        except ImportError:
            raise  # no DSL in this process: not a property of the file
        except Exception as e:  # noqa: BLE001 - a corrupt cache entry is a miss, reported once
            log.warning("compiled-kernel cache entry %s is unusable (%s: %s%s); recompiling", path,
                        type(e).__name__, e, why_not)  # fmt: skip
            for p in (path, lib):
                try:
                    p.unlink()
                except OSError:
                    pass
            return None

    def _load_linked(self, path: Path, lib: Path) -> Any:
        """The function from ``lib`` (linked from ``path`` first when missing or unusable)."""
        if lib.is_file():
            try:
                return shared_object.load(lib, self.function_name)
            except shared_object.SharedObjectError:
                lib.unlink(missing_ok=True)  # stale or damaged: link it anew
        shared_object.link(path, lib)
        return shared_object.load(lib, self.function_name)

    def _load_with_dsl(self, path: Path) -> Any:
        from cutlass import cute

        module = cute.runtime.load_module(str(path), enable_tvm_ffi=True)
        return getattr(module, self.function_name)

    def _save(self, fn: Any, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp.o")
        os.close(fd)
        try:
            fn.export_to_c(tmp, function_name=self.function_name)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

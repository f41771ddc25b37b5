"""The caches of compiled CuTe DSL functions: in the process, and on disk as exported objects.

``ObjectCache(prefix, function_name).get(key, cache_dir, build)`` returns the function of
``key``: from memory; else from ``<cache_dir>/<prefix>-<key>.o`` (``cute.runtime.load_module``
with TVM-FFI; a corrupt file is reported, removed and rebuilt); else ``build()``, exported to
that file atomically (a temp file in the same folder, then ``os.replace``) and loaded back.
One lock per cache serialises builds; a memory hit takes no lock. The caller's ``key`` must
cover everything the generated code depends on (DSL version, sources, class, target arch).

Used by ``hopper_gemm.compile`` (the GEMM), ``hopper_gemm.reduce`` (split-K reduce) and
``transpose``.
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger("autocutlass")


@dataclass
class CacheStats:
    compiled: int = 0
    disk_hits: int = 0
    memory_hits: int = 0


class ObjectCache:
    """Compiled functions by key, in memory and as ``<prefix>-<key>.o`` files."""

    def __init__(self, prefix: str, function_name: str) -> None:
        self.prefix = prefix
        self.function_name = function_name
        self.memory: dict[str, Any] = {}
        self.stats = CacheStats()
        self._lock = threading.Lock()

    def path(self, cache_dir: Path, key: str) -> Path:
        return cache_dir / f"{self.prefix}-{key}.o"

    def get(self, key: str, cache_dir: Path | None, build: Callable[[], Any]) -> Any:
        fn = self.memory.get(key)
        if fn is not None:
            self.stats.memory_hits += 1
            return fn
        with self._lock:
            fn = self.memory.get(key)
            if fn is not None:
                return fn
            path = self.path(cache_dir, key) if cache_dir is not None else None
            if path is not None:
                fn = self._load(path)
                if fn is not None:
                    self.stats.disk_hits += 1
            if fn is None:
                fn = build()
                self.stats.compiled += 1
                if path is not None:
                    try:
                        self._save(fn, path)
                        loaded = self._load(path)
                        fn = loaded if loaded is not None else fn
                    except OSError as e:
                        log.warning("cannot write compiled-kernel cache %s: %s", path, e)
            self.memory[key] = fn
            return fn

    def _load(self, path: Path) -> Any | None:
        """The cached function at ``path``, or None (missing, or corrupt: then reported and removed)."""
        if not path.is_file():
            return None
        from cutlass import cute

        try:
            module = cute.runtime.load_module(str(path), enable_tvm_ffi=True)
            return getattr(module, self.function_name)
        except Exception as e:  # noqa: BLE001 - a corrupt cache entry is a miss, reported once
            log.warning("compiled-kernel cache entry %s is unusable (%s: %s); recompiling", path, type(e).__name__, e)
            try:
                path.unlink()
            except OSError:
                pass
            return None

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

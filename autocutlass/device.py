"""What GPU and toolchain we run on: ``DeviceInfo`` and the *hard key* of tuning records.

A tuning record measured on one GPU/toolchain is never used as if it were measured on another.
The hard key is GPU name + compute capability + SM count + nvidia-cutlass-dsl version + the
content hash of the record's kernel family's sources + the timing-protocol version. Everything else in
``DeviceInfo`` (memory sizes, driver) is informative. A record whose hard key differs only in the
GPU name (``HardKey.is_sibling_of``: an H200's record on an H100) is a *sibling* record: dispatch
uses it as a seed and as a marked stand-in after this GPU's own records, never as this GPU's own.

Nothing here queries the GPU at import time; ``current_device()`` reads once per process and
device index and caches the answer.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.metadata
import io
import json
import tokenize
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from autocutlass.errors import NoGPU

TIMING_PROTOCOL_VERSION = 1
"""Version of the timing protocol in ``autocutlass.search.timing``; bump it when that changes."""

KERNELS_DIR = Path(__file__).resolve().parent / "kernels"


@dataclass(frozen=True)
class HardKey:
    """The fields a tuning record must share with this machine to be trusted here."""

    gpu_name: str
    cc: str  # "9.0"
    sm_count: int
    dsl_version: str
    kernel_hash: str
    protocol_version: int

    def key(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))

    def digest(self) -> str:
        return hashlib.sha256(self.key().encode()).hexdigest()[:16]

    def is_sibling_of(self, other: HardKey) -> bool:
        """True when ``other`` was measured on another GPU model of the same architecture and SM
        count (an H200 for an H100 and the other way round), with everything else equal: the same
        compute capability, SM count, DSL version, kernel sources and timing protocol, and another
        GPU name. Its records are a *sibling's*: good seeds and a marked stand-in, never taken as
        measured here (the hard key stays exact)."""
        return (
            self.gpu_name != other.gpu_name
            and self.cc == other.cc
            and self.sm_count == other.sm_count
            and self.dsl_version == other.dsl_version
            and self.kernel_hash == other.kernel_hash
            and self.protocol_version == other.protocol_version
        )


@dataclass(frozen=True)
class DeviceInfo:
    """A GPU and the toolchain around it, read once."""

    index: int
    gpu_name: str
    cc_major: int
    cc_minor: int
    sm_count: int
    max_smem_per_block_optin: int  # bytes of dynamic shared memory a block may opt into
    l2_bytes: int
    total_memory_bytes: int
    driver_version: str
    cuda_runtime_version: str
    dsl_version: str
    torch_version: str
    uuid: str = ""
    """The GPU's UUID (informative, never matched: per-GPU locks key on it), '' when unknown."""

    @property
    def cc(self) -> str:
        return f"{self.cc_major}.{self.cc_minor}"

    @property
    def arch(self) -> str:
        """The DSL's target name: sm_90a for Hopper (the 'a' features: WGMMA, setmaxnreg)."""
        suffix = "a" if (self.cc_major, self.cc_minor) == (9, 0) else ""
        return f"sm_{self.cc_major}{self.cc_minor}{suffix}"

    def hard_key(self, kernel_hash: str) -> HardKey:
        """The hard key of records of a kernel family whose sources hash to ``kernel_hash``
        (``KernelFamily.source_hash()``) measured on this device."""
        return HardKey(
            gpu_name=self.gpu_name,
            cc=self.cc,
            sm_count=self.sm_count,
            dsl_version=self.dsl_version,
            kernel_hash=kernel_hash,
            protocol_version=TIMING_PROTOCOL_VERSION,
        )

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def dsl_version() -> str:
    """Installed nvidia-cutlass-dsl version, or 'none'."""
    try:
        return importlib.metadata.version("nvidia-cutlass-dsl")
    except importlib.metadata.PackageNotFoundError:
        return "none"


def code_only(source: str) -> str:
    """``source`` without its comments, string statements (docstrings, including attribute
    docstrings) and blank lines, with trailing spaces cut: what remains is the code. The spans
    come from ``ast`` and ``tokenize`` positions in the text itself, so the result does not
    depend on how a Python version prints trees or tokenizes f-strings."""
    lines = source.splitlines()
    cuts: list[tuple[int, int, int, int]] = []  # (first line, first col, last line, end col), 1-based lines, char cols
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            assert node.end_lineno is not None and node.end_col_offset is not None
            # ast columns count UTF-8 bytes; convert them to characters of the line.
            c0 = len(lines[node.lineno - 1].encode()[: node.col_offset].decode())
            c1 = len(lines[node.end_lineno - 1].encode()[: node.end_col_offset].decode())
            cuts.append((node.lineno, c0, node.end_lineno, c1))
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            cuts.append((tok.start[0], tok.start[1], tok.end[0], tok.end[1]))
    for l0, c0, l1, c1 in sorted(cuts, reverse=True):
        head, tail = lines[l0 - 1][:c0], lines[l1 - 1][c1:]
        lines[l0 - 1 : l1] = [head + tail] + [""] * (l1 - l0)
    return "\n".join(line.rstrip() for line in lines if line.strip())


def source_hash(files: Iterable[str], kernels_dir: Path | None = None) -> str:
    """sha256 (16 hex digits) over the code of ``files``, paths relative to ``autocutlass/kernels``
    (``code_only``: editing a comment or a docstring keeps the hash). A kernel family hashes its
    own sources and the shared files it imports (``KernelFamily.SOURCE_FILES``), so editing one
    family never retires another family's tuning records.

    Parsing a family's files costs 0.1-0.2 s, which a process's first call paid once per family
    it looked up (a ResNet-50's first forward from the shipped databases: 2 of its 2.6 s on an
    H100). So the answer is remembered, in the process and in ``source-hashes.json`` of the cache
    directory (``AUTOCUTLASS_CACHE_DIR``), keyed by a sha256 of the files' paths and bytes: any
    change to a file is a new key; an unwritable or damaged cache file is ignored."""
    root = KERNELS_DIR if kernels_dir is None else kernels_dir
    rels = sorted(set(files))
    raw = hashlib.sha256(f"v{CODE_ONLY_VERSION}".encode())
    for rel in rels:  # the files' bytes (a read and a sha256: well under a millisecond)
        raw.update(Path(rel).as_posix().encode() + b"\0" + (root / rel).read_bytes() + b"\0")
    key = raw.hexdigest()
    known = _known_hashes()
    got = known.get(key)
    if got is None:
        got = _hash_sources(root, rels)
        known[key] = got
        _save_known_hashes(known)
    return got


CODE_ONLY_VERSION = 1
"""Part of ``source_hash``'s cache keys: bump it when ``code_only`` changes what it keeps."""

_KNOWN: dict[str, str] | None = None
_KNOWN_FILE = "source-hashes.json"
_KNOWN_MAX = 256
"""Entries kept in the cache file (the newest; a process writes only the ones it computed)."""


def _hash_sources(root: Path, rels: list[str]) -> str:
    h = hashlib.sha256()
    for rel in rels:
        h.update(Path(rel).as_posix().encode())
        h.update(b"\0")
        h.update(_code_of(root / rel).encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


@functools.lru_cache(maxsize=128)
def _code_of_text(text: str) -> str:
    return code_only(text)


def _code_of(path: Path) -> str:
    """``code_only`` of the file at ``path``, parsed once per process per content (families share
    files: the GEMM kernel, the budgets)."""
    return _code_of_text(path.read_text(encoding="utf-8"))


def _known_path() -> Path:
    from autocutlass.settings import cache_dir_from_env

    return cache_dir_from_env() / _KNOWN_FILE


def _known_hashes() -> dict[str, str]:
    global _KNOWN
    if _KNOWN is None:
        try:
            data = json.loads(_known_path().read_text(encoding="utf-8"))
            _KNOWN = {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}
        except (OSError, ValueError):
            _KNOWN = {}
    return _KNOWN


def _save_known_hashes(known: dict[str, str]) -> None:
    import os
    import tempfile

    path = _known_path()
    keep = dict(list(known.items())[-_KNOWN_MAX:])
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(keep, f)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only cache directory: the hashes are computed again in the next process


def gpu_available() -> bool:
    """True when torch sees a CUDA device. Never raises."""
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001 - a broken CUDA install means "no GPU" here
        return False


def _driver_version() -> str:
    try:
        from cuda.bindings import driver

        err, v = driver.cuDriverGetVersion()
        if int(err) == 0:
            return f"{v // 1000}.{(v % 1000) // 10}"
    except ImportError:
        pass
    return "unknown"


@functools.cache
def current_device(index: int | None = None) -> DeviceInfo:
    """DeviceInfo of CUDA device ``index`` (default: torch's current device). Raises NoGPU."""
    if not gpu_available():
        raise NoGPU("no CUDA GPU is visible to this process (torch.cuda.is_available() is False)")
    import torch

    idx = torch.cuda.current_device() if index is None else index
    props = torch.cuda.get_device_properties(idx)
    smem_optin = int(getattr(props, "shared_memory_per_block_optin", 0) or 0)
    if smem_optin == 0:
        smem_optin = 227 * 1024 if props.major == 9 else 99 * 1024
    return DeviceInfo(
        index=idx,
        gpu_name=str(props.name),
        cc_major=int(props.major),
        cc_minor=int(props.minor),
        sm_count=int(props.multi_processor_count),
        max_smem_per_block_optin=smem_optin,
        l2_bytes=int(getattr(props, "L2_cache_size", 0) or 0),
        total_memory_bytes=int(props.total_memory),
        driver_version=_driver_version(),
        cuda_runtime_version=str(torch.version.cuda),
        dsl_version=dsl_version(),
        torch_version=str(torch.__version__),
        uuid=str(getattr(props, "uuid", "") or ""),
    )

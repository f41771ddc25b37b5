"""The exceptions autocutlass raises. Catch these types, never match message text."""

from __future__ import annotations


class AutocutlassError(Exception):
    """Base class of every error autocutlass raises on purpose."""


class UnsupportedProblem(AutocutlassError):
    """The problem (tensors, dtypes, device, layout) is outside what autocutlass serves.

    Dispatch falls back to torch unless ``AUTOCUTLASS_STRICT=1``.
    """


class CantImplement(AutocutlassError):
    """A (config, problem) pair is infeasible; ``reason`` says which budget or rule it breaks."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class KernelCompileError(AutocutlassError):
    """The DSL failed to compile a configuration that ``check`` accepted (a bug to report)."""


class DatabaseError(AutocutlassError):
    """The tuning database cannot be opened or read; the message names the file and the fix."""


class SchemaMismatch(DatabaseError):
    """The database file was written by another schema version; the message gives the upgrade command."""


class NoGPU(AutocutlassError):
    """No CUDA GPU is visible to this process."""

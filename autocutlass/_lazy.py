"""Public names of a package imported on first access (PEP 562 module ``__getattr__``).

A package lists where each of its names lives; ``from package import Name`` then imports only
that module, so a light path (serving stored results) does not pay for the heavy ones (SQLAlchemy,
Optuna, the DSL) that other names of the same package need.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, homes: Mapping[str, str], namespace: dict[str, Any],
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:  # fmt: skip
    """``(__getattr__, __dir__)`` for ``package``: ``homes`` maps each public name to the submodule
    (relative to ``package``) that defines it; ``namespace`` is the package's ``globals()``, where a
    resolved name is bound so that later lookups skip ``__getattr__``."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{home}"), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(homes))

    return __getattr__, __dir__

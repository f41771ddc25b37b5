"""What the families' ``check`` modules share: a rule is ``(config, problem) -> reason or None``;
``first_broken`` runs rules in order, ``outside`` and ``tile_domain`` name the first config field
whose value lies outside its family's allowed values.

Not part of any family's ``SOURCE_FILES``: checks decide what is tried, never what a kernel
generates, so editing this file retires no tuning record."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from typing import Any, TypeVar

C = TypeVar("C")
P = TypeVar("P")


def first_broken(rules: Iterable[Callable[[C, P], str | None]], config: C, problem: P) -> str | None:
    """The reason of the first rule ``config`` breaks on ``problem``, or None."""
    for rule in rules:
        why = rule(config, problem)
        if why is not None:
            return why
    return None


def outside(axes: Iterable[tuple[str, Any, Collection[Any]]], context: str = "") -> str | None:
    """``"name=value is not one of allowed"`` (and `` context``) for the first (name, value,
    allowed) of ``axes`` whose value is not allowed, or None."""
    for name, value, allowed in axes:
        if value not in allowed:
            return f"{name}={value} is not one of {allowed}{' ' + context if context else ''}"
    return None


def tile_domain(config: Any, tiles: tuple[Collection[int], Collection[int], Collection[int]], *,
                swizzle: Collection[int] | None = None, split_k: Collection[int] | None = None,
                clusters: Collection[tuple[int, int]] | None = None) -> str | None:  # fmt: skip
    """``outside`` for a tiled config's ``tile_m``, ``tile_n``, ``tile_k`` (``tiles``), and where
    given its ``swizzle``, ``split_k`` and (``cluster_m``, ``cluster_n``)."""
    tm, tn, tk = tiles
    axes = [("tile_m", config.tile_m, tm), ("tile_n", config.tile_n, tn), ("tile_k", config.tile_k, tk)]
    if swizzle is not None:
        axes.append(("swizzle", config.swizzle, swizzle))
    if split_k is not None:
        axes.append(("split_k", config.split_k, split_k))
    why = outside(axes)
    if why is None and clusters is not None and (config.cluster_m, config.cluster_n) not in clusters:
        why = f"cluster {config.cluster_m}x{config.cluster_n} is not one of {clusters}"
    return why

"""One tree map over the dataclass states (``TaskState`` and the batched terrains inside it).

A *tree* is a tensor (a leaf), a dataclass whose fields are trees, or anything else (kept as it
is: floats, strings, shared tables). A dataclass may name fields that are shared by all rows, not
per row, in a class attribute ``SHARED`` (a tuple of field names): the map passes them through.
``detach``, row selects and partial resets are all one call of :func:`tree_map` (Brax's
``jax.tree_map`` over its ``struct.dataclass`` state is the model).
"""

from __future__ import annotations

import dataclasses

import torch

__all__ = ["tree_map", "tree_leaves", "tree_unflatten", "take_rows", "select_rows", "put_rows"]


def _children(tree):
    shared = getattr(type(tree), "SHARED", ())
    return [f.name for f in dataclasses.fields(tree) if f.name not in shared]


def tree_map(fn, tree, *rest):
    """``fn(leaf, *other_leaves)`` on every tensor leaf of ``tree`` (and the same leaves of ``rest``)."""
    if isinstance(tree, torch.Tensor):
        return fn(tree, *rest)
    if dataclasses.is_dataclass(tree) and not isinstance(tree, type):
        changes = {n: tree_map(fn, getattr(tree, n), *(getattr(r, n) for r in rest)) for n in _children(tree)}
        return dataclasses.replace(tree, **changes)
    return tree


def tree_leaves(tree) -> list:
    """The tensor leaves of ``tree`` in a fixed order (dataclass field order, depth first)."""
    out = []
    tree_map(lambda t: out.append(t) or t, tree)
    return out


def tree_unflatten(like, leaves) -> object:
    """A tree shaped like ``like`` with its tensor leaves replaced, in order, by ``leaves``."""
    it = iter(leaves)
    return tree_map(lambda _: next(it), like)


def take_rows(tree, rows):
    """Rows ``rows`` (an index tensor or slice) of every leaf."""
    return tree_map(lambda t: t[rows], tree)


def select_rows(mask: torch.Tensor, new, old):
    """Rows of ``new`` where ``mask (B,)``, of ``old`` elsewhere: a select, never in place."""
    return tree_map(lambda a, b: torch.where(mask.reshape(-1, *([1] * (a.ndim - 1))), b, a), old, new)


def put_rows(tree, rows: torch.Tensor, sub):
    """``tree`` with rows ``rows`` replaced by ``sub``'s (out of place, so it stays differentiable)."""
    return tree_map(lambda a, b: a.index_copy(0, rows, b), tree, sub)

"""Nested structures of tensors, as tf.nest: the sources and targets of a tape, a custom gradient's result.

`flatten` lists the leaves of nested lists, tuples and dicts (dict values in sorted
key order, as tf.nest); `pack` puts new leaves back in that order, keeping each
container's type (a namedtuple stays one, a dict its key order).

    flatten({"b": [y, z], "a": x})              # [x, y, z]
    pack({"b": [y, z], "a": x}, iter([1, 2, 3]))  # {"b": [2, 3], "a": 1}
    flatten_like({"a": x}, {"a": [1.0, 2.0]})    # [[1.0, 2.0]]: the part at x's place
"""
from __future__ import annotations

from typing import Iterator

_CONTAINERS = (dict, list, tuple)


def flatten(structure) -> list:
    """The leaves of nested lists, tuples and dicts (dict values in sorted key order, as tf.nest)."""
    if isinstance(structure, dict):
        return [leaf for k in sorted(structure) for leaf in flatten(structure[k])]
    if isinstance(structure, (list, tuple)):
        leaves = []
        for item in structure:      # (a leaf is appended without a call: tapes flatten on every step)
            if isinstance(item, _CONTAINERS):
                leaves += flatten(item)
            else:
                leaves.append(item)
        return leaves
    return [structure]


def flatten_like(structure, other, what: str = "the structures") -> list:
    """The parts of `other` at the places of `structure`'s leaves, in `flatten` order (tf.nest's
    flatten_up_to): `other` nests as `structure` does down to those places, where it may hold nests
    of its own (a tangent given as a list of numbers). A list and a tuple match each other; ValueError,
    naming `what`, where the two differ."""
    if isinstance(structure, dict):
        if not isinstance(other, dict) or set(other) != set(structure):
            given = f"keys {sorted(other)}" if isinstance(other, dict) else type(other).__name__
            raise ValueError(f"{what} differ: {given} where a dict with keys {sorted(structure)} belongs")
        return [part for k in sorted(structure) for part in flatten_like(structure[k], other[k], what)]
    if isinstance(structure, (list, tuple)):
        if not isinstance(other, (list, tuple)) or len(other) != len(structure):
            given = f"{len(other)} entries" if isinstance(other, (list, tuple)) else type(other).__name__
            raise ValueError(f"{what} differ: {given} where a sequence of {len(structure)} belongs")
        return [part for item, given in zip(structure, other) for part in flatten_like(item, given, what)]
    return [other]


def pack(structure, leaves: Iterator):
    """`structure` with its leaves replaced, in `flatten` order."""
    if isinstance(structure, dict):
        packed = {k: pack(structure[k], leaves) for k in sorted(structure)}
        return {k: packed[k] for k in structure}
    if isinstance(structure, (list, tuple)):
        items = [pack(item, leaves) if isinstance(item, _CONTAINERS) else next(leaves) for item in structure]
        if isinstance(structure, list):
            return items
        return type(structure)(*items) if hasattr(structure, "_fields") else tuple(items)
    return next(leaves)

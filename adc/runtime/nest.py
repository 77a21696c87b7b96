"""Nested structures of tensors, as tf.nest: the sources and targets of a tape, a custom gradient's result.

`flatten` lists the leaves of nested lists, tuples and dicts (dict values in sorted
key order, as tf.nest); `pack` puts new leaves back in that order, keeping each
container's type (a namedtuple stays one, a dict its key order).

    flatten({"b": [y, z], "a": x})              # [x, y, z]
    pack({"b": [y, z], "a": x}, iter([1, 2, 3]))  # {"b": [2, 3], "a": 1}
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

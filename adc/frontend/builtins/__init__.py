"""The builtin functions of the language, each expanded into IR primitives by one rule.

Part of elaboration (`elaborate.py` calls these rules). `builtin_rules` maps a
builtin's name to its `Builtin`: its parameters (with defaults, named as NumPy/TensorFlow
name them) and its expansion rule `<name>_expand(cx, args) -> value`, where `cx` is the
`Scope` of the kernel being built and `args` the call's `Args`. Each family of builtins
keeps its own table in a module of this package; a new builtin is one rule there:

    elementwise.py   sin, exp, ..., relu, softplus, where, clip, f32(...)
    reductions.py    sum, mean, norm, cumsum, softmax, logsumexp, argmax, any, ...
    shape.py         transpose, reshape, broadcast_to, concat, stack, pad
    linalg.py        matmul, cholesky, solve_triangular, cho_solve
    lu.py            lu_factor, lu_solve, solve, inv, det, slogdet
    orthogonal.py    qr, lstsq, eigh, eigvalsh, svd, svdvals
    gathers.py       take, take_along_axis, scatter, scatter_add
    creation.py      zeros, ones, full, linspace, one_hot
"""
from __future__ import annotations

from adc.frontend.arguments import Builtin
from adc.frontend.builtins import creation, elementwise, gathers, linalg, lu, orthogonal, reductions, shape

builtin_rules: dict[str, Builtin] = {**elementwise.builtin_rules, **reductions.builtin_rules, **shape.builtin_rules,
                                     **linalg.builtin_rules, **lu.builtin_rules, **orthogonal.builtin_rules,
                                     **gathers.builtin_rules, **creation.builtin_rules}

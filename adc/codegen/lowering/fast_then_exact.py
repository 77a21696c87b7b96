"""Fast vector math first, exact only where needed: how a nest runs sin, cos and tan.

A nest whose vector math has fast variants (sin, cos, tan: vecmath.call_fast)
runs them, noting any argument outside their range (`Emitter.math`), and only then runs
again with the exact functions over the same range; both agree bit for bit inside
the range, so results do not depend on which ran.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import llvmlite.ir as ir

from adc.codegen.lowering.loops import I1

if TYPE_CHECKING:
    from adc.codegen.lowering.emitter import Emitter


def fast_then_exact(em: Emitter, emit: Callable[[], None]) -> None:
    """emit() loops with fast vector math, and again with exact vector math if an argument needed it.

    Rerunning is safe: the loops write only their destinations, which they never
    read before writing (a reduction starts again from its identity). Each result
    depends on its own arguments only: an elementwise nest is versioned whole, a
    reduction per output element (a reassociated sum's last bits follow its loop's
    vectorization, so all of one output's terms must go through the same loop).
    """
    slot = em.head.alloca(I1)
    em.b.store(ir.Constant(I1, 0), slot)
    em.outside_fast_range, em.used_fast_math = slot, False
    emit()
    em.outside_fast_range = None
    if em.used_fast_math:
        with em.b.if_then(em.b.load(slot, typ=I1), likely=False):
            emit()

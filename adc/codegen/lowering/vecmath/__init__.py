"""Vector math: exp, log, sin, ... as branch-free scalar LLVM IR that LLVM widens to SIMD.

Where it sits: lowering (`Emitter.math`) calls `call(builder, name, args)` for every elementwise
math op. LLVM's loop vectorizer cannot widen calls to `llvm.exp` & co. without a
vector math library, so each function is emitted here once per LLVM module as an
internal, always-inlined function built only from vectorizable pieces:
fadd/fmul/fdiv, `llvm.fma`, `llvm.fabs`, `llvm.floor`, `llvm.roundeven`,
`llvm.sqrt`, `llvm.copysign`, integer ops on the bit patterns, `select`, and
loads from constant tables (sin/cos/tan's bits of 2/pi), which become gathers.
After inlining, the loop body is straight-line code and the vectorizer turns it
into `<16 x float>` arithmetic. A function reads no memory (`readnone`) unless it
loads from a table (`readonly`).

This module is the entry: it defines and calls the functions whose rules the
package's modules register in `vecmath_rules` (emitter.py), one family
each: exp_log, power, trig, hyperbolic, algebraic, special.

sin, cos and tan also have a fast variant (`call_fast`) without the table: equal
to the exact function bit for bit in a stated range, which `call_fast` returns
as an i1 beside the value, so lowering can run a loop with it and rerun the loop
with the exact function only when an argument fell outside.

Invariants: no branches, no fast-math flags (NaN, inf and signed zeros behave as
in NumPy), the same algorithm for f32 and f64 with per-type constants. Each
emitter's docstring states its algorithm and its measured max error in ulps of
the result type against NumPy float64 rounded to the result type
(tests/codegen/test_vecmath.py asserts those bounds).

    %y = call float @adc.vm.exp.f32(float %x)
    ...
    define internal float @adc.vm.exp.f32(float %x) alwaysinline nounwind readnone {
      %n = call float @llvm.roundeven.f32(float ...)   ; x = n*ln2 + r
      ...                                              ; 2^n * poly(r)
    }

Polynomial coefficients are near-minimax fits (Lawson-reweighted least squares
in 50-digit mpmath) on the reduced ranges stated next to each table; erf and
erfc read the table of erfcx_table.py.
"""
from __future__ import annotations

from typing import Sequence

import llvmlite.ir as ir

# imported for their registrations in vecmath_rules
from adc.codegen.lowering.vecmath import algebraic, exp_log, hyperbolic, power, special, trig
from adc.codegen.lowering.vecmath.emitter import CONSTS, Emitter, Rule, vecmath_rules

FUNCTIONS: frozenset[str] = frozenset(vecmath_rules)


def _define(module: ir.Module, symbol: str, rule: Rule, ty: ir.Type, exact: bool, scalef: bool) -> ir.Function:
    """The internal always-inline function `symbol`, built once per module (a module is built
    for one target, so `scalef` is the same at every call)."""
    fn = ir.Function(module, ir.FunctionType(ty, [ty] * rule.arity), symbol)
    fn.linkage = "internal"
    builder = ir.IRBuilder(fn.append_basic_block("entry"))
    builder.ret(rule.emit(Emitter(builder, ty, exact, scalef), *fn.args))
    loads = any(isinstance(i, ir.LoadInstr) for block in fn.blocks for i in block.instructions)
    for attr in ("alwaysinline", "nounwind", "readonly" if loads else "readnone"):
        fn.attributes.add(attr)
    return fn


def _checked_rule(name: str, args: Sequence[ir.Value]) -> tuple[Rule, ir.Type]:
    if name not in vecmath_rules:
        raise ValueError(f"vecmath has no function {name!r}; it has {', '.join(sorted(FUNCTIONS))}")
    ty = args[0].type if args else None
    if ty not in CONSTS or any(a.type != ty for a in args):
        raise TypeError(f"vecmath.{name} takes f32 or f64 scalars of one type, got "
                        f"{', '.join(str(a.type) for a in args)}")
    if len(args) != vecmath_rules[name].arity:
        raise TypeError(f"vecmath.{name} takes {vecmath_rules[name].arity} argument(s), got {len(args)}")
    return vecmath_rules[name], ty


def _call(builder: ir.IRBuilder, name: str, args: Sequence[ir.Value], exact: bool, vector_bits: int) -> ir.Value:
    rule, ty = _checked_rule(name, args)
    symbol = f"adc.vm.{name}.{'' if exact else 'fast.'}{CONSTS[ty].suffix}"
    fn = builder.module.globals.get(symbol) or _define(builder.module, symbol, rule, ty, exact, vector_bits >= 512)
    return builder.call(fn, args)


def call(builder: ir.IRBuilder, name: str, args: Sequence[ir.Value], vector_bits: int = 256) -> ir.Value:
    """A call to the vector-math function `name` on f32 or f64 scalars, for a target with
    `vector_bits` registers (Target.vector_bits: 512 has AVX-512's vscalef); defines it on first use."""
    return _call(builder, name, args, True, vector_bits)


def call_fast(builder: ir.IRBuilder, name: str, args: Sequence[ir.Value],
              vector_bits: int = 256) -> tuple[ir.Value, ir.Value | None]:
    """`name`'s fast variant and the i1 saying where it equals `call`'s result bit for bit (None: everywhere).

    sin, cos and tan have one: without the exact reduction of large arguments,
    it costs a third of the exact function (no table gathers) in a vector loop.
    """
    rule, ty = _checked_rule(name, args)
    if rule.fast_range is None:
        return call(builder, name, args, vector_bits), None
    return _call(builder, name, args, False, vector_bits), rule.fast_range(Emitter(builder, ty), *args)

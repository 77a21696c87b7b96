"""The verifier: the invariants every pass must keep, checked after each one.

- every value is defined once, before its uses (parameters, then op results);
- every op is registered, and its result types are what its type rule derives;
- every op carries a location when `require_locations` is set;
- returned values are defined; calls name functions of the module;
- result types only use dimension symbols bound by the parameters (a region's may use its
  parent's);
- a symbol a `scan` binds is bound nowhere else in the function.

Failures raise `VerifyError` naming the pass (when given), the function, the op
and what was expected versus found.
"""
from __future__ import annotations

from adc.errors import VerifyError
from adc.ir.core import Func, Module
from adc.ir.ops import TypeRuleError, infer_types


def verify(module: Module, pass_name: str | None = None, require_locations: bool = False) -> None:
    regions = module.regions()
    for func in module:
        verify_func(func, module.funcs, pass_name, require_locations, region=func.name in regions)
    memo: dict[str, tuple[str, ...]] = {}
    for func in module:
        _verify_region_symbols(module, func, func.name in regions, pass_name, memo)


def _verify_region_symbols(module: Module, func: Func, region: bool, pass_name: str | None,
                           memo: dict[str, tuple[str, ...]]) -> None:
    """Every dimension the regions `func` runs read from it, `func` has: its params', its scans',
    or (a region itself) its parent's."""
    have = (set(func.dim_symbols) | set(func.bound_symbols)
            | (set(module.region_symbols(func.name, memo)) if region else set()))
    for name in func.regions():
        if name in module.funcs and (missing := set(module.region_symbols(name, memo)) - have):
            where = f"after pass '{pass_name}': " if pass_name else ""
            raise VerifyError(f"{where}in @{func.name}: its region @{name} uses dimension "
                              f"{', '.join(sorted(missing))}, which @{func.name} does not define")


def verify_func(func: Func, funcs, pass_name: str | None = None, require_locations: bool = False,
                region: bool = False) -> None:
    """Check `func`; a `region` (a loop body, a branch) may return types of its parent's symbols."""
    where = f"after pass '{pass_name}': " if pass_name else ""

    def fail(message: str) -> None:
        raise VerifyError(f"{where}in @{func.name}: {message}")

    defined = set()
    for p in func.params:
        if p in defined:
            fail(f"parameter {p!r} appears twice")
        defined.add(p)
    bound = set(func.dim_symbols)
    params_bind = set(bound)
    for op in func.ops:
        for i, v in enumerate(op.operands):
            if v not in defined:
                fail(f"operand {i} of '{op.name}' is used before it is defined")
        try:
            expected = infer_types(op.name, [v.type for v in op.operands], op.attrs, funcs)
        except TypeRuleError as err:
            fail(f"'{op.name}' at {op.loc}: {err}")
        found = tuple(v.type for v in op.results)
        if expected != found:
            fail(f"'{op.name}' at {op.loc}: expected result types {', '.join(map(str, expected))}, "
                 f"found {', '.join(map(str, found))}")
        if op.name == "scan":
            length = op.attrs["length"]
            if length in bound:
                fail(f"'scan' at {op.loc} binds dimension {length}, which is already bound")
            bound.add(length)
        if require_locations and op.loc is None:
            fail(f"'{op.name}' has no location")
        for r in op.results:
            if r in defined:
                fail(f"a result of '{op.name}' is defined twice")
            defined.add(r)
    for v in func.returns:
        if v not in defined:
            fail("a returned value is not defined")
        unbound = v.type.symbols - params_bind
        if unbound and not region:
            fail(f"result type {v.type} uses unbound dimension {', '.join(sorted(unbound))}")

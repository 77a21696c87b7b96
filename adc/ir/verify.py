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

A function is checked once for what it reads: IR is never changed, and a function's check reads
only its own ops and the signatures of the functions its type rules look up (callees, regions).
After a pass, one the pass left as it was, naming functions of the same signatures, is not
checked again (a pass rebuilds a few functions of a module; re-checking all of them after each
of a dozen passes was a third of a second-order derivative's compile).
"""
from __future__ import annotations

from typing import Iterator, Mapping
from weakref import WeakKeyDictionary

from adc.errors import VerifyError
from adc.ir.core import Func, Module
from adc.ir.ops import TypeRuleError, infer_types
from adc.ir.types import TensorType

Signature = tuple[tuple[TensorType, ...], tuple[TensorType, ...]]
# a checked function -> each context it passed in: (region, require_locations, the signature of
# every function its type rules looked up, by name; None for a name the module lacked)
_passed: WeakKeyDictionary[Func, list[tuple[bool, bool, tuple[tuple[str, Signature | None], ...]]]] = \
    WeakKeyDictionary()


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
    for passed_region, passed_locations, looked_up in _passed.get(func, ()):
        if (passed_region, passed_locations) == (region, require_locations) and \
                all(_signature(funcs.get(name)) == signature for name, signature in looked_up):
            return
    lookups = _Lookups(funcs)
    _check_func(func, lookups, pass_name, require_locations, region)
    _passed.setdefault(func, []).append((region, require_locations, tuple(lookups.read.items())))


def _signature(func: Func | None) -> Signature | None:
    return None if func is None else (func.param_types, func.result_types)


class _Lookups(Mapping[str, Func]):
    """The module's functions, recording the signature of each one a type rule looks up."""

    def __init__(self, funcs: Mapping[str, Func]):
        self.funcs = funcs
        self.read: dict[str, Signature | None] = {}

    def __getitem__(self, name: str) -> Func:
        func = self.funcs.get(name)
        self.read[name] = _signature(func)
        if func is None:
            raise KeyError(name)
        return func

    def __iter__(self) -> Iterator[str]:
        return iter(self.funcs)

    def __len__(self) -> int:
        return len(self.funcs)


def _check_func(func: Func, funcs: Mapping[str, Func], pass_name: str | None, require_locations: bool,
                region: bool) -> None:
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

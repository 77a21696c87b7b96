"""The IR: values, ops, functions and modules — the one data structure of adc.

Values are identified by object identity (names are assigned when printing);
an `Op` defines its result values; a `Func` is a list of SSA ops with parameters
and returned values, control flow being ops whose bodies and branches are
functions of the module (regions). Passes build new ops rather than mutate old
ones, so an IR object, once built, is never changed.

    func @square(%x: f32[N]) -> f32[N] {
      %0 = mul %x, %x : f32[N]
      return %0
    }
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping

from adc.errors import Location
from adc.ir.ops import OPS
from adc.ir.types import TensorType

# control-flow op -> the attributes naming its region functions
REGION_ATTRS = {name: op.regions for name, op in OPS.items() if op.regions}


class Value:
    """An SSA value of one `TensorType`; `name` is a hint kept for parameters."""

    __slots__ = ("type", "name")

    def __init__(self, type: TensorType, name: str | None = None):
        self.type = type
        self.name = name

    def __repr__(self) -> str:
        label = self.name or f"v{id(self) & 0xffff:x}"
        return f"<Value %{label}: {self.type}>"


class FuncRef(str):
    """An attribute naming a function of the module (printed `@name`)."""


class Attrs(Mapping[str, Any]):
    """Immutable, hashable op attributes with a deterministic (sorted) order."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, Any] | None = None):
        self._items = {k: _frozen(v) for k, v in sorted((items or {}).items())}

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"Attrs({self._items!r})"


def _frozen(value: Any) -> Any:
    """Lists become tuples, so attributes are immutable and hashable."""
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    return value


class _derived:
    """A property of an IR object computed at its first use and kept in the object (which is never
    changed): functools.cached_property without its lock, which Python 3.11 holds for every
    instance at once, so a process forked while another thread computed one would wait on it
    forever. Two threads may both compute a value; they find the same."""

    def __init__(self, compute: Callable[[Any], Any]):
        self.compute = compute
        self.__doc__ = compute.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        value = obj.__dict__[self.name] = self.compute(obj)     # found there first from now on
        return value


@dataclass(eq=False)
class Op:
    """One operation: `results = name(operands) {attrs}` at `loc`."""

    name: str
    operands: tuple[Value, ...]
    attrs: Attrs
    results: tuple[Value, ...]
    loc: Location | None = None

    @property
    def result(self) -> Value:
        (value,) = self.results
        return value


@dataclass(eq=False)
class Func:
    """A kernel or a region: parameters, a list of ops (loops and branches among them), returned values.
    What is derived from its ops (their symbols, regions, references) is computed once: passes ask for
    it of every function after every pass, and a function, never changed, has it for good."""

    name: str
    params: tuple[Value, ...]
    ops: tuple[Op, ...]
    returns: tuple[Value, ...]
    loc: Location | None = None

    @property
    def param_types(self) -> tuple[TensorType, ...]:
        return tuple(p.type for p in self.params)

    @property
    def result_types(self) -> tuple[TensorType, ...]:
        return tuple(v.type for v in self.returns)

    @_derived
    def dim_symbols(self) -> tuple[str, ...]:
        """The dimension symbols bound by the parameters, in order of first appearance."""
        seen: dict[str, None] = {}
        for p in self.params:
            for d in p.type.shape:
                for s in sorted(getattr(d, "symbols", ())):
                    seen.setdefault(s, None)
        return tuple(seen)

    @_derived
    def free_symbols(self) -> tuple[str, ...]:
        """Dimension symbols its ops use (in types and attributes) that neither its parameters nor
        its own ops (a scan's length) bind: none in a kernel; in a region function (a loop body, a
        branch), its parent's, which its parent supplies."""
        bound = set(self.dim_symbols) | set(self.bound_symbols)
        seen: dict[str, None] = {}
        for op in self.ops:
            dims = [d for v in op.results for d in v.type.shape] + list(dims_in(op.attrs.values()))
            for d in dims:
                for s in sorted(getattr(d, "symbols", ())):
                    if s not in bound:
                        seen.setdefault(s, None)
        return tuple(seen)

    @_derived
    def bound_symbols(self) -> tuple[str, ...]:
        """The dimension symbols its ops bind: each scan's length (the trip count of its loop)."""
        return tuple(op.attrs["length"] for op in self.ops if op.name == "scan")

    def signature(self) -> str:
        params = ", ".join(f"{p.name}: {p.type}" for p in self.params)
        results = [str(t) for t in self.result_types]
        result = results[0] if len(results) == 1 else f"({', '.join(results)})"
        return f"{self.name}({params}) -> {result}"

    def references(self) -> tuple[str, ...]:
        """The functions its ops name (callees, custom-gradient forwards and backwards, the
        gradients of external functions), in order of appearance."""
        return self._references

    def regions(self) -> tuple[str, ...]:
        """The region functions its control-flow ops run (bodies, conditions, branches), each once,
        in order of appearance."""
        return self._regions

    @_derived
    def _references(self) -> tuple[str, ...]:
        return tuple(r for op in self.ops for value in op.attrs.values()
                     for r in (value if isinstance(value, tuple) else (value,)) if isinstance(r, FuncRef))

    @_derived
    def _regions(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(str(op.attrs[key]) for op in self.ops for key in REGION_ATTRS.get(op.name, ())))


def children_first(roots: Iterable[str], children: Callable[[str], Iterable[str]]) -> list[str]:
    """`roots` and the functions they reach through `children` (a function's regions, its callees),
    each once, every one after all it reaches: the order to compute what a function is from what
    its regions are (their depth, their size), each once however many paths lead to it, on a list,
    not Python's stack (a nest is as deep as the program)."""
    order: list[str] = []
    done: set[str] = set()
    stack = [(name, False) for name in reversed(list(roots))]
    while stack:
        name, ready = stack.pop()
        if ready:
            order.append(name)
        elif name not in done:
            done.add(name)
            stack += [(name, True)] + [(c, False) for c in children(name) if c not in done]
    return order


def dims_in(values) -> Iterator[Any]:
    """The dimensions among attribute values, at any nesting depth (`shape = [N, 2]`, `value = N`)."""
    stack = list(values)
    while stack:
        value = stack.pop()
        if isinstance(value, tuple):
            stack.extend(value)
        elif hasattr(value, "symbols"):
            yield value


@dataclass(eq=False)
class Module:
    """An ordered collection of functions; `name` identifies the source (a file name)."""

    funcs: dict[str, Func] = field(default_factory=dict)
    name: str = "module"

    def __getitem__(self, name: str) -> Func:
        return self.funcs[name]

    def __iter__(self) -> Iterator[Func]:
        return iter(self.funcs.values())

    def reachable(self, name: str) -> "Module":
        """`name` and every function it references, transitively (callees, custom-gradient
        forwards and backwards): what compiling `name` on its own needs."""
        order, stack = {}, [name]
        while stack:
            func = self.funcs[stack.pop()]
            if func.name not in order:
                order[func.name] = func
                stack += func.references()
        return Module({n: f for n, f in self.funcs.items() if n in order}, self.name)

    def custom_gradients(self) -> dict[str, tuple[str, str]]:
        """kernel -> (forward, backward) of each function made of a `custom_gradient` node: the
        parts of a `@custom_gradient` kernel, which are not kernels a user calls."""
        return {func.name: (str(op.attrs["forward"]), str(op.attrs["backward"]))
                for func in self for op in func.ops if op.name == "custom_gradient"}

    def parts(self) -> set[str]:
        """The functions that are parts of others rather than kernels a user calls: the forwards and
        backwards of custom gradients, and the regions of control-flow ops (bodies, branches)."""
        named = {name for pair in self.custom_gradients().values() for name in pair}
        return named | self.regions()

    def regions(self) -> set[str]:
        """The region functions of its control-flow ops and the functions they call, transitively:
        run by their parent (sharing its symbols), never called alone."""
        return self._reached(name for func in self for name in func.regions())

    def looped_regions(self) -> set[str]:
        """The region functions run once per iteration of a loop: the bodies (and a while's
        condition) of its loops, and what those run or call, transitively."""
        return self._reached(str(op.attrs[key]) for func in self for op in func.ops
                             if OPS[op.name].body_leads is not None for key in OPS[op.name].regions)

    def _reached(self, roots: Iterable[str]) -> set[str]:
        """`roots` and the functions they run (regions) or call, transitively."""
        found, stack = set(), list(roots)
        while stack:
            name = stack.pop()
            if name not in found:
                found.add(name)
                func = self.funcs[name]
                stack += [*func.regions(), *(str(op.attrs["callee"]) for op in func.ops if op.name == "call")]
        return found

    def region_symbols(self, name: str, memo: dict[str, tuple[str, ...]] | None = None) -> tuple[str, ...]:
        """The dimension symbols region function `name` reads from its parent, in the order its
        parent passes them: those its params bind, its free symbols, then those its own regions
        read that it does not have (Func.free_symbols sees only its own ops' types). A caller
        asking for many regions of an unchanging module passes one `memo` to all its calls."""
        memo = {} if memo is None else memo
        if name not in memo:
            region = self.funcs[name]
            found = dict.fromkeys(region.dim_symbols + region.free_symbols)
            for inner in region.regions():
                found.update(dict.fromkeys(self.region_symbols(inner, memo)))
            memo[name] = tuple(s for s in found if s not in region.bound_symbols)
        return memo[name]

    def replace(self, *funcs: Func) -> "Module":
        """A new module with `funcs` substituted (or appended) by name."""
        merged = dict(self.funcs)
        for f in funcs:
            merged[f.name] = f
        return Module(merged, self.name)

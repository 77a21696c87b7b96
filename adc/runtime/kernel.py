"""Kernel: a callable compiled kernel that checks its arguments before native code runs.

A call binds the arguments to the signature, converts Python scalars and lists
to the parameter's dtype (NumPy arrays, Tensors and other CPU arrays, read through DLPack,
must already have it), binds
the dimension symbols from the arguments' shapes, checks the shape constraints,
allocates the results and calls the native function through the C ABI
(`int32_t adc_kernel_<name>(const int64_t *dims, void **inputs, void **outputs)`).
Every mistake is a TypeError or ValueError naming the parameter and dimension.

Calls with Tensors and Variables of the right dtypes and ranks take a lean path
(precomputed dimension bindings and result shapes); anything else takes the checked
path, which also writes the errors. Both end in `run_bound`, which fills the C ABI's
arguments, allocates the results and calls: in C (adc/runtime/native_call.c) where
setup.py built it, else in Python through ctypes (`_run_in_python`, which ends in `run_at`: the
call on memory a caller owns, as a framework bridge's tensors, adc/torch.py). Every call
is offered to the recorders of its thread (adc/runtime/recording.py: the tapes,
forward accumulators...), and `derivative()` gives the kernel's VJP as another Kernel,
compiled on first use (adc/runtime/derivatives.py) and kept in the kernel's
DerivativeCache (`derived`, adc/runtime/derivative_cache.py) with every other
derivative built of it.

    m.dense_relu(x, w, b)   # ValueError: dense_relu: parameter 'w' dimension 0 (I) is 5,
                            #             but I = 4 from parameter 'x'
"""
from __future__ import annotations

import ctypes
import functools
import inspect
import threading
from typing import Any, Callable

import numpy as np

from adc.abi import STATUS_OK, KernelSignature
from adc.runtime import buffers, derivatives, dlpack, interrupts
from adc.ir.types import SymDim, TensorType, evaluate_dim
from adc.runtime.derivative_cache import UNBUILT, DerivativeCache
from adc.runtime.recording import record, recordable, thread_state
from adc.runtime.status_errors import status_error
from adc.runtime.tensor import Tensor
from adc.runtime.variable import Variable

try:    # built by setup.py where there is a C compiler: Kernel.run_bound's work in C
    from adc.runtime import native_call
except ImportError:
    native_call = None
else:
    native_call.setup(Tensor, Variable, buffers.empty, buffers.MIN_BYTES)

_KERNEL_CFUNC = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
_PYTHON_VALUES = (bool, int, float, list, tuple)
_SLOW = None   # what the lean path returns when a call needs the checked path
_NO_SIZES: list = []    # the sizes of a kernel of scalar params (never written)


def _count(n: int, noun: str) -> str:
    """`n noun`, plural as Python's own messages say it."""
    return f"{n} {noun}{'' if n == 1 else 's'}"

class Kernel:
    """One kernel of a compiled module; call it like a Python function."""

    # A call whose arguments are plain arrays (ndarrays, Tensors or Variables of the params' dtypes
    # and ranks, C-contiguous) and which no tape records is checked, bound and run in C
    # (native_call.call): ~0.7 us, against ~3 us through the Python side. False sends every call
    # through the Python side, what the tests of its routes (run_bound's C and ctypes) set.
    call_in_c = True

    def __init__(self, signature: KernelSignature, owner: Any, gradient_source: derivatives.GradientSource,
                 recipe: Callable[[], tuple] | None = None):
        self.signature = signature
        self.gradient_source = gradient_source   # where its VJPs come from: its module's (derivatives.py)
        self.derived = DerivativeCache()        # every derivative built of it
        # how another process rebuilds the kernel: called when it is pickled, it gives what
        # __reduce__ returns — (getitem, (module, name)) for a module's kernel, the transform of its
        # base kernel for a derivative (module.py, functional.py)
        self.recipe = recipe
        self._owner = owner  # the native library: keeps it alive as long as the kernel
        self._address = 0    # its entry point, asked for on the first call (a JIT module compiles it then)
        self._cfunc = None   # that address as a ctypes function (the Python route, `_run_in_python`)
        self._np_dtypes = tuple(t.dtype.numpy for t in signature.param_types)
        self._ranks = tuple(t.rank for t in signature.param_types)
        self._arity = len(self._ranks)
        self._dim_plan = _dim_plan(signature)
        self._sized = self._dim_plan != ()       # False: scalar params only, no size to bind or check
        self._result_plan = tuple((t.dtype.numpy, _static_shape(t), _shape_plan(t, signature.dims), t)
                                  for t in signature.result_types)
        self._constrained = bool(signature.constraints)
        self._constraint_plan = _constraint_plan(signature)
        self.checks_indices = bool(signature.index_bounds)     # a call reads those params' values first
        # (position, dtype) of each integer param: what a sparse pattern's key reads of a call
        self.integer_params = tuple((k, t.dtype.numpy) for k, t in enumerate(signature.param_types)
                                    if not t.dtype.is_float)
        static = tuple((dtype, shape) for dtype, shape, _, _ in self._result_plan if shape is not None)
        self._static_results = static if len(static) == len(self._result_plan) else None
        self._result_slot = len(signature.dims) + len(signature.param_types)
        self._plans = threading.local()     # per thread: an argument buffer and the call bound to it
        self._call_plan = None      # native_call's plan of a whole call; False where a call needs Python
        self.float_results = any(t.dtype.is_float for t in signature.result_types)
        self.__name__ = signature.name
        self.__doc__ = f"adc kernel {signature}"
        self.__signature__ = inspect.Signature(
            [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=str(t))
             for n, t in zip(signature.param_names, signature.param_types)],
            return_annotation=", ".join(str(t) for t in signature.result_types))

    def __repr__(self) -> str:
        return f"<adc kernel {self.signature}>"

    def __reduce__(self):
        if self.recipe is None:
            raise TypeError(f"kernel '{self.signature.name}' cannot be pickled: only the kernels of modules "
                            f"opened by adc.compile, adc.compile_file or adc.load, and the derivatives "
                            f"adc.grad, adc.jacobian, adc.hessian and adc.hvp make of them, travel by value")
        return self.recipe()

    def __call__(self, *args, **kwargs):
        plan, recording = self._call_plan, thread_state.recording
        if not recording and plan is not False and self.call_in_c and not kwargs:
            if plan is None:    # planned at the first call that runs this kernel itself (not a tape's)
                plan = self._new_call_plan()
                if self._address:       # kept once its code is settled (entry_address)
                    self._call_plan = plan
            results = native_call.call(plan, args) if plan else None   # plain arrays: all of it in C
            if type(results) is tuple:
                return results[0] if len(results) == 1 else results
            if results is not None:
                raise self._failure(results, self.dims_of([np.shape(_array_of(a)) for a in args]))
        if kwargs or len(args) != self._arity:
            args = self._bind(args, kwargs)
        tensors, lean = [], True
        for value, want, rank in zip(args, self._np_dtypes, self._ranks):
            kind = type(value)      # the lean path: Tensors and Variables of the right dtype and rank
            if kind is Variable:
                value = value._value
            elif kind is not Tensor:
                if kind is np.ndarray and value.dtype is want and value.ndim == rank:
                    # a read-only view, so the caller's array is neither copied nor frozen; native
                    # code takes its address if contiguous (else Tensor._pointer makes it so)
                    tensors.append(Tensor._wrap(value.view()))
                    lean = False
                    continue
                if rank == 0 and (kind is want.type or kind is float and want.type is np.float64):
                    # a NumPy scalar, or a Python float for an f64: a new 0-d array of it
                    tensors.append(Tensor._wrap(np.asarray(value)))
                    lean = False
                    continue
                tensors, lean = self._checked_inputs(args), False
                break
            array = value._array
            if array.dtype is not want or array.ndim != rank:    # (an equal dtype object: checked path)
                tensors, lean = self._checked_inputs(args), False
                break
            tensors.append(value)
        sizes = self.dims_of([t._array.shape for t in tensors]) if self._sized or self._constrained else _NO_SIZES
        if self.checks_indices:
            self._check_indices([t._array for t in tensors], sizes)
        if recording and self.float_results:
            results = self._recorded_run(recording, args, tensors, sizes, lean)
        else:
            results = self.run_bound(tensors, sizes)
        return results[0] if len(results) == 1 else results

    def _recorded_run(self, recording: list, args: tuple, tensors: list[Tensor], sizes: list[int],
                      lean: bool) -> tuple:
        """Run the call and offer it to the recorders. A lone tape (`takes_split_vjps`) keeps it only
        if it watches an argument (no work for a call nobody differentiates), with the split VJP
        (derivatives.split) for the params it watches; under nested tapes, which differentiate the
        gradient computation and so need the kernel's whole VJP, or other recorders, each keeps the
        plain call. `lean`: every argument is a Tensor or Variable, so the tape can keep them as they
        are (recording.recordable)."""
        if len(recording) != 1 or not recording[0].takes_split_vjps:
            results = self.run_bound(tensors, sizes)
            record(self, args, tensors, results)
            return results
        tape = recording[0]
        wanted = tape.watching(args)
        if not wanted:
            return self.run_bound(tensors, sizes)
        split = self.derived.find(("split_vjp", wanted), UNBUILT)
        if split is UNBUILT:
            split = self.derived.get("split_vjp", wanted, derivatives.split, self, wanted)
        if not lean:
            args, tensors = recordable(args, tensors)
        if split is None:
            results = self.run_bound(tensors, sizes)
            tape.keep(self, args, tensors, results)
        else:
            results = split.forward.run_bound(tensors, sizes)
            # the backward's arguments before the cotangents: the call's values, then the residuals
            leading, n = tensors, split.n_results
            if len(results) != n:
                results, leading = results[:n], [*tensors, *results[n:]]
            tape.keep(self, args, tensors, results,
                      (split.backward, leading, sizes if split.same_dims else None))
        return results

    def derivative(self, wanted: tuple[int, ...] | None = None):
        """The kernel's VJP for the `wanted` params (default all), compiled on first use: a
        `derivatives.Derivative` whose `wrt` lists the params the results depend on."""
        return self.derived.get("vjp", wanted, derivatives.derive, self, wanted)

    def entry_address(self) -> int:
        """The kernel's native entry point (runtime/adc.h's C ABI), for callers outside Python (XLA's
        FFI handler, adc/jax_ffi.c); valid while the kernel is alive."""
        if self._address:
            return self._address
        address = self._owner.address(self.signature.symbol)
        if not address:
            raise RuntimeError(f"{self.signature.name}: its library does not define {self.signature.symbol}")
        interrupts.attach(self._owner)      # once the library is loaded (a JIT module's: the runtime's)
        if self._owner.settled(self.signature.symbol):      # first-tier code is asked for again
            self._address = address
        return address

    def _new_plan(self) -> tuple:
        """An argument buffer (dims, then input and output pointers) and the native call bound to it.
        Each thread reuses one, so a call only writes its slots; a call made while it is in use (by
        a signal handler, say) gets one of its own."""
        sig = self.signature
        buffer = (ctypes.c_int64 * max(1, self._result_slot + len(sig.result_types)))()
        base = ctypes.addressof(buffer)
        cfunc = self._cfunc or _KERNEL_CFUNC(self._address or self.entry_address())
        if self._address:       # kept once its code is settled (entry_address)
            self._cfunc = cfunc
        call = functools.partial(cfunc, base, base + 8 * len(sig.dims), base + 8 * self._result_slot)
        return buffer, call

    def _bind(self, args: tuple, kwargs: dict) -> tuple:
        """The arguments in parameter order, or Python's own TypeError for a call that does not fit
        the parameters, checked in Python's order: the keywords, then the count, then what is
        missing, so an unknown keyword is named as such (not as the parameter it left missing)."""
        names, call = self.signature.param_names, f"{self.signature.name}()"
        for key in kwargs:
            if key not in names:
                raise TypeError(f"{call} got an unexpected keyword argument '{key}'")
            if names.index(key) < len(args):
                raise TypeError(f"{call} got multiple values for argument '{key}'")
        if len(args) > len(names):
            raise TypeError(f"{call} takes {_count(len(names), 'positional argument')} but "
                            f"{len(args)} {'was' if len(args) == 1 else 'were'} given")
        missing = [name for name in names[len(args):] if name not in kwargs]
        if missing:
            quoted = [f"'{name}'" for name in missing]
            listed = quoted[0] if len(quoted) == 1 else (
                f"{quoted[0]} and {quoted[1]}" if len(quoted) == 2 else f"{', '.join(quoted[:-1])}, and {quoted[-1]}")
            raise TypeError(f"{call} missing {_count(len(missing), 'required positional argument')}: {listed}")
        return (*args, *(kwargs[name] for name in names[len(args):]))

    def _where(self, name: str) -> str:
        return f"{self.signature.name}: parameter '{name}'"

    def _checked_inputs(self, args: tuple) -> list[Tensor]:
        """The arguments converted to Tensors of the parameters' dtypes, or the error naming one."""
        return [self._convert(name, value, i)
                for i, (name, value) in enumerate(zip(self.signature.param_names, args))]

    def _convert(self, name: str, value: Any, index: int) -> Tensor:
        want = self._np_dtypes[index]
        ptype = self.signature.param_types[index]
        if isinstance(value, Variable):
            value = value._value
        if isinstance(value, Tensor):
            array = value.numpy()
        elif isinstance(value, (np.ndarray, np.generic)):
            array = np.asarray(value)
        elif isinstance(value, _PYTHON_VALUES):
            array = self._from_python(name, value, want, ptype)
        elif dlpack.exports_dlpack(value):
            array = dlpack.from_dlpack(value, self._where(name))
        else:
            raise TypeError(f"{self._where(name)} expects an array of type {ptype}, got {type(value).__name__}")
        if array.dtype != want:
            raise TypeError(f"{self._where(name)} expects dtype {ptype.dtype} ({want}), got {array.dtype}; "
                            f"convert it with .astype(np.{want}) or adc.cast(x, '{ptype.dtype}')")
        if array.ndim != ptype.rank:
            raise ValueError(f"{self._where(name)} expects rank {ptype.rank} ({ptype}), "
                             f"got an array of shape {array.shape}")
        # a read-only view: the caller's array is neither copied nor frozen
        return value if isinstance(value, Tensor) else Tensor._wrap(np.ascontiguousarray(array).reshape(array.shape))

    def _from_python(self, name: str, value: Any, want: np.dtype, ptype: TensorType) -> np.ndarray:
        """A Python scalar or list as an array of the parameter's dtype; an integer that does not fit
        it raises OverflowError (NumPy's astype would wrap it silently)."""
        try:
            array = np.asarray(value)
        except OverflowError:
            array = np.asarray(value, dtype=object)
        if array.dtype == object and array.size and all(isinstance(v, int) for v in array.flat):
            raise OverflowError(f"{self._where(name)} is {ptype}: {value!r} has an integer too large for it")
        if array.dtype.kind in "iu" and want.kind in "iu" and array.size:
            info = np.iinfo(want)
            if array.min() < info.min or array.max() > info.max:
                raise OverflowError(f"{self._where(name)} is {ptype}: {value!r} has an integer outside "
                                    f"[{info.min}, {info.max}]")
        if array.dtype.kind in "biuf" and np.can_cast(array.dtype, want, "same_kind"):
            array = array.astype(want)
        return array

    def dims_of(self, shapes) -> list[int]:
        """The dimension symbols' sizes (in `signature.dims` order) for arguments of these shapes,
        of the params' ranks, after the checks a call makes (ValueError naming the parameter and
        dimension); what `result_shapes` and `run_at` take."""
        if not self._sized:
            sizes = _NO_SIZES
        else:
            sizes = self._lean_dims(shapes)
            if sizes is _SLOW:
                env = self._bind_dims(shapes)
                sizes = [env[s] for s in self.signature.dims]
        if self._constrained:
            self._check_constraints(sizes)
        return sizes

    def result_shapes(self, sizes: list[int]) -> tuple[tuple[np.dtype, tuple[int, ...]], ...]:
        """(dtype, shape) of each result for the dims' `sizes`."""
        return self._static_results or self._result_shapes(sizes)

    def _lean_dims(self, shapes) -> list[int] | None:
        """The dimension symbols' sizes when every parameter dim is a number or a bare symbol
        and the sizes agree; otherwise the checked path binds them and explains the mismatch."""
        plan = self._dim_plan
        if plan is _SLOW:
            return _SLOW
        sizes = [0] * len(self.signature.dims)
        for param, axis, slot, fixed in plan:
            size = shapes[param][axis]
            if slot < 0:
                if size != fixed:
                    return _SLOW
            elif fixed:
                if sizes[slot] != size:
                    return _SLOW
            else:
                sizes[slot] = size
        return sizes

    def bind_shapes(self, shapes) -> dict[str, int]:
        """The dimension symbols' sizes for arguments of these shapes, after the checks a call makes
        (ValueError naming the parameter and dimension): shapes checked before the data exists, as
        adc.dask checks a block's."""
        for name, ptype, shape in zip(self.signature.param_names, self.signature.param_types, shapes):
            if len(shape) != ptype.rank:
                raise ValueError(f"{self._where(name)} expects rank {ptype.rank} ({ptype}), "
                                 f"got an array of shape {tuple(shape)}")
        env = self._bind_dims(shapes)
        self._check_constraints([env[s] for s in self.signature.dims])
        return env

    def _bind_dims(self, shapes) -> dict[str, int]:
        env: dict[str, int] = {}
        origin: dict[str, str] = {}
        derived = []    # dims such as N+M, checked once the symbols are bound
        sig = self.signature
        for name, ptype, shape in zip(sig.param_names, sig.param_types, shapes):
            for axis, (dim, size) in enumerate(zip(ptype.shape, shape)):
                if isinstance(dim, int):
                    if size != dim:
                        raise ValueError(f"{self._where(name)} dimension {axis} must be {dim}, got {size}")
                    continue
                if not dim.is_symbol:
                    derived.append((name, axis, dim, size))
                    continue
                symbol = str(dim)
                if symbol in env and env[symbol] != size:
                    raise ValueError(f"{self._where(name)} dimension {axis} ({symbol}) is {size}, "
                                     f"but {symbol} = {env[symbol]} from parameter '{origin[symbol]}'")
                env[symbol] = size
                origin.setdefault(symbol, name)
        for name, axis, dim, size in derived:
            if evaluate_dim(dim, env) != size:
                raise ValueError(f"{self._where(name)} dimension {axis} ({dim}) is {size}, "
                                 f"but {dim} = {evaluate_dim(dim, env)}")
        return env

    def _check_constraints(self, sizes: list[int]) -> None:
        for terms in self._constraint_plan:     # (the sizes read in place: no dict on a good call)
            total = 0
            for value, slots in terms:
                for slot in slots:
                    value *= sizes[slot]
                total += value
            if total < 0:
                self._constraint_error(sizes)

    def _constraint_error(self, sizes: list[int]) -> None:
        sig = self.signature
        env = dict(zip(sig.dims, sizes))
        for constraint in sig.constraints:
            if evaluate_dim(constraint, env) < 0:
                shown = ", ".join(f"{s} = {env[s]}" for s in sorted(constraint.symbols))
                raise ValueError(f"{sig.name}: the shapes need {constraint} >= 0, but {shown}")

    def _check_indices(self, arrays: list[np.ndarray], sizes: list[int]) -> None:
        """IndexError, as NumPy raises, for an index parameter with an entry outside [-n, n)."""
        env = dict(zip(self.signature.dims, sizes))
        for k, dim in self.signature.index_bounds:
            values, n = arrays[k], evaluate_dim(dim, env)
            if values.size and (values.min() < -n or values.max() >= n):
                bad = values[(values < -n) | (values >= n)].flat[0]
                raise IndexError(f"{self._where(self.signature.param_names[k])}: index {bad} is out of "
                                 f"bounds for an axis of size {n} ({dim})")

    def _new_call_plan(self):
        """native_call's plan of this kernel's whole call (`native_call.call`), or False where every call
        needs the Python side: index params to check, shape constraints, a dim given by an
        expression, or no C extension."""
        if (native_call is None or self._dim_plan is _SLOW or self.checks_indices or self._constrained
                or any(shape is None and shape_plan is None for _, shape, shape_plan, _ in self._result_plan)):
            return False
        rules = tuple((param, axis, slot, slot >= 0 and bool(fixed), fixed if slot < 0 else 0)
                      for param, axis, slot, fixed in self._dim_plan)
        results = tuple((dtype, shape if shape is not None else tuple(-1 - d if symbolic else d
                                                                       for symbolic, d in shape_plan))
                        for dtype, shape, shape_plan, _ in self._result_plan)
        return native_call.plan(self._address or self.entry_address(), self._np_dtypes, self._ranks, rules,
                                len(self.signature.dims), results)

    def _run_native(self, tensors: list[Tensor], sizes: list[int]) -> tuple[Tensor, ...]:
        """run_bound by adc.runtime.native_call: its work in C, the GIL released while native code runs."""
        results = native_call.run(self._address or self.entry_address(), sizes, tensors,
                                   self._static_results or self._result_shapes(sizes))
        if type(results) is not tuple:      # the kernel's nonzero status
            raise self._failure(results, sizes)
        return results

    def _run_in_python(self, tensors: list[Tensor], sizes: list[int]) -> tuple[Tensor, ...]:
        """run_bound where adc.runtime.native_call is not built: this thread's argument buffer
        filled, the results allocated, the native function called through ctypes."""
        addresses = [t._ptr or t._pointer() for t in tensors]
        results = []
        for dtype, shape in self.result_shapes(sizes):
            array = _result_array(shape, dtype)
            pointer = _addressof(_char_at(array)) if array.nbytes else array.ctypes.data
            addresses.append(pointer)
            results.append(_wrap(array, pointer))      # read-only for Python; the native code writes it
        self.run_at(sizes, addresses)
        return tuple(results)

    def run_at(self, sizes: list[int], addresses: list[int]) -> None:
        """The native call on memory its caller owns: `addresses` the inputs' and then the results'
        C-contiguous data, of the params' and results' dtypes and of the shapes the dims' `sizes`
        give (`dims_of`, `result_shapes`). A framework bridge's tensors (adc/torch.py) cross this
        way with no NumPy array made of them; the caller keeps the memory alive meanwhile. By
        adc.runtime.native_call where it is built (its buffer on the C stack), else through
        ctypes, this thread's argument buffer reused."""
        if native_call is not None:
            status = native_call.run_at(self._address or self.entry_address(), self._arity, sizes, addresses)
            if status != STATUS_OK:
                raise self._failure(status, sizes)
            return
        plans = self._plans.__dict__
        plan = plans.pop("plan", None) or self._new_plan()
        buffer, call = plan
        buffer[:len(sizes) + len(addresses)] = sizes + addresses
        status = call()
        if call.func is self._cfunc:    # bound to settled code (entry_address)
            plans["plan"] = plan
        if status != STATUS_OK:
            raise self._failure(status, sizes)

    def run_into(self, sizes: list[int], arrays: list[np.ndarray]) -> None:
        """run_at on NumPy arrays its caller owns: the inputs, then the results to write, each
        C-contiguous (a result writeable) and of the dtype and shape the dims' `sizes` give (the
        caller checked them: `arrays_of`, `dims_of`, `result_shapes`); an index argument's entries
        are checked here, as a call checks them. What a caller filling its own buffers on every
        call uses (an optimizer's sparse Jacobian values, sparse_derivatives.py)."""
        if self.checks_indices:
            self._check_indices(arrays, sizes)
        if native_call is None:
            for k, array in enumerate(arrays):
                if not array.flags.c_contiguous or (k >= self._arity and not array.flags.writeable):
                    raise ValueError(f"{self.signature.name}: run_into takes C-contiguous arrays, the results writeable")
            self.run_at(sizes, [a.ctypes.data for a in arrays])
            return
        status = native_call.run_arrays(self._address or self.entry_address(), self._arity, sizes, arrays)
        if status != STATUS_OK:
            raise self._failure(status, sizes)

    def arrays_of(self, args: tuple) -> list[np.ndarray]:
        """The call's arguments as C-contiguous NumPy arrays of the params' dtypes and ranks, checked
        and converted as a call does (TypeError or ValueError naming the parameter; their shapes
        are `dims_of`'s to check); the caller's own arrays where they already are (what run_into
        takes)."""
        if len(args) == self._arity:
            for a, want, rank in zip(args, self._np_dtypes, self._ranks):
                if type(a) is not np.ndarray or a.dtype is not want or a.ndim != rank or not a.flags.c_contiguous:
                    break
            else:
                return list(args)
        else:
            args = self._bind(args, {})
        return [np.ascontiguousarray(t.numpy()) for t in self._checked_inputs(args)]

    # The native call on Tensors of the params' dtypes, ranks and shapes, the dims' `sizes` bound:
    # results allocated, the C ABI's argument buffer filled, the kernel run. A call checks its
    # arguments first; a backward walk calls this itself for a split VJP's backward
    # (derivatives.Split.same_dims), whose arguments the forward call checked and whose cotangents
    # have its results' shapes. In C where adc.runtime.native_call is built (setup.py).
    run_bound = _run_native if native_call is not None else _run_in_python

    def _failure(self, status: int, sizes: list[int]) -> BaseException:
        """The error of a native call that returned `status` (status_errors.py)."""
        return status_error(self.signature, status, sizes, self._owner, self.gradient_source)

    def _result_shapes(self, sizes: list[int]) -> tuple[tuple[np.dtype, tuple[int, ...]], ...]:
        """(dtype, shape) of each result for `sizes` (`_static_results` when no dim symbol is in them)."""
        shapes = []
        for dtype, shape, shape_plan, rtype in self._result_plan:
            if shape is None:
                shape = (tuple([sizes[d] if symbolic else d for symbolic, d in shape_plan]) if shape_plan
                         else _shape(rtype, dict(zip(self.signature.dims, sizes))))
            shapes.append((dtype, shape))
        return tuple(shapes)


def as_kernel(value, user: str) -> Kernel:
    """`value` as a compiled Kernel: itself, or what its `__adc_kernel__()` gives (an @adc.kernel
    function, compiled then); TypeError naming `user` ("adc.grad", ...) for anything else."""
    if isinstance(value, Kernel):
        return value
    compiled = getattr(type(value), "__adc_kernel__", None)
    if compiled is None:
        raise TypeError(f"{user}: expects a compiled adc kernel (e.g. module.f, or a function decorated "
                        f"with @adc.kernel), got {type(value).__name__}")
    return compiled(value)


def _dim_plan(sig: KernelSignature) -> tuple | None:
    """(param, axis, slot, fixed) per parameter dim: slot -1 checks the static size `fixed`;
    otherwise the first use of a symbol binds sizes[slot] and later ones (fixed=True) compare."""
    plan, seen = [], set()
    for param, ptype in enumerate(sig.param_types):
        for axis, dim in enumerate(ptype.shape):
            if isinstance(dim, int):
                plan.append((param, axis, -1, dim))
            elif isinstance(dim, SymDim) and dim.is_symbol:
                slot = sig.dims.index(str(dim))
                plan.append((param, axis, slot, slot in seen))
                seen.add(slot)
            else:
                return _SLOW
    return tuple(plan)


def _constraint_plan(sig: KernelSignature) -> tuple:
    """Each shape constraint as its terms (coefficient, slots of the dims multiplied), read
    against a call's sizes list."""
    def terms(constraint) -> tuple:
        if isinstance(constraint, int):
            return ((constraint, ()),)
        return tuple((coeff, tuple(sig.dims.index(name) for name in mono)) for mono, coeff in constraint.terms)
    return tuple(terms(c) for c in sig.constraints)


def _static_shape(t: TensorType) -> tuple[int, ...] | None:
    """The result's shape when no dimension symbol is in it (a scalar's is ())."""
    return tuple(t.shape) if all(isinstance(d, int) for d in t.shape) else None


def _shape_plan(t: TensorType, dims: tuple[str, ...]) -> tuple | None:
    """(is_symbol, slot or size) per result dim, or None when a dim is an expression."""
    plan = []
    for dim in t.shape:
        if isinstance(dim, int):
            plan.append((False, dim))
        elif isinstance(dim, SymDim) and dim.is_symbol and str(dim) in dims:
            plan.append((True, dims.index(str(dim))))
        else:
            return _SLOW
    return tuple(plan)


_wrap, _result_array = Tensor._wrap, buffers.empty
_addressof, _char_at = ctypes.addressof, ctypes.c_char.from_buffer    # tensor.data_address, inlined


def _array_of(value):
    """The array a plain argument (an ndarray, a Tensor or a Variable) holds."""
    kind = type(value)
    return value._array if kind is Tensor else value._value._array if kind is Variable else value


def _shape(t: TensorType, env: dict[str, int]) -> tuple[int, ...]:
    return tuple(evaluate_dim(d, env) for d in t.shape)

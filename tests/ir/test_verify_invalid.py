"""The verifier rejects each kind of invalid IR with a message naming what is wrong.

The modules are built from Op/Func directly: the parser and the Builder refuse them.
"""
import pytest

from adc.errors import Location, VerifyError
from adc.ir.core import Attrs, Func, FuncRef, Module, Op, Value
from adc.ir.types import F32, F64, I64, SymDim, TensorType
from adc.ir.parser import parse_module
from adc.ir.verify import verify

N = SymDim.symbol("N")
VEC = TensorType(F32, (N,))
LOC = Location("k.adc", 1, 1)


def single_op_module(name, operands, attrs, result_types, params=None, loc=LOC):
    params = params if params is not None else [p for p in operands if p.name]
    results = tuple(Value(t) for t in result_types)
    op = Op(name, tuple(operands), Attrs(attrs), results, loc)
    return Module({"f": Func("f", tuple(params), (op,), results)})


def _x():
    return Value(VEC, "x")


def use_before_def():
    x, ghost = _x(), Value(VEC)
    return single_op_module("add", [x, ghost], {}, [VEC], params=[x])


def defined_twice():
    x = _x()
    op = Op("neg", (x,), Attrs(), (Value(VEC),), LOC)
    return Module({"f": Func("f", (x,), (op, op), op.results)})


def undefined_return():
    return Module({"f": Func("f", (_x(),), (), (Value(VEC),))})


def unbound_result_dim():
    return single_op_module("iota", [], {"axis": 0, "dtype": F32, "shape": (N,)}, [VEC], params=[])


def missing_location():
    return single_op_module("neg", [_x()], {}, [VEC], loc=None)


INVALID = [
    # an operand that no parameter or earlier op defines
    (use_before_def, {}, "operand 1 of 'add' is used before it is defined"),
    # the same op listed twice defines its result twice
    (defined_twice, {}, "defined twice"),
    # a returned value that nothing defines
    (undefined_return, {}, "a returned value is not defined"),
    # neg of f32[N] is f32[N], not f64[N]
    (lambda: single_op_module("neg", [_x()], {}, [TensorType(F64, (N,))]), {},
     "expected result types f32[N], found f64[N]"),
    # iota's shape mentions N, but no parameter binds N
    (unbound_result_dim, {}, "uses unbound dimension N"),
    # no such op in the registry
    (lambda: single_op_module("frobnicate", [_x()], {}, [VEC]), {}, "unknown op 'frobnicate'"),
    # add is binary
    (lambda: single_op_module("add", [_x()], {}, [VEC]), {}, "'add' takes 2 operands, got 1"),
    # convert needs its target dtype
    (lambda: single_op_module("convert", [_x()], {}, [VEC]), {}, "needs attributes ['dtype']"),
    # a size-3 axis cannot broadcast to 4
    (lambda: single_op_module("broadcast", [Value(TensorType(F32, (3,)), "x")], {"dims": (0,), "shape": (4,)},
                              [TensorType(F32, (4,))]), {}, "cannot broadcast dimension 3 to 4"),
    # operands of an elementwise op must have one type (broadcasting is explicit)
    (lambda: single_op_module("mul", [_x(), Value(TensorType(F32), "s")], {}, [VEC]), {}, "operand types differ"),
    # a call to a function the module does not have
    (lambda: single_op_module("call", [_x()], {"callee": FuncRef("nowhere")}, [VEC]), {},
     "unknown function @nowhere"),
    # gather's indices are integers, and its axis one of x's
    (lambda: single_op_module("gather", [Value(TensorType(F32, (N, 2)), "x"), _x()], {"axis": 0},
                              [TensorType(F32, (N, 2))]), {}, "indices must be an i32 or i64 tensor, got f32[N]"),
    (lambda: single_op_module("gather", [Value(TensorType(F32, (N, 2)), "x"), Value(TensorType(I64, (N,)), "i")],
                              {"axis": 2}, [TensorType(F32, (N, 2))]), {}, "axis 2 out of range for f32[N,2]"),
    # scatter_add's updates have the shape of base indexed by the indices
    (lambda: single_op_module("scatter_add", [Value(TensorType(F32, (N, 2)), "b"), Value(TensorType(I64, (3,)), "i"),
                                              Value(TensorType(F32, (3, 4)), "u")], {"axis": 0},
                              [TensorType(F32, (N, 2))]), {}, "updates must be f32[3,2]"),
    # locations are mandatory when asked for
    (missing_location, {"require_locations": True}, "'neg' has no location"),
    # a loop body reading a dimension its parent does not define (a scan's length, bound elsewhere)
    (lambda: parse_module(REGION_READS_AN_UNDEFINED_DIMENSION), {}, "its region @step uses dimension S"),
]


REGION_READS_AN_UNDEFINED_DIMENSION = """
func @step(%i: i64, %h: f32[N]) -> f32[N] {
  %0 = iota {axis = 0, dtype = f32, shape = [S]} : f32[S]
  %1 = reduce_sum %0 {axes = [0]} : f32
  %2 = broadcast %1 {dims = [], shape = [N]} : f32[N]
  %3 = add %h, %2 : f32[N]
  return %3
}

func @f(%h: f32[N], %n: i64) -> f32[N] {
  %0 = for %n, %h {body = @step, carried = 1, checkpoint = 0} : f32[N]
  return %0
}
"""


@pytest.mark.parametrize("build, options, message", INVALID, ids=[m for _, _, m in INVALID])
def test_invalid_ir_is_rejected(build, options, message):
    with pytest.raises(VerifyError, match="after pass 'unit'") as info:
        verify(build(), pass_name="unit", **options)
    assert message in str(info.value)


CALLER = """
func @g(%x: f32[N]) -> f32[N] {
  %0 = neg %x : f32[N]
  return %0
}

func @f(%x: f32[N]) -> f32[N] {
  %0 = call %x {callee = @g} : f32[N]
  return %0
}
"""


def test_a_function_that_passed_is_checked_again_when_a_function_it_names_changes_signature():
    # IR is never changed, so a function that passed is not re-checked after a pass that kept it;
    # its call, though, reads its callee's signature, which a pass may have changed
    module = parse_module(CALLER)
    verify(module, pass_name="unit")
    x = Value(TensorType(F64, (N,)), "x")
    other = Func("g", (x,), (), (x,))
    with pytest.raises(VerifyError, match="after pass 'unit': in @f:"):
        verify(module.replace(other), pass_name="unit")
    without = Module({"f": module["f"]}, module.name)
    with pytest.raises(VerifyError, match="unknown function @g"):
        verify(without, pass_name="unit")
    verify(module, pass_name="unit")       # the same functions again: still valid


def test_a_function_that_passed_without_locations_is_checked_when_they_are_required():
    module = missing_location()
    verify(module, pass_name="unit")
    with pytest.raises(VerifyError, match="'neg' has no location"):
        verify(module, pass_name="unit", require_locations=True)

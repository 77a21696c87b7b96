"""The textual IR round-trips: print(parse(text)) == text; malformed IR is a located CompileError."""
import math

import pytest

from adc.errors import CompileError, Location
from adc.ir.core import FuncRef
from adc.ir.ops import OPS
from adc.ir.parser import parse_module
from adc.ir.printer import format_module
from adc.ir.types import F64, SymDim, parse_dim
from adc.ir.verify import verify

# Examples in the lead's ops.py that are not valid printed IR (reported; remove when fixed).
@pytest.mark.parametrize("name", sorted(OPS))
def test_op_example_parses_verifies_and_reprints(name):
    example = OPS[name].example
    module = parse_module(example, f"{name}.ir")
    verify(module)
    assert format_module(module) == example


ALL_ATTRIBUTE_FORMS = '''\
func @caller(%x: f32[N], %y: f32) -> (f32, f32[N]) loc("dir/a b.adc":1:1) {
  %0, %1 = call %x, %y {callee = @later} : f32, f32[N] loc("dir/a b.adc":2:3)
  %2 = constant {dtype = f32, value = 1e+20} : f32
  %3 = constant {dtype = f64, value = -inf} : f64
  %4 = constant {dtype = f64, value = inf} : f64
  %5 = constant {dtype = f64, value = nan} : f64 loc("k.adc":40:7)
  %6 = constant {dtype = bool, value = true} : bool
  %7 = constant {dtype = bool, value = false} : bool
  %8 = constant {dtype = f64, value = -0.0} : f64
  %9 = constant {dtype = i32, value = -3} : i32
  %10 = constant {dtype = f32, value = 1.5e-07} : f32
  %11 = dim {dtype = i64, value = 2*N+1} : i64
  %12 = dim {dtype = i64, value = -N+1} : i64
  %13 = dim {dtype = f32, value = N*N-1} : f32
  %14 = slice %x {start = [1], step = [1], stop = [N]} : f32[N-1]
  %15 = reshape %x {shape = [N,1]} : f32[N,1]
  %16 = broadcast %15 {dims = [0,1], shape = [N,4]} : f32[N,4]
  %17 = transpose %16 {perm = [1,0]} : f32[4,N]
  %18 = reduce_sum %17 {axes = []} : f32[4,N]
  return %0, %1
}

func @later(%a: f32[M], %b: f32) -> (f32, f32[M]) {
  %0 = convert %a {dtype = f64} : f64[M]
  %1 = matmul %2, %0 : f64[M]
  return %b, %a
}
'''.replace("  %1 = matmul %2, %0 : f64[M]\n", "")

MULTI_DIM = '''\
func @heads(%x: f32[B,H,D], %w: f32[B,D,E]) -> f32[B*H,E] {
  %0 = transpose %x {perm = [0,2,1]} : f32[B,D,H]
  %1 = transpose %0 {perm = [0,2,1]} : f32[B,H,D]
  %2 = matmul %1, %w : f32[B,H,E]
  %3 = reshape %2 {shape = [B*H,E]} : f32[B*H,E]
  return %3
}

func @pads(%x: f32[N], %v: f32) -> (f32[N+3], f32[2*N+3]) {
  %0 = pad %x, %v {high = [2], low = [1]} : f32[N+3]
  %1 = concat %0, %x {axis = 0} : f32[2*N+3]
  return %0, %1
}

func @empty() -> () {
  return 
}

func @checks(%x: f32[N]) -> f32 {
  call %x {callee = @tail} : ()
  %0 = reduce_sum %x {axes = [0]} : f32
  return %0
}

func @tail(%x: f32[N]) -> () {
  %0 = slice %x {start = [N-1], step = [1], stop = [N]} : f32[1]
  return 
}
'''


@pytest.mark.parametrize("text", [ALL_ATTRIBUTE_FORMS, MULTI_DIM], ids=["attributes", "shapes"])
def test_hand_written_modules_round_trip(text):
    module = parse_module(text, "m.ir")
    verify(module)
    assert format_module(module) == text


def test_attribute_values_have_their_python_types():
    ops = parse_module(ALL_ATTRIBUTE_FORMS)["caller"].ops
    values = [op.attrs.get("value") for op in ops]
    assert ops[0].attrs["callee"] == FuncRef("later") and isinstance(ops[0].attrs["callee"], FuncRef)
    assert values[1] == 1e20 and values[2] == -math.inf and math.isnan(values[4])
    assert values[5] is True and values[6] is False and values[8] == -3
    assert math.copysign(1.0, values[7]) == -1.0
    assert values[10] == parse_dim("2*N+1") and isinstance(values[10], SymDim)
    assert ops[2].attrs["dtype"] is F64
    assert ops[1].loc is None and ops[0].loc == Location("dir/a b.adc", 2, 3)


def test_line_comments_and_escaped_location_strings():
    text = ('// what this proves\nfunc @f(%x: f32) -> f32 { // trailing\n'
            '  %0 = neg %x : f32 loc("q\\"uote\\u00e9.adc":3:4)\n  return %0\n}\n')
    module = parse_module(text)
    assert module["f"].ops[0].loc == Location('q"uote\u00e9.adc', 3, 4)
    assert format_module(module) == text.split("\n", 1)[1].replace(" // trailing", "")


BAD_IR = [
    # (text, expected line, col, message substring)
    ("func @f(%x: f32) -> f32 {\n  %0 = neg %y : f32\n  return %0\n}\n", 2, 12, "%y is used before it is defined"),
    ("func @f(%x: f32) -> f32 {\n  %0 = neg %x : f64\n  return %0\n}\n", 2, 3, "type rule gives f32"),
    ("func @f(%x: f32) -> f32 {\n  %0 = frobnicate %x : f32\n  return %0\n}\n", 2, 3, "unknown op 'frobnicate'"),
    ("func @f(%x: f32) -> f32 {\n  %0 = add %x : f32\n  return %0\n}\n", 2, 3, "takes 2 operands, got 1"),
    ("func @f(%x: f32) -> f32 {\n  %0 = convert %x : f32\n  return %0\n}\n", 2, 3, "needs attributes ['dtype']"),
    ("func @f(%x: f32) -> f32 {\n  %0 = neg %x : f32\n  %0 = neg %x : f32\n  return %0\n}\n", 3, 3,
     "%0 is defined twice"),
    ("func @f(%x: f32) -> f64 {\n  return %x\n}\n", 2, 3, "signature says f64"),
    ("func @f(%x: f32[N]) -> f32 {\n  %0 = call %x {callee = @g} : f32\n  return %0\n}\n", 2, 3, "unknown function @g"),
    ("func @f(%x: f32) -> f32 {\n  %0 = neg %x : f32\n", 3, 1, "unexpected end of IR"),
    ("func @f(%x: f32) -> f32 {\n  %0 = neg %x : f32 $\n  return %0\n}\n", 2, 21, "unexpected character '$'"),
    ("func @f(%x: f32) -> f32 {\n  %0 = reshape %x {shape = [N+]} : f32\n  return %0\n}\n", 2, 29,
     "malformed dimension"),
    ("func @f(%x: f32[N]) -> f32 {\n  %0 = reshape %x {shape = 3} : f32\n  return %0\n}\n", 2, 3,
     "reshape: malformed attributes {shape}"),
    ("func @f(%x: f32[N]) -> f32 {\n  %0 = reduce_sum %x {axes = [0], axes = [0]} : f32\n  return %0\n}\n", 2, 35,
     "attribute axes is given twice"),
    ("func @f(%x: f32) -> f32 {\n  return %x\n}\n\nfunc @f(%x: f32) -> f32 {\n  return %x\n}\n", 5, 1,
     "@f is defined twice"),
    # attribute lists are flat in adc's IR; text nesting them thousands deep is refused where they start
    pytest.param("func @f(%x: f32[N]) -> f32[N] {\n  %0 = transpose %x {perm = " + "[" * 3000 + "0" + "]" * 3000
                 + "} : f32[N]\n  return %0\n}\n", 2, 37, "attribute lists nest at most 8 deep",
                 id="attribute lists nested 3000 deep"),
]


@pytest.mark.parametrize("text, line, col, message", BAD_IR)
def test_malformed_ir_is_a_located_compile_error(text, line, col, message):
    with pytest.raises(CompileError) as info:
        parse_module(text, "bad.ir")
    err = info.value
    assert (err.file, err.line, err.col) == ("bad.ir", line, col), str(err)
    assert message in err.message
    assert str(err).startswith(f"bad.ir:{line}:{col}: error: ")

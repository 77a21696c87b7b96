"""The op definitions: one `OpDef` record per primitive, holding its type rule and every fact
about it that is not a formula (adc/ir/ops/record.py lists them), one module per op family.

Type rules have one signature, `rule(operand_types, attrs, funcs) -> result_types`,
where `funcs` maps function names to `Func` (only calls and control flow look at it). A rule
raises `TypeRuleError` with an expected-vs-got message; the builder turns it into a located
`CompileError` and the verifier into a `VerifyError`.

Every engine of adc (interpreter, lowering, fusion, the derivative passes, the frontend's
builtins, the eager library) either derives its rows from these records or has one rule per op
in a table of its own keyed by op name; none keeps a list of op names.
"""
from adc.ir.ops.record import (ALL, OPS, TRAITS, OpDef, Scalar, TypeRuleError, define, infer_types,
                               with_trait)
from adc.ir.ops import (elementwise, shape, reductions, linalg, lu, orthogonal, indexing, calls,  # noqa: F401  (defines)
                        control_flow)
from adc.ir.ops.calls import bind_dims, substitute
from adc.ir.ops.indexing import gathered_shape
from adc.ir.ops.reductions import REDUCTIONS

__all__ = ["ALL", "OPS", "TRAITS", "OpDef", "REDUCTIONS", "Scalar", "TypeRuleError", "bind_dims", "define",
           "gathered_shape", "infer_types", "substitute", "with_trait"]

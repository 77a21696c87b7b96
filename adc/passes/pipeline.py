"""The pass pipeline: named `Module -> Module` passes, the verifier after each.

`DEFAULT_PIPELINE` optimizes a whole module, every kernel with its callees inlined
(`adc ir --emit opt|llvm`). The JIT and shared objects split it so that its work grows
with the program's size: `SEPARATE_PIPELINE` optimizes each function alone, once per
module, and each kernel compiled gets its callees inlined and `CLEANUP` again then
(compiler.lower_kernel); inlining every kernel of a chain of n kernels, each calling the
one before, would make n²/2 kernel bodies. The CLI's `--print-after-all` /
`--print-after=PASS` print the module after a pass under a banner, so every stage can
be inspected:

    // ----- IR after simplify -----
    func @f(%x: f32[N]) -> f32[N] {
      return %x
    }
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Callable, Iterable, TextIO

from adc.ir.core import Module
from adc.ir.printer import format_module
from adc.ir.verify import verify as verify_module
from adc.passes.combine_sums import combine_sums
from adc.passes.cse import cse
from adc.passes.dce import eliminate_dead_code
from adc.passes.expand import expand_custom_gradients
from adc.passes.hoist import hoist_invariants
from adc.passes.inline import inline
from adc.passes.merge_regions import merged_regions
from adc.passes.prune_loops import prune_dead_loop_values
from adc.passes.simplify import simplify
from adc.passes.sink_sums import sink_sums
from adc.passes.sink_transposes import sink_transposes


@dataclass(frozen=True)
class Pass:
    """A transformation with the name used by `--print-after` and in verifier errors."""

    name: str
    function: Callable[[Module], Module]


CLEANUP: tuple[Pass, ...] = (
    Pass("simplify", simplify),
    Pass("cse", cse),
    Pass("combine_sums", combine_sums),
    Pass("hoist", hoist_invariants),
    Pass("dce", eliminate_dead_code),
    Pass("prune_loops", prune_dead_loop_values),
)

# What code generation runs last: CLEANUP, then the rewrites that pay off only in code, not in IR
# another transformation reads (a loop differentiated after `sink_sums` would store wider states),
# and the region functions of one body merged, each compiled once.
LOWERING: tuple[Pass, ...] = (*CLEANUP, Pass("sink_sums", sink_sums), Pass("sink_transposes", sink_transposes),
                              Pass("merge_regions", merged_regions))

DEFAULT_PIPELINE: tuple[Pass, ...] = (Pass("expand", expand_custom_gradients), Pass("inline", inline), *LOWERING)
SEPARATE_PIPELINE: tuple[Pass, ...] = (Pass("expand", expand_custom_gradients), *CLEANUP)


def run_pipeline(module: Module, passes: Iterable[Pass] = DEFAULT_PIPELINE, verify: bool = True,
                 print_after_all: bool = False, print_after: set[str] | None = None,
                 out: TextIO = sys.stderr) -> Module:
    """Apply `passes` in order; a pass that breaks an invariant raises VerifyError naming it."""
    passes = tuple(passes)
    unknown = set(print_after or ()) - {p.name for p in passes}
    if unknown:
        raise ValueError(f"cannot print after unknown pass {', '.join(sorted(unknown))} "
                         f"(passes: {', '.join(p.name for p in passes)})")
    for p in passes:
        module = p.function(module)
        if verify:
            verify_module(module, pass_name=p.name)
        if print_after_all or p.name in (print_after or ()):
            out.write(f"// ----- IR after {p.name} -----\n{format_module(module)}")
    return module

"""Recursion on an explicit stack: how adc walks structures as deep as the program is long.

A program's nesting grows with its size (a 10,000-term `a + b + ...` is a
10,000-deep tree; a chain of kernels each calling the previous one is a
500-deep call graph), so no pass may recurse on Python's stack, whose limit is
about a thousand frames. A recursive algorithm is written as a generator that
*yields* where it would recurse and gets the result back from the yield;
`trampoline` runs it with a list as its stack. Exceptions travel up through the
suspended generators as they would through frames, so `with` blocks and
`finally` clauses run in the same order.

    def depth(node):                                  def depth(node):
        return 1 + max(map(depth, node.children),         deepest = 0
                       default=0)              ==>         for child in node.children:
                                                               deepest = max(deepest, (yield depth(child)))
                                                           return 1 + deepest
                                                      trampoline(depth(root))
"""
from __future__ import annotations

from types import GeneratorType
from typing import Any, Callable, Generator


def trampoline(root: Generator, expand: Callable[[Any], Any] | None = None) -> Any:
    """The return value of generator `root`. Whatever a generator on the stack yields is passed
    through `expand` (default: taken as is); a generator that comes out is run the same way and
    its return value sent back, anything else is sent back at once."""
    stack: list[Generator] = [root]
    sent: Any = None
    error: BaseException | None = None
    while True:
        try:
            item = stack[-1].send(sent) if error is None else stack[-1].throw(error)
        except StopIteration as done:
            stack.pop()
            sent, error = done.value, None
            if not stack:
                return sent
            continue
        except BaseException as err:     # raised in a generator: its caller sees it, as with frames
            stack.pop()
            if not stack:
                raise
            sent, error = None, err
            continue
        error = None        # caught by the generator it was thrown into, which goes on
        sub = expand(item) if expand is not None else item
        if isinstance(sub, GeneratorType):
            stack.append(sub)
            sent = None
        else:
            sent = sub

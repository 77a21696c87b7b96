"""Kernels that index a buffer only in code that may not run (a branch, a loop body, a callee, a value
no result reads): their sizes are checked when that code runs, not at the call boundary."""

INDEXED_WHEN_RUN = """
def first(x: f64[M]) -> f64:
    return x[3]

def branch(x: f64[M], z: f64) -> f64:
    if z < 0.0:
        t = x[0]
    else:
        t = z
    return t

def guarded(x: f64[M]) -> f64:
    if M > 0:
        t = x[0]
    else:
        t = 0.0
    return t

def body(x: f64[M], n: i64) -> f64:
    t = 0.0
    for i in range(n):
        t = t + x[5]
    return t

def caller(x: f64[M]) -> f64:
    return first(x) * 2.0

def unread(x: f64[M]) -> f64:
    t = x[3]
    return sum(x)

def unread_caller(x: f64[M]) -> f64:
    t = unread(x)
    return sum(x)
"""

"""The eager library's namespaces: adc.nn and adc.math (TensorFlow's), adc.linalg (NumPy's and SciPy's)."""
from __future__ import annotations

from types import SimpleNamespace

from adc.runtime.axis_ops import (argmax, argmin, cumprod, cumsum, log_softmax, reduce_logsumexp, softmax,
                                  sparse_softmax_cross_entropy_with_logits)
from adc.runtime import linalg as linalg_ops, lu as lu_ops, orthogonal
from adc.runtime.ops import (BUILTIN_BINARY, BUILTIN_UNARY, add, divide, elu, equal, greater, greater_equal, less,
                             less_equal, make_unary, multiply, negative, not_equal, pow_, reduce_max, reduce_mean,
                             reduce_min, reduce_prod, reduce_sum, relu, sigmoid, softplus, subtract)

# adc.math's functions that are builtins of the language but no op (atan2 of one argument, or of sqrt(1 - x*x))
COMPOSED_FUNCTIONS = ("atan", "asin", "acos")
nn = SimpleNamespace(relu=relu, elu=elu, sigmoid=sigmoid, softplus=softplus, softmax=softmax,
                     log_softmax=log_softmax,
                     sparse_softmax_cross_entropy_with_logits=sparse_softmax_cross_entropy_with_logits)
# the builtins that are ops (pow taking literal exponents as the language does), the operators by
# TensorFlow's names, the reductions, scans and softmax
math_ops = SimpleNamespace(**BUILTIN_UNARY | BUILTIN_BINARY | dict(
    pow=pow_, add=add, subtract=subtract, multiply=multiply, divide=divide, negative=negative,
    reduce_sum=reduce_sum, reduce_mean=reduce_mean, reduce_max=reduce_max, reduce_min=reduce_min,
    reduce_prod=reduce_prod, reduce_logsumexp=reduce_logsumexp, argmax=argmax, argmin=argmin,
    cumsum=cumsum, cumprod=cumprod,
    softmax=softmax, log_softmax=log_softmax, less=less, less_equal=less_equal, greater=greater,
    greater_equal=greater_equal, equal=equal, not_equal=not_equal,
    **{name: make_unary(name, name) for name in COMPOSED_FUNCTIONS}))
linalg = SimpleNamespace(cholesky=linalg_ops.cholesky, solve_triangular=linalg_ops.solve_triangular,
                         cho_solve=linalg_ops.cho_solve,
                         lu_factor=lu_ops.lu_factor, lu_solve=lu_ops.lu_solve, solve=lu_ops.solve, inv=lu_ops.inv,
                         det=lu_ops.det, slogdet=lu_ops.slogdet, qr=orthogonal.qr, lstsq=orthogonal.lstsq,
                         eigh=orthogonal.eigh, eigvalsh=orthogonal.eigvalsh, svd=orthogonal.svd)

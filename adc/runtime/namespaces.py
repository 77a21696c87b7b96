"""The eager library's TensorFlow-style namespaces: adc.nn and adc.math."""
from __future__ import annotations

from types import SimpleNamespace

from adc.runtime.axis_ops import (argmax, argmin, cumprod, cumsum, log_softmax, reduce_logsumexp, softmax,
                                  sparse_softmax_cross_entropy_with_logits)
from adc.runtime.ops import (abs_, add, atan2, divide, elu, equal, exp, expm1, floor, greater, greater_equal, hypot,
                             less, less_equal, log, log1p, make_unary, maximum, minimum, multiply, negative,
                             not_equal, pow_, reduce_max, reduce_mean, reduce_min, reduce_prod, reduce_sum, relu,
                             round_, rsqrt, sigmoid, sign, sin, cos, tan, softplus, sqrt, subtract, tanh)

MATH_FUNCTIONS = ("log2", "log10", "exp2", "cbrt", "sinh", "cosh", "asinh", "acosh", "atanh", "atan", "asin", "acos",
                  "erf", "erfc", "lgamma", "digamma")   # adc.math.log2, ...: the builtins of those names
nn = SimpleNamespace(relu=relu, elu=elu, sigmoid=sigmoid, softplus=softplus, softmax=softmax,
                     log_softmax=log_softmax,
                     sparse_softmax_cross_entropy_with_logits=sparse_softmax_cross_entropy_with_logits)
math_ops = SimpleNamespace(
    sin=sin, cos=cos, tan=tan, exp=exp, log=log, log1p=log1p, expm1=expm1, sqrt=sqrt, rsqrt=rsqrt,
    abs=abs_, sign=sign, tanh=tanh, sigmoid=sigmoid, round=round_, floor=floor, add=add, subtract=subtract,
    multiply=multiply, divide=divide, pow=pow_, maximum=maximum, minimum=minimum, negative=negative,
    reduce_sum=reduce_sum, reduce_mean=reduce_mean, reduce_max=reduce_max, reduce_min=reduce_min,
    reduce_prod=reduce_prod, reduce_logsumexp=reduce_logsumexp, argmax=argmax, argmin=argmin,
    cumsum=cumsum, cumprod=cumprod,
    softmax=softmax, log_softmax=log_softmax, less=less, less_equal=less_equal, greater=greater,
    greater_equal=greater_equal, equal=equal, not_equal=not_equal, atan2=atan2, hypot=hypot,
    **{name: make_unary(name, name) for name in MATH_FUNCTIONS})

"""The bits of 2/pi, cut into the windows that exact (Payne-Hanek) reduction by pi/2 multiplies by.

trig.py reduces sin/cos/tan arguments with this table. For x = y 2^s with
y in [1, 2^BUCKET), the bits of 2/pi worth more than 4/ulp(x) only add multiples
of 4 to x 2/pi, so they are dropped; the next 4p bits (p: the type's precision)
are stored as four p-bit windows scaled so that y times each window is an
exact-or-fma-exact product of two floats:

    entry j (s = first + j BUCKET):  U_i = B_i 2^(1 - i p),  B_i = bits k0+ip .. k0+ip+p-1 of 2/pi,
                                     k0 = s - p, bit k weighing 2^-k

so x 2/pi = y (U_0 + U_1 + U_2 + U_3) + (a multiple of 4) + (less than 2^(BUCKET+2-3p)).
Pure integer arithmetic: 2/pi comes from Machin's formula, pi = 16 atan(1/5) - 4 atan(1/239).
"""
from __future__ import annotations

BUCKET = 8   # exponents per table entry: x is scaled to y in [1, 2^BUCKET)
WINDOWS = 4


def _atan_inverse(n: int, one: int) -> int:
    """atan(1/n) * one, by its Taylor series in integers (error: a few units)."""
    total, power, k = 0, one // n, 1
    while power:
        total += power // k if k % 4 == 1 else -(power // k)
        power //= n * n
        k += 2
    return total


def two_over_pi_bits(bits: int) -> int:
    """floor(2/pi 2^bits), exact but for the last few bits of the guard dropped."""
    guard = 64
    one = 1 << (bits + guard)
    pi = 16 * _atan_inverse(5, one) - 4 * _atan_inverse(239, one)
    return (2 * one * one // pi) >> guard


def reduction_table(precision: int, first: int, last: int) -> list[tuple[float, ...]]:
    """Rows of WINDOWS floats for the unbiased exponents first, first+BUCKET, ... up to last."""
    scales = range(first, last + 1, BUCKET)
    length = max(scales) + 1 + WINDOWS * precision
    digits = two_over_pi_bits(length)
    mask = (1 << precision) - 1

    def window(k: int) -> int:
        """Bits k .. k+p-1 of 2/pi as an integer; bits at k <= 0 are zero (2/pi < 1)."""
        end = k + precision - 1
        return (digits >> (length - end)) & mask if end > 0 else 0

    return [tuple(float(window(s - precision + i * precision) * 2.0 ** (1 - i * precision))
                  for i in range(WINDOWS)) for s in scales]

"""The bits of 2/pi and the reduction table cut from them, against 2/pi as published.

The oracle is fdlibm's table of 2/pi (e_rem_pio2.c, `ipio2`: 1584 bits in 24-bit
words), checked there against other published expansions.
"""
from fractions import Fraction

import numpy as np
import pytest

from adc.codegen.lowering.vecmath import two_over_pi

PUBLISHED = int(
    "A2F9836E4E441529FC2757D1F534DDC0DB6295993C439041FE5163ABDEBBC561B7246E3A424DD2E006492EEA09D1921C"
    "FE1DEB1CB129A73EE88235F52EBB4484E99C7026B45F7E413991D639835339F49C845F8BBDF9283B1FF897FFDE05980F"
    "EF2F118B5A0A6D1F6D367ECF27CB09B74F463F669E5FEA2D7527BAC7EBE5F17B3D0739F78A5292EA6BFB5FB11F8D5D08"
    "56033046FC7B6BABF0CFBC209AF4361DA9E391615EE61B086599855F14A068408DFFD8804D73273106061556CA73A8C9"
    "60E27BC08C6B", 16)
PUBLISHED_BITS = 1584


def test_bits_match_the_published_expansion():
    for bits in (24, 53, 700, PUBLISHED_BITS):
        assert two_over_pi.two_over_pi_bits(bits) == PUBLISHED >> (PUBLISHED_BITS - bits), bits


@pytest.mark.parametrize("precision, bias", [(24, 127), (53, 1023)], ids=["f32", "f64"])
def test_rows_reproduce_x_times_two_over_pi_mod_4(precision, bias):
    """x 2/pi - y (U0 + U1 + U2 + U3), x = y 2^s, is a multiple of 4 plus a tail below 2^(BUCKET+2-3p)."""
    table = two_over_pi.reduction_table(precision, -1, bias)
    assert len(table) == (bias + 1) // two_over_pi.BUCKET + 1
    rng = np.random.default_rng(precision)
    two_over_pi_exact = Fraction(PUBLISHED, 2 ** PUBLISHED_BITS)   # its truncation: < 2^-550 x here
    bound = Fraction(2) ** (two_over_pi.BUCKET + 2 - 3 * precision)
    for row, windows in enumerate(table):
        s = row * two_over_pi.BUCKET - 1
        for _ in range(20):
            mantissa = int(rng.integers(1 << (precision - 1), 1 << precision))
            y = Fraction(mantissa, 1 << (precision - 1)) * 2 ** int(rng.integers(0, two_over_pi.BUCKET))
            product = y * sum(Fraction(u) for u in windows)
            difference = (y * Fraction(2) ** s * two_over_pi_exact - product) % 4
            assert difference < bound, (row, y)   # the windows truncate: x 2/pi - product >= 0

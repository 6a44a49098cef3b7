"""Column-wise decimal parsing rounds every number exactly as Python's float() does."""

from __future__ import annotations

import random
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

from judgeblender.pairs.decimals import parse_decimals


def _tokens(strings: list[str]) -> np.ndarray:
    return np.array([s.encode("ascii") for s in strings])


def _bits(values) -> list[int]:
    return np.asarray(values, dtype=np.float64).view(np.int64).tolist()


def _near_midpoints(rng: random.Random, count: int) -> list[str]:
    """19-digit decimals just below and just above the midpoint of two neighbouring doubles:
    where a quotient off by an ulp would show."""
    out = []
    for _ in range(count):
        x = rng.uniform(0, 100)
        mid = (Fraction(x) + Fraction(float(np.nextafter(x, np.inf)))) / 2
        exact = Decimal(mid.numerator) / Decimal(mid.denominator)
        places = 19 - len(str(int(x)).lstrip("0"))
        step = Decimal(1).scaleb(-places)
        out += [f"{exact.quantize(step, rounding='ROUND_DOWN'):f}", f"{exact.quantize(step, rounding='ROUND_UP'):f}"]
    return out


def test_every_value_is_the_correctly_rounded_one():
    rng = random.Random(7)
    strings = _near_midpoints(rng, 3000)
    strings += [repr(rng.uniform(-1e3, 1e3)) for _ in range(3000)]  # run scores as Python prints them
    strings += [f"{rng.uniform(-1e4, 1e4):.{rng.randint(0, 19)}f}" for _ in range(3000)]
    strings += [str(rng.randint(0, 10 ** rng.randint(1, 19))) for _ in range(1000)]
    strings += ["-0.0", "0", "+1.5", ".5", "1.", "-.25", "0.0065739506881072884", "9007199254740993",
                "9999999999999999999", "12345678901234567890", "1e5", "-1.5E-3", "0.0000000000000000000012",
                "0.00000000000000000000001234567890123456789", "3.5"]
    assert _bits(parse_decimals(_tokens(strings))) == _bits([float(s) for s in strings])


@pytest.mark.parametrize("bad", ["x", "1.2.3", "-", "", ".", "1-2", "+-1", "1e"])
def test_a_token_that_is_not_a_number_raises_as_numpy_does(bad):
    with pytest.raises(ValueError):
        parse_decimals(_tokens([bad, "1.0"]))

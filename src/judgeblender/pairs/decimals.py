"""Plain decimal numbers (`-12.345`) parsed column-wise with numpy, rounded exactly as
Python's float() rounds them.

numpy's bytes-to-float conversion costs about 0.3 us per number, which made it the largest
single step of reading a directory of run files. Most run scores are plain decimals with at
most 19 digits, which numpy can do as integer arithmetic:
- up to 2**53 the digits M are exact in a float64, and so is 10**k for k <= 22: M / 10**k is
  one correctly rounded division (Clinger's fast path);
- above 2**53 the quotient can be off by an ulp or two; it is checked, and moved, by comparing
  M * 2**s with the midpoints to its neighbours (2Q +- 1) * 10**k in exact 128-bit integers.
Anything else (exponents, more digits, a tie exactly on a midpoint) goes to numpy's own
conversion, so every value is the correctly rounded one.
"""

from __future__ import annotations

import numpy as np

_DIGITS_MAX = 19  # 10**19 - 1 < 2**64
_POW10 = np.array([10**i for i in range(_DIGITS_MAX + 1)], dtype=np.uint64)
_EXACT_POW10_MAX = 22  # 10.0**22 is the largest power of ten a float64 holds exactly
_FPOW10 = np.array([10.0**i for i in range(_EXACT_POW10_MAX + 1)])
_MASK32 = np.uint64(0xFFFFFFFF)
_TWO53 = 2**53


def parse_decimals(tokens: np.ndarray) -> np.ndarray:
    """float(t) for each token of a numpy bytes ("S") array without NUL bytes inside tokens.
    Raises ValueError for a token that is not a number, as `tokens.astype(float)` does."""
    n, width = len(tokens), tokens.dtype.itemsize
    if n == 0 or width == 0:
        return tokens.astype(np.float64)
    return parse_decimal_chars(np.ascontiguousarray(np.ascontiguousarray(tokens).view(np.uint8).reshape(n, width).T))


def parse_decimal_chars(cols: np.ndarray) -> np.ndarray:
    """parse_decimals for tokens given as a (width x tokens) uint8 array: row j holds each
    token's j-th byte, 0 after its end. Each step below is a 1-D operation over all tokens."""
    width, n = cols.shape
    first = cols[0]
    signed = (first == 45) | (first == 43)
    mantissa = np.zeros(n, dtype=np.uint64)  # the digits as one integer
    n_digits = np.zeros(n, dtype=np.int64)
    n_significant = np.zeros(n, dtype=np.int64)  # from the first non-zero digit on
    k = np.zeros(n, dtype=np.int64)  # digits after the point
    n_dots = np.zeros(n, dtype=np.int64)
    plain = np.ones(n, dtype=bool)
    for j in range(width):
        c = cols[j]
        d = c - np.uint8(48)  # wraps below "0": the digits are exactly the bytes with d < 10
        digit = d < 10
        dot = c == 46
        stray = ~(digit | dot) & (c != 0)
        plain &= ~(stray & ~signed) if j == 0 else ~stray
        n_significant += digit & ((mantissa > 0) | (d > 0))
        mantissa = np.where(digit, mantissa * np.uint64(10) + d, mantissa)
        n_digits += digit
        n_dots += dot
        k += digit & (n_dots > 0)
    plain &= (n_dots <= 1) & (n_digits >= 1) & (n_significant <= _DIGITS_MAX) & (k <= _EXACT_POW10_MAX)
    k = np.minimum(k, _EXACT_POW10_MAX)
    value = mantissa.astype(np.float64) / _FPOW10[k]
    slow = ~plain
    big = plain & (mantissa > _TWO53)
    slow |= big & (k > _DIGITS_MAX)  # 10**k would not fit the 64-bit integer check
    big &= k <= _DIGITS_MAX
    if big.any():
        idx = np.flatnonzero(big)
        fixed, ok = _round_exactly(mantissa[idx], k[idx], value[idx])
        value[idx] = fixed
        slow[idx[~ok]] = True
    value = np.where(first == 45, -value, value)
    if slow.any():
        tokens = np.ascontiguousarray(cols[:, slow].T).view(f"S{width}").ravel()
        value[slow] = tokens.astype(np.float64)
    return value


def _round_exactly(m: np.ndarray, k: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The correctly rounded m / 10**k starting from an estimate q within a few ulps, and
    which rows it settled (a tie on a midpoint or an out-of-range shift is left unsettled)."""
    p = _POW10[k]
    settled = np.zeros(len(m), dtype=bool)
    q = q.copy()
    for _ in range(4):
        frac, exp = np.frexp(q)
        big_q = (frac * float(_TWO53)).astype(np.uint64)  # q = Q * 2**(exp - 53), 2**52 <= Q < 2**53
        shift = 54 - exp.astype(np.int64)  # m / 10**k vs (2Q +- 1) * 2**(exp - 54)
        usable = (shift >= 0) & (shift <= 64) & (big_q > 2**52)  # Q = 2**52: the lower ulp is half
        s = np.clip(shift, 0, 64).astype(np.uint64)
        lhs = (np.where(s == 0, 0, m >> (np.uint64(64) - s)), m << s)
        above = _compare(lhs, _mul128(2 * big_q + 1, p))
        below = _compare(lhs, _mul128(2 * big_q - 1, p))
        step = np.where(above > 0, 1, np.where(below < 0, -1, 0))
        done = usable & (step == 0) & (above != 0) & (below != 0)
        settled |= done
        if settled.all() or not (usable & (step != 0)).any():
            break
        move = ~settled & usable & (step != 0)
        q[move] = np.nextafter(q[move], np.where(step[move] > 0, np.inf, -np.inf))
    return q, settled


def _mul128(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """a * b as (high, low) 64-bit halves, from 32-bit partial products."""
    a0, a1, b0, b1 = a & _MASK32, a >> np.uint64(32), b & _MASK32, b >> np.uint64(32)
    p00, p01, p10, p11 = a0 * b0, a0 * b1, a1 * b0, a1 * b1
    mid = (p00 >> np.uint64(32)) + (p01 & _MASK32) + (p10 & _MASK32)
    low = (p00 & _MASK32) | (mid << np.uint64(32))
    high = p11 + (p01 >> np.uint64(32)) + (p10 >> np.uint64(32)) + (mid >> np.uint64(32))
    return high, low


def _compare(x: tuple[np.ndarray, np.ndarray], y: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """-1, 0 or 1 per row for 128-bit numbers given as (high, low)."""
    hi = (x[0] > y[0]).astype(np.int8) - (x[0] < y[0])
    lo = (x[1] > y[1]).astype(np.int8) - (x[1] < y[1])
    return np.where(hi != 0, hi, lo)

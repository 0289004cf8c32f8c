"""Divisors, ordered factorisations and prime factors of loop extents.

Tile sizes in tensorgym are divisors of loop extents. Divisors are found by
trial division up to the square root (O(sqrt(n)), so an extent of 10**12
takes about a millisecond) and cached, since every space asks for the same
few extents over and over.

The ordered factorisations of a highly composite extent are many (a 4-level
split of 14414400 has millions), so spaces never list them to draw one:
:func:`count_factorizations` counts them over the divisor lattice and
:func:`nth_factorization` builds the one at a given index of
:func:`factorizations`' order, both in time polynomial in the number of
divisors.
"""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=4096)
def divisors(n: int) -> tuple[int, ...]:
    """The positive divisors of ``n``, ascending."""
    if n < 1:
        raise ValueError(f"divisors are defined for positive integers, got {n}")
    small, large = [], []
    d = 1
    while d * d <= n:
        if n % d == 0:
            small.append(d)
            if d * d != n:
                large.append(n // d)
        d += 1
    return tuple(small + large[::-1])


@lru_cache(maxsize=4096)
def factorizations(n: int, parts: int, max_last: int) -> tuple[tuple[int, ...], ...]:
    """All ordered ``parts``-tuples of positive ints with product ``n`` and last entry <= ``max_last``."""
    if parts == 1:
        return ((n,),) if n <= max_last else ()
    out = []
    for d in divisors(n):
        for rest in factorizations(n // d, parts - 1, max_last):
            out.append((d, *rest))
    return tuple(out)


@lru_cache(maxsize=65536)
def count_factorizations(n: int, parts: int, max_last: int) -> int:
    """``len(factorizations(n, parts, max_last))``, without listing them."""
    if parts == 1:
        return 1 if n <= max_last else 0
    return sum(count_factorizations(n // d, parts - 1, max_last) for d in divisors(n))


def nth_factorization(n: int, parts: int, max_last: int, index: int) -> tuple[int, ...]:
    """``factorizations(n, parts, max_last)[index]``, without listing them."""
    total = count_factorizations(n, parts, max_last)
    if not 0 <= index < total:
        raise IndexError(f"index {index} out of range: {n} has {total} such factorisations")
    out = []
    for level in range(parts, 1, -1):
        for d in divisors(n):
            count = count_factorizations(n // d, level - 1, max_last)
            if index < count:
                out.append(d)
                n //= d
                break
            index -= count
    out.append(n)
    return tuple(out)


def prime_factors(n: int) -> list[int]:
    """The prime factors of ``n`` with multiplicity, ascending (``12 -> [2, 2, 3]``)."""
    out, p = [], 2
    while p * p <= n:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    if n > 1:
        out.append(n)
    return out

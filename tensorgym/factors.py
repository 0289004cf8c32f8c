"""Divisors, ordered factorisations and prime factors of loop extents.

Tile sizes in tensorgym are divisors of loop extents. Divisors are found by
trial division up to the square root (O(sqrt(n)), so an extent of 10**12
takes about a millisecond) and cached, since every space asks for the same
few extents over and over.
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

"""What the machines draw: block sizes, id bases, namespaces, event schedules, passed-back ids and token alphabets.

Each strategy is a choice of the conformance machines (``drive.machines``)
with the reason for it; ``namespace_population`` makes many tenants from one seed.
"""

from __future__ import annotations

import random

from hypothesis import strategies as st

from spec.api import ID_LIMIT, Namespace
from prefixspec.drive.coverage import BOUNDARY_VALUES

BLOCK_SIZES = st.one_of(st.integers(1, 4), st.sampled_from([5, 7, 16, 17, 32, 64, 128, 256]))
"""Half the examples at 1-4 tokens a block (dense traffic finds the logic bugs), half at odd and engine sizes, up to
2^7 and 2^8 (a block size kept in a byte, signed or not, is wrong there)."""

EXTREME_BLOCK_SIZES = st.integers(1, 2)
"""The extremes stage's block sizes: a path DEEP nodes deep costs the spec depth squared times the block size
to build and walk, and a stage whose examples may all miss the deep path cannot be held to reaching it."""

ID_BASES = st.one_of(st.just(0), st.sampled_from([ID_LIMIT - 2, 2**31 - 2, 2**16 - 2, 2**15 - 2, 2**8 - 2, 2**7 - 2]))
"""Where an example's block ids start counting: 0, or just below a boundary, so that its ids cross it."""

EXTREMES = ("deep_path", "wide_node", "many_locks", "many_tenants")
"""The extreme rules, one of which opens each example of the extremes stage."""

NAMESPACE_PAIRS: tuple[tuple[Namespace, Namespace], ...] = (
    (("a", "bc"), ("ab", "c")),
    (None, ""),
    (0, "0"),
    ("", ()),
    ((None,), None),
    ("a b;c", "a"),
    (1, (1,)),
    ("é", "e"),
)
"""Namespaces that coincide when concatenated, printed or written carelessly, but are different (R12)."""

HASH_MODULUS = 2**61 - 1
"""CPython hashes an int modulo this prime: ``n`` and ``n + HASH_MODULUS`` hash alike, and so do -1 and -2."""


def namespace_population(count: int, seed: int) -> list[Namespace]:
    """``count`` distinct namespaces (R12), mixed as ``seed`` says: ints, strs and tuples, neighbours whose texts
    coincide (``7``, ``"7"``, ``(7,)``, ``("7",)``; ``("t", "71")`` and ``("t7", "1")``) or whose hashes do
    (``7`` and ``7 + 2**61 - 1``; ``-1`` and ``-2``).

    Made from a seed rather than drawn one by one: Hypothesis spends its choice budget per drawn value, and a
    population of a thousand must cost two draws.  Any mapping of namespaces onto fewer slots or values than
    ``count`` (a table, a digest) gives two of them one place.
    """
    rng = random.Random(seed)
    found: list[Namespace] = []
    seen: set[tuple[str, Namespace]] = set()  # by type too: the population is distinct as values of their shape
    serial = 0
    while len(found) < count:
        serial += 1
        number = rng.choice((serial, rng.randrange(2**64), -serial))
        text = str(number)
        cut = rng.randrange(len(text) + 1)
        family: tuple[Namespace, ...] = (
            number,
            text,
            (number,),
            (text,),
            ("t", text),
            ("t" + text[:cut], text[cut:]),
            number + HASH_MODULUS,
            -1 - number if number > 0 else number - 1,
            "é" + text,
            "e" + text,
            (None, number),
            "",
            (),
        )
        for space in rng.sample(family, rng.randint(1, len(family))):
            key = (repr(type(space)), space)
            if key not in seen and len(found) < count:
                seen.add(key)
                found.append(space)
    return found


NAMESPACE_DRAW = st.one_of(st.none(), st.sampled_from([space for pair in NAMESPACE_PAIRS for space in pair]))
"""Half the calls in the default namespace, half in one of the namespaces that alias carelessly."""

TAKE_SCHEDULES = st.one_of(st.just(1), st.integers(2, 6), st.none())
"""When the lockstep takes the target's events (R13): after every insert and evict, after every k-th, or only at
the end of the example, as a router that polls now and then: a take then spans stores, removals and refusals."""

PASSED_BACK = st.one_of(
    st.sampled_from(["cached", "fresh"]),
    st.lists(st.sampled_from(["cached", "duplicate", "refused"]), min_size=2, max_size=5),
)
"""What an insert passes back at the positions it finds cached: all the cached ids (an engine that matched first),
all new ones (a racing engine), or a mix, cycled over the positions: the cached id, a different one (a duplicate)
or one cached at another position (refused), so that the cache's own id meets its own position after a differing one."""

MIXED_PASSED_BACK = st.one_of(
    st.sampled_from([["duplicate", "cached"], ["cached", "duplicate", "cached"], ["cached", "refused"], ["refused", "cached", "duplicate"]]),
    st.lists(st.sampled_from(["cached", "duplicate", "refused"]), min_size=2, max_size=5),
)
"""Mixes only: the named ones (the cache's own id after a differing one; first and last agreeing, the middle not)
and any other."""

TOKEN_ALPHABETS = (
    st.integers(0, 3),
    st.sampled_from(BOUNDARY_VALUES),
    st.integers(0, ID_LIMIT - 1),
)
"""A prompt's tokens come from one of these: four dense values (sharing, splits), the boundary values, anything."""

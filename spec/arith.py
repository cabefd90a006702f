"""The arithmetic of the rules, as small pure functions with contracts.

Each contract states what the rule *means* (for the usable prefix: a multiple of
B, at most n - 1, and the largest such), not the formula again, so that
``crosshair check`` has something to prove.  The contracts are PEP 316
docstrings rather than icontract decorators: they need no run-time dependency,
stay invisible to mypy and cost nothing when the spec runs, while CrossHair
reads them by default.  Every condition is about integers (or one float),
because CrossHair proves integer arithmetic well and reports false
counterexamples on equality of symbolic lists.

The one float, the hit rate, is proved with floats modelled as reals
(``prefixspec/commands/crosshair.py`` says why): its contract holds for IEEE doubles
too, because int / int is correctly rounded and the precondition keeps the
counts where rounding cannot reach 0.0 or 1.0.

``spec/model/`` computes every length with these functions; ``impl/blocks.py``
keeps its own versions, and ``make crosshair`` compares each pair with
``crosshair diffbehavior``.  ``docs/crosshair.md`` lists what each contract
means and what CrossHair found while they were written.
"""

from __future__ import annotations


def usable_prefix(n_tokens: int, block_size: int) -> int:
    """R3: the tokens a match may cover, leaving the last prompt token to compute.

    pre: n_tokens >= 0
    pre: block_size >= 1
    post: __return__ % block_size == 0
    post: 0 <= __return__ <= max(n_tokens - 1, 0)
    post: n_tokens == 0 or __return__ + block_size > n_tokens - 1
    """
    if n_tokens == 0:
        return 0
    return ((n_tokens - 1) // block_size) * block_size


def full_blocks(n_tokens: int, block_size: int) -> int:
    """R2, R5: how many whole blocks ``n_tokens`` tokens fill; the partial tail is not one.

    pre: n_tokens >= 0
    pre: block_size >= 1
    post: __return__ >= 0
    post: __return__ * block_size <= n_tokens < (__return__ + 1) * block_size
    """
    return n_tokens // block_size


def block_span(index: int, block_size: int) -> tuple[int, int]:
    """R5: the tokens [start, end) that block ``index`` of a prefix holds.

    pre: index >= 0
    pre: block_size >= 1
    post: __return__[1] - __return__[0] == block_size
    post: __return__[0] % block_size == 0
    post: full_blocks(__return__[0], block_size) == index
    """
    start = index * block_size
    return (start, start + block_size)


def segment_blocks(parent_end: int, node_end: int, block_size: int) -> int:
    """R4: the blocks a node holds, between its parent's prefix end and its own.

    The parent's blocks followed by the node's are exactly the blocks of the
    node's prefix.  (Stated as ``parent_end + __return__ * block_size ==
    node_end`` the same rule is beyond z3: a product of two unknowns.)

    pre: block_size >= 1
    pre: 0 <= parent_end <= node_end
    pre: parent_end % block_size == 0 and node_end % block_size == 0
    post: __return__ >= 0
    post: full_blocks(parent_end, block_size) + __return__ == full_blocks(node_end, block_size)
    """
    return (node_end - parent_end) // block_size


def hit_rate(hit_tokens: int, query_tokens: int) -> float:
    """R9: the share of queried tokens that the cache covered; 0.0 before any query token.

    Up to 2**53 query tokens the meaning survives the rounding to a double:
    for 0 < hit_tokens < query_tokens <= 2**53 the exact share lies between
    1 / 2**53 and 1 - 1 / 2**53, which are doubles, and int / int rounds
    correctly (so monotonically): no hit rounds to 0.0 and no miss to 1.0.
    Far beyond the bound both happen: 1 / 10**400 is 0.0 and
    2**54 / (2**54 + 1) is 1.0.  No engine counts that many tokens.

    pre: 0 <= hit_tokens <= query_tokens <= 2**53
    post: 0.0 <= __return__ <= 1.0
    post: (__return__ == 0.0) == (hit_tokens == 0)
    post: (__return__ == 1.0) == (hit_tokens == query_tokens and query_tokens > 0)
    """
    if query_tokens == 0:
        return 0.0
    return hit_tokens / query_tokens


def cached_tokens(cached_blocks: int, block_size: int) -> int:
    """R9: the tokens that ``cached_blocks`` whole blocks cover.

    pre: cached_blocks >= 0
    pre: block_size >= 1
    post: __return__ % block_size == 0
    post: full_blocks(__return__, block_size) == cached_blocks
    """
    return cached_blocks * block_size

"""A hit rate that divides the wrong way: queried tokens per hit token.

Same name, signature and contract as ``spec.arith.hit_rate``; the body
guards the zero it divides by, so the bug shows only as a rate above 1.
"""

from __future__ import annotations


def hit_rate(hit_tokens: int, query_tokens: int) -> float:
    """R9: the share of queried tokens that the cache covered; 0.0 before any query token.

    pre: 0 <= hit_tokens <= query_tokens <= 2**53
    post: 0.0 <= __return__ <= 1.0
    post: (__return__ == 0.0) == (hit_tokens == 0)
    post: (__return__ == 1.0) == (hit_tokens == query_tokens and query_tokens > 0)
    """
    if hit_tokens == 0:
        return 0.0
    return query_tokens / hit_tokens

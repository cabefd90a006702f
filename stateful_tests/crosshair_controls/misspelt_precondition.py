"""A precondition that cannot be evaluated: ``blocksize`` is not a parameter.

Every input raises NameError in ``pre:``, so no input meets it and CrossHair
has nothing to refute: it says "Unable to meet precondition" and exits 0.
The body is as wrong as ``wrong_usable_prefix``; only the gate's reading of
the report can tell that nothing was proved.
"""

from __future__ import annotations


def usable_prefix(n_tokens: int, block_size: int) -> int:
    """R3: the tokens a match may cover, leaving the last prompt token to compute.

    pre: n_tokens >= 0
    pre: blocksize >= 1
    post: __return__ % block_size == 0
    post: 0 <= __return__ <= max(n_tokens - 1, 0)
    post: n_tokens == 0 or __return__ + block_size > n_tokens - 1
    """
    return (n_tokens // block_size) * block_size

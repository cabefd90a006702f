"""The optimised prefix cache, checked against the specification in ``spec``."""

from impl.cache import RadixCache

__all__ = ["RadixCache"]

"""R12: the spec's namespaces as SGLang's ``RadixKey`` fields: an injective string key and its inverse.

Shared by the adapters of SGLang's caches and by the vLLM adapter (which salts its hashes with the same key).
"""

from __future__ import annotations

import functools
import json
from typing import Any, Literal

from spec.api import Namespace, NamespacePart


NamespaceField = Literal["extra_key", "cache_salt"]
"""Which field of SGLang's ``RadixKey`` carries the spec's namespace (R12)."""


def _tagged(part: NamespacePart) -> list[Any]:
    if part is None:
        return ["n"]
    if isinstance(part, int):
        return ["i", part]
    return ["s", part]


def namespace_key(namespace: Namespace) -> str | None:
    """R12: the string SGLang keys a namespace by (its ``RadixKey.extra_key``, a ``str | None``,
    radix_cache.py:67), injective, so that the adapter itself never aliases two namespaces.

    - ``None`` (the default namespace) is ``None``: SGLang's own default, no extra_key at all;
    - an int n is ``'["i",n]'``, a str s is ``'["s",s]'`` (s JSON-escaped), a tuple is
      ``'["t",[part,...]]'`` with each part so, and a None inside a tuple ``'["n"]'``.

    ``json.dumps`` of these tagged lists is one-to-one (``json.loads`` inverts it, ``namespace_of``),
    so ``0`` is ``'["i",0]'`` and ``"0"`` is ``'["s","0"]'``, ``""`` is ``'["s",""]'`` (never None, nor
    empty: SGLang turns an empty cache_salt into None, radix_cache.py:77), ``("a", "bc")`` is
    ``'["t",[["s","a"],["s","bc"]]]'`` and ``("ab", "c")`` is ``'["t",[["s","ab"],["s","c"]]]'``.
    """
    if namespace is None:
        return None
    if isinstance(namespace, tuple):
        tagged: list[Any] = ["t", [_tagged(part) for part in namespace]]
    else:
        tagged = _tagged(namespace)
    return json.dumps(tagged, separators=(",", ":"), ensure_ascii=True)


@functools.lru_cache(maxsize=4096)
def namespace_of(key: str | None) -> Namespace:
    """The namespace ``namespace_key`` encoded as ``key`` (the inverse; remembered: every snapshot decodes every node's)."""
    if key is None:
        return None

    def part(tagged: list[Any]) -> NamespacePart:
        if tagged[0] == "n":
            return None
        value: int | str = tagged[1]
        return value

    decoded: list[Any] = json.loads(key)
    if decoded[0] == "t":
        return tuple(part(item) for item in decoded[1])
    return part(decoded)

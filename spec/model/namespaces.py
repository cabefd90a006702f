"""R12: namespaces: every rule's prefix is (namespace, tokens), so namespaces share only what they share by construction."""

from __future__ import annotations

from spec.api import Namespace
from spec.model.snapshot import Snapshotting


class Namespacing(Snapshotting):
    """``Snapshotting`` and R12, below."""

    # R12: namespaces ----------------------------------------------------------------------
    # Every rule above reads "prefix" as (namespace, tokens): the state's keys hold the namespace, so a prefix
    # of one namespace never meets another's.  What the namespaces share is shared by construction: one
    # ``_cached_at`` (R5's one owner), one clock and one ``eviction_key`` over every leaf (R7, R8), one set
    # of counters (R9).  ``as_namespace`` checks the argument's shape (``spec.api.is_namespace``).

    def namespaces(self) -> set[Namespace]:
        """R12: every namespace a prefix was ever cached in (the roots of the walks of R4 and R11)."""
        return self._namespaces

"""R3: what a match searches: the longest cached whole-block prefix of the usable prefix."""

from __future__ import annotations

from collections.abc import Sequence

from spec import arith
from spec.api import Namespace, PrefixMatch
from spec.model.contents import Contents
from spec.model.state import as_ids, as_namespace


class Matching(Contents):
    """``Contents`` and R3, below."""

    # R3: what a match searches ----------------------------------------------------

    def match_prefix(self, tokens: Sequence[int], namespace: Namespace = None) -> PrefixMatch:
        """R3: the longest cached whole-block prefix of the usable prefix, within ``namespace`` (R12).

        Only the first u = usable_prefix(n, B) tokens are searched, so the last
        prompt token is always left to compute.  A match ending inside a node
        splits it (R4), is one use of its path (R7) and is counted (R9).  It publishes no event (R13).
        """
        prompt = as_ids(tokens, "tokens")
        space = as_namespace(namespace)
        usable = arith.usable_prefix(len(prompt), self._block_size)
        path = self.cached_path(self.whole_block_prefixes((space, prompt[:usable])))
        matched = len(path[-1][1]) if path else 0
        self.next_call()
        node = self.root
        if path:
            node = self.split_at(path[-1])
            if self._rules.use != "release":  # variant use=release: a lookup touches nothing (R7)
                self.use_path(path, hit=False)
        self._lookups += 1
        self._query_tokens += len(prompt)
        self._hit_tokens += matched
        return PrefixMatch(matched_tokens=matched, blocks=self.blocks_of(path), node=node)

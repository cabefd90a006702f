"""The snapshot digest of a ``RadixTree`` (R11), kept as calls change the tree.

Once a digest was asked for, the tree marks the nodes a call changes (``reshaped``: their blocks, copies, end or existence; ``restamped``:
their locks or their place in the order) and keeps its blocks' release stamps and their digest terms itself.
``DigestKeeper.digest`` turns the marks into the nodes' terms (``spec.api.node_digest_term``), so a digest
costs the nodes the calls since the last one changed, not the tree's size: a reshaped node reads its prefix
up to the root once, a restamped one only its locks and key.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable

from impl.radix import TOKEN_TYPECODE, Key, Node, RadixTree, eviction_key
from spec.api import Counters, Rules, counters_digest_of, node_digest_term, node_shape_hash


def order_key(rules: Rules) -> Callable[[Node], tuple[int, ...]]:
    """A node's place in the snapshot's order, as the spec's digest writes it: the tree's own eviction key
    (``(last use, 0)`` where the tree keys by the last use alone, as ``use=path`` ranks every use 0), none under
    ``use=release``, whose order is the blocks' (R7, R8)."""
    if rules.use == "release":
        return lambda node: ()
    if rules.evict == "lru" and rules.use == "path":
        return lambda node: (node.last_use, 0)  # the default: eviction_key's int, as the spec ranks each use 0, in one call
    key = eviction_key(rules)

    def as_tuple(node: Node) -> tuple[int, ...]:
        value: Key = key(node)
        return (value, 0) if isinstance(value, int) else value

    return as_tuple


def shape_of(tree: RadixTree, node: Node) -> int:
    """``spec.api.node_shape_hash`` of a live node: its namespace and prefix, read up to the root, its blocks and copies.

    Runtime complexity: O(depth) Python steps, O(prefix) in C.
    """
    segments: list[bytes] = []
    top = node
    walker = node
    root = tree.root
    while walker is not root:
        segments.append(walker.segment)
        top = walker
        walker = walker.parent
    segments.reverse()
    prefix = tuple(array(TOKEN_TYPECODE, b"".join(segments)))
    namespace = top.key[0] if isinstance(top.key, tuple) else None
    blocks = tuple(node.blocks)
    copies = tree.copies
    shown: tuple[tuple[int, ...], ...] = ()
    if copies and any(block in copies for block in blocks):
        shown = tuple(tuple(copies.get(block, ())) for block in blocks)
    return node_shape_hash(namespace, prefix, blocks, shown)


class DigestKeeper:
    """The nodes' digest terms of one tree and their sum, brought up to date from the tree's marks when asked."""

    def __init__(self, tree: RadixTree, rules: Rules) -> None:
        self._tree = tree
        self._order_key = order_key(rules)
        self._shapes: dict[Node, int] = {}
        self._terms: dict[Node, int] = {}
        self._node_terms = 0
        self._last: tuple[Counters, int, int] | None = None
        """The last digest made, and the counters and block terms it was made with."""

    def digest(self, block_size: int, counters: Counters) -> int:
        """``spec.api.counters_digest_of`` the tree with ``counters`` (R9's, in ``PrefixStats``' order).

        Runtime complexity: O(1) plus that of ``shape_of`` per reshaped node and O(1) per restamped one.
        """
        tree = self._tree
        last = self._last
        if last is not None and not tree.reshaped and not tree.restamped and last[0] == counters and last[1] == tree.block_terms:
            # Nothing marked since, the same counters: the last digest (a lockstep reads one after every call, a query's too).
            return last[2]
        if not tree.tracking:  # the first digest: every live node, and the tree marks its changes from now on
            tree.tracking = True
            tree.reshaped.update(node for node, _prefix, _namespace in tree.prefixes())
        reshaped, restamped = tree.reshaped, tree.restamped
        shapes, terms, order_key = self._shapes, self._terms, self._order_key
        node_terms = self._node_terms
        if reshaped:
            for node in reshaped:
                shapes.pop(node, None)
            restamped |= reshaped
            reshaped.clear()
        # Emptied in place, not made anew: most calls mark a path or a lock alone, and two new sets a digest
        # were a tenth of its cost (bench.instructions).
        for node in restamped:
            node_terms -= terms.pop(node, 0)
            if node.owner is not tree:
                shapes.pop(node, None)  # evicted: its NodeId is never reused
                continue
            shape = shapes.get(node)
            if shape is None:
                shape = shapes[node] = shape_of(tree, node)
            term = terms[node] = node_digest_term(shape, node.locks, order_key(node))
            node_terms += term
        restamped.clear()
        self._node_terms = node_terms
        digest = counters_digest_of(block_size, counters, node_terms, tree.block_terms)
        self._last = (counters, tree.block_terms, digest)
        return digest

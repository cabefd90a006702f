"""R11's snapshot of impl's tree: every non-root node as a ``NodeView``, in the order the interface fixes."""

from __future__ import annotations

from impl.node import Key, eviction_key
from impl.radix import RadixTree
from spec.api import NodeView, PrefixStats, Rules, Snapshot


def snapshot_of(tree: RadixTree, rules: Rules, block_size: int, stats: PrefixStats) -> Snapshot:
    """The canonical state (R11) of ``tree``, evicting by ``rules``, with ``stats``: every non-root node, oldest
    last use first, a call's nodes (one path) shortest prefix first; under ``use=release`` by namespace and prefix,
    with the released blocks in their order.

    Runtime complexity: O(sum of the prefix lengths + N log N) for N nodes.
    """
    ordered: list[tuple[Key, int, NodeView]] = []
    key = eviction_key(rules)
    copies = tree.copies
    for node, prefix, namespace in tree.prefixes():
        shown: tuple[tuple[int, ...], ...] = ()
        if copies and any(block in copies for block in node.blocks):
            shown = tuple(tuple(copies.get(block, ())) for block in node.blocks)
        ordered.append((key(node), len(prefix), NodeView(prefix, tuple(node.blocks), node.locks, namespace, shown)))
    if tree.released is not None:  # use=release: the blocks' own order, the nodes by namespace and prefix (R11)
        views = sorted((view for _, _, view in ordered), key=lambda view: (repr(view.namespace), view.prefix))
        return Snapshot(block_size, tuple(views), stats, tuple(tree.released))
    ordered.sort(key=lambda entry: (entry[0], entry[1]))
    return Snapshot(block_size, tuple(view for _, _, view in ordered), stats)

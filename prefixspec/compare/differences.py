"""How two caches' answers differ, in words: the rule a differing result breaks, and the first part of two snapshots that differs.

``snapshots_agree`` is R11's verdict on two snapshots (the order compared as far as a call can observe it and
the cache reports it, ``compare.observable``); ``describe_snapshot_difference`` says where they differ, for a
``lockstep.Disagreement``.
"""

from __future__ import annotations

from collections.abc import Sequence

from spec.api import ERROR_TYPES, NodeView, Rules, Snapshot
from prefixspec.compare.observable import OrderReport, eviction_walk, observable_difference, on_one_root_path
from prefixspec.vocabulary import BY_OP, render_ints, render_namespace, render_stats


def result_rule(op: str, expected: str, got: str) -> str:
    """The rule a difference in the result of ``op`` breaks: its refusals' rule when either cache refused it
    (not by a wrong result), else its result's (the call table's ``rule`` and ``refusal_rule``)."""
    refused = [text for text in (expected, got) if text.split(" ")[0] in ERROR_TYPES or text.startswith("crash ")]
    kind = BY_OP[op]
    if refused and not any(text.startswith("crash WrongResult") for text in refused):
        return kind.refusal_rule
    return kind.rule


def node_label(view: NodeView) -> str:
    """A node as an order difference names it: its prefix, and its namespace outside the default (R12)."""
    return render_ints(view.prefix) + ("" if view.namespace is None else f" ns={render_namespace(view.namespace)}")


def order_text(views: Sequence[NodeView]) -> str:
    return "[" + ", ".join(node_label(view) for view in views) + "]"


def shared_prefix(prefix: Sequence[int], tokens: Sequence[int]) -> int:
    """How many leading tokens ``prefix`` shares with ``tokens``: which node the last call moved, when several could have."""
    length = 0
    for ours, theirs in zip(prefix, tokens):
        if ours != theirs:
            break
        length += 1
    return length


def moved_node(expected: Sequence[NodeView], got: Sequence[NodeView], tokens: Sequence[int] = ()) -> str:
    """For two orders of the same nodes: the one node whose move makes them differ, with both its places.

    When several would do (two neighbours swapped), the one sharing the
    longest prefix with the last call's ``tokens`` is named: the call moved it.
    """
    def shared(view: NodeView) -> int:
        return shared_prefix(view.prefix, tokens)

    candidates = [
        view for view in expected if [other for other in expected if other != view] == [other for other in got if other != view]
    ]
    if candidates:
        view = max(candidates, key=lambda candidate: (shared(candidate), abs(expected.index(candidate) - got.index(candidate))))
        return (
            f"node {node_label(view)} moved: it is at place {expected.index(view) + 1} of {len(expected)} "
            f"in the spec's order, {got.index(view) + 1} in the cache's"
        )
    for index, (wanted, actual) in enumerate(zip(expected, got)):
        if wanted != actual:
            return f"from place {index + 1} of {len(expected)} on: the spec has node {node_label(wanted)} there, the cache {node_label(actual)}"
    return "the orders differ"


def snapshots_agree(expected: Snapshot, got: Snapshot, order: OrderReport = "eviction-order") -> bool:
    """R11: the same block size, counters and nodes, and the order as far as a call can observe it and the cache reports it.

    ``order`` is how the cache reports it (``compare.observable``): its eviction order, compared on the pairs of
    nodes off one root path; its eviction walk, compared with the spec's; or none.
    """
    if expected == got:
        return True
    if expected.block_size != got.block_size or expected.stats != got.stats:
        return False
    if len(expected.nodes) != len(got.nodes) or set(expected.nodes) != set(got.nodes):
        return False
    if order == "unordered":
        return True
    if expected.released != got.released:  # use=release: the order is the blocks' release order, not the nodes'
        return False
    if order == "walk-order":
        return eviction_walk(expected.nodes, expected.block_size) == list(got.nodes)
    return observable_difference(expected.nodes, got.nodes, expected.block_size) is None


def moved_pair(expected: Sequence[NodeView], got: Sequence[NodeView], pair: tuple[NodeView, NodeView], tokens: Sequence[int] = ()) -> str:
    """Two nodes off one root path ranked the other way: the one the last call moved (the one sharing the longer
    prefix with its ``tokens``), with both its places, and the other."""
    def shared(view: NodeView) -> int:
        return shared_prefix(view.prefix, tokens)

    view, other = sorted(pair, key=shared, reverse=True)
    return (
        f"node {node_label(view)} moved: it is at place {expected.index(view) + 1} of {len(expected)} "
        f"in the spec's order, {got.index(view) + 1} in the cache's; it and node {node_label(other)} lie on no one "
        "root path, so an eviction can tell which goes first"
    )


def describe_snapshot_difference(
    expected: Snapshot, got: Snapshot, rules: Rules, tokens: Sequence[int] = (), order: OrderReport = "eviction-order"
) -> tuple[str, str, str]:
    """The first part of two snapshots that differs, as (rule, expected, got) text."""
    if expected.block_size != got.block_size:
        return ("R1, the block size", f"block_size {expected.block_size}", f"block_size {got.block_size}")
    if expected.stats != got.stats:
        return ("R9, the counters", render_stats(expected.stats), render_stats(got.stats))
    expected_nodes = set(expected.nodes)
    got_nodes = set(got.nodes)
    if expected_nodes != got_nodes:
        missing = sorted(expected_nodes - got_nodes, key=lambda view: view.prefix)
        extra = sorted(got_nodes - expected_nodes, key=lambda view: view.prefix)
        if {(view.namespace, view.prefix) for view in expected.nodes} != {(view.namespace, view.prefix) for view in got.nodes}:
            same_prefixes = {view.prefix for view in expected.nodes} == {view.prefix for view in got.nodes}
            rule = "R12, the namespaces" if same_prefixes else "R4, where nodes end"
        elif {(view.prefix, view.blocks) for view in expected.nodes} != {(view.prefix, view.blocks) for view in got.nodes}:
            rule = "R2/R5, the blocks cached"
        elif {(view.prefix, view.copies) for view in expected.nodes} != {(view.prefix, view.copies) for view in got.nodes}:
            rule = "R5, the copies a position holds" + (" (dup=keep)" if rules.dup == "keep" else "")
        else:
            rule = "R6, the locks"
        return (rule, f"nodes also {missing}", f"nodes also {extra}")
    if expected.released != got.released:
        return (
            "R7/R8, the order blocks were released in and are evicted in (use=release)"
            if rules.use == "release"
            else f"R7/R8, the order of eviction: the cache keeps a release order of blocks (as under use=release), the rule set orders nodes by use={rules.use}",
            f"released {list(expected.released)}",
            f"released {list(got.released)}",
        )
    # The order is R7's under lru (last use) and R8's key otherwise; a cache that
    # orders by another key than the rule set's differs here too.
    rule = "R7/R8, the order of last use and eviction" + ("" if rules.evict == "lru" else f" (evict={rules.evict_text})")
    if order == "walk-order":
        walk = eviction_walk(expected.nodes, expected.block_size)
        return (
            rule,
            f"eviction walk {[list(view.prefix) for view in walk]}; {moved_node(walk, got.nodes, tokens)}",
            f"eviction walk {[list(view.prefix) for view in got.nodes]}",
        )
    pair = observable_difference(expected.nodes, got.nodes, expected.block_size)
    assert pair is not None and not on_one_root_path(*pair), "describe only snapshots that disagree"
    moved = moved_pair(expected.nodes, got.nodes, pair, tokens)
    return (
        rule,
        f"last-use order {order_text(expected.nodes)}; {moved}",
        f"last-use order {order_text(got.nodes)}",
    )

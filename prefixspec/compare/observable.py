"""What of a snapshot's order some sequence of calls can observe (R11), and how a cache reports it.

A snapshot lists its nodes in eviction order (R8's key).  Eviction only ever compares *leaves*, and two
nodes on one root path (one a prefix of the other, in one namespace) are never both leaves: the lower
must be gone before the upper is a leaf.  So their relative order is invisible to every call, and a
cache may rank them either way.  Every other pair is observable under every R8 variant: keys change only
by a use (a match or an insert), a lock pins without changing any key, and ``evict(1)`` frees exactly
the first unpinned leaf; locking the rest of the tree and evicting the two nodes' subtrees leaf by leaf
makes both leaves at their current keys, and one more ``evict(1)`` names the first (spec/README.md R11).

Two orders of one set of nodes therefore agree when they rank every pair off one root path alike.  That
is decided here without looking at pairs one by one: a pair off one root path meets at a node u (or the
virtual root above every namespace) with two or more children, in two different child subtrees of u.
Below each such u, list the nodes in the first order with their places in the second: the pairs the two
orders rank differently are the inversions of that list, and those off one root path are its inversions
less the inversions within each child subtree.  The orders agree when that difference is 0 at every u.

A cache says in its features (``prefixspec.vocabulary.features_of``, the line protocol's handshake) how
its snapshot reports the order:

- neither word (the default): in its eviction order, compared on observable pairs;
- ``walk-order``: as its own eviction walk would free the nodes with every lock released (the first
  leaf by its key, again and again), compared with the spec's walk; a walk shows fewer pairs than an
  order (those only locks reveal are left to the evict calls the machines make);
- ``unordered``: the order means nothing; only the nodes are compared, and the order is checked by
  what ``evict`` returns, which the lockstep compares on every call.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from typing import Literal

from spec.api import Namespace, NodeView

OrderReport = Literal["eviction-order", "walk-order", "unordered"]

ORDER_FEATURES: tuple[OrderReport, ...] = ("walk-order", "unordered")
"""The feature words by which a cache says its snapshot's order is not its eviction order."""

NodeKey = tuple[Namespace, tuple[int, ...]]


def order_report(features: Iterable[str]) -> OrderReport:
    """How a cache with ``features`` reports its order: ``unordered`` over ``walk-order`` over the default."""
    offered = set(features)
    if "unordered" in offered:
        return "unordered"
    if "walk-order" in offered:
        return "walk-order"
    return "eviction-order"


def key_of(view: NodeView) -> NodeKey:
    return (view.namespace, view.prefix)


def parents(nodes: Sequence[NodeView], block_size: int) -> dict[NodeKey, NodeKey | None]:
    """Each node's parent (None: the root), by its own blocks: the parent ends ``len(blocks) * B`` tokens earlier.

    A node whose parent is not among ``nodes`` (a snapshot that is no tree) gets None.
    """
    present = {key_of(view) for view in nodes}
    found: dict[NodeKey, NodeKey | None] = {}
    for view in nodes:
        end = len(view.prefix) - len(view.blocks) * block_size
        parent = (view.namespace, view.prefix[:end])
        found[key_of(view)] = parent if end > 0 and parent in present else None
    return found


def on_one_root_path(first: NodeView, second: NodeView) -> bool:
    """Whether one of two nodes lies on the other's root path: never both leaves, so their order is unobservable."""
    if first.namespace != second.namespace or type(first.namespace) is not type(second.namespace):
        return False
    shorter, longer = sorted((first.prefix, second.prefix), key=len)
    return longer[: len(shorter)] == shorter


def branch_sequences(
    order: Sequence[NodeView], parent_of: dict[NodeKey, NodeKey | None], place: dict[NodeKey, int]
) -> dict[NodeKey | None, list[tuple[NodeKey, int]]]:
    """For every node with two or more children (None: the virtual root), each node below it in ``order``, as
    (the child subtree it lies in, its ``place`` in the other order).

    Runtime complexity: O(N log N) to find the branching nodes, plus one step per branching ancestor of each node.
    """
    children: dict[NodeKey | None, int] = {}
    for key in parent_of:
        parent = parent_of[key]
        children[parent] = children.get(parent, 0) + 1
    # Nearest branching ancestor of every node, and the child of it toward the node, top down.
    jump: dict[NodeKey, tuple[NodeKey | None, NodeKey] | None] = {}
    for key in sorted(parent_of, key=lambda node: len(node[1])):
        parent = parent_of[key]
        if children.get(parent, 0) >= 2:
            jump[key] = (parent, key)
        elif parent is None:
            jump[key] = None
        else:
            jump[key] = jump[parent]
    sequences: dict[NodeKey | None, list[tuple[NodeKey, int]]] = {}
    for view in order:
        key = key_of(view)
        at = jump[key]
        while at is not None:
            branch, child = at
            sequences.setdefault(branch, []).append((child, place[key]))
            at = jump[branch] if branch is not None else None
    return sequences


def inversions(values: list[int]) -> int:
    """The pairs i < j with values[i] > values[j], by a bottom-up merge sort (no recursion). O(n log n)."""
    run, width, count = list(values), 1, 0
    while width < len(run):
        merged: list[int] = []
        for start in range(0, len(run), 2 * width):
            left, right = run[start : start + width], run[start + width : start + 2 * width]
            i = j = 0
            while i < len(left) and j < len(right):
                if right[j] < left[i]:
                    count += len(left) - i
                    merged.append(right[j])
                    j += 1
                else:
                    merged.append(left[i])
                    i += 1
            merged.extend(left[i:])
            merged.extend(right[j:])
        run, width = merged, 2 * width
    return count


def disagrees_below(sequence: list[tuple[NodeKey, int]]) -> bool:
    """Whether some two nodes of different child subtrees come in the other order: inversions across subtrees."""
    by_child: dict[NodeKey, list[int]] = {}
    for child, place in sequence:
        by_child.setdefault(child, []).append(place)
    within = 0
    for places in by_child.values():
        within += inversions(places)
    return inversions([place for _, place in sequence]) != within


def observable_difference(expected: Sequence[NodeView], got: Sequence[NodeView], block_size: int) -> tuple[NodeView, NodeView] | None:
    """Two nodes off one root path that ``expected`` ranks first-then-second and ``got`` the other way; None when
    the two orders (of one set of nodes) agree on every observable pair."""
    if list(expected) == list(got):
        return None
    parent_of = parents(expected, block_size)
    place = {key_of(view): index for index, view in enumerate(got)}
    for branch, sequence in branch_sequences(expected, parent_of, place).items():
        if disagrees_below(sequence):
            return witness(expected, got, branch, parent_of)
    return None


def witness(
    expected: Sequence[NodeView], got: Sequence[NodeView], branch: NodeKey | None, parent_of: dict[NodeKey, NodeKey | None]
) -> tuple[NodeView, NodeView]:
    """The first pair, in ``expected``'s order, of nodes in two child subtrees of ``branch`` that ``got`` ranks the other way."""
    def subtree_child(key: NodeKey) -> NodeKey | None:
        at: NodeKey | None = key
        while at is not None and parent_of[at] != branch:
            at = parent_of[at]
        return at

    below = [(view, subtree_child(key_of(view))) for view in expected]
    below = [(view, child) for view, child in below if child is not None]
    place = {key_of(view): index for index, view in enumerate(got)}
    for index, (first, first_child) in enumerate(below):
        for second, second_child in below[index + 1 :]:
            if first_child != second_child and place[key_of(second)] < place[key_of(first)]:
                return first, second
    raise AssertionError("inversions across child subtrees mean some such pair is ranked the other way")


def eviction_walk(order: Sequence[NodeView], block_size: int) -> list[NodeView]:
    """The nodes as ``evict`` would free them with no lock held, ``order`` being the eviction order: the first node
    with nothing below it, again and again (a parent joins when its last child goes)."""
    parent_of = parents(order, block_size)
    rank = {key_of(view): index for index, view in enumerate(order)}
    by_key = {key_of(view): view for view in order}
    below: dict[NodeKey, int] = {}
    for key in parent_of:
        parent = parent_of[key]
        if parent is not None:
            below[parent] = below.get(parent, 0) + 1
    waiting = [(rank[key], key) for key in parent_of if below.get(key, 0) == 0]
    heapq.heapify(waiting)
    walk: list[NodeView] = []
    while waiting:
        _, key = heapq.heappop(waiting)
        walk.append(by_key[key])
        parent = parent_of[key]
        if parent is not None:
            below[parent] -= 1
            if below[parent] == 0:
                heapq.heappush(waiting, (rank[parent], parent))
    return walk

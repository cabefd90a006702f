"""A node of impl's radix tree, and the key that orders leaves for eviction (R8).

The node is a slotted record that the tree (``impl.radix``) alone writes; its
object is its own NodeId.  Tokens and ids are held as native ``'I'`` bytes and
arrays (``TOKEN_TYPECODE``), 4 bytes each.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from operator import attrgetter

from spec.api import Namespace, Rules

TOKEN_TYPECODE = "I"
"""The array typecode of tokens and block ids: unsigned, 4 bytes, so converting
to it checks R1's range [0, 2**32) in C."""

TOKEN_BYTES = array(TOKEN_TYPECODE).itemsize
if TOKEN_BYTES != 4:
    raise ImportError(f"array('{TOKEN_TYPECODE}') holds {TOKEN_BYTES} bytes here; R1 needs exactly 4")

Key = int | tuple[int, ...]
"""A leaf's place in the eviction order (R8): the smallest goes first."""

QueueEntry = tuple[Key, int, "Node"]
"""(eviction key, seq, leaf): seq is unique, so entries never compare their nodes."""

ChildKey = bytes | tuple[Namespace, bytes]
"""A child's key in its parent's ``children``: its first block's bytes; below the root, outside the
default namespace, the namespace and those bytes (R12), so that namespaces meet nowhere below the root."""


def eviction_key(rules: Rules) -> Callable[[Node], Key]:
    """The key of a leaf in the eviction order of ``rules.evict`` (R8), ranks of a call's uses included (R7).

    The default rule set, ``lru`` with ``use=path``, keys by the last use
    alone: an int, the cheapest to build and compare (benchmark: bench/,
    issue 7, measured with int keys).
    """
    if rules.evict == "lru" and rules.use == "path":
        return attrgetter("last_use")
    if rules.evict == "lru":
        return lambda node: (node.last_use, node.use_rank)
    if rules.evict == "lfu":
        return lambda node: (node.hits, node.last_use, node.use_rank)
    if rules.evict == "fifo":
        return lambda node: (node.created, node.created_rank, node.last_use, node.use_rank)
    if rules.evict == "mru":
        return lambda node: (-node.last_use, -node.use_rank)
    if rules.evict == "slru":
        threshold = rules.slru_threshold
        return lambda node: (int(node.hits >= threshold), node.last_use, node.use_rank)
    return lambda node: (-node.created, -node.created_rank, node.last_use, node.use_rank)


class Node:
    """One node of the tree: the whole blocks of a cached prefix past its parent's end.

    A node object is its own NodeId: it is hashable by identity and never reused.
    Every attribute is read only outside ``RadixTree``.

    - ``owner``: the tree holding the node (``impl.radix.RadixTree``), ``None`` once it is evicted.
    - ``parent``: the node above; the root is its own parent.
    - ``segment``: the node's own tokens as native ``'I'`` bytes, whole blocks.
    - ``key``: the first block of ``segment``, the node's key in its parent's
      ``children``, kept so that eviction need not slice the segment again;
      a child of the root outside the default namespace is keyed by
      ``(namespace, first block)`` (R12).
    - ``blocks``: one block id per block of ``segment``, in token order, as an
      ``array('I')``: 4 bytes a block where a list of ints took 36, which
      took impl from 7.4 to 5.4 bytes per cached token at 10^6 cached blocks
      (benchmark: bench/ memory, issue 7).  Calls that return ids make the
      ints in one C call (``tolist``).
    - ``end``: the length in tokens of the prefix ending at this node.
    - ``children``: the nodes below, keyed by the bytes of their first block.
    - ``locks``: the node's own lock count.
    - ``pins``: the locks held in the subtree rooted here, own ones included;
      the node is pinned while this is positive.
    - ``last_use``: the logical time of the last use of this node, and
      ``use_rank`` its order within that call: 0 for every use under
      ``use=path``; under ``use=path+split-tail``, 0 for a node the call found
      there, k for the k-th node it created (R7).
    - ``hits``: the inserts that used the node (R7; a split's upper node
      starts with the hits of the node it splits); ``created`` and
      ``created_rank``: the call that created it and the node's order among
      those it created (R4): a split's upper node takes the node's own under
      ``split=inherit``; ``born`` and ``born_rank``: the call that made the node and
      its order among those, whatever its creation stamp (R7 ranks a call's uses
      of the nodes it made by them).
    - ``queue_seq``: the seq of the node's live LRU queue entry, -1 when none;
      exactly the unpinned leaves have one.
    """

    __slots__ = (
        "owner",
        "parent",
        "segment",
        "key",
        "blocks",
        "end",
        "children",
        "locks",
        "pins",
        "last_use",
        "use_rank",
        "hits",
        "created",
        "created_rank",
        "born",
        "born_rank",
        "queue_seq",
    )

    def __init__(
        self,
        owner: object | None,
        parent: Node | None,
        segment: bytes,
        key: ChildKey,
        blocks: array[int],
        end: int,
        last_use: int,
        created: int,
        created_rank: int = 1,
    ) -> None:
        self.owner = owner
        self.parent: Node = self if parent is None else parent
        self.segment = segment
        self.key = key
        self.blocks = blocks
        self.end = end
        self.children: dict[ChildKey, Node] = {}
        self.locks = 0
        self.pins = 0
        self.last_use = last_use
        self.use_rank = 0
        self.hits = 0
        self.created = created
        self.created_rank = created_rank
        self.born = created
        self.born_rank = created_rank
        self.queue_seq = -1

    def __repr__(self) -> str:
        if self.parent is self:
            return "<Node root>"
        state = "live" if self.owner is not None else "evicted"
        return f"<Node {state} end={self.end} blocks={len(self.blocks)} locks={self.locks}>"

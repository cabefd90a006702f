"""The executable specification: ``SpecCache``, rules R1-R13 in order, a module each (two share ``counters``).

Read top to bottom, the modules are the rules of ``spec/README.md``, each rule's section headed ``# Rn``:

1. ``state``: R1, the argument checks, and the flat state every rule reads (its fields listed there);
2. ``contents``: R2, the cached contents, block-granular;
3. ``match``: R3, what a match searches;
4. ``nodes``: R4, the nodes and what a split makes;
5. ``insert``: R5, insert (its variant ``dup=keep`` beside it);
6. ``locks``: R6, locks and the prefixes they pin;
7. ``use``: R7, use (its variants ``use=path+split-tail`` and ``use=release`` beside it);
8. ``eviction``: R8, eviction (its variants by ``evict`` and ``unit`` beside it);
9. ``counters``: R9, the counters, and R10;
10. ``snapshot``: R11, the snapshot and its digest, from scratch and kept;
11. ``namespaces``: R12, namespaces;
12. ``events``: R13, events.

Each module's class extends the one before (``Contents(State)``, ``Matching(Contents)``, ...) and
``SpecCache`` below is the last, so a rule's code sees the rules before it, as the prose does.  Five calls
go the other way: R3 and R5 split (R4's ``split_at``) and use a path (R7's ``use_path``), R5 and R6 release
(R7's ``release``), R5 publishes (R13's ``publish_stored``) and R11 walks the namespaces (R12's
``namespaces``).  ``State`` declares these five as abstract methods: each is written once, where its rule
is, mypy holds every call to the one signature and checks that ``SpecCache`` defines all five, and no
module imports a later one.  What a rule marks for a later one (R2, R4, R8's marks for R11, R8's
BlockRemoved for R13) it writes on the state directly: those are fields, not calls.

There is no tree of nodes: a node's blocks, its parent, whether it is a leaf
and whether it is pinned are all computed from the dicts of ``state`` when asked, by
looking up the prefixes the question is about (a parent is the longest
shorter prefix that is a node; a leaf is a node no cached prefix extends), so
a call costs what it touches, not a scan of the cache.  ``impl.RadixCache`` is
the fast radix tree, and the two are compared call by call.  The code is
written for the reader: no recursion, no counters kept in step with the
contents, no ``map``/``filter``, every length computed by the functions of
``spec/arith.py``.
"""

from __future__ import annotations

from spec.model.events import Publishing
from spec.model.state import Prefix, SpecNode, Stamp, Tokens, as_count, as_id, as_ids, as_int, as_namespace

__all__ = ["Prefix", "SpecCache", "SpecNode", "Stamp", "Tokens", "as_count", "as_id", "as_ids", "as_int", "as_namespace"]


class SpecCache(Publishing):
    """The reference prefix cache; satisfies ``spec.api.PrefixCache``: the state of R1 and rules R2-R13, in order."""

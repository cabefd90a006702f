"""The snapshot of SGLang's ``UnifiedRadixCache``: its nodes read from the TreeCore, the Python core's by its
node objects, the Rust core's rebuilt from what its binding offers (``rust_records``)."""

from __future__ import annotations

from typing import Any

from spec.api import BlockId, NodeView, Snapshot
from examples.sglang.adapter import SglangCache
from examples.sglang.namespaces import namespace_of


class UnifiedSnapshot(SglangCache):
    """``snapshot`` and what it needs of the core, for ``examples.sglang.unified.UnifiedCache``, which defines the
    three members declared here (its core's handles and the guard against a panic of the Rust core)."""

    core: str
    receipts: dict[int, list[Any]]
    placed: dict[BlockId, tuple[Any, tuple[int, ...], int]]
    tip_nodes: dict[BlockId, tuple[tuple[Any, tuple[int, ...], int], int]]

    @property
    def tree(self) -> Any:
        """The TreeCore."""
        raise NotImplementedError

    @property
    def root_id(self) -> int:
        """The TreeCore's NodeId of the root."""
        raise NotImplementedError

    def guarded(self, call: str, run: Any, *arguments: Any) -> Any:
        """``run(*arguments)``, a panic of the Rust core reported as RustPanic."""
        raise NotImplementedError

    @property
    def prefixspec_features(self) -> frozenset[str]:
        """What the kit may ask of this cache (``prefixspec.vocabulary.features_of``): namespaces and events, and
        for the Rust core ``unordered`` (``prefixspec/compare/observable.py``): its binding reports no order, so its
        snapshot's nodes are compared without one and its order is checked by what each ``evict`` frees."""
        offered = {"namespaces", "events"}
        if not self.reports_order:
            offered.add("unordered")
        return frozenset(offered)

    @property
    def reports_order(self) -> bool:
        """Whether ``snapshot`` orders nodes by the core's own eviction priority: the Python core keeps it on its
        nodes (``last_access_time``, ``hit_count``, ``creation_time``, ``priority``); the Rust binding exposes none
        of them, so its snapshot is ``unordered`` and its order is checked by what each ``evict`` frees."""
        return self.core == "python"

    def node_records(self) -> list[tuple[Any, tuple[int, ...], NodeView]]:
        """(priority or None, prefix, view) of every node but the root."""
        if self.core == "python":
            return self.python_records()
        return self.rust_records()

    def python_records(self) -> list[tuple[Any, tuple[int, ...], NodeView]]:
        tree = self.tree
        full = self.sg.ComponentType.FULL
        priority = tree.eviction_strategy.get_priority
        records: list[tuple[Any, tuple[int, ...], NodeView]] = []
        stack: list[tuple[Any, tuple[int, ...]]] = [(tree.root_node, ())]
        while stack:
            node, prefix = stack.pop()
            for child in node.children.values():
                child_prefix = prefix + tuple(child.key.raw_token_ids())
                own = child.component_data[full].lock_ref - sum(grand.component_data[full].lock_ref for grand in child.children.values())
                value = child.component_data[full].value
                blocks = tuple(self.block_ids(value)) if value is not None else ()
                view = NodeView(child_prefix, blocks, own, namespace_of(getattr(child.key, self.namespace_field)))
                records.append((priority(child), child_prefix, view))
                stack.append((child, child_prefix))
        return records

    def rust_records(self) -> list[tuple[Any, tuple[int, ...], NodeView]]:
        """The Rust core's nodes, rebuilt from what its binding offers: ``walk_for_kv_canary`` lists every cached
        KV slot with the slot before it (so the tips of the tree), each tip's block was placed by one insert at a
        known token prefix (``placed``), ``match_full_device_prefix`` of that prefix names the tip's node (a
        read-only walk), ``collect_path_info`` gives each node on its path with its span, and
        ``collect_full_device_indices`` the KV slots of the part of the path no earlier tip's path covered.  Own
        locks: the receipts the adapter holds on a node, where the canary walk of unlocked slots agrees the node
        is pinned; a node it shows pinned that no receipt at or below pins counts one lock the adapter never took.

        The node a tip's block names is remembered (``tip_nodes``) and asked again only when the block was placed
        anew, or when the core does not show that node ending at the tip's slot and prefix: then every tip is
        matched again.  The core's own path info and slots decide every snapshot; the memory spares only the
        match of each tip's prefix."""
        every = self.guarded("walk_for_kv_canary", self.tree.walk_for_kv_canary, False, False)
        unlocked = self.guarded("walk_for_kv_canary", self.tree.walk_for_kv_canary, True, False)
        previous = set(every.prev_slot_indices.tolist())
        free_slots = set(unlocked.slot_indices.tolist())
        tips = [slot for slot in every.slot_indices.tolist() if slot not in previous]
        for remembered in (True, False):
            built = self.nodes_along(tips, remembered)
            if built is not None:
                records, last_slot, parents = built
                break
        else:
            raise RuntimeError("SGLang's Rust core names, for a tip's prefix, a node whose path does not end at the tip's KV slot")
        held_below = dict.fromkeys(records, 0)  # receipts at or below each node
        for node_id, receipts in self.receipts.items():
            at: int | None = node_id
            while at is not None and at in records:
                held_below[at] += len(receipts)
                at = parents.get(at)
        for node_id, (priority, prefix, view) in list(records.items()):
            if last_slot[node_id] in free_slots:
                continue
            own = len(self.receipts.get(node_id, ())) if held_below[node_id] else 1
            records[node_id] = (priority, prefix, NodeView(view.prefix, view.blocks, own, view.namespace))
        return list(records.values())

    def nodes_along(
        self, tips: list[int], remembered: bool
    ) -> tuple[dict[int, tuple[Any, tuple[int, ...], NodeView]], dict[int, int], dict[int, int]] | None:
        """The nodes on the paths to ``tips`` (each with no locks yet), a slot of each node's last page, and each
        node's parent; None when a tip's node (remembered, or matched) does not end at the tip's slot and prefix,
        or is no longer in the core."""
        ends = [self.tip_node(tip, remembered) for tip in tips]  # (tip node, namespace, its whole prefix)
        if not ends:
            return {}, {}, {}
        try:
            paths = self.guarded("collect_path_info", self.tree.collect_path_info, [node for node, _, _ in ends])
        except KeyError:
            return None
        records: dict[int, tuple[Any, tuple[int, ...], NodeView]] = {}
        last_slot: dict[int, int] = {}
        parents: dict[int, int] = {}
        size = self.size
        for tip, (node, namespace, prefix), path in zip(tips, ends, paths):
            if not path or int(path[-1].node_id) != node or int(path[-1].path_end) != len(prefix):
                return None
            known = len(path)  # the path's nodes below the last one an earlier tip's path recorded: root first
            while known and int(path[known - 1].node_id) not in records:
                known -= 1
            if known == len(path):  # a tip's node an earlier tip's path holds: no leaf
                return None
            until = int(path[known - 1].node_id) if known else self.root_id
            offset = int(path[known].path_start)
            slots: list[int] = self.guarded("collect_full_device_indices", self.tree.collect_full_device_indices, node, until).tolist()
            if len(slots) != len(prefix) - offset or not slots or slots[-1] != tip:
                return None
            firsts = slots[::size]  # each page's first slot, from ``offset`` on
            blocks_along = firsts if size == 1 else list(map(size.__rfloordiv__, firsts))
            for info in path[known:]:
                node_id = int(info.node_id)
                start, end = (int(info.path_start) - offset) // size, (int(info.path_end) - offset) // size
                records[node_id] = (None, prefix[: int(info.path_end)], NodeView(prefix[: int(info.path_end)], tuple(blocks_along[start:end]), 0, namespace))
                last_slot[node_id] = firsts[end - 1]
                parents[node_id] = int(info.parent_id)
        return records, last_slot, parents

    def tip_node(self, tip: int, remembered: bool = True) -> tuple[int, Any, tuple[int, ...]]:
        """(node, namespace, prefix) of the tip whose last KV slot is ``tip``: the node remembered for the insert
        that placed its block (when ``remembered``), else the one ``match_full_device_prefix`` of that insert's
        prefix names."""
        block = tip // self.size
        place = self.placed.get(block)
        if place is None:
            raise RuntimeError(f"SGLang's Rust core holds KV slot {tip} (block {block}), which no insert left")
        namespace, whole, end = place
        prefix = whole[:end]
        known = self.tip_nodes.get(block) if remembered else None
        if known is not None and known[0] is place:
            return (known[1], namespace, prefix)
        matched, node, _pinned = self.guarded("match_full_device_prefix", self.tree.match_full_device_prefix, self.radix_key(list(prefix), namespace))
        if int(matched) != len(prefix):
            raise RuntimeError(f"SGLang's Rust core holds block {block} but matches {int(matched)} of its {len(prefix)} tokens")
        self.tip_nodes[block] = (place, int(node))
        return (int(node), namespace, prefix)

    def snapshot(self) -> Snapshot:
        records = self.node_records()
        if self.reports_order:
            records.sort(key=lambda record: (record[0], len(record[1])))
        else:
            records.sort(key=lambda record: (len(record[1]), record[1]))
        return Snapshot(self.size, tuple(view for _, _, view in records), self.stats())

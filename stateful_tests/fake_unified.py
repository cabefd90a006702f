"""A fake of the few SGLang names the UnifiedRadixCache adapter calls (lock receipts, the TreeCore's read-only
walks, a Rust panic), and the adapter built on it: what ``test_sglang_unified.py`` checks the translation on."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from examples.sglang.unified import UnifiedCache


class PanicException(BaseException):
    """What pyo3 raises for a Rust panic: a BaseException, so ``except Exception`` does not stop it."""


class Values(list[int]):
    """A tensor's face the adapter uses: ``tolist``."""

    def tolist(self) -> list[int]:
        return list(self)


@dataclass(frozen=True)
class Receipt:
    node: int
    serial: int


@dataclass(frozen=True)
class Locked:
    receipt: Receipt

    def to_dec_params(self) -> Receipt:
        return self.receipt


@dataclass(frozen=True)
class PathInfo:
    node_id: int
    parent_id: int
    path_start: int
    path_end: int


@dataclass(frozen=True)
class Walk:
    slot_indices: Values
    prev_slot_indices: Values


@dataclass
class FakeTree:
    """A TreeCore of page size 1: ``nodes`` maps a node to (parent, its tokens, its slots)."""

    nodes: dict[int, tuple[int, tuple[int, ...], tuple[int, ...]]] = field(default_factory=dict)
    pinned: set[int] = field(default_factory=set)
    """Slots the canary walk of unlocked nodes leaves out."""

    def chain(self, node: int) -> list[int]:
        path = []
        while node != 0:
            path.append(node)
            node = self.nodes[node][0]
        return path[::-1]

    def collect_path_info(self, ends: list[int]) -> tuple[tuple[PathInfo, ...], ...]:
        paths = []
        for end in ends:
            if end not in self.nodes:
                raise KeyError(end)
            start, infos = 0, []
            for node in self.chain(end):
                length = len(self.nodes[node][1])
                infos.append(PathInfo(node, self.nodes[node][0], start, start + length))
                start += length
            paths.append(tuple(infos))
        return tuple(paths)

    def collect_full_device_indices(self, node: int, until: int) -> Values:
        """The slots from ``until`` (exclusive) down to ``node``, root first."""
        chain = self.chain(node)
        below = chain[chain.index(until) + 1 :] if until in chain else chain
        return Values(slot for step in below for slot in self.nodes[step][2])

    def walk_for_kv_canary(self, unlocked_only: bool, swa_resident_only: bool) -> Walk:
        slots, previous = Values(), Values()
        for node, (parent, _tokens, own) in self.nodes.items():
            before = self.nodes[parent][2][-1] if parent else -1
            for slot in own:
                if not (unlocked_only and slot in self.pinned):
                    slots.append(slot)
                    previous.append(before)
                before = slot
        return Walk(slots, previous)

    def match_full_device_prefix(self, key: tuple[tuple[int, ...], dict[str, Any]]) -> tuple[int, int, int]:
        tokens = key[0]
        best, length = 0, 0
        for node in self.nodes:
            prefix = tuple(token for step in self.chain(node) for token in self.nodes[step][1])
            if tokens[: len(prefix)] == prefix and len(prefix) > length:
                best, length = node, len(prefix)
        return (length, best, length)


class RustUnifiedTreeCore(FakeTree):
    """Named as SGLang's Rust core is, which the adapter checks it was given."""


class UnifiedTreeCore(FakeTree):
    """Named as SGLang's Python core is."""


@dataclass
class FakeCache:
    tree_core: FakeTree
    released: list[Receipt] = field(default_factory=list)
    serials: int = 0
    panic_on_release: BaseException | None = None
    fail_on_release: bool = False

    def root_node_handle(self) -> int:
        return 0

    def inc_lock_ref(self, node: int) -> Locked:
        self.serials += 1
        return Locked(Receipt(node, self.serials))

    def dec_lock_ref(self, node: int, receipt: Receipt) -> None:
        if self.panic_on_release is not None:
            raise self.panic_on_release
        if self.fail_on_release:
            raise AssertionError(f"FULL segment release hit lock_ref=0 on node {node}")
        self.released.append(receipt)

    def path_device_indices(self, node: int) -> Values:
        return Values(slot for step in self.tree_core.chain(node) for slot in self.tree_core.nodes[step][2])

    def total_size(self) -> tuple[int, int]:
        return (sum(len(own) for _, _, own in self.tree_core.nodes.values()), 0)


class FakeComponents:
    FULL = 0


class FakeTorch:
    int64 = "int64"

    @staticmethod
    def arange(size: int, dtype: str) -> list[int]:
        return list(range(size))


@dataclass
class FakeSglang:
    """The names ``UnifiedCache`` takes from ``loading.SglangUnified``."""

    tree: FakeTree
    built: FakeCache | None = None
    ComponentType: type = FakeComponents
    torch: type = FakeTorch

    def CacheInitParams(self, **params: Any) -> dict[str, Any]:
        return params

    def UnifiedRadixCache(self, params: dict[str, Any]) -> FakeCache:
        self.built = FakeCache(self.tree)
        return self.built

    def RadixKey(self, tokens: Any, **fields: Any) -> tuple[tuple[int, ...], dict[str, Any]]:
        return (tuple(tokens), fields)

    def rust_unavailable(self) -> None:
        return None


def unified_on(tree: FakeTree, core: str = "rust") -> tuple[UnifiedCache, FakeCache]:
    fake = FakeSglang(tree)

    class OnFake(UnifiedCache):
        def load(self) -> Any:
            return fake

    cache = OnFake(1, "lru", core=core)  # type: ignore[arg-type]  # core is "rust" or "python" in every test
    assert fake.built is not None
    return cache, fake.built


def three_nodes() -> RustUnifiedTreeCore:
    """[5] (slot 0), below it [5 6 7] (slots 1, 2) and [5 8] (slot 3)."""
    return RustUnifiedTreeCore({1: (0, (5,), (0,)), 2: (1, (6, 7), (1, 2)), 3: (1, (8,), (3,))})

"""SGLang 0.5.23's ``UnifiedRadixCache`` on its Rust or its Python TreeCore, behind ``spec.api.PrefixCache``.

The class SGLang's server builds by default (``mem_cache/registry.py``, ``default_radix_cache_factory``
returns ``create_unified_radix_cache(ctx)``), constructed directly, on CPU, as the server would for a
model with full attention only: ``CacheInitParams(tree_components=(FULL,), tree_core_backend=core)``,
an allocator that records what ``free_segment`` is given, no request pool.  The tree is a TreeCore
(``unified_cache/tree_core_registry.py``): ``"rust"`` (the default, the bundled
``rust_tree_core/mem_cache`` extension) or ``"python"`` (``unified_cache/unified_tree_core.py``).

The adapter translates as ``examples/sglang/adapter.py`` does (pages, the last prompt token, tokens
to blocks, namespaces as ``extra_key`` or ``cache_salt``, SGLang's KV events as a router reads them);
what differs here:

- node handles are SGLang's ``NodeId`` ints tagged with their cache (``UnifiedNode``: the Rust core counts
  ids from 0 in every cache); a handle is live while the TreeCore still resolves it (``collect_path_info``
  raises KeyError for one it dropped, both cores);
- locks are receipts: ``inc_lock_ref`` returns one, and ``dec_lock_ref`` must be given it back, once
  (``UnifiedRadixCache.lock``/``unlock``, unified_radix_cache.py:1094-1106).  ``lock`` keeps each
  receipt on a stack per node and ``unlock`` hands back the newest.  R6's NotLocked is the caller's
  check in SGLang, as on the plain RadixCache: an unlock of a node holding no receipt raises
  NotLocked and reaches neither core.  So the adapter never releases a receipt twice; what the Rust
  core does when a caller does (it panics and every later call fails) is shown by
  ``examples/sglang/defects.py`` in a process of its own; should a panic reach the adapter
  (the binding raises ``RuntimeError("Rust TreeCore panicked: ...")``, or pyo3's ``PanicException``, a
  ``BaseException``), ``guarded`` reports it as ``RustPanic`` and refuses every later call, so a check
  names the first panic instead of a cascade of failures or a crash of the kit;
- the R5 check of ids "cached elsewhere" reads what SGLang holds along a key with the TreeCore's
  read-only ``match_full_device_prefix`` (unified_tree_core.py:986, no stamp, no split);
- the snapshot: nodes, blocks, own locks and namespaces as the TreeCore holds them; the order is the
  core's eviction priority where it can be read (the Python core: ``eviction_strategy.get_priority``
  of each node, ties by prefix length); the Rust core reports none and says so with the ``unordered`` feature
  (``UnifiedCache.prefixspec_features``), its nodes then listed by prefix (``unified_snapshot.py``).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from spec.api import BlockId, NodeId, NotLocked, UnknownNode
from examples.sglang.namespaces import NamespaceField
from examples.sglang.unified_snapshot import UnifiedSnapshot
from bench.sglang_loading import SglangUnified, load_unified, unified_unavailable

load_unified()  # with the module, whose import has no time limit (examples/sglang/adapter.py says why)

Core = Literal["rust", "python"]
CORES: tuple[Core, ...] = ("rust", "python")

SERVER_POLICIES = ("lru", "lfu", "slru", "priority", "tlru")
"""What SGLang 0.5.23's server accepts as ``--radix-eviction-policy`` (server_args.py, its choices)."""

LIBRARY_POLICIES = ("fifo", "mru", "filo")
"""Eviction strategies ``mem_cache/evict_policy.py`` defines that the server's flag does not offer."""


@dataclass(frozen=True)
class UnifiedNode:
    """A node handle of one adapter: SGLang's ``NodeId`` is a plain int, and the Rust core counts its ids from 0
    in every cache, so another cache's id could name a node here; the handle carries its cache's serial."""

    cache: int
    node: int

    def __repr__(self) -> str:
        return f"node {self.node} of cache {self.cache}"


_SERIALS = itertools.count()


class RustPanic(RuntimeError):
    """SGLang's Rust TreeCore panicked (pyo3's PanicException); the binding is poisoned from then on."""


def _is_panic(error: BaseException) -> bool:
    """A panic of the Rust core: the binding turns it into ``RuntimeError("Rust TreeCore panicked: ...")`` and poisons
    its mutex (every later call raises the same way); a panic it does not catch would be pyo3's PanicException."""
    if type(error).__name__ == "PanicException":
        return True
    return isinstance(error, RuntimeError) and not isinstance(error, RustPanic) and str(error).startswith("Rust TreeCore panicked")


def _unified() -> SglangUnified:
    sglang = load_unified()
    if sglang is None:
        raise RuntimeError(f"SGLang's UnifiedRadixCache cannot be imported here ({unified_unavailable()}): make engines installs it into .venv-bench")
    return sglang


class UnifiedCache(UnifiedSnapshot):
    """SGLang's ``UnifiedRadixCache`` (page size B, eviction ``policy``, TreeCore ``core``) as a PrefixCache.

    ``policy_config`` is SGLang's ``eviction_policy_config`` (``slru``: ``protected_threshold``;
    ``tlru``: ``threshold``, ``next_prompt_estimate``).  RuntimeError when the core cannot be built
    here (the Rust core's import error is named).
    """

    def __init__(
        self,
        block_size: int,
        policy: str = "lru",
        *,
        core: Core = "rust",
        namespace_field: NamespaceField = "extra_key",
        policy_config: dict[str, Any] | None = None,
    ) -> None:
        if core not in CORES:
            raise ValueError(f"core is one of {', '.join(CORES)}, got {core!r}")
        self.core: Core = core
        self.receipts: dict[int, list[Any]] = {}  # the receipts of the locks each node holds, oldest first
        self.placed: dict[BlockId, tuple[Any, tuple[int, ...], int]] = {}  # each id SGLang took: (namespace, its insert's tokens, its end)
        self.tip_nodes: dict[BlockId, tuple[tuple[Any, tuple[int, ...], int], int]] = {}  # a tip's block: (its place, the node it named)
        self.panicked: str | None = None
        self.serial = next(_SERIALS)
        super().__init__(block_size, policy, namespace_field=namespace_field, policy_config=policy_config)

    def load(self) -> Any:
        return _unified()

    def build_cache(self, params: dict[str, Any]) -> Any:
        sg = self.sg
        if self.core == "rust":
            reason = sg.rust_unavailable()
            if reason is not None:
                raise RuntimeError(f"SGLang's Rust TreeCore cannot be imported here: {reason}")
        init = sg.CacheInitParams(
            **params,
            tree_components=(sg.ComponentType.FULL,),
            tree_core_backend=self.core,
        )
        cache = sg.UnifiedRadixCache(init)
        chosen = type(cache.tree_core).__name__
        wanted = "RustUnifiedTreeCore" if self.core == "rust" else "UnifiedTreeCore"
        if chosen != wanted:  # tree_core_registry.py falls back to Python where it judges Rust unfit
            raise RuntimeError(f"SGLang built a {chosen} where the {self.core} TreeCore ({wanted}) was asked for")
        return cache

    @property
    def tree(self) -> Any:
        return self.cache.tree_core

    @property
    def root(self) -> NodeId:
        return self.handle(self.root_id)

    @property
    def root_id(self) -> int:
        return int(self.cache.root_node_handle())

    def handle(self, node: Any) -> UnifiedNode:
        """SGLang's NodeId as this adapter's handle (a handle passes through)."""
        if isinstance(node, UnifiedNode):
            return node
        return UnifiedNode(self.serial, int(node))

    def rust_guard(self, call: str) -> None:
        """Refuse every call after a panic of the Rust core: its binding is poisoned (RustPanic names the first)."""
        if self.panicked is not None:
            raise RustPanic(f"{call}: SGLang's Rust TreeCore panicked earlier and is poisoned ({self.panicked})")

    def guarded(self, call: str, run: Any, *arguments: Any) -> Any:
        self.rust_guard(call)
        try:
            return run(*arguments)
        except BaseException as error:
            if not _is_panic(error):
                raise
            self.panicked = f"{call}: {error}"
            raise RustPanic(f"SGLang's Rust TreeCore panicked in {call}: {error}") from None

    # Handles, locks and the R5 read.

    def live(self, node: object) -> Any:
        """R6: SGLang's NodeId of a handle of this adapter that the TreeCore still resolves, else UnknownNode."""
        if isinstance(node, UnifiedNode) and node.cache == self.serial:
            if node.node == self.root_id:
                return node.node
            try:
                self.guarded("collect_path_info", self.tree.collect_path_info, [node.node])
                return node.node
            except KeyError:
                pass
        raise UnknownNode(f"{node!r} is not in the cache")

    def lock(self, node: NodeId) -> None:
        live = self.live(node)
        if live == self.root_id:
            return
        result = self.guarded("inc_lock_ref", self.cache.inc_lock_ref, live)
        self.receipts.setdefault(live, []).append(result.to_dec_params())

    def unlock(self, node: NodeId) -> None:
        live = self.live(node)
        if live == self.root_id:
            return
        held = self.receipts.get(live)
        if not held:
            raise NotLocked(f"{node!r} holds no lock of its own")
        receipt = held.pop()
        if not held:
            del self.receipts[live]
        self.guarded("dec_lock_ref", self.cache.dec_lock_ref, live, receipt)

    def cached_along(self, key: list[int], namespace: Any = None) -> list[int]:
        """The ids SGLang holds along ``key``, read with the TreeCore's read-only full-device match."""
        matched, node, _pinned = self.guarded("match_full_device_prefix", self.tree.match_full_device_prefix, self.radix_key(key, namespace))
        if not matched:
            return []
        return self.path_blocks(node)[: int(matched) // self.size]

    # The calls, each guarded against a panic of the Rust core.

    def match_prefix(self, tokens: Sequence[int], namespace: Any = None) -> Any:
        self.rust_guard("match_prefix")
        try:
            found = super().match_prefix(tokens, namespace)
            return replace(found, node=self.handle(found.node))
        except BaseException as error:
            self.note_panic("match_prefix", error)
            raise

    def insert(self, tokens: Sequence[int], blocks: Sequence[BlockId], namespace: Any = None) -> Any:
        self.rust_guard("insert")
        try:
            done = super().insert(tokens, blocks, namespace)
            return replace(done, node=self.handle(done.node))
        except BaseException as error:
            self.note_panic("insert", error)
            raise

    def took(self, prompt: list[int], given: list[int], kept: int, namespace: Any) -> None:
        """Where each id SGLang took sits (its namespace and token prefix): how ``rust_records`` finds its node."""
        super().took(prompt, given, kept, namespace)
        whole = tuple(prompt)  # one tuple an insert, its blocks' prefixes cut from it only when read: a tuple each is quadratic
        for position in range(kept, len(given)):
            self.placed[given[position]] = (namespace, whole, (position + 1) * self.size)

    def evict(self, n_blocks: int) -> list[BlockId]:
        self.rust_guard("evict")
        try:
            return super().evict(n_blocks)
        except BaseException as error:
            self.note_panic("evict", error)
            raise

    def note_panic(self, call: str, error: BaseException) -> None:
        if _is_panic(error):
            self.panicked = f"{call}: {error}"
            raise RustPanic(f"SGLang's Rust TreeCore panicked in {call}: {error}") from None

    def cached_blocks(self) -> int:
        return self.cached_tokens() // self.size

    def cached_tokens(self) -> int:
        full, _other = self.guarded("total_size", self.cache.total_size)
        return int(full)

    def evictable_blocks(self) -> int:
        return int(self.guarded("evictable_size", self.cache.evictable_size)) // self.size


# A factory per core and policy, for ``prefixspec check examples.sglang.unified:rust_lru --rules ...``.
def rust_lru(block_size: int) -> UnifiedCache:
    return UnifiedCache(block_size, "lru", core="rust", namespace_field="cache_salt")


def python_lru(block_size: int) -> UnifiedCache:
    return UnifiedCache(block_size, "lru", core="python", namespace_field="cache_salt")


def rust_lfu(block_size: int) -> UnifiedCache:
    return UnifiedCache(block_size, "lfu", core="rust", namespace_field="cache_salt")


def python_lfu(block_size: int) -> UnifiedCache:
    return UnifiedCache(block_size, "lfu", core="python", namespace_field="cache_salt")


def rust_slru(block_size: int) -> UnifiedCache:
    return UnifiedCache(block_size, "slru", core="rust", namespace_field="cache_salt")


def python_slru(block_size: int) -> UnifiedCache:
    return UnifiedCache(block_size, "slru", core="python", namespace_field="cache_salt")


def rust_priority(block_size: int) -> UnifiedCache:
    return UnifiedCache(block_size, "priority", core="rust", namespace_field="cache_salt")


def python_priority(block_size: int) -> UnifiedCache:
    return UnifiedCache(block_size, "priority", core="python", namespace_field="cache_salt")


TLRU_CONFIG = {"threshold": 4096, "next_prompt_estimate": 512}
"""The server refuses ``tlru`` unless threshold > next_prompt_estimate (arg_groups/kv_cache_hook.py:375-391); its documented example."""


def rust_tlru(block_size: int) -> UnifiedCache:
    return UnifiedCache(block_size, "tlru", core="rust", namespace_field="cache_salt", policy_config=dict(TLRU_CONFIG))


def python_tlru(block_size: int) -> UnifiedCache:
    return UnifiedCache(block_size, "tlru", core="python", namespace_field="cache_salt", policy_config=dict(TLRU_CONFIG))


def rust_fifo(block_size: int) -> UnifiedCache:
    return UnifiedCache(block_size, "fifo", core="rust", namespace_field="cache_salt")


def python_fifo(block_size: int) -> UnifiedCache:
    return UnifiedCache(block_size, "fifo", core="python", namespace_field="cache_salt")


def rust_mru(block_size: int) -> UnifiedCache:
    return UnifiedCache(block_size, "mru", core="rust", namespace_field="cache_salt")


def python_mru(block_size: int) -> UnifiedCache:
    return UnifiedCache(block_size, "mru", core="python", namespace_field="cache_salt")


def rust_filo(block_size: int) -> UnifiedCache:
    return UnifiedCache(block_size, "filo", core="rust", namespace_field="cache_salt")


def python_filo(block_size: int) -> UnifiedCache:
    return UnifiedCache(block_size, "filo", core="python", namespace_field="cache_salt")

"""The call machine's rule groups, each a class that reads on its own: prompts, matches and inserts, namespaces,
locks, evictions and counters, and the extremes.

Every group is a ``CallMachineState``; ``drive.call_machine`` puts them
together.  Hypothesis orders a machine's rules by their targets, arguments and
names, not by the class that holds them, so the grouping leaves the draws as
they were.
"""

from __future__ import annotations

from typing import cast

from hypothesis import strategies as st
from hypothesis.stateful import MultipleResults, consumes, multiple, precondition, rule

from spec.api import ID_LIMIT, BlockId, Inserted, Namespace, NodeId, PrefixMatch
from prefixspec.formats.trace import FOREIGN
from prefixspec.drive.call_state import NODES, PROMPTS, CallMachineState, NodePair, note_passed_back
from prefixspec.drive.coverage import BOUNDARY_VALUES, DEEP, MANY_LOCKS, WIDE
from prefixspec.drive.draws import MIXED_PASSED_BACK, NAMESPACE_DRAW, NAMESPACE_PAIRS, PASSED_BACK, TOKEN_ALPHABETS, namespace_population
from prefixspec.vocabulary import BY_OP, QUERIES, Call


class PromptRules(CallMachineState):
    """Prompts that share, extend and diverge: what the calls are made of."""

    @rule(target=PROMPTS, alphabet=st.sampled_from(TOKEN_ALPHABETS), data=st.data())
    def new_prompt(self, alphabet: st.SearchStrategy[int], data: st.DataObject) -> tuple[int, ...]:
        """A prompt of up to four blocks and a bit, its tokens from one alphabet."""
        size = self.spec.block_size()
        return tuple(data.draw(st.lists(alphabet, max_size=4 * size + 2), label="tokens"))

    @rule(target=PROMPTS, base=PROMPTS, alphabet=st.sampled_from(TOKEN_ALPHABETS), data=st.data())
    def extend_prompt(self, base: tuple[int, ...], alphabet: st.SearchStrategy[int], data: st.DataObject) -> tuple[int, ...]:
        """A prompt sharing ``base`` up to some point, then going its own way."""
        size = self.spec.block_size()
        cut = data.draw(st.integers(0, min(len(base), 2 * size)), label="cut")
        tail = data.draw(st.lists(alphabet, min_size=1, max_size=3 * size), label="tail")
        return base[: len(base) - cut] + tuple(tail)


class InsertRules(CallMachineState):
    """Matches and inserts: correct, duplicate and refused block lists passed back, and the calls R1 and R5 refuse."""

    @rule(target=NODES, prompt=PROMPTS, namespace=NAMESPACE_DRAW)
    def match(self, prompt: tuple[int, ...], namespace: Namespace) -> NodePair | MultipleResults[NodePair]:
        space = self.offered(namespace)
        found = self.call(lambda: self.pair.match_prefix(prompt, namespace=space))
        return self.node_pair(found.node) if isinstance(found, PrefixMatch) else multiple()

    @rule(target=NODES, prompt=PROMPTS, passed=PASSED_BACK, namespace=NAMESPACE_DRAW)
    def insert(self, prompt: tuple[int, ...], passed: str | list[str], namespace: Namespace) -> NodePair | MultipleResults[NodePair]:
        """Insert passing back, over the cached part, the cached ids, new ones, or a mix of cached, duplicate and refused ids."""
        space = self.offered(namespace)
        along = self.cached_blocks_along(prompt, space)
        blocks = self.passed_back(along, passed)
        note_passed_back(self.coverage, along, blocks)
        done = self.call(lambda: self.pair.insert(prompt, blocks, namespace=space))
        return self.node_pair(done.node) if isinstance(done, Inserted) else multiple()

    @rule(prompt=PROMPTS, passed=MIXED_PASSED_BACK, namespace=NAMESPACE_DRAW)
    def insert_over_cached(self, prompt: tuple[int, ...], passed: list[str], namespace: Namespace) -> None:
        """The prompt cached whole (the cached ids passed back where cached), then inserted again with a mix of
        cached, duplicate and refused ids: every position of the second insert is a cached one."""
        space = self.offered(namespace)
        if len(prompt) // self.spec.block_size() < 2:
            return
        self.call(lambda: self.pair.insert(prompt, self.passed_back(self.cached_blocks_along(prompt, space), "cached"), namespace=space))
        along = self.cached_blocks_along(prompt, space)
        blocks = self.passed_back(along, passed)
        note_passed_back(self.coverage, along, blocks)
        self.call(lambda: self.pair.insert(prompt, blocks, namespace=space))

    def passed_back(self, along: list[BlockId | None], passed: str | list[str]) -> list[BlockId]:
        """The ids an insert passes for positions whose cached ids are ``along``: fresh where nothing is cached;
        where something is, by ``passed`` (cycled): the cached id, a fresh one (a duplicate to hand back) or an id
        cached at another position (which R5 refuses; a repeat of this call's first id when none is cached)."""
        new_ids = iter(self.fresh_blocks(len(along)))
        kinds = [passed] if isinstance(passed, str) else passed
        blocks: list[BlockId] = []
        cached_positions = 0
        for position, cached in enumerate(along):
            if cached is None:
                blocks.append(next(new_ids))
                continue
            kind = kinds[cached_positions % len(kinds)]
            cached_positions += 1
            elsewhere = [other for other in along if other is not None and other != cached]
            if kind == "cached":
                blocks.append(cached)
            elif kind == "refused" and (elsewhere or blocks):
                blocks.append(elsewhere[position % len(elsewhere)] if elsewhere else blocks[0])
            else:
                blocks.append(next(new_ids))
        return blocks

    @rule(prompt=PROMPTS, mistake=st.sampled_from(["tail", "short", "repeat", "cached_elsewhere", "bad_id", "bad_token", "bad_match"]))
    def insert_wrong(self, prompt: tuple[int, ...], mistake: str) -> None:
        """A call that R1 or R5 refuses (both caches must refuse it and change nothing)."""
        along = self.cached_blocks_along(prompt)
        blocks = self.fresh_blocks(len(along))
        tokens = prompt
        if mistake == "tail":
            blocks = blocks + self.fresh_blocks(1)
        elif mistake == "short" and blocks:
            blocks = blocks[:-1]
        elif mistake == "repeat" and len(blocks) >= 2:
            blocks[-1] = blocks[0]
        elif mistake == "cached_elsewhere" and blocks and self.spec.cached_blocks():
            blocks[-1] = min(self.spec.cached_block_ids())
        elif mistake == "bad_id" and blocks:
            blocks[0] = ID_LIMIT
        elif mistake == "bad_token":
            tokens = prompt + (-1,)
            blocks = self.fresh_blocks(len(tokens) // self.spec.block_size())
        elif mistake == "bad_match":
            self.call(lambda: self.pair.match_prefix(prompt + (ID_LIMIT,)))
            return
        self.call(lambda: self.pair.insert(tokens, blocks))


class NamespaceRules(CallMachineState):
    """R12: one prompt in namespaces that alias when written carelessly, and dozens of tenants at once."""

    @rule(prompt=PROMPTS, pair=st.sampled_from(NAMESPACE_PAIRS))
    def one_prompt_in_two_namespaces(self, prompt: tuple[int, ...], pair: tuple[Namespace, Namespace]) -> None:
        """R12: the same tokens cached in two namespaces that alias when written carelessly; each matches only its own."""
        if "namespaces" not in self.features:
            return
        first, second = pair
        self.call(lambda: self.pair.insert(prompt, self.fresh_blocks(len(self.cached_blocks_along(prompt, first))), namespace=first))
        self.call(lambda: self.pair.match_prefix(prompt, namespace=second))
        theirs = self.cached_blocks_along(prompt, first)
        if theirs and None not in theirs:  # one pool of ids (R5 across R12): the first namespace's ids are refused in the second
            self.call(lambda: self.pair.insert(prompt, cast(list[BlockId], theirs), namespace=second))
        self.call(lambda: self.pair.insert(prompt, self.fresh_blocks(len(self.cached_blocks_along(prompt, second))), namespace=second))
        self.call(lambda: self.pair.match_prefix(prompt + (0,), namespace=first))
        self.coverage.note("one prompt in two namespaces")

    @rule(prompt=PROMPTS, count=st.integers(2, 16), seed=st.integers(0, 2**32 - 1))
    def many_namespaces(self, prompt: tuple[int, ...], count: int, seed: int) -> None:
        """R12 among dozens of tenants at once: enough for a short digest of the namespace to collide."""
        self.tenants(prompt, count, seed)

    def tenants(self, prompt: tuple[int, ...], count: int, seed: int, *, then_evict: bool = False) -> None:
        """One prompt cached in each of ``count`` distinct live namespaces (``namespace_population``), then matched in
        the first and the last few: a cache that maps namespaces onto fewer slots or values shares it between two.
        ``then_evict``: then evict everything, one evict of hundreds of leaves, so that the rest of the example
        does not compare hundreds of nodes after every call."""
        if "namespaces" not in self.features:
            return
        size = self.spec.block_size()
        prompt = prompt if len(prompt) >= size else prompt + (0,) * size
        population = namespace_population(count, seed)
        with self.batched():
            for space in population:
                self.call(lambda: self.pair.insert(prompt, self.fresh_blocks(len(prompt) // size), namespace=space))
            for space in population[:2] + population[-2:]:
                self.call(lambda: self.pair.match_prefix(prompt + (0,), namespace=space))
        self.coverage.note_shape(self.pair.snapshot())
        if then_evict:
            self.call(lambda: self.pair.evict(10**9))


class LockRules(CallMachineState):
    """R6: locks and unlocks of nodes old and new, locks never released, and nodes of another cache."""

    @rule(node=NODES, times=st.integers(1, 2))
    def lock(self, node: NodePair, times: int) -> None:
        """One lock, or two: two requests on one prefix (R6's count), half the time, not only when a draw repeats a node."""
        for _ in range(times):
            self.call(lambda: self.pair.lock(node.spec_node))

    @rule(node=NODES)
    def unlock(self, node: NodePair) -> None:
        self.call(lambda: self.pair.unlock(node.spec_node))

    @rule(node=consumes(NODES))
    def lock_and_forget(self, node: NodePair) -> None:
        """A request that never finishes: its lock stays for the rest of the example."""
        self.call(lambda: self.pair.lock(node.spec_node))

    @rule(op=st.sampled_from(["lock", "unlock"]))
    def lock_foreign(self, op: str) -> None:
        """R6: a node of another cache is unknown here (the trace's handle ``foreign``), to both caches alike."""
        self.coverage.note(f"refused {op}: UnknownNode (foreign)")
        self.call(lambda: self.pair.perform(Call(op, (FOREIGN,))))


class EvictRules(CallMachineState):
    """R8 and R9: evictions of every size, the counters, and what evict frees against what evictable_blocks promised."""

    @rule(n_blocks=st.integers(-1, 12))
    def evict(self, n_blocks: int) -> None:
        self.call(lambda: self.pair.evict(n_blocks))

    @rule()
    def evict_one(self) -> None:
        """The smallest eviction, which must still free a whole leaf (R8): the likeliest to expose a truncated one."""
        self.call(lambda: self.pair.evict(1))

    @rule()
    def evict_everything(self) -> None:
        self.call(lambda: self.pair.evict(10**9))

    @rule(query=st.sampled_from(QUERIES))
    def read_counters(self, query: str) -> None:
        self.call(getattr(self.pair, BY_OP[query].method))

    @rule(prompt=PROMPTS, cut=st.integers(1, 3))
    def branch_and_evict(self, prompt: tuple[int, ...], cut: int) -> None:
        """A prompt, one that leaves it after ``cut`` blocks (a split by insert), then evict(everything):
        both leaves go, and their parent becomes a leaf within that one evict."""
        size = self.spec.block_size()
        if len(prompt) < (cut + 1) * size:
            return
        other = prompt[: cut * size] + tuple((token + 1) % ID_LIMIT for token in prompt[cut * size : (cut + 1) * size])
        self.call(lambda: self.pair.insert(prompt, self.fresh_blocks(len(prompt) // size)))
        self.call(lambda: self.pair.insert(other, self.fresh_blocks(len(other) // size)))
        self.call(lambda: self.pair.evict(10**9))

    @precondition(lambda self: self.spec.cached_blocks() > 0)
    @rule()
    def evictable_is_what_evict_frees(self) -> None:
        """R9: evict(10**9) frees exactly evictable_blocks() blocks."""
        promised = self.call(self.pair.evictable_blocks)
        freed = self.call(lambda: self.pair.evict(10**9))
        if not isinstance(freed, list) or len(freed) != promised:
            self.fail_with_trace(f"evictable_blocks() was {promised} but evict freed {freed}")


class ExtremeRules(CallMachineState):
    """Paths hundreds of nodes deep, nodes with hundreds of children and under hundreds of locks: hundreds of calls
    each, so only the extremes stage runs them (``setup.extremes``); the plain call machine has them too, never
    enabled, so that both machines choose among the same rules."""

    @precondition(lambda self: self.setup.extremes)
    @rule(depth=st.integers(DEEP, DEEP + 8), alphabet=st.sampled_from(TOKEN_ALPHABETS[:2]), data=st.data())
    def deep_path(self, depth: int, alphabet: st.SearchStrategy[int], data: st.DataObject) -> None:
        """A path ``depth`` nodes deep (one block each), its deepest node locked, then evictions around it."""
        size = self.spec.block_size()
        prompt = tuple(data.draw(st.lists(alphabet, min_size=depth * size, max_size=depth * size), label="deep prompt"))
        deepest: NodeId | None = None
        with self.batched():
            if self.call(lambda: self.pair.insert(prompt, self.fresh_blocks(depth))) is None:
                return
            for blocks in range(1, depth + 1):
                found = self.call(lambda: self.pair.match_prefix(prompt[: blocks * size] + (0,)))
                if isinstance(found, PrefixMatch):
                    deepest = found.node
        self.coverage.note_shape(self.pair.snapshot())
        if deepest is None:
            return
        self.call(lambda: self.pair.lock(deepest))
        self.call(self.pair.evictable_blocks)
        self.call(lambda: self.pair.evict(10**9))
        self.call(lambda: self.pair.unlock(deepest))
        self.call(lambda: self.pair.evict(depth // 2))

    @precondition(lambda self: self.setup.extremes)
    @rule(width=st.integers(WIDE, WIDE + 8), base=st.sampled_from(BOUNDARY_VALUES))
    def wide_node(self, width: int, base: int) -> None:
        """One block shared by ``width`` prompts that each go their own way after it: a node with that many children."""
        size = self.spec.block_size()
        shared = (base,) * size
        with self.batched():
            for child in range(width):
                tail = tuple((base + child + 1 + offset) % ID_LIMIT for offset in range(size))
                self.call(lambda: self.pair.insert(shared + tail, self.fresh_blocks(2)))
        self.coverage.note_shape(self.pair.snapshot())
        self.call(lambda: self.pair.match_prefix(shared + shared + (0,)))
        self.call(lambda: self.pair.evict(width // 3))

    @precondition(lambda self: self.setup.extremes)
    @rule(times=st.integers(MANY_LOCKS, MANY_LOCKS + 60))
    def many_locks(self, times: int) -> None:
        """Hundreds of requests on one prefix, past 2^8 (a count in a byte, signed or not): as many locks on one
        node, evictions under them, then the unlocks."""
        size = self.spec.block_size()
        prompt = (ID_LIMIT - 1,) * (2 * size)
        done = self.call(lambda: self.pair.insert(prompt, [self.spec.block_cached_at(prompt[:size]) or self.fresh_blocks(1)[0], self.fresh_blocks(1)[0]]))
        if not isinstance(done, Inserted):
            return
        node = self.node_pair(done.node)
        with self.batched():
            for _ in range(times):
                self.call(lambda: self.pair.lock(node.spec_node))
        self.coverage.note_shape(self.pair.snapshot())
        self.call(lambda: self.pair.evict(10**9))
        with self.batched():
            for _ in range(times + 1):
                self.call(lambda: self.pair.unlock(node.spec_node))

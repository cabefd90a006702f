"""A serving engine's block manager, driving a prefix cache as an engine does.

The engine owns a fixed pool of block ids.  Every id is in exactly one place:
the free list, a running request (its private blocks), or the cache.  It
admits requests (match, lock, take the rest from the free list, evicting when
short, refusing when even eviction cannot help), prefills them (insert, free
the duplicates and the partial tail, move the lock to the inserted node),
finishes them (unlock, free private blocks) and evicts under pressure.  After
every step (every ``check_every``-th for the snapshot's checks) it checks what
the cache must guarantee an engine:

- conservation: the pool's ids are each in exactly one place;
- lock safety: no locked prefix loses a block, no evict returns a pinned id,
  and ``evictable_blocks`` never promises blocks evict cannot free;
- right after an insert, the inserted prefix is the longest match;
- the cache's own counts (cached blocks and tokens, evicted blocks) agree with
  what the engine saw.

Any violation raises ``EngineViolation``.  Randomness comes only from the
``random.Random`` passed to each step, so a (seed, steps) pair replays exactly.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import cast

from spec.api import BlockId, Namespace, NodeId, PrefixCache, PrefixMatch, TakesNamespaces
from prefixspec.drive.conservation import EngineViolation as EngineViolation  # the engine's failures: re-exported
from prefixspec.drive.conservation import Key, PathCheck, cached_block_by_prefix as cached_block_by_prefix, check_from_scratch, copies_by_prefix

DRAIN_ALL = 10**9


@dataclass(frozen=True)
class Workload:
    """The shape of the traffic: small by default, so hits, splits and evictions are frequent."""

    block_size: int = 2
    pool_size: int = 64
    max_running: int = 8
    system_prompts: int = 3
    alphabet: int = 4
    longest_prompt_blocks: int = 24
    namespaces: tuple[Namespace, ...] = (None,)
    """The tenants a request comes from (R12); one, the default, for a cache without namespaces."""
    most_pressure: int = 8
    """The most blocks a step of memory pressure asks ``evict`` to free (each asks 0 to this many, evenly)."""


@dataclass(eq=False)
class Request:
    """A request the engine is running; ``own`` are the ids only it holds.  Each is itself alone: two prefilled
    requests of one prompt hold equal fields, and ``list.remove`` must take the one that finished, found by
    identity, not the first equal one (nor compare the fields of every request before it: 1.4% of an engine
    step, bench.instructions)."""

    prompt: tuple[int, ...]
    node: NodeId
    table: list[BlockId]
    own: list[BlockId]
    locked_blocks: int
    prefilled: bool = False
    namespace: Namespace = None


@dataclass
class EngineCounts:
    """What the engine has done, for reports."""

    steps: int = 0
    admitted: int = 0
    refused: int = 0
    prefilled: int = 0
    finished: int = 0
    pressure_evictions: int = 0
    duplicates_freed: int = 0
    blocks_evicted: int = 0


class PromptSource:
    """Prompts shaped like engine traffic: shared system prompts, multi-turn chats, unique prompts."""

    def __init__(self, workload: Workload, seed: int) -> None:
        self.workload = workload
        setup = random.Random(seed)
        size = workload.block_size
        self.system_prompts: list[tuple[int, ...]] = []
        for _ in range(workload.system_prompts):
            length = setup.randint(size, 4 * size)
            self.system_prompts.append(tuple(setup.randrange(100, 200) for _ in range(length)))
        self.conversations: list[tuple[int, ...]] = []
        self.recent: list[tuple[int, ...]] = []

    def random_tokens(self, rng: random.Random, most: int) -> tuple[int, ...]:
        return tuple(rng.randrange(self.workload.alphabet) for _ in range(rng.randint(0, most)))

    def next_prompt(self, rng: random.Random) -> tuple[int, ...]:
        size = self.workload.block_size
        longest = self.workload.longest_prompt_blocks * size
        kind = rng.random()
        if kind < 0.15 and self.recent:
            prompt = rng.choice(self.recent)  # the same prompt again, often while the first still runs
        elif kind < 0.55:
            prompt = rng.choice(self.system_prompts) + self.random_tokens(rng, 3 * size)
        elif kind < 0.85 and self.conversations:
            index = rng.randrange(len(self.conversations))
            prompt = self.conversations[index] + self.random_tokens(rng, 4 * size)
            if len(prompt) > longest:
                prompt = rng.choice(self.system_prompts)
            self.conversations[index] = prompt
        else:
            prompt = self.random_tokens(rng, longest // 2)
            if rng.random() < 0.5:
                self.conversations.append(prompt)
                if len(self.conversations) > 6:
                    self.conversations.pop(0)
        prompt = prompt[:longest]
        self.recent.append(prompt)
        if len(self.recent) > 8:
            self.recent.pop(0)
        return prompt


@dataclass
class Engine:
    """The block manager over ``cache``; call ``step(rng)`` repeatedly, then ``drain()``."""

    cache: PrefixCache
    workload: Workload = field(default_factory=Workload)
    prompt_seed: int = 0
    free: list[BlockId] = field(default_factory=list)
    running: list[Request] = field(default_factory=list)
    counts: EngineCounts = field(default_factory=EngineCounts)
    check_every: int = 1
    """Engine steps between two full checks of conservation and lock safety (each reads the whole snapshot)."""

    def __post_init__(self) -> None:
        self.free = list(range(self.workload.pool_size))
        self.path_check = PathCheck(self.workload.pool_size)
        self.prompts = PromptSource(self.workload, self.prompt_seed)

    # The engine's actions ------------------------------------------------------------

    def step(self, rng: random.Random) -> str:
        """One engine action chosen by ``rng``, then every invariant; returns the action's name."""
        roll = rng.random()
        if roll < 0.45 and len(self.running) < self.workload.max_running:
            tenants = self.workload.namespaces
            # One draw more only with tenants: a workload in the default namespace keeps its sequence of steps.
            action = self.admit(self.prompts.next_prompt(rng), rng.choice(tenants) if len(tenants) > 1 else tenants[0])
        else:
            action = self.act_on_running(roll, rng)
        self.counts.steps += 1
        if self.counts.steps % self.check_every == 0:
            self.check()
        return action

    def act_on_running(self, roll: float, rng: random.Random) -> str:
        """The step's action where it admits no request: one on a running request, memory pressure, or a reading
        (the requests sorted by their state only here: an admission, nearly half the steps, needs neither list)."""
        waiting = [request for request in self.running if not request.prefilled]
        done = [request for request in self.running if request.prefilled]
        if roll < 0.7 and waiting:
            return self.prefill(rng.choice(waiting))
        if roll < 0.85 and done:
            return self.finish(rng.choice(done))
        if roll < 0.88 and waiting:
            return self.finish(rng.choice(waiting))  # an aborted request
        if roll < 0.96:
            return self.pressure(rng.randint(0, self.workload.most_pressure))
        return self.observe()

    def match(self, prompt: tuple[int, ...], namespace: Namespace) -> PrefixMatch:
        """A match in ``namespace``; a cache without namespaces is only ever asked in the default one."""
        if namespace is None:
            return self.cache.match_prefix(prompt)
        return cast(TakesNamespaces, self.cache).match_prefix(prompt, namespace=namespace)

    def admit(self, prompt: tuple[int, ...], namespace: Namespace = None) -> str:
        size = self.workload.block_size
        found = self.match(prompt, namespace)
        self.cache.lock(found.node)
        wanted = (len(prompt) + size - 1) // size - len(found.blocks)
        if wanted > len(self.free):
            short = wanted - len(self.free)
            if self.cache.evictable_blocks() < short:
                self.cache.unlock(found.node)
                self.counts.refused += 1
                return "refuse"
            freed = self.evict(short)
            if len(freed) < short:
                raise EngineViolation(
                    f"evictable_blocks() promised at least {short} blocks but evict({short}) freed {len(freed)}"
                )
        own = self.free[:wanted]
        del self.free[:wanted]
        request = Request(prompt, found.node, list(found.blocks) + own, own, len(found.blocks), namespace=namespace)
        self.running.append(request)
        self.counts.admitted += 1
        return "admit"

    def prefill(self, request: Request) -> str:
        size = self.workload.block_size
        whole = len(request.prompt) // size
        if request.namespace is None:
            inserted = self.cache.insert(request.prompt, request.table[:whole])
        else:
            inserted = cast(TakesNamespaces, self.cache).insert(request.prompt, request.table[:whole], namespace=request.namespace)
        for block in inserted.duplicates:
            if block not in request.own:
                raise EngineViolation(f"insert handed back block {block}, which the request does not own")
            request.own.remove(block)
            self.free.append(block)
            self.counts.duplicates_freed += 1
        for block in request.table[:whole]:
            if block in request.own:
                request.own.remove(block)  # the cache holds it now
        self.free.extend(request.own)  # the partial tail block
        request.own = []
        self.cache.lock(inserted.node)
        self.cache.unlock(request.node)
        request.node = inserted.node
        request.locked_blocks = whole
        request.prefilled = True
        if whole:
            self.check_longest_match(request, inserted.node, inserted.duplicates)
        self.counts.prefilled += 1
        return "prefill"

    def check_longest_match(self, request: Request, node: NodeId, duplicates: list[BlockId]) -> None:
        """Right after an insert its whole prefix is the longest match, ending at the inserted node."""
        size = self.workload.block_size
        whole = request.locked_blocks
        found = self.match(request.prompt[: whole * size] + (0,), request.namespace)
        if found.matched_tokens != whole * size or found.node != node:
            raise EngineViolation(
                f"right after inserting {whole * size} tokens a match covered {found.matched_tokens}"
                f"{'' if found.node == node else ' and ended at another node'}"
            )
        copies: dict[Key, tuple[BlockId, ...]] | None = None
        for position, block in enumerate(request.table[:whole]):
            if block not in duplicates and found.blocks[position] != block:
                if copies is None:  # a cache that keeps copies (R5 dup=keep) matches the first; the request's is another
                    copies = copies_by_prefix(self.cache.snapshot())
                if block in copies.get((request.namespace, request.prompt[: (position + 1) * size]), ()):
                    continue
                raise EngineViolation(f"block {position} was inserted as {block} but matches as {found.blocks[position]}")
        request.table[:whole] = found.blocks

    def finish(self, request: Request) -> str:
        self.cache.unlock(request.node)
        self.free.extend(request.own)
        self.running.remove(request)
        self.counts.finished += 1
        return "finish"

    def pressure(self, n_blocks: int) -> str:
        self.evict(n_blocks)
        self.counts.pressure_evictions += 1
        return "evict"

    def evict(self, n_blocks: int) -> list[BlockId]:
        pinned = self.pinned_blocks()
        freed = self.cache.evict(n_blocks)
        hit = sorted(set(freed) & pinned)
        if hit:
            raise EngineViolation(f"evict({n_blocks}) freed blocks {hit} of a locked prefix")
        self.free.extend(freed)
        self.counts.blocks_evicted += len(freed)
        return freed

    def observe(self) -> str:
        """Read the counters as a metrics endpoint would, and hold them to what the engine saw."""
        size = self.workload.block_size
        held = self.workload.pool_size - len(self.free) - sum(len(request.own) for request in self.running)
        blocks = self.cache.cached_blocks()
        tokens = self.cache.cached_tokens()
        evictable = self.cache.evictable_blocks()
        stats = self.cache.stats()
        rate = self.cache.hit_rate()
        if blocks != held:
            raise EngineViolation(f"cached_blocks() is {blocks} but the cache holds {held} of the pool's blocks")
        if tokens != blocks * size:
            raise EngineViolation(f"cached_tokens() is {tokens}, not cached_blocks() * B = {blocks * size}")
        if not 0 <= evictable <= blocks:
            raise EngineViolation(f"evictable_blocks() is {evictable}, outside [0, {blocks}]")
        if stats.evicted_blocks != self.counts.blocks_evicted:
            raise EngineViolation(f"stats().evicted_blocks is {stats.evicted_blocks}, evict returned {self.counts.blocks_evicted}")
        if not 0.0 <= rate <= 1.0 or stats.hit_tokens > stats.query_tokens:
            raise EngineViolation(f"hit_rate() {rate} from {stats.hit_tokens} hit of {stats.query_tokens} queried tokens")
        return "observe"

    def drain(self) -> None:
        """Finish every request and evict everything: the whole pool must come back."""
        for request in list(self.running):
            self.finish(request)
            self.check()
        evictable = self.cache.evictable_blocks()
        cached = self.cache.cached_blocks()
        if evictable != cached:
            raise EngineViolation(f"with no request running, evictable_blocks() is {evictable} of {cached} cached")
        self.evict(DRAIN_ALL)
        self.check()
        if self.cache.cached_blocks() != 0 or sorted(self.free) != list(range(self.workload.pool_size)):
            raise EngineViolation(
                f"after draining, {self.cache.cached_blocks()} blocks are still cached and "
                f"{self.workload.pool_size - len(set(self.free))} ids are missing from the free list"
            )

    # The invariants ---------------------------------------------------------------------

    def pinned_blocks(self) -> set[BlockId]:
        pinned: set[BlockId] = set()
        for request in self.running:
            pinned.update(request.table[: request.locked_blocks])
        return pinned

    def check(self) -> None:
        """Conservation and lock safety, from the cache's snapshot, read node by node (``conservation.PathCheck``)."""
        self.path_check.check(self.cache.snapshot(), self.free, self.running)

    def check_from_scratch(self) -> None:
        """``check``'s verdict, from the whole snapshot (``conservation.check_from_scratch``): the definition."""
        check_from_scratch(self.cache.snapshot(), self.free, self.running, self.workload.pool_size)


def run_engine(cache: PrefixCache, steps: int, seed: int, workload: Workload | None = None) -> Engine:
    """``steps`` seeded engine steps on ``cache``, then a full drain; raises on any violation."""
    engine = Engine(cache, workload or Workload(), prompt_seed=seed)
    rng = random.Random(seed)
    for _ in range(steps):
        engine.step(rng)
    engine.drain()
    return engine

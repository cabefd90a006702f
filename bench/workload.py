"""The engine-shaped workload: seeded traffic, and an engine that records its cache calls as data.

The traffic (``Traffic``) is shaped like an LLM server's at B = 16:

- 55% of requests start with one of 8 shared system prompts of 1,000-2,000
  tokens, followed by a unique user part of 50-500 tokens;
- 35% are turns of multi-turn chats: each turn's prompt is the chat's last
  prompt, plus that turn's output, plus a new message of 50-500 tokens (a chat
  opens on a system prompt; 8 chats run at a time, so a chat often comes
  back while its history is still cached; one that would pass ``chat_limit``
  tokens starts over);
- 10% are unique prompts of 200-3,000 tokens;
- every request generates 50-300 output tokens.

The engine (``record``) runs over a bounded pool of block ids with a free list
and keeps ``in_flight`` requests running at once.  Admitting a request is
``match_prefix`` -> ``lock`` -> ``evict`` (only when the free list is short) ->
take blocks from the free list; finishing it is ``insert`` (prompt and output,
one block per whole block) -> free the duplicates and the partial tail's
block -> ``unlock``.  With 8 requests in flight, two running requests compute
the same uncached blocks and the second insert hands back duplicates.

The engine decides every call from the results of a reference cache (the spec,
or a cross-checked implementation, see ``bench.run``), and records each call
with that result as its expected one.  Any cache then replays exactly the same
calls (``bench.replay``), and a result that differs is a divergence, reported
and not timed.
"""

from __future__ import annotations

import random
from array import array
from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass, field

from spec.api import PrefixCache
from prefixspec.vocabulary import COMMANDS

OP_NAMES: tuple[str, ...] = COMMANDS
"""A call's op code is its place among the calls of the table that take arguments: the calls an engine makes."""
MATCH, INSERT, LOCK, UNLOCK, EVICT = map(OP_NAMES.index, ("match", "insert", "lock", "unlock", "evict"))
ROOT_REF = -1
"""The node reference of the root in expected results."""


@dataclass(frozen=True)
class Shape:
    """The knobs of one workload; ``seed`` fixes every prompt, output and choice."""

    name: str
    pool_blocks: int
    requests: int
    in_flight: int = 1
    block_size: int = 16
    seed: int = 2024
    system_prompts: int = 8
    system_tokens: tuple[int, int] = (1000, 2000)
    user_tokens: tuple[int, int] = (50, 500)
    unique_tokens: tuple[int, int] = (200, 3000)
    output_tokens: tuple[int, int] = (50, 300)
    system_share: float = 0.55
    chat_share: float = 0.35
    chats: int = 8
    chat_limit: int = 8000

    def describe(self) -> str:
        flight = "one request at a time" if self.in_flight == 1 else f"{self.in_flight} requests in flight"
        return f"pool {self.pool_blocks:,} blocks, {self.requests:,} requests, {flight}"


SMALL = Shape("small", pool_blocks=4096, requests=3000)
BIG = Shape("big", pool_blocks=65536, requests=12000)
SMALL_IN_FLIGHT = Shape("small-8", pool_blocks=4096, requests=3000, in_flight=8)
SHAPES = {shape.name: shape for shape in (SMALL, BIG, SMALL_IN_FLIGHT)}


@dataclass
class Request:
    prompt: array[int]
    output: array[int]
    chat: int | None


class Traffic:
    """The prompts and outputs of a workload, drawn from one seeded ``random.Random``."""

    def __init__(self, shape: Shape) -> None:
        self.shape = shape
        self.rng = random.Random(shape.seed)
        self.system = [self.tokens(self.rng.randint(*shape.system_tokens)) for _ in range(shape.system_prompts)]
        self.chats: list[array[int]] = []

    def tokens(self, count: int) -> array[int]:
        """``count`` random tokens in [0, 65536), made in C from random bytes."""
        return array("I", array("H", self.rng.randbytes(2 * count)))

    def opening(self) -> array[int]:
        return self.rng.choice(self.system) + self.tokens(self.rng.randint(*self.shape.user_tokens))

    def next_request(self, busy_chats: set[int]) -> Request:
        shape = self.shape
        output = self.tokens(self.rng.randint(*shape.output_tokens))
        kind = self.rng.random()
        if kind < shape.system_share:
            return Request(self.opening(), output, None)
        if kind < shape.system_share + shape.chat_share:
            chat = self.rng.randrange(shape.chats)
            if chat in busy_chats:
                return Request(self.opening(), output, None)  # that chat's last turn is still running
            if chat >= len(self.chats):
                self.chats.append(array("I"))
                chat = len(self.chats) - 1
            message = self.tokens(self.rng.randint(*shape.user_tokens))
            prompt = self.chats[chat] + message if self.chats[chat] else self.opening()
            if len(prompt) + shape.output_tokens[1] > shape.chat_limit:
                prompt = self.opening()  # the chat starts over
            return Request(prompt, output, chat)
        return Request(self.tokens(self.rng.randint(*shape.unique_tokens)), output, None)

    def finished(self, request: Request, sequence: array[int]) -> None:
        if request.chat is not None:
            self.chats[request.chat] = sequence


@dataclass
class Recording:
    """The calls of one workload as data, each with its expected result.

    ``ops[i]`` is the call's kind; ``args[i]`` its arguments (match: the token
    array; insert: the token array and the block array; lock and unlock: the
    index of the call whose node they name; evict: the block count);
    ``expected[i]`` its result (match: ``(matched_tokens, blocks, ref)``;
    insert: ``(ref, duplicates)``; evict: the freed ids; lock and unlock:
    None), where a ``ref`` is the index of the first call that returned that
    node, ``ROOT_REF`` for the root.
    """

    shape: Shape
    rule: str
    reference: str
    ops: list[int] = field(default_factory=list)
    args: list[object] = field(default_factory=list)
    expected: list[object] = field(default_factory=list)
    requests: int = 0
    query_tokens: int = 0
    hit_tokens: int = 0
    inserted_tokens: int = 0
    evicted_blocks: int = 0
    duplicates: int = 0
    pressure_evictions: int = 0

    def __len__(self) -> int:
        return len(self.ops)

    def counts(self) -> dict[str, int]:
        found = {name: 0 for name in OP_NAMES}
        for op in self.ops:
            found[OP_NAMES[op]] += 1
        return found

    def read_tokens(self) -> int:
        """The tokens passed to match and insert: what the read floor reads."""
        return self.query_tokens + self.inserted_tokens

    def summary(self) -> dict[str, object]:
        return {
            "shape": self.shape.name,
            "rule": self.rule,
            "reference": self.reference,
            "calls": len(self),
            "calls_by_op": self.counts(),
            "requests": self.requests,
            "query_tokens": self.query_tokens,
            "hit_tokens": self.hit_tokens,
            "hit_rate": round(self.hit_tokens / self.query_tokens, 4) if self.query_tokens else 0.0,
            "inserted_tokens": self.inserted_tokens,
            "evicted_blocks": self.evicted_blocks,
            "duplicates": self.duplicates,
            "evict_calls": self.pressure_evictions,
        }


@dataclass
class Running:
    request: Request
    match_call: int
    blocks: list[int]
    own: list[int]


class Recorder:
    """Makes the calls on the reference cache and records them with its results."""

    def __init__(self, shape: Shape, cache: PrefixCache, rule: str, reference: str) -> None:
        self.cache = cache
        self.recording = Recording(shape, rule, reference)
        self.first_call: dict[Hashable, int] = {}

    def _ref(self, node: Hashable, call: int) -> int:
        if node == self.cache.root:
            return ROOT_REF
        return self.first_call.setdefault(node, call)

    def match(self, tokens: array[int]) -> tuple[int, list[int], Hashable]:
        """Record a match; its call index, its blocks and its node."""
        rec = self.recording
        call = len(rec.ops)
        found = self.cache.match_prefix(tokens.tolist())
        rec.ops.append(MATCH)
        rec.args.append(tokens)
        rec.expected.append((found.matched_tokens, array("I", found.blocks), self._ref(found.node, call)))
        rec.query_tokens += len(tokens)
        rec.hit_tokens += found.matched_tokens
        return call, list(found.blocks), found.node

    def insert(self, tokens: array[int], blocks: list[int]) -> list[int]:
        rec = self.recording
        call = len(rec.ops)
        done = self.cache.insert(tokens.tolist(), blocks)
        rec.ops.append(INSERT)
        rec.args.append((tokens, array("I", blocks)))
        rec.expected.append((self._ref(done.node, call), array("I", done.duplicates)))
        rec.inserted_tokens += len(tokens)
        rec.duplicates += len(done.duplicates)
        return list(done.duplicates)

    def lock(self, call: int, node: Hashable) -> None:
        self.cache.lock(node)
        self.recording.ops.append(LOCK)
        self.recording.args.append(call)
        self.recording.expected.append(None)

    def unlock(self, call: int, node: Hashable) -> None:
        self.cache.unlock(node)
        self.recording.ops.append(UNLOCK)
        self.recording.args.append(call)
        self.recording.expected.append(None)

    def evict(self, count: int) -> list[int]:
        freed = self.cache.evict(count)
        rec = self.recording
        rec.ops.append(EVICT)
        rec.args.append(count)
        rec.expected.append(array("I", freed))
        rec.evicted_blocks += len(freed)
        rec.pressure_evictions += 1
        return freed


def record(shape: Shape, cache: PrefixCache, *, rule: str, reference: str) -> Recording:
    """Run the workload's engine on ``cache`` (fresh, block size ``shape.block_size``); its calls as data."""
    if cache.block_size() != shape.block_size:
        raise ValueError(f"the reference cache has block size {cache.block_size()}, the workload {shape.block_size}")
    size = shape.block_size
    traffic = Traffic(shape)
    recorder = Recorder(shape, cache, rule, reference)
    free = list(range(shape.pool_blocks))
    running: deque[Running] = deque()
    nodes: dict[int, Hashable] = {}

    def finish(job: Running) -> None:
        request = job.request
        sequence = request.prompt + request.output
        whole = len(sequence) // size
        table = job.blocks + job.own
        duplicates = recorder.insert(sequence, table[:whole])
        free.extend(duplicates)
        free.extend(table[whole:])  # the partial tail's block: never cached
        recorder.unlock(job.match_call, nodes.pop(job.match_call))
        traffic.finished(request, sequence)

    for _ in range(shape.requests):
        if len(running) >= shape.in_flight:
            finish(running.popleft())
        request = traffic.next_request({job.request.chat for job in running if job.request.chat is not None})
        call, blocks, node = recorder.match(request.prompt)
        nodes[call] = node
        recorder.lock(call, node)
        need = -(-(len(request.prompt) + len(request.output)) // size) - len(blocks)
        while len(free) < need:
            free.extend(recorder.evict(need - len(free)))
            if len(free) < need:
                if not running:
                    raise RuntimeError(f"a pool of {shape.pool_blocks} blocks cannot hold one request of {need} blocks")
                finish(running.popleft())
        own = free[len(free) - need :]
        del free[len(free) - need :]
        running.append(Running(request, call, blocks, own))
        recorder.recording.requests += 1
    while running:
        finish(running.popleft())
    if cache.cached_blocks() + len(free) != shape.pool_blocks or len(set(free)) != len(free):
        raise RuntimeError("the engine lost track of its blocks: the recording is not trustworthy")
    return recorder.recording


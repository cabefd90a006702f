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
or a cross-checked implementation, see ``bench.run``), and records its calls
as a trace of the checker's format (``prefixspec.formats.trace``): each call a
``Call`` of the call table, named ``nK`` on line K when it returns a node, with
the reference's result as its expected one, written as the trace writes it.
Any cache then replays exactly the same calls (``bench.replay``), and a result
that differs is a divergence, reported and not timed; ``prefixspec replay``
reads the same trace (``Recording.trace.text()``).

Tokens are tuples built by concatenation from the drawn pieces, so the calls of
a workload share the int objects of one prompt and hold a pointer per token.
"""

from __future__ import annotations

import random
from array import array
from collections import Counter, deque
from dataclasses import dataclass

from prefixspec.formats.trace import CallRunner, Step, Trace
from prefixspec.vocabulary import BY_OP, COMMANDS, Arg, make_call
from spec.api import BlockId, Inserted, PrefixCache, PrefixMatch, Rules

Tokens = tuple[int, ...]


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
class Prompted:
    """A request as the traffic draws it (the engine's running state is ``Running``): its prompt, its output, its chat."""

    prompt: Tokens
    output: Tokens
    chat: int | None


class Traffic:
    """The prompts and outputs of a workload, drawn from one seeded ``random.Random``."""

    def __init__(self, shape: Shape) -> None:
        self.shape = shape
        self.rng = random.Random(shape.seed)
        self.system = [self.tokens(self.rng.randint(*shape.system_tokens)) for _ in range(shape.system_prompts)]
        self.chats: list[Tokens] = []

    def tokens(self, count: int) -> Tokens:
        """``count`` random tokens in [0, 65536), made in C from random bytes."""
        return tuple(array("H", self.rng.randbytes(2 * count)))

    def opening(self) -> Tokens:
        return self.rng.choice(self.system) + self.tokens(self.rng.randint(*self.shape.user_tokens))

    def next_request(self, busy_chats: set[int]) -> Prompted:
        shape = self.shape
        output = self.tokens(self.rng.randint(*shape.output_tokens))
        kind = self.rng.random()
        if kind < shape.system_share:
            return Prompted(self.opening(), output, None)
        if kind < shape.system_share + shape.chat_share:
            chat = self.rng.randrange(shape.chats)
            if chat in busy_chats:
                return Prompted(self.opening(), output, None)  # that chat's last turn is still running
            if chat >= len(self.chats):
                self.chats.append(())
                chat = len(self.chats) - 1
            message = self.tokens(self.rng.randint(*shape.user_tokens))
            prompt = self.chats[chat] + message if self.chats[chat] else self.opening()
            if len(prompt) + shape.output_tokens[1] > shape.chat_limit:
                prompt = self.opening()  # the chat starts over
            return Prompted(prompt, output, chat)
        return Prompted(self.tokens(self.rng.randint(*shape.unique_tokens)), output, None)

    def finished(self, request: Prompted, sequence: Tokens) -> None:
        if request.chat is not None:
            self.chats[request.chat] = sequence


@dataclass
class Recording:
    """The calls of one workload as a trace, each with its expected result, and what they add up to.

    ``trace`` is a ``prefixspec.formats.trace.Trace`` of the calls the engine
    made (match, insert, lock, unlock, evict), its ``rules`` those the reference
    followed; a call that returns a node is named ``nK`` on line K, and a lock
    or unlock names the match whose node it holds.
    """

    shape: Shape
    rule: str
    reference: str
    trace: Trace
    requests: int = 0
    query_tokens: int = 0
    hit_tokens: int = 0
    inserted_tokens: int = 0
    evicted_blocks: int = 0
    duplicates: int = 0
    pressure_evictions: int = 0

    def __len__(self) -> int:
        return len(self.trace.steps)

    def counts(self) -> dict[str, int]:
        found = Counter(step.call.op for step in self.trace.steps)
        return {op: found[op] for op in COMMANDS}

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
    """A request the engine runs: what it was drawn as, the handle of its match (which it holds locked), its blocks."""

    request: Prompted
    match_handle: str
    blocks: list[BlockId]
    own: list[BlockId]


class Recorder:
    """Makes the calls on the reference cache through the trace's ``CallRunner`` and records each with its result."""

    def __init__(self, shape: Shape, cache: PrefixCache, rule: str, reference: str, rules: Rules) -> None:
        self.cache = cache
        self.runner = CallRunner(cache)
        self.steps: list[Step] = []
        self.recording = Recording(shape, rule, reference, Trace(shape.block_size, self.steps, rules=rules))

    def call(self, op: str, *args: Arg) -> tuple[str, object]:
        """Make the call ``op`` on the reference; its handle (empty for a call that names no node) and its result."""
        line = len(self.steps) + 1
        name = f"n{line}" if BY_OP[op].names_node else ""
        call = make_call(op, *args, name=name)
        outcome = self.runner.run(call)
        if outcome.error is not None:
            raise RuntimeError(f"the reference cache refused line {line} of the workload ({op}): {outcome.text}")
        self.steps.append(Step(call, outcome.text, line))
        return name, outcome.value

    def match(self, tokens: Tokens) -> tuple[str, list[BlockId]]:
        """Record a match; its handle and its blocks."""
        handle, found = self.call("match", tokens)
        assert isinstance(found, PrefixMatch)
        rec = self.recording
        rec.query_tokens += len(tokens)
        rec.hit_tokens += found.matched_tokens
        return handle, list(found.blocks)

    def insert(self, tokens: Tokens, blocks: list[BlockId]) -> list[BlockId]:
        _, done = self.call("insert", tokens, tuple(blocks))
        assert isinstance(done, Inserted)
        rec = self.recording
        rec.inserted_tokens += len(tokens)
        rec.duplicates += len(done.duplicates)
        return list(done.duplicates)

    def evict(self, count: int) -> list[BlockId]:
        _, freed = self.call("evict", count)
        assert isinstance(freed, list)
        rec = self.recording
        rec.evicted_blocks += len(freed)
        rec.pressure_evictions += 1
        return freed


def record(shape: Shape, cache: PrefixCache, *, rule: str, reference: str, rules: Rules) -> Recording:
    """Run the workload's engine on ``cache`` (fresh, block size ``shape.block_size``, following ``rules``); its calls as a trace."""
    if cache.block_size() != shape.block_size:
        raise ValueError(f"the reference cache has block size {cache.block_size()}, the workload {shape.block_size}")
    size = shape.block_size
    traffic = Traffic(shape)
    recorder = Recorder(shape, cache, rule, reference, rules)
    free = list(range(shape.pool_blocks))
    running: deque[Running] = deque()

    def finish(job: Running) -> None:
        request = job.request
        sequence = request.prompt + request.output
        whole = len(sequence) // size
        table = job.blocks + job.own
        duplicates = recorder.insert(sequence, table[:whole])
        free.extend(duplicates)
        free.extend(table[whole:])  # the partial tail's block: never cached
        recorder.call("unlock", job.match_handle)
        traffic.finished(request, sequence)

    for _ in range(shape.requests):
        if len(running) >= shape.in_flight:
            finish(running.popleft())
        request = traffic.next_request({job.request.chat for job in running if job.request.chat is not None})
        handle, blocks = recorder.match(request.prompt)
        recorder.call("lock", handle)
        need = -(-(len(request.prompt) + len(request.output)) // size) - len(blocks)
        while len(free) < need:
            free.extend(recorder.evict(need - len(free)))
            if len(free) < need:
                if not running:
                    raise RuntimeError(f"a pool of {shape.pool_blocks} blocks cannot hold one request of {need} blocks")
                finish(running.popleft())
        own = free[len(free) - need :]
        del free[len(free) - need :]
        running.append(Running(request, handle, blocks, own))
        recorder.recording.requests += 1
    while running:
        finish(running.popleft())
    if cache.cached_blocks() + len(free) != shape.pool_blocks or len(set(free)) != len(free):
        raise RuntimeError("the engine lost track of its blocks: the recording is not trustworthy")
    return recorder.recording

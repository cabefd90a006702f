"""SGLang's two TreeCores driven side by side: the same calls to the Rust and the Python core must give the same answers.

``compare_cores(policy, ...)`` draws call sequences from a seeded ``random.Random`` (small token
alphabets and page sizes so that prompts share prefixes, split nodes and evict one another; ids from
a small pool so that R5's refusals happen), makes every call on a ``UnifiedCache`` of each core and
compares, call by call: the result or the error class, then the counters, and every ``check_every``
calls the snapshots' nodes as sets (the Rust binding reports no order) and the events taken.  It
stops at the first difference and returns it with the calls that led there, as trace-like lines.

This is differential testing of one engine's two implementations; it does not say either agrees with
the spec (the checks of ``make engines`` do that).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from spec.api import Snapshot
from examples.sglang.unified import UnifiedCache


@dataclass
class CoreComparison:
    policy: str
    calls: int = 0
    sequences: int = 0
    difference: str | None = None
    trace: list[str] = field(default_factory=list)


def _answer(run: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return ("ok", run())
    except Exception as error:  # the class of a refusal is what both cores must agree on
        return ("error", type(error).__name__)


def _shape(snapshot: Snapshot) -> frozenset[tuple[Any, ...]]:
    return frozenset((view.namespace, view.prefix, view.blocks, view.locks) for view in snapshot.nodes)


def _handle_free(value: Any, handles: dict[int, int], cache: UnifiedCache) -> Any:
    """A result with node handles replaced by the index of the call that first returned them (ids differ between cores)."""
    from spec.api import Inserted, PrefixMatch

    def name(node: Any) -> Any:
        if node == cache.root:
            return "root"
        return handles.setdefault(node, len(handles))

    if isinstance(value, PrefixMatch):
        return ("match", value.matched_tokens, tuple(value.blocks), name(value.node))
    if isinstance(value, Inserted):
        return ("insert", name(value.node), tuple(value.duplicates))
    if isinstance(value, list):
        return tuple(value)
    return value


def compare_cores(
    policy: str,
    *,
    sequences: int = 200,
    length: int = 40,
    block_sizes: tuple[int, ...] = (1, 2, 3),
    seed: int = 19,
    check_every: int = 1,
    policy_config: dict[str, Any] | None = None,
    progress: Callable[[str], None] | None = None,
) -> CoreComparison:
    """Drive ``sequences`` random call sequences of ``length`` calls through both cores under ``policy``."""
    result = CoreComparison(policy)
    draw = random.Random(seed)
    for sequence in range(sequences):
        size = draw.choice(block_sizes)
        caches = [UnifiedCache(size, policy, core=core, namespace_field="cache_salt", policy_config=policy_config) for core in ("rust", "python")]
        handles: list[dict[int, int]] = [{}, {}]
        returned: list[list[Any]] = [[], []]  # per core, every node handle a call returned, in order
        result.sequences += 1
        trace = [f"# block size {size}, policy {policy}"]
        for step in range(length):
            kind = draw.choices(("match", "insert", "lock", "unlock", "evict", "events"), weights=(4, 5, 2, 2, 2, 1))[0]
            tokens = [draw.randrange(3) for _ in range(draw.randrange(0, 4 * size + 1))]
            namespace = draw.choice((None, None, None, "a"))
            pick = draw.randrange(1 << 16)
            wanted = draw.randrange(0, 4)
            ids = draw.sample(range(12), k=len(tokens) // size) if len(tokens) // size <= 12 else []
            answers = []
            for index, cache in enumerate(caches):
                nodes = returned[index]
                if kind == "match":
                    answer = _answer(lambda: cache.match_prefix(tokens, namespace))
                    text = f"match {tokens} ns={namespace}"
                elif kind == "insert":
                    answer = _answer(lambda: cache.insert(tokens, ids, namespace))
                    text = f"insert {tokens} {ids} ns={namespace}"
                elif kind in ("lock", "unlock"):
                    node = nodes[pick % len(nodes)] if nodes else cache.root
                    operation = cache.lock if kind == "lock" else cache.unlock
                    answer = _answer(lambda: operation(node))
                    text = f"{kind} (the node of call {pick % len(nodes) if nodes else 'root'})"
                elif kind == "evict":
                    answer = _answer(lambda: cache.evict(wanted))
                    text = f"evict {wanted}"
                else:
                    answer = _answer(cache.take_events)
                    text = "take_events"
                if answer[0] == "ok" and kind in ("match", "insert"):
                    nodes.append(answer[1].node)
                status, value = answer
                answers.append((status, _handle_free(value, handles[index], cache) if status == "ok" else value))
            result.calls += 1
            trace.append(f"{text} -> rust {answers[0]}, python {answers[1]}")
            if answers[0] != answers[1]:
                result.difference, result.trace = f"the answers differ at call {step + 1}", trace
                return result
            counters = [(cache.stats(), cache.cached_blocks(), cache.evictable_blocks()) for cache in caches]
            if counters[0] != counters[1]:
                trace.append(f"counters: rust {counters[0]}, python {counters[1]}")
                result.difference, result.trace = f"the counters differ after call {step + 1}", trace
                return result
            if (step + 1) % check_every == 0:
                shapes = [_shape(cache.snapshot()) for cache in caches]
                if shapes[0] != shapes[1]:
                    trace.append(f"nodes: rust {sorted(shapes[0] - shapes[1], key=repr)} python {sorted(shapes[1] - shapes[0], key=repr)}")
                    result.difference, result.trace = f"the nodes differ after call {step + 1}", trace
                    return result
        if progress is not None and (sequence + 1) % 50 == 0:
            progress(f"{policy}: {sequence + 1} sequences, {result.calls:,} calls agree")
    return result

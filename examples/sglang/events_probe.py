"""R12 namespaces and R13 events: SGLang's real RadixCache beside the spec, scenario by scenario.

Run from the project's root with the venv that holds SGLang::

    .venv-bench/bin/python -m examples.sglang.events_probe

Each scenario drives ``examples.sglang.adapter.SglangCache`` and ``spec.model.SpecCache`` (rules
``sglang``) with the same calls, from empty caches of block size 2.  After every call it prints both
answers and both caches' ``take_events()`` cut into one fact per block (``prefixspec.vocabulary.per_block``,
the checker's normal form); at the end it folds each stream into a router's mirror
(``prefixspec.compare.mirror.Mirror``) and compares it with the cache's contents.  A line starts with
``ok`` when SGLang and the spec agree, ``DIFF`` when they do not.  Exit 0 always: the probe records what
SGLang does, it asserts nothing.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from examples.sglang.adapter import NamespaceField, SglangCache
from prefixspec.compare.mirror import Mirror, MirrorError, Place
from prefixspec.vocabulary import BlockFact, per_block
from spec.api import RULE_PRESETS, BlockId, KVEvent, Namespace, PrefixCacheError, Snapshot
from spec.model import SpecCache

B = 2


@dataclass(frozen=True)
class Insert:
    tokens: tuple[int, ...]
    blocks: tuple[int, ...]
    namespace: Namespace = None

    def __str__(self) -> str:
        return f"insert {list(self.tokens)} {list(self.blocks)}" + _ns(self.namespace)


@dataclass(frozen=True)
class Match:
    tokens: tuple[int, ...]
    namespace: Namespace = None

    def __str__(self) -> str:
        return f"match {list(self.tokens)}" + _ns(self.namespace)


@dataclass(frozen=True)
class Evict:
    n_blocks: int

    def __str__(self) -> str:
        return f"evict {self.n_blocks}"


Step = Insert | Match | Evict


@dataclass
class Scenario:
    name: str
    steps: list[Step]
    namespace_field: NamespaceField = "extra_key"
    dynamo_format: bool = False
    diffs: list[str] = field(default_factory=list)


def _ns(namespace: Namespace) -> str:
    return "" if namespace is None else f" ns={namespace!r}"


def answer(cache: SglangCache | SpecCache, step: Step) -> str:
    """The call's answer as text (an error by its type), without node handles (they differ by construction)."""
    try:
        if isinstance(step, Insert):
            inserted = cache.insert(list(step.tokens), list(step.blocks), step.namespace)
            return f"duplicates {inserted.duplicates}"
        if isinstance(step, Match):
            found = cache.match_prefix(list(step.tokens), step.namespace)
            return f"{found.matched_tokens} tokens {found.blocks}"
        return f"freed {cache.evict(step.n_blocks)}"
    except PrefixCacheError as error:
        return f"{type(error).__name__}"


def facts_text(facts: list[BlockFact] | None) -> str:
    if facts is None:
        return "(not one block's worth per block)"
    if not facts:
        return "none"
    parts = []
    for kind, namespace, parent, tokens, block in facts:
        if kind == "stored":
            parts.append(f"stored {'-' if parent is None else parent}>{block} {list(tokens)}{_ns(namespace)}")
        else:
            parts.append(f"removed {block}")
    return "; ".join(parts)


def contents_of(snapshot: Snapshot) -> dict[Place, BlockId]:
    """A cache's contents {(namespace, token prefix): last block id} from its snapshot (R2, R13)."""
    contents: dict[Place, BlockId] = {}
    for view in snapshot.nodes:
        start = len(view.prefix) - len(view.blocks) * snapshot.block_size
        for index, block in enumerate(view.blocks):
            contents[(view.namespace, view.prefix[: start + (index + 1) * snapshot.block_size])] = block
    return contents


def fold(events: list[KVEvent]) -> tuple[Mirror, str | None]:
    mirror = Mirror()
    try:
        mirror.fold(events)
    except MirrorError as error:
        return mirror, str(error)
    return mirror, None


def contents_text(contents: Mapping[Place, BlockId]) -> str:
    entries = sorted(contents.items(), key=lambda item: (repr(item[0][0]), item[0][1]))
    return "{" + ", ".join(f"{list(tokens)}{_ns(namespace)}: {block}" for (namespace, tokens), block in entries) + "}"


def run(scenario: Scenario, out: Callable[[str], None]) -> None:
    sglang = SglangCache(B, "lru", namespace_field=scenario.namespace_field, dynamo_format=scenario.dynamo_format)
    spec = SpecCache(B, RULE_PRESETS["sglang"])
    options = f"namespace -> {scenario.namespace_field}" + (", dynamo format" if scenario.dynamo_format else "")
    out(f"== {scenario.name}  ({options})")
    all_sglang: list[KVEvent] = []
    all_spec: list[KVEvent] = []

    def compare(what: str, got: str, wanted: str, note: str = "") -> None:
        same = got == wanted
        if not same:
            scenario.diffs.append(what)
        out(f"  {'ok  ' if same else 'DIFF'} {what}: sglang {got}{note}" + ("" if same else f"\n       {' ' * len(what)}  spec   {wanted}"))

    def events(after: str) -> None:
        got, wanted = sglang.take_events(), spec.take_events()
        all_sglang.extend(got)
        all_spec.extend(wanted)
        if got or wanted:
            raw = ", ".join(type(event).__name__ for event in got) or "none"
            compare(f"events after {after}", facts_text(per_block(got)), facts_text(per_block(wanted)), f"  (SGLang's events: {raw})")

    events("construction")
    for step in scenario.steps:
        compare(str(step), answer(sglang, step), answer(spec, step))
        events(str(step).split(" ")[0])
    mirror, problem = fold(all_sglang)
    spec_mirror, spec_problem = fold(all_spec)
    assert spec_problem is None and spec_mirror.contents() == spec.cached_contents(), "the spec's own events must fold to it"
    sglang_contents = contents_of(sglang.snapshot())
    compare("contents", contents_text(sglang_contents), contents_text(spec.cached_contents()))
    folded = f"mirror {contents_text(mirror.contents())}" + ("" if problem is None else f" (fold stopped: {problem})")
    compare("mirror of its events = its contents", folded if problem or mirror.contents() != sglang_contents else "yes",
            "yes")


SCENARIOS = [
    Scenario("insert", [Insert((1, 2, 3, 4), (10, 11))]),
    Scenario("insert sharing a prefix", [Insert((1, 2, 3, 4), (10, 11)), Insert((1, 2, 5, 6), (20, 21))]),
    Scenario("duplicate insert", [Insert((1, 2, 3, 4), (10, 11)), Insert((1, 2, 3, 4, 5, 6), (30, 11, 32))]),
    Scenario("match that splits", [Insert((1, 2, 3, 4, 5, 6), (10, 11, 12)), Match((1, 2, 3, 9, 9)), Insert((1, 2, 7, 8), (10, 21))]),
    Scenario("evict of a multi-block leaf", [Insert((1, 2, 3, 4, 5, 6), (10, 11, 12)), Insert((1, 2, 7, 8), (10, 21)), Evict(1), Evict(1)]),
    Scenario("refused inserts", [Insert((1, 2), (10,)), Insert((3, 4), (10,)), Insert((5, 6, 7, 8), (40, 40)), Insert((1, 2, 3), (5, 6)),
                                 Insert((1, 2), (10,), (1.5,))]),  # type: ignore[arg-type]  # a float part: refused
    Scenario("two namespaces, the same tokens", [Insert((1, 2, 3, 4), (10, 11), "a"), Insert((1, 2, 3, 4), (20, 21), "b"),
                                                 Match((1, 2, 3, 4, 9), "a"), Match((1, 2, 3, 4, 9), "b"), Match((1, 2, 3, 4, 9)),
                                                 Evict(2), Evict(2)]),
    Scenario('("a", "bc") vs ("ab", "c")', [Insert((1, 2), (10,), ("a", "bc")), Insert((1, 2), (20,), ("ab", "c")),
                                            Match((1, 2, 9), ("a", "bc")), Match((1, 2, 9), ("ab", "c")), Evict(1)]),
    Scenario('None vs ""', [Insert((1, 2), (10,)), Insert((1, 2), (20,), ""), Match((1, 2, 9)), Match((1, 2, 9), ""), Evict(1)]),
    Scenario('0 vs "0"', [Insert((1, 2), (10,), 0), Insert((1, 2), (20,), "0"), Match((1, 2, 9), 0), Match((1, 2, 9), "0"), Evict(1)]),
    Scenario("a namespace under a shared parent", [Insert((1, 2), (10,), "a"), Insert((1, 2), (20,), "b"), Evict(1),
                                                   Insert((1, 2, 3, 4), (21, 22), "b")]),
    Scenario("two namespaces, the same tokens", [Insert((1, 2, 3, 4), (10, 11), "a"), Insert((1, 2, 3, 4), (20, 21), "b"),
                                                 Evict(2), Evict(2)], dynamo_format=True),
    Scenario("two namespaces, the same tokens", [Insert((1, 2, 3, 4), (10, 11), "a"), Insert((1, 2, 3, 4), (20, 21), "b"),
                                                 Match((1, 2, 3, 4, 9), "a"), Evict(2), Evict(2)], namespace_field="cache_salt"),
    Scenario('("a", "bc") vs ("ab", "c"), None vs "", 0 vs "0"',
             [Insert((1, 2), (10,), ("a", "bc")), Insert((1, 2), (20,), ("ab", "c")), Insert((1, 2), (30,)),
              Insert((1, 2), (40,), ""), Insert((1, 2), (50,), 0), Insert((1, 2), (60,), "0"), Evict(6)],
             namespace_field="cache_salt"),
]


def main() -> int:
    for scenario in SCENARIOS:
        run(scenario, print)
        print()
    print("summary:")
    for scenario in SCENARIOS:
        options = scenario.namespace_field + (", dynamo" if scenario.dynamo_format else "")
        verdict = "agree" if not scenario.diffs else f"DIFFER in {len(scenario.diffs)}: " + " | ".join(scenario.diffs)
        print(f"  {scenario.name} ({options}): {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

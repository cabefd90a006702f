"""The rule sets of the interface (``spec.api``): the variants of R4, R5, R7 and R8 a cache may follow, their presets and their text.

``Rules`` is a value: which variant of each varying rule a cache follows.  The variants' meaning is the spec's
(``spec/README.md``, ``spec/model/``); this module only names them, checks that a combination is one, and
reads and writes them as text (``use=release,evict=lru``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

UseRule = Literal["path", "path+split-tail", "release"]
"""R7: what a match or insert uses (see ``Rules``)."""

EvictRule = Literal["lru", "lfu", "fifo", "mru", "filo", "slru"]
"""R8: which unpinned leaf goes first (see ``Rules``)."""

UnitRule = Literal["leaf", "block"]
"""R8: what one step of an eviction frees (see ``Rules``)."""

DupRule = Literal["refuse", "keep"]
"""R5: what becomes of a block offered at a position already cached (see ``Rules``)."""

SplitRule = Literal["fresh", "inherit"]
"""R4: the creation stamp of a split's upper node (see ``Rules``)."""

SLRU_DEFAULT_THRESHOLD = 2
"""R8 ``slru``: the hits at which a node becomes protected, SGLang 0.5.23's default (``SLRUStrategy(protected_threshold=2)``)."""


@dataclass(frozen=True)
class RuleField:
    """One field of ``Rules``: its key in rule texts (``use=release``), the rule it varies, and its variants.

    The first variant is ``strict``'s.  Every place that reads, writes, explains or searches rule sets
    (``parse_rules``, ``Rules.name``, reports, ``identify``) walks ``RULE_FIELDS``, so a new field is one
    row here and one field of ``Rules``.
    """

    key: str
    rule: str
    variants: tuple[str, ...]
    meaning: str

    @property
    def default(self) -> str:
        return self.variants[0]

    def accepts(self, value: str) -> bool:
        return value in self.variants


RULE_FIELDS: tuple[RuleField, ...] = (
    RuleField("use", "R7", ("path", "path+split-tail", "release"), "what a call uses, and when a block was last used"),
    RuleField("evict", "R8", ("lru", "lfu", "fifo", "mru", "filo", "slru"), "which unpinned leaf goes first (slru:N, protected from N hits)"),
    RuleField("unit", "R8", ("leaf", "block"), "whole leaves, or exactly n blocks cut from a leaf's tail"),
    RuleField("dup", "R5", ("refuse", "keep"), "a block offered at a cached position: handed back, or cached too"),
    RuleField("split", "R4", ("fresh", "inherit"), "a split's upper node: stamped at its creation, or with the creation of the node it splits"),
)
"""The fields of a rule set, in the order texts write them; ``spec/README.md`` states each variant under its rule.
``slru``'s threshold is a parameter of its variant (``evict=slru:3``), not a field of its own."""

USE_RULES: tuple[UseRule, ...] = ("path", "path+split-tail", "release")
EVICT_RULES: tuple[EvictRule, ...] = ("lru", "lfu", "fifo", "mru", "filo", "slru")
SPLIT_RULES: tuple[SplitRule, ...] = ("fresh", "inherit")

RULE_REQUIREMENTS: tuple[tuple[str, str, str, str, str], ...] = (
    ("use", "release", "unit", "block", "a block's recency is its own (when it was last released), so blocks go one at a time"),
    ("use", "release", "evict", "lru", "released blocks wait in one queue, oldest release first"),
    ("dup", "keep", "use", "release", "a copy is used apart from the other copies of its position: its recency is its own"),
)
"""(key, variant, needed key, needed variant, why): a variant that only has a meaning beside another."""


@dataclass(frozen=True)
class Rules:
    """A rule set: the named variant of each rule that real engines implement differently.

    - ``use`` (R7): ``path``, a call uses every node from the root to the node
      it returns; ``path+split-tail``, the lower part of a node the call split
      counts as used by it too, just before the call's own nodes (SGLang);
      ``release``, a match uses nothing, and a block's recency is when it was
      last released: at the end of the insert that passed it, or by the unlock
      that left it unpinned, a call's blocks tail first (vLLM).
    - ``evict`` (R8): ``lru`` (oldest last use first), ``lfu`` (fewest hits,
      then oldest last use), ``fifo`` (oldest creation, then oldest last use),
      ``mru`` (newest last use), ``filo`` (newest creation, then oldest last use),
      ``slru`` (unprotected before protected, a node being protected from
      ``slru_threshold`` hits on; then oldest last use).
    - ``unit`` (R8): ``leaf``, whole leaves until at least n blocks are freed;
      ``block``, exactly n blocks (or all the unpinned ones), a leaf cut from
      its tail one block at a time (vLLM).
    - ``dup`` (R5): ``refuse``, a different id offered at a cached position is
      handed back as a duplicate; ``keep``, it is cached too, another copy of
      that position's block (vLLM).
    - ``split`` (R4): ``fresh``, a split's upper node is stamped with its
      creation; ``inherit``, it takes the creation stamp of the node it splits
      (SGLang's UnifiedRadixCache).
    - ``slru_threshold`` (R8 ``slru`` only): the hits that protect a node.

    ``RULE_FIELDS`` lists the fields and ``RULE_REQUIREMENTS`` the variants that
    need another; ``spec/README.md`` states each under its rule; the default is
    ``strict``, R1-R13 as first written.
    """

    use: UseRule = "path"
    evict: EvictRule = "lru"
    unit: UnitRule = "leaf"
    dup: DupRule = "refuse"
    split: SplitRule = "fresh"
    slru_threshold: int = SLRU_DEFAULT_THRESHOLD

    def __post_init__(self) -> None:
        problem = rules_problem({field.key: getattr(self, field.key) for field in RULE_FIELDS})
        if problem:
            raise ValueError(problem)
        if self.slru_threshold < 1:
            raise ValueError(f"slru_threshold must be at least 1, got {self.slru_threshold}")

    @property
    def evict_text(self) -> str:
        """``evict`` as rules text writes it: ``slru:N`` for a threshold other than the default."""
        if self.evict == "slru" and self.slru_threshold != SLRU_DEFAULT_THRESHOLD:
            return f"slru:{self.slru_threshold}"
        return self.evict

    def variant(self, key: str) -> str:
        """The variant this rule set picks for the field ``key`` of ``RULE_FIELDS``."""
        value: str = getattr(self, key)
        return value

    def with_variant(self, key: str, value: str) -> Rules:
        """This rule set with field ``key`` set to ``value`` (ValueError when the combination has no meaning)."""
        chosen = {field.key: (value if field.key == key else self.variant(field.key)) for field in RULE_FIELDS}
        return Rules(**chosen, slru_threshold=self.slru_threshold)  # type: ignore[arg-type]  # values are checked by __post_init__

    @property
    def text(self) -> str:
        """``use=U,evict=E`` and every other field that is not strict's, as ``parse_rules`` reads it."""
        words = [
            f"{field.key}={self.evict_text if field.key == 'evict' else self.variant(field.key)}"
            for field in RULE_FIELDS
            if field.key in ("use", "evict") or self.variant(field.key) != field.default
        ]
        return ",".join(words)

    @property
    def name(self) -> str:
        """The preset's name when the rule set is a preset, else its ``text``."""
        for name, preset in RULE_PRESETS.items():
            if preset == self:
                return name
        return self.text

    def differences(self, other: Rules) -> list[RuleField]:
        """The fields on which ``other`` picks another variant, in ``RULE_FIELDS`` order."""
        return [field for field in RULE_FIELDS if self.variant(field.key) != other.variant(field.key)]


def rules_problem(chosen: Mapping[str, object]) -> str:
    """Why a combination of variants, one per key of ``RULE_FIELDS``, has no meaning ('' when it has one)."""
    for field in RULE_FIELDS:
        value = chosen.get(field.key, field.default)
        if not isinstance(value, str) or not field.accepts(value):
            return f"{field.key} must be one of {', '.join(field.variants)}, got {value!r}"
    for key, value, needed_key, needed, why in RULE_REQUIREMENTS:
        if chosen.get(key) == value and chosen.get(needed_key) != needed:
            return f"{key}={value} needs {needed_key}={needed}: {why}"
    return ""


RULE_PRESETS: dict[str, Rules] = {
    "strict": Rules(),
    "sglang": Rules("path+split-tail", "lru"),
    "sglang-lfu": Rules("path+split-tail", "lfu"),
    "sglang-fifo": Rules("path+split-tail", "fifo"),
    "sglang-mru": Rules("path+split-tail", "mru"),
    "sglang-filo": Rules("path+split-tail", "filo"),
    "sglang-slru": Rules("path+split-tail", "slru"),
    "sglang-unified-fifo": Rules("path+split-tail", "fifo", split="inherit"),
    "sglang-unified-filo": Rules("path+split-tail", "filo", split="inherit"),
    "vllm": Rules("release", "lru", "block", "keep"),
}
"""The named rule sets: ``strict`` (the default); SGLang 0.5.23's RadixCache (``sglang``...) under each
eviction strategy that needs no new call argument, and its UnifiedRadixCache where it differs: only
``fifo`` and ``filo`` key by creation, so only they see R4's ``split=inherit`` (under lru, lfu, mru and
slru the unified cache follows the RadixCache presets).  ``slru`` is at SGLang's default threshold (2);
another is ``evict=slru:N``.  The server accepts lru, lfu, slru, priority and tlru; ``fifo``, ``mru``
and ``filo`` exist only inside the library.  ``priority`` needs a priority argument of insert (with
every priority 0 its key is lru's), and ``tlru`` takes configuration: neither has a preset
(spec/README.md, Rule sets).  ``vllm`` is vLLM 0.32.0's automatic prefix caching (``BlockPool`` and
its free queue, ``vllm/v1/core/block_pool.py``)."""


def parse_rules(text: str) -> Rules:
    """A preset's name, or ``key=value`` pairs joined by commas (``use=release,evict=lru,unit=block,dup=keep``;
    a field left out is strict's; ``evict=slru:N`` gives slru's threshold); ValueError naming what is wrong."""
    if text in RULE_PRESETS:
        return RULE_PRESETS[text]
    keys = {field.key: field for field in RULE_FIELDS}
    shape = ",".join(f"{field.key}={field.key[0].upper()}" for field in RULE_FIELDS)
    chosen: dict[str, str] = {}
    threshold = SLRU_DEFAULT_THRESHOLD
    for part in text.split(","):
        key, equals, value = part.strip().partition("=")
        if not equals or key not in keys or key in chosen:
            raise ValueError(f"rules {text!r}: give a preset ({', '.join(RULE_PRESETS)}) or {shape} (any may be left out)")
        if key == "evict" and value.startswith("slru:"):
            count = value.removeprefix("slru:")
            if not (count.isascii() and count.isdigit()) or int(count) < 1:
                raise ValueError(f"rules {text!r}: slru takes a threshold of hits, slru:N with N >= 1, got {value!r}")
            value, threshold = "slru", int(count)
        if not keys[key].accepts(value):
            raise ValueError(f"rules {text!r}: {key} must be one of {', '.join(keys[key].variants)}, got {value!r}")
        chosen[key] = value
    try:
        return Rules(**chosen, slru_threshold=threshold)  # type: ignore[arg-type]  # each value is one of its field's variants, checked above
    except ValueError as problem:
        raise ValueError(f"rules {text!r}: {problem}") from None

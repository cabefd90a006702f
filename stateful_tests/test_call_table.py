"""The call table is the one place a call's rules are written: no other module of the checker ties a rule to a call.

``prefixspec/vocabulary/table.py`` gives each call its rule and its refusals'
(``CallKind.rule``, ``CallKind.refusal_rule``); the lockstep, the long-node
check and the rest read them there.  A module that names a call (``"evict"``,
``"match_prefix"``) and a rule (``"R8, eviction"``) in one statement, or in a
statement under a test or a loop that names the call, keeps a table of its
own: the scan below finds it.  Prose (docstrings, comments) may speak of both.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from spec.api import PrefixCache
from prefixspec.vocabulary import BY_METHOD, CALLS, COUNTERS_RULE, Call, CallThrough

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "prefixspec" / "vocabulary" / "table.py"
SCANNED = ("prefixspec", "bench")
CALL_NAMES = frozenset(name for kind in CALLS for name in (kind.op, kind.method))
RULE = re.compile(r"\bR(?:1[0-3]|[1-9])\b")

Tie = tuple[int, str, tuple[str, ...]]
"""(line, the call named, the texts naming rules in the same statement)."""


def strings(node: ast.AST) -> set[str]:
    """Every string constant in ``node``, the literal parts of f-strings too."""
    return {found.value for found in ast.walk(node) if isinstance(found, ast.Constant) and isinstance(found.value, str)}


def is_docstring(statement: ast.stmt) -> bool:
    return isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant) and isinstance(statement.value.value, str)


def simple_statements(body: Iterable[ast.stmt], context: frozenset[str] = frozenset()) -> Iterator[tuple[ast.AST, frozenset[str]]]:
    """Each statement that holds no others (and each compound one's header), with the strings of the tests and loops
    around it: ``if call.op == "evict": rule = "R8"`` ties the two as ``{"evict": "R8"}`` does."""
    for statement in body:
        if is_docstring(statement):
            continue
        inner = context
        if isinstance(statement, ast.If | ast.While):
            inner = context | strings(statement.test)
        elif isinstance(statement, ast.For | ast.AsyncFor):
            inner = context | strings(statement.iter)
        elif isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            inner = frozenset()  # a function's rules are its own; its header (decorators, defaults) is a statement alone
            yield ast.Module(body=[], type_ignores=[]), frozenset()
            for header in (*statement.decorator_list, *getattr(statement, "bases", ()), getattr(statement, "args", None)):
                if header is not None:
                    yield header, frozenset()
        nested = [getattr(statement, name, []) for name in ("body", "orelse", "finalbody")]
        nested += [handler.body for handler in getattr(statement, "handlers", [])]
        nested += [case.body for case in getattr(statement, "cases", [])]
        if any(nested):
            for block in nested:
                yield from simple_statements(block, inner)
        else:
            yield statement, context


def rule_ties(source: str) -> list[Tie]:
    """Each call a statement of ``source`` names exactly (a string that is its op or method) beside a rule."""
    ties: list[Tie] = []
    for statement, context in simple_statements(ast.parse(source).body):
        own = strings(statement)
        named = sorted((own | context) & CALL_NAMES)
        rules = tuple(sorted(text for text in own if RULE.search(text)))
        if rules:
            ties.extend((getattr(statement, "lineno", 0), call, rules) for call in named)
    return ties


def ties_outside_the_table(root: Path) -> list[str]:
    found: list[str] = []
    for folder in SCANNED:
        for path in sorted((root / folder).rglob("*.py")):
            if path.resolve() == TABLE:
                continue
            for line, call, rules in rule_ties(path.read_text(encoding="utf-8")):
                found.append(f"{path.relative_to(root)}:{line} names the call {call!r} beside the rules {', '.join(map(repr, rules))}")
    return found


def test_no_module_outside_the_table_ties_a_rule_to_a_call() -> None:
    assert ties_outside_the_table(ROOT) == []


def test_the_table_itself_is_what_the_scan_would_find() -> None:
    """The scan finds the table's own ties: it looks where they are written."""
    ties = rule_ties(TABLE.read_text(encoding="utf-8"))
    assert {call for _, call, _ in ties} >= {"match", "insert", "lock", "unlock", "evict", "take_events"}


PLANTED = {
    "a table": 'RULES = {"evict": "R8, eviction", "lock": "R6, locks"}\n',
    "a test": 'def rule(op):\n    if op == "unlock":\n        return "R6, NotLocked"\n    return ""\n',
    "a conditional": 'def rule(call):\n    return "R3/R5, the match" if "match" in call else "R8"\n',
    "a loop": 'for op in ("insert", "evict"):\n    print(f"{op} breaks R13")\n',
    "a method": 'def rule(kind):\n    return {"match_prefix": "R3"}[kind]\n',
}


def test_the_scan_finds_a_planted_tie(tmp_path: Path) -> None:
    """Negative control: each way of tying a rule to a call, planted in a module of the checker, is reported."""
    for shape, source in PLANTED.items():
        (tmp_path / "prefixspec").mkdir(exist_ok=True)
        (tmp_path / "prefixspec" / "planted.py").write_text(source)
        found = ties_outside_the_table(tmp_path)
        assert found and all(line.startswith("prefixspec/planted.py:") for line in found), (shape, found)


def test_prose_and_unrelated_strings_are_no_tie() -> None:
    source = (
        'def lock_foreign(op):\n    """R6: a node of another cache is unknown here."""\n    note(f"refused {op}")\n'
        'EVENT = "split by match"\nRULE = "R4, where nodes end"\n'
    )
    assert rule_ties(source) == []


def test_every_call_has_its_rules_and_counters_share_one() -> None:
    for kind in CALLS:
        assert RULE.search(kind.rule) and RULE.search(kind.refusal_rule), kind.op
        assert (kind.rule == COUNTERS_RULE) == (not kind.params and not kind.optional), kind.op
    assert {kind.op for kind in CALLS if kind.publishes} == {"insert", "evict"}
    assert {kind.op for kind in CALLS if kind.uses} == {"match", "insert"}


def test_call_through_has_one_method_per_call_of_the_table() -> None:
    """``CallThrough``'s methods are made from the table (``passed_through``): one for each call, named by it."""
    faces = {name for name in vars(CallThrough) if name in BY_METHOD}
    assert faces == set(BY_METHOD)
    interface = {name for name in vars(PrefixCache) if not name.startswith("_")} - {"root", "block_size", "snapshot"}
    assert interface <= faces


class Recorder(CallThrough):
    """A wrapper that answers nothing and keeps the calls it was handed."""

    def __init__(self) -> None:
        self.calls: list[Call] = []

    def perform(self, call: Call) -> object:
        self.calls.append(call)
        return None

    def handle_of(self, node: object) -> str:
        return str(node)

    def next_name(self) -> str:
        return f"n{len(self.calls) + 1}"


def test_call_through_takes_arguments_by_position_or_by_name() -> None:
    recorder = Recorder()
    recorder.insert([1, 2], [3])
    recorder.insert(tokens=[1, 2], blocks=[3], namespace="a")
    recorder.insert([1, 2], blocks=[3])
    recorder.lock(node="root")
    recorder.evict(n_blocks=2)
    assert [call.text() for call in recorder.calls] == [
        "n1 = insert [1 2] [3]",
        'n2 = insert [1 2] [3] ns="a"',
        "n3 = insert [1 2] [3]",
        "lock root",
        "evict 2",
    ]
    with pytest.raises(TypeError, match="unexpected keyword argument 'count'"):
        getattr(recorder, "evict")(count=2)

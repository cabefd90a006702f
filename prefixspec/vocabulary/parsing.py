"""Reading a call from its text: ``n1 = insert [1 2 3 4] [10 11] ns="a"`` back into a ``Call``."""

from __future__ import annotations

import re

from spec.api import Namespace
from prefixspec.vocabulary.table import BY_OP, OPS, Arg, Call, CallKind, ParamKind
from prefixspec.vocabulary.words import HANDLE, TraceFormatError, read_int, read_ints, read_namespace

_WORD = re.compile(r"\[[^\]]*\]|[^\s\[\]]+|\[")


def _usage(kind: CallKind) -> str:
    shown = {"tokens": "[t ...]", "blocks": "[b ...]", "node": "nK", "count": "N"}
    words = " ".join(shown[param.kind] for param in kind.params)
    call = f"{kind.op} {words}".strip()
    return f"nK = {call}" if kind.names_node else call


def parse_call(text: str, line: int) -> Call:
    """One call, without its result; raises TraceFormatError naming ``line``."""
    name = ""
    if "=" in text:
        name, _, text = text.partition("=")
        name = name.strip()
        if not HANDLE.match(name) or name in ("root", "foreign"):
            raise TraceFormatError(line, f"bad handle name {name!r}")
    namespace: Namespace = None
    before, space, last = text.strip().rpartition(" ")
    if space and last.startswith("ns="):
        text = before
        try:
            namespace = read_namespace(last[3:])
        except ValueError as problem:
            raise TraceFormatError(line, f"bad namespace {last[3:63]!r}: {problem}") from None
    words = _WORD.findall(text)
    if not words:
        raise TraceFormatError(line, "missing call")
    op, rest = words[0], words[1:]
    kind = BY_OP.get(op)
    if kind is None:
        raise TraceFormatError(line, f"unknown call {op!r} (known: {', '.join(OPS)})")
    if space and last.startswith("ns=") and not kind.namespaced:
        raise TraceFormatError(line, f"{op} takes no namespace")
    if kind.names_node != bool(name):
        raise TraceFormatError(line, f"{op} {'needs' if kind.names_node else 'takes no'} a handle name ('nK = {op} ...')")
    if len(rest) != len(kind.params):
        raise TraceFormatError(line, f"{op} takes {len(kind.params) or 'no'} argument{'' if len(kind.params) == 1 else 's'}: {_usage(kind)}")
    args: list[Arg] = []
    for param, word in zip(kind.params, rest):
        value: Arg | None
        if param.kind in ("tokens", "blocks"):
            value = read_ints(word)
        elif param.kind == "count":
            value = read_int(word, signed=True)
        else:
            value = word if HANDLE.match(word) else None
        if value is None:
            raise TraceFormatError(line, f"{op}'s {param.name} must be {_PARAM_SHAPES[param.kind]}, got {word[:60]!r}: {_usage(kind)}")
        args.append(value)
    return Call(op, tuple(args), name, namespace)


_PARAM_SHAPES: dict[ParamKind, str] = {
    "tokens": "a list of whole numbers [t1 t2 ...]",
    "blocks": "a list of whole numbers [b1 b2 ...]",
    "node": "a handle (nK or root)",
    "count": "a whole number",
}


"""The vocabulary of calls: every call of ``spec.api.PrefixCache``, its arguments, its result, said once.

``CALLS`` is the table.  Everything that speaks calls is derived from it: the
trace's text (``Call.text`` and ``parse_call``), the results as text
(``render_result``) and back (``parse_result``), the line protocol (which
writes the same lines), making a call on a cache (``invoke``), the wrappers
that stand between a caller and a cache (``CallThrough``: the lockstep, the
recording cache, the pipe cache), which override one method that takes a
``Call``, and the rule a disagreement on a call breaks.  Adding an argument
to a call is a change to this table and to the caches.

A call as text::

    n1 = insert [1 2 3 4 5] [10 11]      # a call that returns a node names it (n1)
    lock n1                              # a node argument is a handle named earlier, or root
    evict 2
    stats
    n2 = match [1 2 3] ns="tenant-a"     # R12: a namespace other than the default, last, as ns=JSON
    take_events                          # R13: optional; a cache that publishes events answers it

A namespace is written ``ns=`` and one word of JSON: an integer, a string, or an
array of null, integers and strings (``ns=0``, ``ns="0"``, ``ns=["a","bc"]``);
the default namespace (None) is written by leaving ``ns=`` out.  The word holds
no space, ``#``, ``;``, ``>`` or ``|``: inside strings they are ``\\u`` escapes.
A call's result follows it after `` -> ``, written by the call's result kind
(``vocabulary.results``), or an error by name.

The package's modules, each with one job, and this face, which names them all:

- ``table``: ``CALLS`` and every fact about a call (its rules, whether it
  publishes events), and ``Call``;
- ``words``: values as text (lists of ints, numbers, handles, namespaces);
- ``parsing``: a call read from its text;
- ``checks``: whether a value a cache returned is of the interface's type;
- ``results`` and ``events``: results as text, written and read back;
- ``invocation``: calls made on a cache from Python, and ``CallThrough``.
"""

from prefixspec.vocabulary.checks import ResultFormatError, WrongResult
from prefixspec.vocabulary.events import (
    EVENT_TYPES,
    EVENTS_SHAPE,
    BlockFact,
    parse_events,
    per_block,
    render_event,
    render_events,
    same_events,
)
from prefixspec.vocabulary.invocation import FEATURES, CallThrough, call_of, features_of, invoke
from prefixspec.vocabulary.parsing import parse_call
from prefixspec.vocabulary.results import (
    ERROR_NAMES,
    RESULT_GRAMMAR,
    error_name,
    parse_result,
    render_result,
    render_stats,
    result_error,
    result_node,
)
from prefixspec.vocabulary.table import (
    BY_METHOD,
    BY_OP,
    CALLS,
    COMMANDS,
    COUNTERS_RULE,
    INTERFACE,
    OPS,
    PUBLISHERS,
    QUERIES,
    STATS_FIELDS,
    TAKE_EVENTS,
    Arg,
    Call,
    CallKind,
    Param,
    ParamKind,
    ResultKind,
    make_call,
    locks_and_unlocks,
    render_arg,
)
from prefixspec.vocabulary.words import (
    HANDLE,
    LONGEST_NAMESPACE,
    LONGEST_NUMBER,
    TraceFormatError,
    Unwritable,
    counted,
    ints_pattern,
    namespace_of,
    read_int,
    read_ints,
    read_namespace,
    render_ints,
    render_namespace,
)

__all__ = [
    "ResultFormatError",
    "WrongResult",
    "EVENT_TYPES",
    "EVENTS_SHAPE",
    "BlockFact",
    "parse_events",
    "per_block",
    "render_event",
    "render_events",
    "same_events",
    "FEATURES",
    "CallThrough",
    "call_of",
    "features_of",
    "invoke",
    "parse_call",
    "ERROR_NAMES",
    "RESULT_GRAMMAR",
    "error_name",
    "parse_result",
    "render_result",
    "render_stats",
    "result_error",
    "result_node",
    "BY_METHOD",
    "BY_OP",
    "CALLS",
    "COMMANDS",
    "COUNTERS_RULE",
    "INTERFACE",
    "OPS",
    "PUBLISHERS",
    "QUERIES",
    "STATS_FIELDS",
    "TAKE_EVENTS",
    "Arg",
    "Call",
    "CallKind",
    "Param",
    "ParamKind",
    "ResultKind",
    "make_call",
    "locks_and_unlocks",
    "render_arg",
    "HANDLE",
    "LONGEST_NAMESPACE",
    "LONGEST_NUMBER",
    "TraceFormatError",
    "Unwritable",
    "counted",
    "ints_pattern",
    "namespace_of",
    "read_int",
    "read_ints",
    "read_namespace",
    "render_ints",
    "render_namespace",
]

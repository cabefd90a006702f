"""prefixspec: the checker of prefix caches against their executable specification (``spec``).

For an engine's own test suite::

    from prefixspec import conformance_suite
    TestPrefixCacheConformance = conformance_suite(make_cache)   # make_cache(block_size) -> a cache

From the command line: ``prefixspec check``, ``replay``, ``verify``, ``hunt``
(``python -m prefixspec`` is the same).  The layers, each importing only
those before it:

- ``vocabulary``: the calls of the interface, their text and results, said once;
- ``formats``: traces and the line protocol;
- ``targets``: loading a cache, an engine over a pipe, planted bugs, recording;
- ``running``: the lockstep, the engine workload, the machines, the stages of a check;
- ``commands``: the command line.

Installed from the wheel, the definition and the fast cache live under this
package too: ``prefixspec.spec`` and ``prefixspec.impl`` (``spec`` and ``impl``
in a checkout of the repository; README, "Installed names").

The package face is lazy (PEP 562): ``import prefixspec`` loads nothing else,
and ``prefixspec.conformance_suite`` loads the checker (and Hypothesis) when it
is first read, so ``import prefixspec.vocabulary`` costs the vocabulary alone.
"""

from __future__ import annotations

import importlib
import os as _os
import sys as _sys
from typing import TYPE_CHECKING

try:  # Hypothesis reads the working directory as it is imported: a deleted one would be a traceback
    _os.getcwd()
except FileNotFoundError:
    if _sys.argv[:1] == ["-m"] or _os.path.basename(_sys.argv[0]) == "prefixspec":  # the command line: one line, usage
        print("prefixspec: the working directory no longer exists (it was deleted): cd to a folder that does", file=_sys.stderr)
        raise SystemExit(2) from None
    raise

if TYPE_CHECKING:
    from prefixspec.running.pytest_suite import conformance_suite
    from prefixspec.running.stages import RunPlan, run_check

__all__ = ["RunPlan", "conformance_suite", "run_check"]

_FACE = {
    "conformance_suite": "prefixspec.running.pytest_suite",
    "RunPlan": "prefixspec.running.stages",
    "run_check": "prefixspec.running.stages",
}
"""Each name of ``__all__`` and the module that defines it."""


def __getattr__(name: str) -> object:
    module = _FACE.get(name)
    if module is None:
        raise AttributeError(f"module 'prefixspec' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # read once: later reads are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_FACE])

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
"""

import os as _os
import sys as _sys

try:  # Hypothesis reads the working directory as it is imported: a deleted one would be a traceback
    _os.getcwd()
except FileNotFoundError:
    if _sys.argv[:1] == ["-m"] or _os.path.basename(_sys.argv[0]) == "prefixspec":  # the command line: one line, usage
        print("prefixspec: the working directory no longer exists (it was deleted): cd to a folder that does", file=_sys.stderr)
        raise SystemExit(2) from None
    raise

from prefixspec.running.pytest_suite import conformance_suite
from prefixspec.running.stages import RunPlan, run_check

__all__ = ["RunPlan", "conformance_suite", "run_check"]

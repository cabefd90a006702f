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

from prefixspec.running.pytest_suite import conformance_suite
from prefixspec.running.stages import RunPlan, run_check

__all__ = ["RunPlan", "conformance_suite", "run_check"]

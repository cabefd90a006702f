"""Benchmarks of the prefix caches (issue 7), kept outside the test suite.

``python -m bench`` (or ``prefixspec bench``, or ``make bench``) records the
engine-shaped workloads, replays them on ``impl.RadixCache``, on SGLang's
RadixCache (when it can be imported) and on ``spec.model.SpecCache``, runs the
scaling series and the memory probe, and writes ``docs/perf.md``, its plots and
the raw results under ``bench/results/``.

- ``bench.workload``: the seeded traffic and the engine that records its cache
  calls, each with its expected result, as a trace of the checker's format
  (``prefixspec.formats.trace``);
- the ``sglang`` rule set (``spec.api.RULE_PRESETS``), followed by the spec and
  by ``impl.variants.sglang``, records the sequence SGLang is replayed on;
- ``bench.replay``: the adapters and the timed replay, each result written and
  compared as the trace writes it;
- ``bench.sglang_adapter``: importing SGLang's RadixCache without torchvision;
- ``bench.series``: evict scaling, match against the read floor, memory;
- ``bench.report``: ``docs/perf.md``, from ``bench.figures`` (targets, medians,
  ratios), ``bench.plots`` and ``bench.analysis`` (why a target is missed, the
  method);
- ``bench.run``: the whole run.
"""

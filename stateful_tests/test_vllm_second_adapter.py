"""Two vLLM adapters built on other choices get one verdict from the kit: the verdict is vLLM's, not an adapter's.

``examples/vllm/adapter.py`` drives vLLM's ``KVCacheManager``: locks are requests, the blocks that stand for no
cached id are kept out of vLLM's free queue, events are translated when taken.  ``examples/vllm/pool_adapter.py``
drives the ``BlockPool`` beneath it: locks are ``touch``es, those blocks wait at the head of the free queue, events
are translated at the end of every call.  ``identify`` must find the same thing of both under every preset, down
to each counterexample's calls; an adapter with a planted translation error (a lookup that touches its blocks, as
vLLM's lookup does not) must not pass as ``vllm``, so that the agreement is no accident of a blind check.

Skipped where vLLM does not import (run with ``.venv-vllm/bin/pytest``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from spec.api import RULE_PRESETS, CacheFactory, Namespace, PrefixMatch
from examples.vllm.loading import import_failure, load_vllm
from prefixspec.formats.trace import read_trace
from prefixspec.running.identify import Verdict, identify
from prefixspec.running.stages import RunPlan

if load_vllm() is None:
    pytest.skip(f"vLLM is not importable here ({import_failure()}); make engines-vllm builds .venv-vllm", allow_module_level=True)

from examples.vllm import adapter, pool_adapter  # noqa: E402  (after the skip: they import vLLM)


class TouchingLookup(pool_adapter.PoolCache):
    """The planted error: a lookup that holds and frees what it found, so it refreshes their recency (R7)."""

    def match_prefix(self, tokens: Sequence[int], namespace: Namespace = None) -> PrefixMatch:
        found = super().match_prefix(tokens, namespace)
        blocks = [self.pool.blocks[self.ids.vllm_of[block]] for block in found.blocks]
        self.pool.touch(blocks)
        self.pool.free_blocks(reversed(blocks))
        return found


def verdicts_of(factory: CacheFactory, name: str, folder: Path, presets: Sequence[str] = tuple(RULE_PRESETS)) -> list[Verdict]:
    base = replace(RunPlan.of_profile("ci"), out_dir=folder, replay_target=f"--target {name}")
    return identify(factory, target_name=name, base=base, presets=presets)


def findings(verdicts: list[Verdict]) -> list[tuple[str, bool, list[tuple[str, str, list[str]]]]]:
    """Per preset: whether it conforms, and each failed stage's rule and counterexample calls (the trace's steps)."""
    found = []
    for verdict in verdicts:
        stages = [
            (stage.name, stage.rule, [step.text() for step in read_trace(stage.counterexample).steps] if stage.counterexample else [])
            for stage in verdict.report.stages
            if not stage.passed
        ]
        found.append((verdict.rules.name, verdict.conforms, stages))
    return found


def test_both_adapters_get_one_verdict_under_every_preset(tmp_path: Path) -> None:
    by_manager = findings(verdicts_of(adapter.make_cache, "examples.vllm.adapter:make_cache", tmp_path / "manager"))
    by_pool = findings(verdicts_of(pool_adapter.make_cache, "examples.vllm.pool_adapter:make_cache", tmp_path / "pool"))
    assert [name for name, conforms, _ in by_manager if conforms] == ["vllm"]
    assert by_pool == by_manager


def test_a_lookup_that_touches_is_not_vllm(tmp_path: Path) -> None:
    (verdict,) = verdicts_of(TouchingLookup, "TouchingLookup", tmp_path, presets=("vllm",))
    assert not verdict.conforms
    shortest = verdict.shortest
    assert shortest is not None and shortest.counterexample and "R7" in shortest.rule

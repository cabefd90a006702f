"""docs/adapters.md's worked example (examples/adapter_example.py) passes the conformance check, and the doc quotes it."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from examples.adapter_example import ToyAdapter, ToyRadixCache, TreeNode, make_cache
from spec.model import SpecCache
from prefixspec.compare.lockstep import Disagreement, Lockstep
from prefixspec.running.stages import RunPlan, run_check, run_golden

ROOT = Path(__file__).resolve().parent.parent


def test_the_adapted_toy_cache_passes_the_check(tmp_path: Path) -> None:
    # The core stages: the toy walks its tree on every call, too slow for the scale stage's 80,000 calls.
    plan = replace(RunPlan.of_profile("ci"), min_engine_steps=500, out_dir=tmp_path, reach=False)
    report = run_check(make_cache, target_name="examples.adapter_example:make_cache", plan=plan)
    assert report.passed, report.summary()


class StampsBeforeSplitting(ToyRadixCache):
    """As SGLang's ``_match_prefix_helper`` does: the child is stamped before the split, so the part below counts as used."""

    def match_prefix(self, key: Sequence[int]) -> tuple[list[int], TreeNode]:
        node = self.root_node
        page_key = list(key[: len(key) // self.page_size * self.page_size])
        while page_key and self._child_key(page_key) in node.children:
            child = node.children[self._child_key(page_key)]
            child.last_access_time = self.clock + 1
            common = self._match_len(child.key, page_key)
            if common < len(child.key):
                break
            node, page_key = child, page_key[common:]
        return super().match_prefix(key)


def stamps_before_splitting(block_size: int) -> ToyAdapter:
    adapter = ToyAdapter(block_size)
    adapter.toy = StampsBeforeSplitting(block_size)
    return adapter


def test_stamping_the_split_child_is_caught() -> None:
    """The difference docs/adapters.md points out: an adapter cannot hide it, the lockstep shows it in three calls.

    The split's two parts lie on one root path, an order no call can observe (R11); the lower part counted as
    used shows against a third node off that path, which an eviction would tell apart.
    """
    pair = Lockstep(SpecCache(1), stamps_before_splitting(1))
    pair.insert([1, 2, 3, 4], [10, 11, 12, 13])
    pair.insert([7, 7], [20, 21])
    with pytest.raises(Disagreement) as caught:
        pair.match_prefix([1, 2, 9])  # splits [1 2 3 4]: the toy now ranks [3 4] after [7 7], the spec before
    assert caught.value.rule.startswith("R7/R8"), str(caught.value)
    assert "node [1 2 3 4] moved" in str(caught.value)


def test_the_doc_quotes_the_example_verbatim() -> None:
    """Every Python block of docs/adapters.md is a piece of examples/adapter_example.py, so the doc cannot drift."""
    doc = (ROOT / "docs" / "adapters.md").read_text(encoding="utf-8")
    source = (ROOT / "examples" / "adapter_example.py").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", doc, flags=re.DOTALL)
    assert len(blocks) >= 4
    for block in blocks:
        for piece in block.split("\n    ...\n"):
            assert piece.strip("\n") in source, piece

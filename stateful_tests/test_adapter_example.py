"""docs/adapters.md's worked example (examples/adapter_example.py) passes the conformance check, and the doc quotes it."""

from __future__ import annotations

import re
from dataclasses import replace
from collections.abc import Sequence
from pathlib import Path

from examples.adapter_example import ToyAdapter, ToyRadixCache, TreeNode, make_cache
from prefixspec.running.stages import RunPlan, run_check, run_golden

ROOT = Path(__file__).resolve().parent.parent


def test_the_adapted_toy_cache_passes_the_check(tmp_path: Path) -> None:
    # The core stages: the toy walks its tree on every call, too slow for the scale stage's 95,000 calls.
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


def test_stamping_the_split_child_is_caught(tmp_path: Path) -> None:
    """The difference docs/adapters.md points out: an adapter cannot hide it, the check shows it in a few calls."""
    stage = run_golden(stamps_before_splitting, replace(RunPlan.of_profile("ci"), out_dir=tmp_path))
    assert not stage.passed
    assert stage.counterexample_calls == 2, stage.failure  # an insert, then a match that splits it
    assert "last-use order" in stage.failure


def test_the_doc_quotes_the_example_verbatim() -> None:
    """Every Python block of docs/adapters.md is a piece of examples/adapter_example.py, so the doc cannot drift."""
    doc = (ROOT / "docs" / "adapters.md").read_text(encoding="utf-8")
    source = (ROOT / "examples" / "adapter_example.py").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", doc, flags=re.DOTALL)
    assert len(blocks) >= 4
    for block in blocks:
        for piece in block.split("\n    ...\n"):
            assert piece.strip("\n") in source, piece

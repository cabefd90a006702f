"""The UnifiedRadixCache adapter (examples/sglang/unified.py): its translation checked on a fake SGLang, and,
where SGLang is installed (``.venv-bench``), on the real one, both TreeCores side by side.

The fake (``fake_unified.py``) stands in for the few SGLang names the adapter calls (lock receipts, the TreeCore's read-only
walks, a Rust panic); without SGLang the real tests skip and the rest run.
"""

from __future__ import annotations

from typing import Any

import pytest

from spec.api import NodeView, NotLocked, UnknownNode
from examples.engines import section_from_json, section_to_json
from examples.matrix import EngineSection, MatrixRow
from bench.sglang_loading import load_unified
from examples.sglang.unified import RustPanic, UnifiedCache, UnifiedNode
from stateful_tests.fake_unified import PanicException, UnifiedTreeCore, three_nodes, unified_on


# Locks are receipts: each handed back once, newest first; R6's refusals never reach the core.


def test_each_receipt_goes_back_once_newest_first_then_not_locked() -> None:
    cache, sglang = unified_on(three_nodes())
    cache.lock(cache.handle(2))
    cache.lock(cache.handle(2))
    cache.unlock(cache.handle(2))
    cache.unlock(cache.handle(2))
    assert [receipt.serial for receipt in sglang.released] == [2, 1]
    with pytest.raises(NotLocked):
        cache.unlock(cache.handle(2))
    assert len(sglang.released) == 2  # the refused unlock reached no core


def test_unlock_of_a_node_never_locked_is_not_locked_and_the_root_is_free() -> None:
    cache, sglang = unified_on(three_nodes())
    with pytest.raises(NotLocked):
        cache.unlock(cache.handle(3))
    cache.lock(cache.root)
    cache.unlock(cache.root)
    cache.unlock(cache.root)
    assert sglang.released == [] and sglang.serials == 0
    assert cache.root == UnifiedNode(cache.serial, 0)


@pytest.mark.parametrize("handle", ["dropped", "foreign", 2, True, "2", None])
def test_a_handle_the_core_does_not_resolve_or_of_another_cache_is_unknown(handle: Any) -> None:
    cache, _ = unified_on(three_nodes())
    other, _ = unified_on(three_nodes())
    node = {"dropped": cache.handle(99), "foreign": other.handle(2)}.get(handle, handle)
    with pytest.raises(UnknownNode):
        cache.lock(node)
    with pytest.raises(UnknownNode):
        cache.unlock(node)


# A panic of the Rust core is reported, never let through as a BaseException, and poisons the adapter.


@pytest.mark.parametrize(
    "panic",
    [PanicException("receipt released twice"), RuntimeError("Rust TreeCore panicked: FULL segment release hit lock_ref=0 on node 1")],
    ids=["pyo3-panic", "binding-runtime-error"],
)
def test_a_panic_becomes_rust_panic_and_every_later_call_is_refused(panic: BaseException) -> None:
    cache, sglang = unified_on(three_nodes())
    cache.lock(cache.handle(2))
    sglang.panic_on_release = panic
    with pytest.raises(RustPanic, match="panicked in dec_lock_ref"):
        cache.unlock(cache.handle(2))
    assert isinstance(RustPanic("x"), RuntimeError)
    for call in (lambda: cache.lock(cache.handle(3)), lambda: cache.cached_blocks(), lambda: cache.snapshot(), lambda: cache.evict(1)):
        with pytest.raises(RustPanic, match="poisoned"):
            call()


def test_an_ordinary_error_of_the_core_passes_through_unchanged_and_poisons_nothing() -> None:
    cache, sglang = unified_on(three_nodes())
    cache.lock(cache.handle(2))
    sglang.fail_on_release = True
    with pytest.raises(AssertionError, match="lock_ref=0"):  # what the Python core raises for a double release
        cache.unlock(cache.handle(2))
    assert cache.panicked is None
    sglang.fail_on_release = False
    cache.lock(cache.handle(3))
    cache.unlock(cache.handle(3))


# What the adapter says it offers, and which core it was given.


def test_the_rust_core_reports_no_order_and_the_python_core_does() -> None:
    rust, _ = unified_on(three_nodes(), "rust")
    python, _ = unified_on(UnifiedTreeCore(dict(three_nodes().nodes)), "python")
    assert rust.prefixspec_features == frozenset({"namespaces", "events", "unordered"})
    assert python.prefixspec_features == frozenset({"namespaces", "events"})


def test_a_core_other_than_the_one_asked_for_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="UnifiedTreeCore where the rust TreeCore"):
        unified_on(UnifiedTreeCore(dict(three_nodes().nodes)), "rust")
    with pytest.raises(ValueError, match="core is one of"):
        unified_on(three_nodes(), "cpp")


# The Rust core's nodes rebuilt from its canary walk, its read-only match and its paths.


def placed(cache: UnifiedCache) -> None:
    cache.placed.update({0: (None, (5,), 1), 1: (None, (5, 6), 2), 2: (None, (5, 6, 7), 3), 3: (None, (5, 8), 2)})


THREE_VIEWS = {  # the nodes of three_nodes()
    (5,): NodeView((5,), (0,), 0, None),
    (5, 6, 7): NodeView((5, 6, 7), (1, 2), 0, None),
    (5, 8): NodeView((5, 8), (3,), 0, None),
}


def test_the_rust_nodes_are_rebuilt_with_their_own_blocks() -> None:
    cache, _ = unified_on(three_nodes())
    placed(cache)
    assert {view.prefix: view for view in cache.snapshot().nodes} == THREE_VIEWS


def test_a_remembered_tip_node_the_core_no_longer_resolves_is_matched_again() -> None:
    tree = three_nodes()
    cache, _ = unified_on(tree)
    placed(cache)
    assert {view.prefix: view for view in cache.snapshot().nodes} == THREE_VIEWS
    assert cache.tip_nodes[3][1] == 3
    tree.nodes[7] = tree.nodes.pop(3)  # the core names [5 8] node 7 now: the remembered node 3 is gone
    assert {view.prefix: view for view in cache.snapshot().nodes} == THREE_VIEWS
    assert cache.tip_nodes[3][1] == 7


def test_a_remembered_tip_node_that_ends_elsewhere_is_not_trusted() -> None:
    cache, _ = unified_on(three_nodes())
    placed(cache)
    cache.snapshot()
    cache.tip_nodes[3] = (cache.placed[3], 2)  # a wrong memory: node 2 lives, but ends at [5 6 7], not at slot 3
    assert {view.prefix: view for view in cache.snapshot().nodes} == THREE_VIEWS
    assert cache.tip_nodes[3][1] == 3


def test_a_core_whose_matched_node_ends_elsewhere_is_an_error() -> None:
    tree = three_nodes()
    cache, _ = unified_on(tree)
    placed(cache)
    tree.match_full_device_prefix = lambda key: (len(key[0]), 2, 0)  # type: ignore[method-assign]  # every match names node 2
    with pytest.raises(RuntimeError, match="does not end at the tip's KV slot"):
        cache.snapshot()


def test_own_locks_are_the_receipts_where_the_core_pins_and_one_where_it_pins_unasked() -> None:
    tree = three_nodes()
    cache, _ = unified_on(tree)
    placed(cache)
    cache.lock(cache.handle(2))
    cache.lock(cache.handle(2))
    tree.pinned = {0, 1, 2, 3}  # the path of node 2, and node 3 which no receipt pins
    views = {view.prefix: view.locks for view in cache.snapshot().nodes}
    assert views == {(5,): 0, (5, 6, 7): 2, (5, 8): 1}
    tree.pinned = set()  # the core lost the locks: the adapter reports none
    assert {view.prefix: view.locks for view in cache.snapshot().nodes} == {(5,): 0, (5, 6, 7): 0, (5, 8): 0}


def test_a_slot_no_insert_left_is_an_error_not_a_guess() -> None:
    cache, _ = unified_on(three_nodes())
    cache.placed.update({2: (None, (5, 6, 7), 3)})
    with pytest.raises(RuntimeError, match="no insert left"):
        cache.snapshot()


def test_a_block_held_under_other_tokens_is_an_error() -> None:
    cache, _ = unified_on(three_nodes())
    placed(cache)
    cache.placed[3] = (None, (5, 9), 2)
    with pytest.raises(RuntimeError, match="matches 1 of its 2 tokens"):
        cache.snapshot()


# make engines: a section crosses the process boundary of .venv-vllm as JSON.


def test_a_section_round_trips_through_json_and_garbage_is_refused() -> None:
    section = EngineSection("vLLM", (MatrixRow("vLLM 0.32.0 KVCacheManager", "-", "vllm", "PASSED", 1234, 5.5),), "prose")
    assert section_from_json(section_to_json(section, ["a problem"])) == (section, ["a problem"])
    for garbage in ("", "{}", '{"title": "x", "rows": [{"engine": 1}], "prose": ""}', "[1, 2]"):
        with pytest.raises(ValueError):
            section_from_json(garbage)


# The real SGLang, where it is installed.

requires_sglang = pytest.mark.skipif(load_unified() is None, reason="SGLang's UnifiedRadixCache is not importable here (make engines installs it into .venv-bench)")


@requires_sglang
@pytest.mark.parametrize("policy", ["lru", "fifo"])
def test_the_real_cores_agree_side_by_side(policy: str) -> None:
    from examples.sglang.cores import compare_cores

    compared = compare_cores(policy, sequences=10, length=25)
    assert compared.difference is None, "\n".join(compared.trace)
    assert compared.calls == 250


def test_the_page_renders_every_part_kept_and_names_the_sections_missing(tmp_path: Any) -> None:
    from examples.engines import SECTIONS, render

    parts = tmp_path / "sections"
    parts.mkdir()
    row = MatrixRow("SGLang 0.5.23 UnifiedRadixCache", "rust vs python `lru`", "cores side by side", "agree", 3000, 36.6)
    (parts / "cores-all.json").write_text(section_to_json(EngineSection("cores", (row,), "side by side"), []), encoding="utf-8")
    page = tmp_path / "engines.md"
    render(parts, page, None)
    text = page.read_text(encoding="utf-8")
    assert "| SGLang 0.5.23 UnifiedRadixCache | rust vs python `lru` | `cores side by side` | agree | 3,000 | 36.6 |" in text
    assert "All of it in 37 s." in text
    for name in SECTIONS:
        assert (f"`{name}`: no run has kept it yet" in text) == (name != "cores")
    assert "- `cores-all`: finished 20" in text and "load average" in text  # when each part ran, and the load then


def test_narrowed_parts_of_one_section_merge_in_policy_order_each_paragraph_once(tmp_path: Any) -> None:
    from examples.engines import render

    parts = tmp_path / "sections"
    parts.mkdir()
    engine = "SGLang 0.5.23 UnifiedRadixCache"
    for stem, policy, note in (("unified-fifo-rust", "fifo", "fifo is library only"), ("unified-slru-python", "slru", "slru is a server policy")):
        row = MatrixRow(engine, f"core `{policy}`", "sglang", "PASSED", 10, 2.0, 1.5)
        section = EngineSection("SGLang `UnifiedRadixCache`", (row,), f"shared words\n\n- {note}")
        (parts / f"{stem}.json").write_text(section_to_json(section, []), encoding="utf-8")
    page = tmp_path / "engines.md"
    render(parts, page, None)
    text = page.read_text(encoding="utf-8")
    assert text.count("## SGLang `UnifiedRadixCache`") == 1 and text.count("shared words") == 1
    assert text.index("core `slru`") < text.index("core `fifo`")  # the server's policies first, not the files' names' order
    assert text.index("slru is a server policy") < text.index("fifo is library only")
    assert "| 10 | 2.0 (1.5) |" in text  # wall and CPU seconds

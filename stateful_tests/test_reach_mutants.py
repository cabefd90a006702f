"""The second round of reach (issue 21): each planted bug of its kinds is caught by the ci check, briefly.

Tenants by the hundreds (a table of 256 slots, an 8-bit digest), events taken as a router polls (a batch
reordered by kind, pending events dropped on an error path), one node of 2^16+ blocks (an offset inside a node
in 16 bits) and passed-back ids in any mix (spot-checked, or handed back wrong).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import cast

import pytest

from prefixspec.commands.main import main
from prefixspec.drive.long_node import LongNodeDisagreement, check_long_node
from prefixspec.drive.scale import ScaleRun
from prefixspec.formats.trace import read_trace
from prefixspec.running.stages import RunPlan, run_stage
from prefixspec.targets.mutants import DEFAULT_CATALOGUE, Catalogue, load_mutant, read_catalogue
from spec.api import Rules

CAUGHT_BY_THE_CALL_MACHINE = {
    "n06": "R12",
    "e04": "R13",
    "e05": "R13",
    "p01": "R5",
    "p02": "R5",
}
"""The planted bugs the call machine catches, with the rule its minimised counterexample breaks."""


@pytest.fixture(scope="module")
def catalogue() -> Catalogue:
    return read_catalogue(DEFAULT_CATALOGUE)


@pytest.mark.parametrize("mutant_id", CAUGHT_BY_THE_CALL_MACHINE)
def test_each_is_caught_by_the_call_machine_with_a_short_replayable_counterexample(
    mutant_id: str, catalogue: Catalogue, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    factory = load_mutant(catalogue, catalogue.mutant(mutant_id))
    stage = run_stage("call machine", factory, replace(RunPlan.of_profile("ci"), out_dir=tmp_path))
    assert not stage.passed and stage.counterexample, f"{mutant_id} survived the call machine"
    trace = read_trace(stage.counterexample)
    assert 1 <= len(trace.driven_steps()) <= 6, f"{mutant_id}: {len(trace.driven_steps())} calls"
    assert CAUGHT_BY_THE_CALL_MACHINE[mutant_id] in stage.rule, f"{mutant_id}: {stage.rule}"
    assert main(["replay", stage.counterexample, "--target", f"{DEFAULT_CATALOGUE}#{mutant_id}"]) == 1, mutant_id
    assert main(["replay", stage.counterexample, "--target", "impl:RadixCache"]) == 0, mutant_id
    capsys.readouterr()


def test_a_batch_reordered_by_kind_needs_a_take_that_spans_an_evict_and_an_insert(catalogue: Catalogue, tmp_path: Path) -> None:
    """e04 agrees with the spec whenever every take holds one call's events: its counterexample takes across calls."""
    factory = load_mutant(catalogue, catalogue.mutant("e04"))
    stage = run_stage("call machine", factory, replace(RunPlan.of_profile("ci"), out_dir=tmp_path))
    steps = read_trace(stage.counterexample).steps
    since_take = 0
    spans = []
    for step in steps:
        if step.call.op == "take_events":
            spans.append(since_take)
            since_take = 0
        elif step.call.op in ("insert", "evict"):
            since_take += 1
    assert max(spans) >= 2, [step.call.text() for step in steps]


def test_a_node_of_2_16_blocks_cut_at_a_16_bit_offset_is_caught_at_its_first_split(catalogue: Catalogue) -> None:
    factory = load_mutant(catalogue, catalogue.mutant("r09"))
    stage = run_stage("extremes", factory, RunPlan.of_profile("ci"))
    assert not stage.passed
    assert stage.calls == 2 and "split by insert" in stage.failure and stage.rule.startswith("R4"), stage.failure


def test_a_table_of_256_tenant_slots_is_caught_by_the_extremes_with_257_namespaces(catalogue: Catalogue, tmp_path: Path) -> None:
    """Its counterexample needs a namespace for every slot: 256 first uses and the 257th that shares the first's."""
    factory = load_mutant(catalogue, catalogue.mutant("n05"))
    stage = run_stage("extremes", factory, replace(RunPlan.of_profile("ci"), out_dir=tmp_path, report_within=5.0))
    assert not stage.passed and stage.counterexample, stage.failure
    driven = read_trace(stage.counterexample).driven_steps()
    spaces = {step.call.namespace for step in driven if step.call.namespace is not None}
    assert len(spaces) >= 257 and len(driven) >= 257
    assert stage.rule.startswith("R12"), stage.rule


UNSIGNED_BYTE = {"r06": ("% 128", "% 256"), "r04": ("levels < 127", "levels < 255")}
"""The catalogue's signed-byte bugs widened to an unsigned byte: a node's own locks counted mod 2^8, a lock that
pins at most 255 levels up."""


@pytest.mark.parametrize("mutant_id", UNSIGNED_BYTE)
def test_a_count_kept_in_an_unsigned_byte_is_caught_by_the_extremes(mutant_id: str, catalogue: Catalogue, tmp_path: Path) -> None:
    """The extremes go past 2^8 (``coverage.MANY_LOCKS``, ``coverage.DEEP``): the counterexample needs 256+ locks on
    one node, or a path 256+ nodes deep under a locked leaf, which is what shows the reach caught it."""
    signed = catalogue.mutant(mutant_id)
    narrow, wide = UNSIGNED_BYTE[mutant_id]
    assert narrow in signed.replace
    unsigned = replace(signed, id=f"{mutant_id}u8", replace=signed.replace.replace(narrow, wide))
    factory = load_mutant(catalogue, unsigned)
    stage = run_stage("extremes", factory, replace(RunPlan.of_profile("ci"), out_dir=tmp_path, report_within=2.0))
    assert not stage.passed and stage.counterexample, f"{unsigned.id} survived the extremes"
    trace = read_trace(stage.counterexample)
    driven = trace.driven_steps()
    if mutant_id == "r06":
        assert sum(step.call.op == "lock" for step in driven) >= 256
    else:
        longest = max(len(cast(tuple[int, ...], step.call.arg("tokens"))) for step in driven if step.call.op == "insert")
        assert longest >= 256 * trace.block_size
    assert main(["replay", stage.counterexample, "--target", "impl:RadixCache"]) == 0


def test_a_count_of_cached_blocks_kept_in_16_bits_is_caught_at_the_node_of_2_16_blocks(catalogue: Catalogue) -> None:
    """r08 keeps the count in 12 bits (the scale stage's 4,096+ blocks catch it); in 16 bits only 2^16+ cached blocks
    can, which the long node holds, its counts read beside the spec's (at the scale stage's end).  Negative control: impl agrees there
    (``test_reach.test_the_node_of_2_16_blocks_agrees_on_impl_and_reaches_both_splits_past_2_16``)."""
    narrow = catalogue.mutant("r08")
    assert narrow.replace.endswith("0xFFF\n")
    wide = replace(narrow, id="r08u16", replace=narrow.replace.replace("0xFFF\n", "0xFFFF\n"))
    with pytest.raises(LongNodeDisagreement) as caught:
        check_long_node(load_mutant(catalogue, wide), Rules(), base=7, past=1, read_counts=True)
    assert caught.value.calls[-1].startswith("cached_blocks ") and caught.value.rule.startswith("R9"), caught.value


def test_the_scale_stage_reads_the_long_nodes_counts_after_its_run(catalogue: Catalogue, monkeypatch: pytest.MonkeyPatch) -> None:
    """The scale stage itself catches the count kept in 16 bits, after its run (here a stub that agreed at once, to
    keep the test short); the stage's report is the long node's, with its rule.  Negative control: impl passes it."""
    import prefixspec.running.stages as stages

    monkeypatch.setattr(stages, "run_scale", lambda *arguments, **named: ScaleRun(calls=1))
    narrow = catalogue.mutant("r08")
    wide = replace(narrow, id="r08u16", replace=narrow.replace.replace("0xFFF\n", "0xFFFF\n"))
    plan = RunPlan.of_profile("dev")
    stage = run_stage("scale", load_mutant(catalogue, wide), plan)
    assert not stage.passed and "`cached_blocks (" in stage.failure and stage.rule.startswith("R9"), stage.failure
    assert run_stage("scale", load_mutant(catalogue, None), plan).failure == ""


BYTE_BLOCK_SIZES = {
    "unsigned": "        self._tree = RadixTree(size & 0xFF or 1, rules)",
    "signed": "        self._tree = RadixTree(abs(((size + 128) & 0xFF) - 128) or 1, rules)",
}
"""r03's edit (the block size kept in 4 bits) with the size kept in a byte: wrong at 256 (and, signed, at 128)
alone of the sizes the call machine draws (``draws.BLOCK_SIZES``)."""


@pytest.mark.parametrize("kind", BYTE_BLOCK_SIZES)
def test_a_block_size_kept_in_a_byte_is_caught_by_the_call_machine_at_an_engine_size(kind: str, catalogue: Catalogue, tmp_path: Path) -> None:
    """The counterexample's block size is the one the byte cannot hold, which shows the engine sizes caught it."""
    in_a_byte = replace(catalogue.mutant("r03"), id=f"r03{kind}", replace=BYTE_BLOCK_SIZES[kind])
    stage = run_stage("call machine", load_mutant(catalogue, in_a_byte), replace(RunPlan.of_profile("ci"), out_dir=tmp_path))
    assert not stage.passed and stage.counterexample, f"a block size kept in a {kind} byte survived the call machine"
    trace = read_trace(stage.counterexample)
    assert trace.block_size in ((256,) if kind == "unsigned" else (128, 256)) and len(trace.driven_steps()) <= 3
    assert main(["replay", stage.counterexample, "--target", "impl:RadixCache"]) == 0

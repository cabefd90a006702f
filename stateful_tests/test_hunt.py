"""The hunt: all twelve planted bugs of the seed are killed, by the seed tests it names, with short counterexamples."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from dataclasses import replace

from prefixspec.commands.main import main
from prefixspec.exit_status import ExitStatus
from prefixspec.running.report import CheckReport, StageResult
from prefixspec.running.stages import STAGES, RunPlan, chosen_stages, run_stage
from prefixspec.running.hunt import HuntResult, chosen_mutants, hunt, keep, table
from prefixspec.targets.mutants import DEFAULT_CATALOGUE, CatalogueError, Catalogue, Mutant, load_mutant, read_catalogue
from prefixspec.drive.seed_tests import SEED_TESTS
from prefixspec.formats.trace import read_trace

SEED_IDS = ["s01", "s02", "s03", "s04", "s05", "s06", "s07", "s08", "s09", "s10", "m01", "m02"]
REACH_IDS = ["r01", "r02", "r03", "r04", "r05", "r06", "r07", "r08"]
"""Bugs at the extremes (issue 12): no seed test reaches them; the check's stages must."""


@pytest.fixture(scope="module")
def catalogue() -> Catalogue:
    return read_catalogue(DEFAULT_CATALOGUE)


def test_the_catalogue_holds_the_seeds_twelve_bugs_and_the_extremes(catalogue: Catalogue) -> None:
    assert [mutant.id for mutant in catalogue.mutants] == SEED_IDS + REACH_IDS + TENANT_IDS + SECOND_REACH_IDS
    for mutant in catalogue.mutants:
        assert set(mutant.killed_by) <= set(SEED_TESTS), mutant.id
        assert bool(mutant.killed_by) == (mutant.id in SEED_IDS), mutant.id


def test_every_edit_still_applies_exactly_once(catalogue: Catalogue) -> None:
    """The catalogue follows impl/: an edit that no longer matches the source fails here."""
    for mutant in catalogue.mutants:
        assert catalogue.occurrences(mutant) == 1, f"{mutant.id}: update catalogues/impl.toml to the current impl/ source"


def test_an_edit_that_does_not_apply_is_refused(catalogue: Catalogue) -> None:
    stale = Mutant("x01", "stale", "cache.py", "this text is not in the source", "", ())
    with pytest.raises(CatalogueError, match="0 times"):
        load_mutant(catalogue, stale)


def test_repeated_ids_are_named_and_distinct_ones_read(tmp_path: Path) -> None:
    """Which ids repeat, each once, in a catalogue edited by hand; the control: the same mutants under distinct ids read."""
    entry = 'id = "{}"\nbug = "b"\nfile = "cache.py"\nfind = "f"\nreplace = "r"\n'
    head = 'package = "impl"\nfactory = "RadixCache"\n'
    repeated = tmp_path / "repeated.toml"
    repeated.write_text(head + "".join("[[mutant]]\n" + entry.format(name) for name in ("a", "b", "a", "c", "b", "a")), encoding="utf-8")
    with pytest.raises(CatalogueError, match=r"mutant ids repeat: a, b \("):
        read_catalogue(repeated)
    distinct = tmp_path / "distinct.toml"
    distinct.write_text(head + "".join("[[mutant]]\n" + entry.format(name) for name in ("a", "b", "c")), encoding="utf-8")
    assert [mutant.id for mutant in read_catalogue(distinct).mutants] == ["a", "b", "c"]


def test_the_unmutated_copy_passes_every_seed_test(catalogue: Catalogue) -> None:
    """The copy mechanism itself plants nothing: a mutant's failures come from its edit."""
    original = load_mutant(catalogue, None)
    assert original.__module__.startswith("_prefixspec_mutant_")
    for seed_test in SEED_TESTS.values():
        seed_test(original)


@pytest.mark.parametrize("mutant_id", SEED_IDS)
def test_the_hunt_kills_each_with_its_named_seed_tests_and_a_short_replayable_counterexample(
    mutant_id: str, catalogue: Catalogue, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One mutant per test, so that the twelve hunts spread over the test workers.  Engine examples of 500 steps, as
    ``hunt --steps 500``: each mutant is killed by the same stages as at 3,000 (s04, which the engine machine never
    kills, ran it whole: 12.9 of its test's 13.4 s of CPU)."""
    [result] = hunt(catalogue, only=mutant_id, profile="ci", out_dir=tmp_path, steps=500)
    print("\n" + table([result]))
    assert result.killed, f"{mutant_id} survived"
    assert result.missed_seed_tests == [], f"{mutant_id}: not killed by {result.missed_seed_tests}"
    assert result.machine_killers, f"{mutant_id}: no state machine killed it"
    assert result.counterexample, mutant_id
    trace = read_trace(result.counterexample)
    assert 1 <= len(trace.driven_steps()) <= 15, f"{mutant_id}: {len(trace.driven_steps())} calls"
    # Its time to the report is a figure of the table printed above (and of make hunt), not a promise: load stretches it.
    assert result.seconds_to_report is not None, f"{mutant_id}: no report"
    target = f"{DEFAULT_CATALOGUE}#{mutant_id}"
    assert main(["replay", result.counterexample, "--target", target]) == 1, mutant_id
    assert main(["replay", result.counterexample, "--target", "impl:RadixCache"]) == 0, mutant_id
    capsys.readouterr()


REACH_KILLERS = {
    "r01": "golden trace",
    "r02": "call machine",
    "r03": "call machine",
    "r04": "extremes",
    "r05": "extremes",
    "r06": "extremes",
    "r07": "scale",
    "r08": "scale",
}
"""The stage that first kills each bug at the extremes (``make hunt`` runs every stage on each)."""

CUT_WITHIN = {"golden trace": 2.0, "call machine": 2.0, "extremes": 2.0, "scale": 10.0}
"""Seconds of delta debugging, by stage.  Not the scale stage's 2: a long run none of whose cuts failed by then is
replayed whole, the check that it fails at all, so r07 took longer (19.1 s of CPU, not 12.6); r04 took 3.3 s, not 10.9."""


@pytest.mark.parametrize("mutant_id", [mutant_id for mutant_id in REACH_IDS if mutant_id != "r08"])
def test_each_bug_at_the_extremes_is_caught_by_its_stage_with_a_report_within_a_minute(
    mutant_id: str, catalogue: Catalogue, tmp_path: Path
) -> None:
    """Only the stage that first catches it, and a short minimising budget (``CUT_WITHIN``), to keep make test short.
    r08's case, with its report's own budget and its counterexample's length, is test_shrink_block_counts's r08 test
    (one scale run).

    "Within a minute" is held as CPU time of this process (the checker runs in it): a loaded machine
    stretches the wall clock, not the work (``make hunt`` reports the seconds).
    """
    factory = load_mutant(catalogue, catalogue.mutant(mutant_id))
    plan = replace(RunPlan.of_profile("ci"), out_dir=tmp_path, report_within=CUT_WITHIN[REACH_KILLERS[mutant_id]])
    cpu = time.process_time()
    stage = run_stage(REACH_KILLERS[mutant_id], factory, plan)
    cpu = time.process_time() - cpu
    assert not stage.passed, f"{mutant_id} survived the {stage.name}"
    assert stage.counterexample, stage.failure
    assert cpu <= 60, f"{mutant_id}: report after {cpu:.1f} s of CPU"
    assert read_trace(stage.counterexample).steps
    if mutant_id == "r04":  # its cut takes half a minute (a replay of a 129-deep path, 0.3 s, a hundred times): 2 s stop it
        assert stage.counterexample_cut_short and "budget ran out: the shortest found by then, not shown minimal" in stage.failure
        result = HuntResult(catalogue.mutant(mutant_id), machine_killers=[stage.name], counterexample=stage.counterexample,
                            counterexample_calls=stage.counterexample_calls, counterexample_cut_short=stage.counterexample_cut_short)
        assert f"| {stage.counterexample_calls} calls (its budget ran out: not shown minimal) |" in table([result])


def test_hunt_command_exit_status(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A survivor is SURVIVED, exit 1, and the output says which stages it survived when not every one ran.  The
    survivor's hunt runs the golden trace alone (``--stage``: every stage took 13 of this test's 15 s of CPU);
    that a hunt runs every stage unless told is test_hunt_plans_each_mutants_check's."""
    assert main(["hunt", "--mutant", "s03", "--quiet", "--out", str(tmp_path)]) == 0
    output = capsys.readouterr().out
    assert "| s03 |" in output and "killed" in output and "1 of 1 mutants killed" in output and "only the stages" not in output
    survivor = tmp_path / "survivor.toml"
    survivor.write_text(
        'package = "impl"\nfactory = "RadixCache"\n[[mutant]]\nid = "e01"\nbug = "an equivalent edit"\n'
        'file = "blocks.py"\nfind = "    return cached_blocks * block_size"\nreplace = "    return block_size * cached_blocks"\n'
    )
    assert main(["hunt", str(survivor), "--stage", "golden-trace", "--quiet", "--out", str(tmp_path)]) == 1
    output = capsys.readouterr().out
    assert "SURVIVED" in output and "only the stages golden trace ran on each mutant" in output
    assert main(["hunt", "--mutant", "zz9", "--quiet"]) == 2


def test_hunt_plans_each_mutants_check(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``hunt --steps N`` and ``--stage NAME`` are the plan of each mutant's check, as ``check``'s; without them every
    stage runs, at 3,000 steps (the negative control of each)."""
    import prefixspec.commands.hunt as command
    import prefixspec.running.hunt as hunting

    asked: list[tuple[int, tuple[str, ...]]] = []

    def hunted(catalogue: Catalogue, *, steps: int, stages: tuple[str, ...], **_: object) -> list[object]:
        asked.append((steps, stages))
        return []

    with monkeypatch.context() as patched:
        patched.setattr(command, "hunt", hunted)
        assert main(["hunt", "--quiet", "--out", str(tmp_path)]) == 0
        assert main(["hunt", "--steps", "300", "--stage", "scale", "--stage", "call-machine", "--quiet", "--out", str(tmp_path)]) == 0
    assert asked == [(3000, ()), (300, ("scale", "call machine"))]

    planned: list[tuple[int, list[str]]] = []

    def run_check(factory: object, *, target_name: str, plan: RunPlan) -> object:
        planned.append((plan.min_engine_steps, chosen_stages(plan)))
        raise KeyboardInterrupt  # the plan is all this test wants: the hunt stops there, as at a Ctrl-C

    monkeypatch.setattr(hunting, "run_check", run_check)
    catalogue = read_catalogue(DEFAULT_CATALOGUE)
    with pytest.raises(KeyboardInterrupt):
        hunting.hunt(catalogue, only="s03", supervised=False)
    with pytest.raises(KeyboardInterrupt):
        hunting.hunt(catalogue, only="s03", supervised=False, steps=300, stages=("scale", "call machine"))
    assert planned == [(3000, list(STAGES)), (300, ["call machine", "scale"])]


def test_mutant_named_again_hunts_each_once_in_catalogue_order(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``--mutant`` again for more (as ``--stage``): each named mutant once, in catalogue order; one the catalogue lacks
    is usage.  It kept only the last one named, silently."""
    import prefixspec.commands.hunt as command

    catalogue = read_catalogue(DEFAULT_CATALOGUE)
    assert [mutant.id for mutant in chosen_mutants(catalogue, ["s03", "s01", "s03"])] == ["s01", "s03"]
    assert [mutant.id for mutant in chosen_mutants(catalogue, "s03")] == ["s03"]
    assert chosen_mutants(catalogue, None) == list(catalogue.mutants)
    with pytest.raises(CatalogueError, match="no mutant 'zz'"):
        chosen_mutants(catalogue, ["s01", "zz"])
    asked: list[object] = []

    def hunted(catalogue: Catalogue, *, only: object, **_: object) -> list[object]:
        asked.append(only)
        return []

    monkeypatch.setattr(command, "hunt", hunted)
    assert main(["hunt", "--mutant", "s03", "--mutant", "s01", "--quiet", "--out", str(tmp_path)]) == 0
    assert asked == [["s03", "s01"]]


def test_under_other_rules_the_seed_tests_are_said_not_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The seed tests state the strict rules, so a hunt under others does not run them: its table says so, where it
    said "none (expected also: ...)", the catalogue's killers as if they had missed.  The control, under strict: they
    run, and kill s03."""
    arguments = ["hunt", "--mutant", "s03", "--stage", "golden-trace", "--quiet"]
    assert main([*arguments, "--rules", "sglang", "--out", str(tmp_path / "sglang")]) == ExitStatus.PASSED
    out = capsys.readouterr().out
    assert "| s03 | counting the searched length as a hit | killed | not run (they state the strict rules) | golden trace |" in out, out
    assert "expected also" not in out
    assert main([*arguments, "--out", str(tmp_path / "strict")]) == ExitStatus.PASSED
    assert "| killed | hand_example_shared_system_prompt" in capsys.readouterr().out


@pytest.mark.parametrize(("finished", "said"), [(1, "after 1 finished mutant"), (2, "after 2 finished mutants"), (0, "after 0 finished mutants")])
def test_a_stopped_hunt_counts_its_finished_mutants_as_words_do(
    finished: int, said: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A hunt stopped by Ctrl-C prints the table of the mutants that finished, then how many, in the singular for one
    (it said "1 finished mutant(s)"); the other counts are the control."""
    import prefixspec.commands.hunt as command

    catalogue = read_catalogue(DEFAULT_CATALOGUE)
    done = [HuntResult(mutant) for mutant in catalogue.mutants[:finished]]

    def stopped(*_: object, **__: object) -> list[HuntResult]:
        stop = KeyboardInterrupt()
        stop.prefixspec_hunted = done  # type: ignore[attr-defined]  # as running.hunt hands them on
        raise stop

    monkeypatch.setattr(command, "hunt", stopped)
    assert main(["hunt", "--quiet", "--out", str(tmp_path)]) == ExitStatus.INTERRUPTED
    out = capsys.readouterr().out
    assert out.rstrip().splitlines()[-1] == f"result: STOPPED, interrupted (Ctrl-C), {said}"
    assert out.count("| SURVIVED |") == finished


def test_a_kill_with_no_trace_to_replay_keeps_its_stages_report(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A stage that fails with no trace (r09's, at the node of 2^16+ blocks: its calls are in its words) leaves its
    report as ``ID.report``, which the table names, where it said ``-``; a stage that leaves a trace keeps only that."""
    import prefixspec.running.hunt as hunting

    trace = tmp_path / "found.trace"
    trace.write_text("prefixspec-trace 1\nblock_size 1\n", encoding="utf-8")
    stages: list[StageResult] = []

    def run_check(factory: object, *, target_name: str, plan: RunPlan) -> CheckReport:
        return CheckReport(target_name, "ci", None, list(stages))

    monkeypatch.setattr(hunting, "run_check", run_check)
    catalogue = read_catalogue(DEFAULT_CATALOGUE)
    stages[:] = [StageResult("extremes", False, 1.0, failure="at the node of 65,537 blocks: the calls ...")]
    [result] = hunting.hunt(catalogue, only="s03", supervised=False, out_dir=tmp_path / "out")
    kept = tmp_path / "out" / "s03.report"
    assert result.report == str(kept) and kept.read_text(encoding="utf-8") == "extremes: at the node of 65,537 blocks: the calls ...\n"
    assert f"| none to replay: its report is {kept} |" in table([result])
    stages[:] = [StageResult("call machine", False, 1.0, failure="differs", counterexample=str(trace), counterexample_calls=2)]
    [result] = hunting.hunt(catalogue, only="s04", supervised=False, out_dir=tmp_path / "out")
    assert not result.report and not (tmp_path / "out" / "s04.report").exists() and "| 2 calls |" in table([result])


def test_a_trace_or_report_that_cannot_be_kept_is_named_and_the_verdict_stands(tmp_path: Path) -> None:
    """``keep``: a file that cannot be written (its folder cannot be made under /proc) is no path and a reason the
    table shows; one that can is written whole (the control)."""
    result = HuntResult(Mutant("x", "a bug", "cache.py", "a", "b", ()), machine_killers=["call machine"])
    assert keep(result, Path("/proc/no-such-folder/x.trace"), "calls") == ""
    assert "| not written (/proc/no-such-folder/x.trace: No such file or directory) |" in table([result])
    assert keep(result, tmp_path / "made" / "x.trace", "calls") == str(tmp_path / "made" / "x.trace")
    assert (tmp_path / "made" / "x.trace").read_text() == "calls"


@pytest.mark.parametrize("steps", ["0", "-5", "x", "1000001"])
def test_hunt_steps_out_of_range_are_usage_in_one_line(steps: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["hunt", "--steps", steps, "--quiet"])
    err = capsys.readouterr().err
    assert exited.value.code == ExitStatus.USAGE and "argument --steps" in err and err.count("error:") == 1, err


SECOND_REACH_IDS = ["n05", "n06", "e04", "e05", "r09", "p01", "p02"]
"""Tenants by the hundreds, events taken as a router polls, a node of 2^16+ blocks, mixed passed-back ids
(issue 21): stateful_tests/test_reach_mutants.py shows what catches each."""

TENANT_IDS = ["n01", "n02", "n03", "n04", "e01", "e02", "e03"]
"""Bugs in namespaces (R12) and events (R13): no seed test knows either; the call machine must catch each."""


@pytest.mark.parametrize("mutant_id", TENANT_IDS)
def test_each_namespace_and_event_bug_is_caught_by_the_call_machine_with_a_short_replayable_counterexample(
    mutant_id: str, catalogue: Catalogue, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    factory = load_mutant(catalogue, catalogue.mutant(mutant_id))
    stage = run_stage("call machine", factory, replace(RunPlan.of_profile("ci"), out_dir=tmp_path))
    assert not stage.passed and stage.counterexample, f"{mutant_id} survived the call machine"
    trace = read_trace(stage.counterexample)
    assert 1 <= len(trace.driven_steps()) <= 6, f"{mutant_id}: {len(trace.driven_steps())} calls"
    assert stage.rule.startswith(("R12", "R13", "R1/R5")), f"{mutant_id}: {stage.rule}"
    assert main(["replay", stage.counterexample, "--target", f"{DEFAULT_CATALOGUE}#{mutant_id}"]) == 1, mutant_id
    assert main(["replay", stage.counterexample, "--target", "impl:RadixCache"]) == 0, mutant_id
    capsys.readouterr()


HOSTILE_MATCH = "    def match_prefix(self, tokens: Sequence[int], namespace: Namespace = None) -> PrefixMatch:\n"


def hostile_catalogue(folder: Path, statements: dict[str, str], file: str = "cache.py") -> Path:
    """A catalogue of impl mutants whose match_prefix begins with each statement."""
    import json

    entries = "".join(
        f'[[mutant]]\nid = "{name}"\nbug = "{name}"\nfile = "{file}"\nfind = {json.dumps(HOSTILE_MATCH)}\n'
        f'replace = {json.dumps(HOSTILE_MATCH + "        " + statement + chr(10))}\n\n'
        for name, statement in statements.items()
    )
    path = folder / "hostile.toml"
    path.write_text(f'package = "impl"\nfactory = "RadixCache"\n\n{entries}', encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("statement", "words", "seed_cell"),
    [
        ("__import__('os')._exit(0)", "exited with status 0", "unknown (its process ended)"),
        ("__import__('os')._exit(7)", "exited with status 7", "unknown (its process ended)"),
        ("__import__('os').kill(__import__('os').getpid(), 9)", "killed by signal SIGKILL", "unknown (its process ended)"),
        ("__import__('sys').exit(5)", "killed", "hand_example_shared_system_prompt, "),
        ("raise KeyboardInterrupt", "killed", "hand_example_shared_system_prompt, "),
        ("while True: pass", "killed", "hand_example_shared_system_prompt, "),
    ],
    ids=["os._exit(0)", "os._exit(7)", "SIGKILL", "sys.exit", "KeyboardInterrupt", "an endless loop"],
)
def test_a_mutant_that_ends_its_process_or_hangs_is_killed_with_a_report(
    statement: str, words: str, seed_cell: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The seed tests' cell says what they found, or that it is unknown where the process ended with their verdicts
    (it said "none", and named the seed tests the catalogue expects as missed)."""
    catalogue = hostile_catalogue(tmp_path, {"x01": statement})
    status = main(["hunt", str(catalogue), "--quiet", "--timeout", "0.5", "--out", str(tmp_path / "out")])
    out = capsys.readouterr().out
    assert status == ExitStatus.PASSED, out  # killed: the hunt held, and said so
    assert "| x01 |" in out and "| killed |" in out and words in out and "1 of 1 mutants killed" in out
    assert f"| killed | {seed_cell}" in out and "expected also" not in out, out


def test_a_mutant_that_exits_at_import_is_usage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    catalogue = tmp_path / "import.toml"
    catalogue.write_text(
        'package = "impl"\nfactory = "RadixCache"\n[[mutant]]\nid = "x02"\nbug = "exits at import"\nfile = "cache.py"\n'
        'find = "import operator\\n"\nreplace = "import operator\\nimport os; os._exit(6)\\n"\n',
        encoding="utf-8",
    )
    status = main(["hunt", str(catalogue), "--quiet", "--out", str(tmp_path / "out")])
    captured = capsys.readouterr()
    assert status == ExitStatus.USAGE and captured.out == ""
    assert "x02 cannot be loaded" in captured.err and "exited with status 6" in captured.err


@pytest.mark.parametrize("file", ["../spec/model/state.py", "../impl/cache.py/..", "no_such.py", "cache.pyc"])
def test_an_edit_of_no_module_of_the_package_is_usage(file: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``../toycache/cache.py`` passed the existence check once and was silently not applied: the unmutated package was hunted."""
    catalogue = hostile_catalogue(tmp_path, {"x03": "pass"}, file=file)
    status = main(["hunt", str(catalogue), "--quiet", "--out", str(tmp_path / "out")])
    captured = capsys.readouterr()
    assert status == ExitStatus.USAGE and captured.out == "", captured.out
    assert "x03" in captured.err and captured.err.count("\n") == 1


def test_a_package_that_cannot_be_found_is_usage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    catalogue = tmp_path / "nopkg.toml"
    catalogue.write_text('package = "no_such_pkg.sub"\nfactory = "F"\n[[mutant]]\nid="a"\nbug="b"\nfile="c.py"\nfind="x"\nreplace="y"\n', encoding="utf-8")
    status = main(["hunt", str(catalogue), "--quiet"])
    captured = capsys.readouterr()
    assert status == ExitStatus.USAGE and "cannot be found" in captured.err and "Traceback" not in captured.err

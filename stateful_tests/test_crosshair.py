"""The CrossHair gate is seen to fail: on planted arithmetic bugs, and on a report that proves nothing.

``make crosshair`` runs the gate itself; these tests only show that it can
say no.  Each CrossHair run here takes about half a second.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from spec import arith
from prefixspec.commands.crosshair import (
    ROOT,
    SPEC_ARITH,
    ContractedFunction,
    Run,
    Verdict,
    check_file,
    contracted_functions,
    diff_pair,
    judge_check,
    parse_check_report,
)

CONTROLS = ROOT / "stateful_tests" / "crosshair_controls"
CONTROLS_MODULE = "stateful_tests.crosshair_controls"
COUNTEREXAMPLE = re.compile(r"error: false when calling (?P<function>\w+)\(")


def only_verdict(verdicts: list[Verdict]) -> Verdict:
    (verdict,) = verdicts
    return verdict


def contract_lines(path: Path, name: str) -> list[str]:
    """The ``pre:`` and ``post:`` lines of function ``name`` in ``path``, as written."""
    (function,) = [function for function in contracted_functions(path) if function.name == name]
    lines = path.read_text().splitlines()[function.first_line - 1 : function.last_line]
    return [line.strip() for line in lines if re.match(r"\s*(pre|post)(\[[^\]]*\])?:", line)]


@pytest.mark.parametrize(("planted", "name"), [("wrong_usable_prefix", "usable_prefix"), ("wrong_hit_rate", "hit_rate"), ("misspelt_precondition", "usable_prefix")])
def test_planted_bugs_carry_the_spec_contract(planted: str, name: str) -> None:
    """A control proves something about the gate only under the contract the gate checks."""
    planted_lines = contract_lines(CONTROLS / f"{planted}.py", name)
    spec_lines = contract_lines(SPEC_ARITH, name)
    if planted == "misspelt_precondition":
        planted_lines = [line.replace("blocksize", "block_size") for line in planted_lines]
    assert planted_lines == spec_lines


@pytest.mark.parametrize(("planted", "name"), [("wrong_usable_prefix", "usable_prefix"), ("wrong_hit_rate", "hit_rate")])
def test_the_gate_finds_a_counterexample_to_each_planted_bug(planted: str, name: str) -> None:
    verdict = only_verdict(check_file(CONTROLS / f"{planted}.py"))
    assert not verdict.passed
    assert verdict.subject == f"{CONTROLS_MODULE}.{planted}.{name}"
    counterexamples = [match["function"] for problem in verdict.problems if (match := COUNTEREXAMPLE.search(problem))]
    assert counterexamples, verdict.problems
    assert set(counterexamples) == {name}


def test_diffbehavior_finds_the_planted_usable_prefix_differs_from_the_spec() -> None:
    verdict = diff_pair("usable_prefix", f"{CONTROLS_MODULE}.wrong_usable_prefix.usable_prefix")
    assert not verdict.passed
    assert any(problem.startswith("Given: (") for problem in verdict.problems), verdict.problems


def test_the_gate_fails_a_precondition_it_cannot_evaluate_though_crosshair_exits_0() -> None:
    planted = CONTROLS / "misspelt_precondition.py"
    target = f"{CONTROLS_MODULE}.misspelt_precondition.usable_prefix"
    # The pitfall itself: CrossHair calls this a success.
    crosshair = subprocess.run([sys.executable, "-m", "crosshair", "check", "--report_all", "--per_condition_timeout=5", target], cwd=ROOT, capture_output=True, text=True, timeout=600)  # a hang guard
    assert crosshair.returncode == 0
    assert "Unable to meet precondition" in crosshair.stdout
    verdict = only_verdict(check_file(planted))
    assert not verdict.passed
    assert verdict.proved == 0
    assert any("Unable to meet precondition" in problem for problem in verdict.problems)


SPEC_USABLE_PREFIX = next(function for function in contracted_functions(SPEC_ARITH) if function.name == "usable_prefix")


def report(*lines: str) -> str:
    return "".join(f"{SPEC_ARITH}:{line}\n" for line in lines)


def confirmed_report(function: ContractedFunction) -> str:
    return report(*(f"{line}: info: Confirmed over all paths." for line in sorted(function.post_lines)))


def test_the_parser_passes_a_report_confirming_every_condition() -> None:
    assert judge_check(SPEC_USABLE_PREFIX, Run(0, confirmed_report(SPEC_USABLE_PREFIX), "", 0.1)).passed


@pytest.mark.parametrize(
    "message",
    [
        'info: Unable to meet precondition (possibly because it raised "NameError("name \'blocksize\' is not defined")"?).',
        "info: Not confirmed.",
        "error: false when calling usable_prefix(2, 2) (which returns 2)",
    ],
)
def test_the_parser_fails_any_condition_not_confirmed_even_on_exit_code_0(message: str) -> None:
    first, *others = sorted(SPEC_USABLE_PREFIX.post_lines)
    stdout = report(f"{first}: {message}", *(f"{line}: info: Confirmed over all paths." for line in others))
    verdict = judge_check(SPEC_USABLE_PREFIX, Run(0, stdout, "", 0.1))
    assert not verdict.passed
    assert verdict.proved == len(others)


def test_the_parser_fails_a_multi_line_message_and_a_silent_condition() -> None:
    first = min(SPEC_USABLE_PREFIX.post_lines)
    stdout = report(f"{first}: info: Unable to meet precondition (possibly because it raised \"NameError(...) at") + '  File "<string>", line 1\n"?).\n'
    verdict = judge_check(SPEC_USABLE_PREFIX, Run(0, stdout, "", 0.1))
    assert not verdict.passed
    message, *silent = verdict.problems
    assert message.startswith(f"line {first}: info: Unable to meet precondition") and message.endswith('"?).')
    assert silent == [f"line {line}: condition never reported confirmed" for line in sorted(SPEC_USABLE_PREFIX.post_lines)]


@pytest.mark.parametrize(("returncode", "stderr"), [(0, "Traceback (most recent call last):"), (2, ""), (None, "")])
def test_the_parser_fails_a_confirmed_report_from_a_broken_run(returncode: int | None, stderr: str) -> None:
    verdict = judge_check(SPEC_USABLE_PREFIX, Run(returncode, confirmed_report(SPEC_USABLE_PREFIX), stderr, 0.1))
    assert not verdict.passed


def test_the_parser_fails_a_function_crosshair_never_reported_on() -> None:
    assert not judge_check(SPEC_USABLE_PREFIX, Run(0, "", "", 0.1)).passed


def test_the_parser_joins_continuation_lines_to_their_message() -> None:
    findings = parse_check_report(report("5: info: first half") + "second half\n")
    assert [(finding.line, finding.message) for finding in findings] == [(5, "first half\nsecond half")]


def test_the_hit_rate_keeps_its_meaning_through_rounding_up_to_the_bound() -> None:
    """CrossHair proves the hit rate over reals; these are the doubles nearest to breaking it."""
    bound = 2**53
    assert 0.0 < arith.hit_rate(1, bound) < arith.hit_rate(bound - 1, bound) < 1.0
    assert arith.hit_rate(bound, bound) == 1.0
    # Beyond the bound the precondition excludes, rounding does break it.
    assert arith.hit_rate(1, 10**400) == 0.0
    assert arith.hit_rate(2**54, 2**54 + 1) == 1.0

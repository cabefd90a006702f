"""``make fuzz``: the long campaign, thousands of cases of every family of ``plans``, counted.

    python -m stateful_tests.fuzzing.campaign [--cases 10000] [--seed 13]

Each family of ``plans`` gets its share of the cases by weight (mostly
hostile traces, which are cheap): Hypothesis draws the cases of the drawn
families (seeded, no shrinking, no example database), the tables of
documented cases run round and round.  Every case runs in the sandbox, a process of its own under a time
limit; the campaign counts them by family and exit status, and lists every
broken promise (a traceback, a hang, a process left behind, an undocumented
status) with the case and, for a trace, the file, kept under
``counterexamples/fuzz/``.  Exit status 1 if any promise broke.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from stateful_tests.fuzzing.option_plans import option_plans
from stateful_tests.fuzzing.plans import (
    Plan,
    engine_plans,
    engine_table,
    interrupt_plans,
    run_plan,
    process_end_plans,
    target_plans,
    trace_plans,
)
from stateful_tests.fuzzing.sandbox import ROOT, Sandbox

WEIGHTS = {"trace": 87, "engine": 6, "target": 3, "option": 1, "interrupt": 2, "process end": 1}
"""Per hundred cases, one weight for each family of ``drawn_families`` and ``table_families`` (a test holds the two
alike): hostile traces take a few tens of milliseconds, engines, Ctrl-C and ends of a target's process up to seconds."""

KEPT = ROOT / "counterexamples" / "fuzz"


def quotas(cases: int) -> dict[str, int]:
    """How many of ``cases`` each family gets, by ``WEIGHTS``; the rounding's rest goes to the traces."""
    shares = {family: cases * weight // sum(WEIGHTS.values()) for family, weight in WEIGHTS.items()}
    shares["trace"] += cases - sum(shares.values())
    return shares


def drawn_families(scratch: Path) -> dict[str, st.SearchStrategy[Plan]]:
    return {"trace": trace_plans(scratch), "engine": engine_plans(scratch), "interrupt": interrupt_plans(scratch)}


def table_families(scratch: Path) -> dict[str, list[Plan]]:
    return {"target": target_plans(scratch) + engine_table(scratch), "option": option_plans(scratch), "process end": process_end_plans(scratch)}


class Tally:
    """Cases by family and exit status, and the broken promises with their cases."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[str, int]] = Counter()
        self.broken: list[str] = []
        self.started = time.monotonic()
        self.slowest = 0.0

    def add(self, plan: Plan, status: int, seconds: float, broken: list[str]) -> None:
        self.counts[(plan.family, status)] += 1
        self.slowest = max(self.slowest, seconds)
        if broken:
            number = len(self.broken) + 1
            print(f"  broken promise {number}: {plan.case.argv} (env {dict(plan.case.env)}): {broken[0]}", file=sys.stderr, flush=True)
            note = f"{number}. {plan.case.argv} (env {dict(plan.case.env)}):\n   " + "\n   ".join(broken)
            for path, data in plan.files:
                KEPT.mkdir(parents=True, exist_ok=True)
                kept = KEPT / f"case{number}{Path(path).suffix}"
                kept.write_bytes(data)
                note += f"\n   its file {path} is kept as {kept}"
            self.broken.append(note)

    @property
    def cases(self) -> int:
        return sum(self.counts.values())

    def progress(self) -> str:
        return f"  {self.cases:,} cases, {len(self.broken)} broken, {time.monotonic() - self.started:.0f} s"

    def summary(self) -> str:
        lines = [f"prefixspec fuzz campaign: {self.cases:,} cases in {time.monotonic() - self.started:.0f} s (slowest {self.slowest:.1f} s)"]
        families = list(WEIGHTS) + sorted({kind for kind, _ in self.counts} - set(WEIGHTS))  # a table's plans may name a family of their own
        for family in families:
            statuses = {status: count for (kind, status), count in sorted(self.counts.items()) if kind == family}
            shown = ", ".join(f"exit {status}: {count:,}" for status, count in statuses.items())
            lines.append(f"  {family:<14} {sum(statuses.values()):>6,}  ({shown})")
        lines.append(f"broken promises: {len(self.broken)}")
        lines.extend(self.broken[:50])
        return "\n".join(lines)


def campaign(cases: int, seed: int, sandbox: Sandbox, scratch: Path, tally: Tally | None = None) -> Tally:
    """Run ``cases`` cases, each family its quota: drawn ones by Hypothesis (seeded), tables round and round; counted in ``tally``."""
    tally = Tally() if tally is None else tally

    def run(plan: Plan) -> None:
        ran, broken = run_plan(sandbox, plan)
        tally.add(plan, ran.status, ran.seconds, broken)
        if tally.cases % 500 == 0:
            print(tally.progress(), file=sys.stderr, flush=True)

    shares = quotas(cases)
    for offset, (family, plans) in enumerate(drawn_families(scratch).items()):
        if not shares[family]:
            continue

        @hypothesis_seed(seed + offset)
        @settings(
            max_examples=shares[family],
            deadline=None,
            database=None,
            phases=[Phase.generate],  # a campaign counts every case; it shrinks none
            # Each case is a process of its own, seconds long by design; nothing else is suppressed.
            suppress_health_check=[HealthCheck.too_slow],
        )
        @given(plan=plans)
        def one_case(plan: Plan) -> None:
            run(plan)

        one_case()
    for family, table in table_families(scratch).items():
        for index in range(shares[family]):  # again and again: a case that passes only sometimes shows here
            run(table[index % len(table)])
    return tally


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stateful_tests.fuzzing.campaign", description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=10_000, help="how many cases (default 10,000)")
    parser.add_argument("--seed", type=int, default=13, help="Hypothesis seed (default 13)")
    arguments = parser.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="prefixspec-fuzz-"))
    tally = Tally()
    try:
        with Sandbox() as sandbox:
            campaign(arguments.cases, arguments.seed, sandbox, scratch, tally)
    finally:  # a campaign that stops early (Ctrl-C, its own error) still prints what it counted
        shutil.rmtree(scratch, ignore_errors=True)
        print(tally.summary())
    return 1 if tally.broken else 0


if __name__ == "__main__":
    sys.exit(main())

"""The fuzz's family ``option_plans`` (``plans.py`` lists every family): option sets each refused with exit
status 2, in one line, and writes that fail only at the end, each with what the command line documents for it."""

from __future__ import annotations

from pathlib import Path

from prefixspec.shipped import GOLDEN_TRACE
from stateful_tests.fuzzing.plans import CHECK_LIMIT, GOLDEN, QUICK_CHECK, TRACE_LIMIT, Plan, in_scratch


# Options ------------------------------------------------------------------------------------------


def odd_options(scratch: Path) -> list[tuple[str, ...]]:
    """Option sets that must each be refused with exit status 2, before any work (files under ``scratch``)."""
    afile = str(scratch / "a-file")
    folder = str(scratch)
    return [
        ("check", "--out", afile),
        ("check", "--json", f"{folder}/no/such/folder/report.json"),
        ("check", "--json", folder),
        # Places no file can be made in (issue 22): refused before the run, not lost after it.
        ("check", "--out", f"{folder}/dangling"),
        ("check", "--out", f"{folder}/dangling/below"),
        ("check", "--out", "/proc/prefixspec-out"),
        ("check", "--out", "/proc/self/prefixspec-out"),
        ("check", "--out", f"{folder}/same", "--json", f"{folder}/same"),
        ("check", "--json", "/proc/prefixspec.json"),
        ("check", "--json", "/sys/prefixspec.json"),
        ("check", "--json", f"{folder}/dangling.json"),
        ("identify", "--out", "/proc/prefixspec-out"),
        ("hunt", "--out", f"{folder}/dangling"),
        ("verify", GOLDEN, "--shrink", "--out", "/proc/prefixspec.trace"),
        ("check", "--steps", "1000000000000"),
        ("check", "--steps", "0"),
        ("check", "--steps", "9" * 5000),
        ("check", "--steps", "²"),
        ("check", "--timeout", "inf"),
        ("check", "--timeout", "nan"),
        ("check", "--timeout", "1e309"),
        ("check", "--timeout", "-1"),
        ("check", "--timeout", "1e12"),
        ("check", "--exec", ""),
        ("check", "--exec", "   "),
        ("check", ""),
        ("check", "impl:RadixCache", "--exec", "true"),
        ("check", "--rules", "use=nothing"),
        ("check", "--profile", "fast"),
        ("check", "--seed", "1e3"),
        ("identify", "--out", afile),
        ("replay", GOLDEN, "--target", ""),
        ("replay", GOLDEN, "--timeout", "0"),
        ("replay", f"{folder}/missing.trace"),
        ("replay", folder),
        ("verify", GOLDEN, "--time-budget", "nan"),
        ("verify", GOLDEN, "--time-budget", "-5"),
        ("verify", GOLDEN, "--shrink", "--out", f"{folder}/no/such/folder/x.trace"),
        ("hunt", f"{folder}/latin1.toml"),
        ("hunt", f"{folder}/missing.toml"),
        ("hunt", "--out", afile),
        ("hunt", "--mutant", "no-such-mutant"),
        ("crosshair", "--jobs", "0"),
        ("bench", "--reps", "0"),
        ("golden", folder),
        ("frobnicate",),
        (),
    ]


def option_plans(scratch: Path) -> list[Plan]:
    """Every odd option set, with the files it names: a plain file, and a catalogue that is not UTF-8."""
    files = (
        (str(scratch / "a-file"), b"not a folder\n"),
        (str(scratch / "latin1.toml"), 'package = "impl"\nfactory = "RadixCache"\n# caf\xe9\n'.encode("latin-1")),
    )
    for link, points_to in (("dangling", "/nonexistent/folder"), ("dangling.json", "/nonexistent/report.json")):
        if not (scratch / link).is_symlink():
            (scratch / link).symlink_to(points_to)
    plans = [Plan("option", in_scratch(scratch, argv, TRACE_LIMIT), frozenset({2}), files=files) for argv in odd_options(scratch)]
    # A write that fails only at the end (a full device): the report on stdout all the same, and exit 2.
    full = ("check", "stateful_tests.hostile_targets:cached_blocks_float", *QUICK_CHECK, "--out", str(scratch / "out"), "--json", "/dev/full")
    plans.append(Plan("option", in_scratch(scratch, full, CHECK_LIMIT), frozenset({2}), "the report could not be written there"))
    # verify --shrink's cut, written at the end to a full device: the divergence printed, exit 2, nothing half-written.
    diverging = (str(scratch / "diverging.trace"), GOLDEN_TRACE.read_bytes().replace(b"\nevict 7 -> [0 1 2 3 4]\n", b"\nevict 7 -> [0 1 2 3]\n", 1))
    cut = ("verify", diverging[0], "--shrink", "--out", "/dev/full")
    plans.append(Plan("option", in_scratch(scratch, cut, TRACE_LIMIT), frozenset({2}), "could not be written there", files=(diverging,)))
    return plans

"""A supervised command leaves no Hypothesis storage behind in the temporary directory.

The child that runs a command ends with ``os._exit`` (or by its target's
hand), which runs no exit handler: the folder Hypothesis's storage points at
must be made, and so removed, by the parent.  Each run is a process of its
own with ``TMPDIR`` pointed at an empty folder, which must stay empty.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# A command whose child loads the ci profile (no example database) and runs a Hypothesis test in it.
SCRIPT = """
import argparse, sys
from hypothesis import given, strategies as st
from prefixspec.running.profiles import load_profile

def command(arguments):
    load_profile("ci")

    @given(st.integers())
    def holds(value):
        assert isinstance(value, int)

    holds()
    print("result: PASSED")
    return 0

arguments = argparse.Namespace(command="check", timeout=None)
if sys.argv[1] == "supervised":
    from prefixspec.commands.supervised_run import run_supervised
    sys.exit(run_supervised(arguments, command))
from prefixspec.targets.supervised import supervise  # the child forked with nothing made before it
sys.exit(supervise(lambda: command(arguments), None).status or 0)
"""


def left_in_temporary_directory(tmp_path: Path, how: str) -> list[str]:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    environment = {**os.environ, "TMPDIR": str(scratch), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", SCRIPT, how], cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return sorted(os.listdir(scratch))


def test_a_supervised_command_removes_its_storage(tmp_path: Path) -> None:
    assert left_in_temporary_directory(tmp_path, "supervised") == []


def test_negative_control_a_child_that_makes_the_folder_leaves_it(tmp_path: Path) -> None:
    """Without the parent making it first, the child makes the folder and cannot remove it."""
    left = left_in_temporary_directory(tmp_path, "bare")
    assert len(left) == 1 and left[0].startswith("prefixspec-hypothesis-")

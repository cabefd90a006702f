"""The checker works installed: a wheel built from this checkout, in a fresh venv, run from a folder outside it.

This is what a new user does: ``pip install prefixspec-*.whl``, then the
commands and a pytest file of their own.  Nothing here may reach the checkout:
the commands run with the checkout off ``sys.path`` and from another folder,
and the data they need (the catalogue, the golden trace) must come from the
installed package.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.xdist_group("installed")  # one worker builds the wheel and venv once, for every test here


def run(command: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    environment = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "HYPOTHESIS_PROFILE")}
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=environment)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the fresh venv's bin folder, an empty working folder outside the checkout)."""
    scratch = tmp_path_factory.mktemp("installed")
    built = run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(scratch / "dist"), str(ROOT)], scratch)
    assert built.returncode == 0, built.stderr
    [wheel] = sorted((scratch / "dist").glob("prefixspec-*.whl"))
    made = run([sys.executable, "-m", "venv", str(scratch / "venv")], scratch)
    assert made.returncode == 0, made.stderr
    bin_folder = scratch / "venv" / "bin"
    pip = run([str(bin_folder / "python"), "-m", "pip", "install", "--quiet", str(wheel), "pytest"], scratch, timeout=600)
    assert pip.returncode == 0, pip.stderr
    elsewhere = scratch / "elsewhere"
    elsewhere.mkdir()
    return bin_folder, elsewhere


def test_the_installed_package_is_not_the_checkout(installed: tuple[Path, Path]) -> None:
    bin_folder, elsewhere = installed
    done = run([str(bin_folder / "python"), "-c", "import prefixspec, spec, impl; print(prefixspec.__file__, spec.__file__, impl.__file__)"], elsewhere)
    assert done.returncode == 0, done.stderr
    assert str(ROOT) not in done.stdout and "site-packages" in done.stdout


def test_check_passes_installed(installed: tuple[Path, Path]) -> None:
    bin_folder, elsewhere = installed
    # Every stage runs, installed; --steps keeps the engine machine's examples short (the checkout's own tests run them in full).
    done = run([str(bin_folder / "prefixspec"), "check", "--steps", "500", "--quiet", "--out", "cx"], elsewhere)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "result: PASSED" in done.stdout
    assert not (elsewhere / ".hypothesis").exists(), "a ci run leaves no .hypothesis/ behind"


def test_hunt_finds_the_shipped_catalogue(installed: tuple[Path, Path]) -> None:
    bin_folder, elsewhere = installed
    done = run([str(bin_folder / "prefixspec"), "hunt", "--mutant", "s01", "--quiet", "--out", "hunted"], elsewhere)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 of 1 mutants killed" in done.stdout
    replayed = run([str(bin_folder / "prefixspec"), "replay", "hunted/s01.trace", "--target", "impl:RadixCache"], elsewhere)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr


def test_replay_of_the_shipped_golden_trace(installed: tuple[Path, Path]) -> None:
    bin_folder, elsewhere = installed
    where = run([str(bin_folder / "python"), "-c", "from prefixspec.shipped import GOLDEN_TRACE; print(GOLDEN_TRACE)"], elsewhere)
    golden = where.stdout.strip()
    assert "site-packages" in golden, where.stderr
    done = run([str(bin_folder / "prefixspec"), "replay", golden, "--target", "impl:RadixCache"], elsewhere)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "442 calls replayed" in done.stdout


def test_a_pytest_file_of_the_users_own(installed: tuple[Path, Path]) -> None:
    bin_folder, elsewhere = installed
    (elsewhere / "test_my_cache.py").write_text(
        textwrap.dedent(
            """
            from hypothesis import settings
            from impl import RadixCache
            from prefixspec import conformance_suite

            TestMyCache = conformance_suite(
                RadixCache, settings=settings(max_examples=2, database=None), min_engine_steps=300,
                stages=("golden trace", "call machine", "engine machine"),
            )
            """
        )
    )
    done = run([str(bin_folder / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_my_cache.py"], elsewhere)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 passed" in done.stdout


@pytest.mark.parametrize(("command", "words"), [("bench", "source checkout"), ("crosshair", "needs CrossHair")])
def test_checkout_commands_say_so_in_one_line(installed: tuple[Path, Path], command: str, words: str) -> None:
    bin_folder, elsewhere = installed
    done = run([str(bin_folder / "prefixspec"), command], elsewhere)
    assert done.returncode == 2
    assert words in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr

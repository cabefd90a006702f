"""The checker works installed: a wheel built from this checkout, in a fresh venv, run from a folder outside it.

This is what a new user does: ``pip install prefixspec-*.whl``, then the
commands and a pytest file of their own.  Nothing here may reach the checkout:
the commands run with the checkout off ``sys.path`` and from another folder,
and the data they need (the catalogue, the golden trace) must come from the
installed package.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import textwrap
import time
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.xdist_group("installed")  # one worker builds the wheel and venv once, for every test here


def run(command: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    environment = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "HYPOTHESIS_PROFILE")}
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=environment)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from this checkout."""
    scratch = tmp_path_factory.mktemp("wheel")
    built = run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(scratch / "dist"), str(ROOT)], scratch)
    assert built.returncode == 0, built.stderr
    [found] = sorted((scratch / "dist").glob("prefixspec-*.whl"))
    return found


def top_level_imports(source: str) -> set[str]:
    """The top-level packages a module imports absolutely."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_the_wheel_installs_prefixspec_alone(wheel: Path) -> None:
    """No generic top-level name: the definition and the fast cache are prefixspec.spec and prefixspec.impl, and no
    module of the wheel imports a top-level spec or impl (which would find a user's package of that name, or none)."""
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        sources = {name: archive.read(name).decode("utf-8") for name in names if name.endswith(".py")}
    assert {name.split("/")[0] for name in names} == {"prefixspec", "prefixspec-0.1.0.dist-info"}
    for package in ("spec", "impl"):
        checkout = sorted(path.relative_to(ROOT / package).as_posix() for path in (ROOT / package).rglob("*.py"))
        assert sorted(name.removeprefix(f"prefixspec/{package}/") for name in sources if name.startswith(f"prefixspec/{package}/")) == checkout
    wrong = {name: sorted(top_level_imports(source) & {"spec", "impl"}) for name, source in sources.items()}
    assert not {name: found for name, found in wrong.items() if found}
    assert "from prefixspec.spec.api import" in sources["prefixspec/impl/cache.py"]


def test_the_rewrite_refuses_an_import_it_cannot_point() -> None:
    """The negative control of the layout: an import form the build cannot point under prefixspec fails the build."""
    sys.path.insert(0, str(ROOT))
    try:
        from hatch_build import ImportForm, installed_source
    except ImportError:  # hatchling is not in this environment: pip's isolated build has it
        pytest.skip("hatchling is not installed here")
    finally:
        sys.path.remove(str(ROOT))
    assert installed_source("import spec\nfrom impl.cache import RadixCache\n") == "from prefixspec import spec\nfrom prefixspec.impl.cache import RadixCache\n"
    with pytest.raises(ImportForm, match="import spec.api"):
        installed_source("x = 1\nimport spec.api\n", "m.py")


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the fresh venv's bin folder, an empty working folder outside the checkout)."""
    scratch = tmp_path_factory.mktemp("installed")
    # Without a pip of its own, filled by this one's (--python), not byte-compiled ahead: the venv's ensurepip and the
    # compiling of every module took 10 of the fixture's 13 s, and the tests import a few of those modules.
    made = run([sys.executable, "-m", "venv", "--without-pip", str(scratch / "venv")], scratch)
    assert made.returncode == 0, made.stderr
    bin_folder = scratch / "venv" / "bin"
    installing = ["--python", str(bin_folder / "python"), "install", "--quiet", "--no-compile", "--disable-pip-version-check"]
    pip = run([sys.executable, "-m", "pip", *installing, str(wheel), "pytest"], scratch, timeout=600)
    assert pip.returncode == 0, pip.stderr
    elsewhere = scratch / "elsewhere"
    elsewhere.mkdir()
    return bin_folder, elsewhere


def test_the_installed_package_is_not_the_checkout(installed: tuple[Path, Path]) -> None:
    bin_folder, elsewhere = installed
    done = run(
        [str(bin_folder / "python"), "-c", "import prefixspec.spec, prefixspec.impl; print(prefixspec.__file__, prefixspec.spec.__file__, prefixspec.impl.__file__)"],
        elsewhere,
    )
    assert done.returncode == 0, done.stderr
    assert str(ROOT) not in done.stdout and "site-packages" in done.stdout
    for generic in ("spec", "impl"):
        absent = run([str(bin_folder / "python"), "-c", f"import {generic}"], elsewhere)
        assert absent.returncode == 1 and "ModuleNotFoundError" in absent.stderr, generic


def test_check_passes_installed(installed: tuple[Path, Path]) -> None:
    bin_folder, elsewhere = installed
    # Every stage runs, installed; --steps keeps the engine machine's examples short (the checkout's own tests run them in full).
    done = run([str(bin_folder / "prefixspec"), "check", "--steps", "500", "--quiet", "--out", "cx"], elsewhere)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "result: PASSED" in done.stdout
    assert list((elsewhere / "cx").glob("*")) == [], "a run that passes writes no counterexample"
    assert not (elsewhere / ".hypothesis").exists(), "a ci run leaves no .hypothesis/ behind"


def test_hunt_finds_the_shipped_catalogue(installed: tuple[Path, Path]) -> None:
    bin_folder, elsewhere = installed
    done = run([str(bin_folder / "prefixspec"), "hunt", "--mutant", "s01", "--quiet", "--out", "hunted"], elsewhere)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 of 1 mutants killed" in done.stdout
    replayed = run([str(bin_folder / "prefixspec"), "replay", "hunted/s01.trace", "--target", "prefixspec.impl:RadixCache"], elsewhere)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr


def test_replay_of_the_shipped_golden_trace(installed: tuple[Path, Path]) -> None:
    bin_folder, elsewhere = installed
    where = run([str(bin_folder / "python"), "-c", "from prefixspec.shipped import GOLDEN_TRACE; print(GOLDEN_TRACE)"], elsewhere)
    golden = where.stdout.strip()
    assert "site-packages" in golden, where.stderr
    done = run([str(bin_folder / "prefixspec"), "replay", golden, "--target", "prefixspec.impl:RadixCache"], elsewhere)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "442 calls replayed" in done.stdout


def test_a_pytest_file_of_the_users_own(installed: tuple[Path, Path]) -> None:
    bin_folder, elsewhere = installed
    (elsewhere / "test_my_cache.py").write_text(
        textwrap.dedent(
            """
            from hypothesis import settings
            from prefixspec import conformance_suite
            from prefixspec.impl import RadixCache

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


@pytest.mark.parametrize(("command", "words"), [("bench", "source checkout"), ("crosshair", "needs CrossHair: pip install crosshair-tool")])
def test_checkout_commands_say_so_in_one_line(installed: tuple[Path, Path], command: str, words: str) -> None:
    bin_folder, elsewhere = installed
    done = run([str(bin_folder / "prefixspec"), command], elsewhere)
    assert done.returncode == 2
    assert words in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


# The README's pytest file in a project of its own (make installed, make deep) -----------------------------------

CACHES = {
    "correct": """
        from prefixspec.impl import RadixCache


        def make_cache(block_size):
            return RadixCache(block_size)
        """,
    "broken": """
        from prefixspec.impl import RadixCache


        class LockPinsNothing(RadixCache):
            def lock(self, node):
                return None  # the seed's s07: a running request's blocks can be evicted under it


        def make_cache(block_size):
            return LockPinsNothing(block_size)
        """,
}


def readme_pytest_file() -> str:
    """The pytest file README gives, as it stands there."""
    found = re.search(r"```python\n(# tests/test_prefix_cache_conformance\.py\n.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), re.DOTALL)
    assert found is not None, "README has no pytest file headed # tests/test_prefix_cache_conformance.py"
    return found[1]


@pytest.mark.deep
@pytest.mark.parametrize("cache", sorted(CACHES))
def test_the_readme_pytest_file_in_a_project_of_its_own(installed: tuple[Path, Path], cache: str, tmp_path: Path) -> None:
    """README's three lines, unchanged, in a scratch project with a cache package of its own, run by pytest under no
    profile of its own: the package's ci profile applies.  The correct cache passes every stage; the broken one fails
    each core stage with a short counterexample and a replay line that names its factory.  The time is printed, not
    held to a budget (a loaded machine is slow)."""
    bin_folder, _ = installed
    project = tmp_path / "project"
    (project / "mypkg").mkdir(parents=True)
    (project / "tests").mkdir()
    (project / "mypkg" / "__init__.py").write_text("")
    (project / "mypkg" / "cache.py").write_text(textwrap.dedent(CACHES[cache]))
    (project / "tests" / "test_prefix_cache_conformance.py").write_text(readme_pytest_file())
    started = time.perf_counter()
    done = run([str(bin_folder / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"], project, timeout=3600)
    seconds = time.perf_counter() - started
    output = done.stdout + done.stderr
    lengths = [int(found) for found in re.findall(r"counterexample \((\d+) calls\)", output)]
    print(f"\nthe README's pytest file on the {cache} cache: exit {done.returncode} in {seconds:.1f} s; counterexamples of {lengths} calls")
    if cache == "correct":
        assert done.returncode == 0, output
        assert "5 passed" in output, output
    else:
        assert done.returncode == 1, output
        for stage in ("test_golden_trace", "test_call_machine", "test_engine_machine"):
            assert f"TestPrefixCacheConformance::{stage}" in output, output
        assert len(lengths) >= 3 and max(sorted(lengths)[:3]) <= 5, output
        assert "--target mypkg.cache:make_cache" in output and "MODULE:FACTORY" not in output, output

"""``import prefixspec`` loads only what its caller uses: the package face is lazy (PEP 562 ``__getattr__``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def modules_loaded_by(statement: str) -> list[str]:
    """The modules a fresh interpreter loads for ``statement``, beyond those it starts with."""
    program = f"import sys; before = set(sys.modules); {statement}; print(__import__('json').dumps(sorted(set(sys.modules) - before)))"
    done = subprocess.run([sys.executable, "-c", program], cwd=ROOT, capture_output=True, text=True, timeout=600, check=True)  # a hang guard, not a budget
    loaded: list[str] = json.loads(done.stdout)
    return loaded


def ours(modules: list[str]) -> list[str]:
    return [name for name in modules if name.split(".")[0] in ("prefixspec", "spec", "impl")]


def test_the_vocabulary_alone_loads_no_hypothesis_and_no_checker() -> None:
    loaded = modules_loaded_by("import prefixspec.vocabulary")
    assert not [name for name in loaded if name.split(".")[0] == "hypothesis"]
    beyond = [name for name in ours(loaded) if not name.startswith(("prefixspec.vocabulary.", "spec.api_"))]
    assert beyond == ["prefixspec", "prefixspec.vocabulary", "spec", "spec.api"]
    assert len(loaded) < 80, loaded  # 271 modules (79 of Hypothesis) when the face imported the stages eagerly


def test_the_package_alone_loads_itself() -> None:
    assert ours(modules_loaded_by("import prefixspec")) == ["prefixspec"]


def test_the_face_loads_the_checker_when_read() -> None:
    loaded = modules_loaded_by("from prefixspec import conformance_suite, RunPlan, run_check")
    assert "prefixspec.running.pytest_suite" in loaded and "hypothesis" in loaded


def test_the_face_says_what_it_has() -> None:
    import prefixspec

    assert {"conformance_suite", "RunPlan", "run_check"} <= set(dir(prefixspec))
    assert prefixspec.conformance_suite is __import__("prefixspec.running.pytest_suite", fromlist=["x"]).conformance_suite
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        getattr(prefixspec, "nothing_here")

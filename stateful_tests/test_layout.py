"""The layout: three packages, imports running one way, no circles, and nobody reading the spec's state.

- ``spec`` (the definition) imports nothing of the others;
- ``impl`` imports the interface modules alone (``spec.api`` and the ``spec.api_*`` it re-exports);
- ``prefixspec`` (the checker) imports ``spec`` and ``impl``, and within itself
  runs in layers: vocabulary < formats < targets < compare < drive < running < commands;
- ``bench`` (the benchmarks) may import the three, never ``examples``;
- ``examples`` (adapters and engines a user copies) may import anything; nothing imports them.

Every import counts, also one inside a function.  The checks are functions of
an import graph, so each is shown failing on a graph with a planted arrow.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("spec", "impl", "prefixspec", "bench", "examples")

LAYERS: dict[str, int] = {
    "prefixspec.errors": 0,
    "prefixspec.exit_status": 0,
    "prefixspec.shipped": 0,
    "prefixspec.vocabulary": 0,
    "prefixspec.formats": 1,
    "prefixspec.targets": 2,
    "prefixspec.compare": 3,
    "prefixspec.drive": 4,
    "prefixspec.running": 5,
    "prefixspec.commands": 6,
    "prefixspec.__main__": 6,
}
"""The checker's layers: a module imports only from its own layer or those below."""

Graph = dict[str, set[str]]


def module_files() -> dict[str, Path]:
    modules: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def import_graph(modules: dict[str, Path]) -> Graph:
    """Each project module and the project modules it imports (``from a import b`` counts a.b when b is a module)."""
    graph: Graph = {}
    for name, path in modules.items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            found: list[str] = []
            if isinstance(node, ast.Import):
                found = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found = [f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in modules else node.module for alias in node.names]
            targets.update(target for target in found if target.split(".")[0] in PACKAGES)
        graph[name] = targets
    return graph


def layer_of(module: str) -> int | None:
    for prefix, layer in LAYERS.items():
        if module == prefix or module.startswith(prefix + "."):
            return layer
    return None


def is_interface(module: str) -> bool:
    """``spec.api`` or one of the ``spec.api_*`` modules it is made of: what impl may import."""
    return module == "spec.api" or module.startswith("spec.api_")


def wrong_arrows(graph: Graph) -> list[str]:
    """Every import against the direction: spec -> nothing else, impl -> spec.api, prefixspec by layer."""
    wrong: list[str] = []
    for source, targets in graph.items():
        top = source.split(".")[0]
        for target in targets:
            target_top = target.split(".")[0]
            if target_top == "examples" and top != "examples":
                wrong.append(f"{source} -> {target}: nothing imports the examples")
            elif target_top == "bench" and top not in ("bench", "examples"):
                wrong.append(f"{source} -> {target}: only the examples import the benchmarks")
            elif top == "spec" and target_top != "spec":
                wrong.append(f"{source} -> {target}: spec imports nothing of the others")
            elif top == "impl" and target_top != "impl" and not is_interface(target):
                wrong.append(f"{source} -> {target}: impl imports the interface modules alone (spec.api, spec.api_*)")
            elif top == "prefixspec" and target_top == "prefixspec" and source != "prefixspec":
                source_layer, target_layer = layer_of(source), layer_of(target)
                if target == "prefixspec" or source_layer is None or target_layer is None or target_layer > source_layer:
                    wrong.append(f"{source} -> {target}: against the layers {list(LAYERS)}")
    return sorted(wrong)


def circles(graph: Graph) -> list[list[str]]:
    """Every import circle (as one path each), by an iterative depth-first search; a package's own modules excepted.

    A package's ``__init__`` importing its submodules is no circle: importing
    a submodule runs the package first, but never the other way round.
    """
    def edges(source: str) -> Iterable[str]:
        return (target for target in graph.get(source, ()) if not source.startswith(target + ".") and target in graph)

    found: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in sorted(graph):
        if start in state:
            continue
        path = [start]
        pending = [iter(sorted(edges(start)))]
        state[start] = 1
        while pending:
            following = next(pending[-1], None)
            if following is None:
                state[path.pop()] = 2
                pending.pop()
            elif state.get(following) == 1:
                found.append(path[path.index(following) :] + [following])
            elif following not in state:
                state[following] = 1
                path.append(following)
                pending.append(iter(sorted(edges(following))))
    return found


def test_imports_run_one_way() -> None:
    assert wrong_arrows(import_graph(module_files())) == []


def test_there_is_no_import_circle() -> None:
    assert circles(import_graph(module_files())) == []


def test_every_checker_module_has_a_layer() -> None:
    unplaced = [name for name in module_files() if name.startswith("prefixspec.") and layer_of(name) is None]
    assert unplaced == []


def test_the_checks_fail_on_planted_arrows() -> None:
    """Negative controls: each kind of wrong arrow and a circle are reported."""
    graph = import_graph(module_files())
    planted = {name: set(targets) for name, targets in graph.items()}
    planted["spec.model"].add("prefixspec.vocabulary")
    planted["impl.cache"].add("spec.arith")
    planted["impl.radix"].add("spec.apiary")
    planted["prefixspec.formats.trace"].add("prefixspec.compare.lockstep")
    planted["bench.run"].add("examples.sglang.adapter")
    planted["prefixspec.running.stages"].add("bench.workload")
    wrong = wrong_arrows(planted)
    assert any(line.startswith("spec.model -> prefixspec.vocabulary") for line in wrong)
    assert any(line.startswith("impl.cache -> spec.arith") for line in wrong)
    assert any(line.startswith("impl.radix -> spec.apiary") for line in wrong), "only spec.api and spec.api_* are the interface"
    assert any(line.startswith("prefixspec.formats.trace -> prefixspec.compare.lockstep") for line in wrong)
    assert any(line.startswith("bench.run -> examples.sglang.adapter") for line in wrong)
    assert any(line.startswith("prefixspec.running.stages -> bench.workload") for line in wrong)
    assert circles(planted), "trace -> lockstep -> trace is a circle"


def test_importing_impl_loads_neither_the_model_nor_the_arithmetic() -> None:
    code = "import impl, sys; loaded = [m for m in ('spec.model', 'spec.arith') if m in sys.modules]; print(loaded); sys.exit(bool(loaded))"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def spec_state() -> set[str]:
    """The attributes ``State.__init__`` (``spec/model/state.py``, the one ``__init__`` of SpecCache's classes) gives itself: the model's state."""
    tree = ast.parse((ROOT / "spec" / "model" / "state.py").read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "__init__":
            for target in ast.walk(node):
                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
                    names.add(target.attr)
    return names - {"root"}


def readers_of(state: set[str], folders: Iterable[str]) -> list[str]:
    """Every ``x._name`` (not ``self._name``) of the model's state, in a module that imports the model.

    impl's own tests read impl's fields, some of the same names; they never import the model.
    """
    readers: list[str] = []
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            if not any(isinstance(node, ast.ImportFrom) and node.module == "spec.model" for node in ast.walk(tree)):
                continue
            for node in ast.walk(tree):
                own = isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"
                if isinstance(node, ast.Attribute) and node.attr in state and not own:
                    readers.append(f"{path.relative_to(ROOT)}:{node.lineno} .{node.attr}")
    return readers


OUTSIDE_SPEC = ("prefixspec", "stateful_tests", "bench", "examples")


def test_nobody_outside_spec_reads_or_writes_the_models_state() -> None:
    state = spec_state()
    assert {"_block_at", "_last_use", "_own_locks"} <= state
    assert readers_of(state, OUTSIDE_SPEC) == []


def test_the_state_reader_check_finds_a_planted_reader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "planted"
    folder.mkdir()
    (folder / "reader.py").write_text("from spec.model import SpecCache\n\ndef peek(cache: SpecCache):\n    return cache._block_at\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert readers_of({"_block_at"}, ["planted"]) == ["planted/reader.py:4 ._block_at"]


LINE_LIMIT = 400
"""The most lines a module holds: a module longer than that holds more than one job (split it by its jobs)."""

LONG_MODULES: dict[str, str] = {}
"""Modules allowed past ``LINE_LIMIT``, each with its reason (none: every module keeps to one job)."""


def long_modules(sources: dict[str, str], allowed: dict[str, str]) -> list[str]:
    """Each module of ``sources`` (name -> text) longer than ``LINE_LIMIT`` lines and not ``allowed``."""
    return sorted(
        f"{name}: {len(text.splitlines())} lines" for name, text in sources.items() if len(text.splitlines()) > LINE_LIMIT and name not in allowed
    )


def project_sources() -> dict[str, str]:
    """The text of every Python module of the packages and of ``stateful_tests``, by its path."""
    sources: dict[str, str] = {}
    for folder in (*PACKAGES, "stateful_tests"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            sources[str(path.relative_to(ROOT))] = path.read_text(encoding="utf-8")
    return sources


def test_no_module_is_over_the_line_limit() -> None:
    sources = project_sources()
    assert "spec/model/state.py" in sources and "stateful_tests/test_layout.py" in sources
    assert long_modules(sources, LONG_MODULES) == []
    assert set(LONG_MODULES) <= set(sources), "an allowed module that is gone leaves the list"


def test_the_line_limit_check_finds_a_planted_long_module() -> None:
    """Negative control: a module one line past the limit is reported, one at it is not, and an allowed one is not."""
    planted = {"spec/long.py": "x = 1\n" * (LINE_LIMIT + 1), "spec/full.py": "x = 1\n" * LINE_LIMIT}
    assert long_modules(planted, {}) == [f"spec/long.py: {LINE_LIMIT + 1} lines"]
    assert long_modules(planted, {"spec/long.py": "a reason"}) == []

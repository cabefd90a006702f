"""``spec/README.md`` against the code: every name it gives under *Implements:* and *Pinned by:* exists,
and the modules of ``spec/model/``, read in the order their classes extend one another (the order the
package's docstring lists), have a section per rule, R1 to R13, in the order of the prose.

The checks are functions of texts, so each is shown failing on a planted wrong name or section.
"""

from __future__ import annotations

import ast
import fnmatch
import re
from collections.abc import Iterator
from pathlib import Path

import spec.api
import spec.arith
import spec.model

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "spec" / "README.md"
MODEL = ROOT / "spec" / "model"
RULES = tuple(f"R{number}" for number in range(1, 14))

FIELD = re.compile(r"\*(Implements|Pinned by):\*(.*?)(?=\n\s*\n|\n\*[A-Z]|\n#|\Z)", re.S)
QUOTED = re.compile(r"`([A-Za-z_][\w.*/:]*(?:\(\))?)`")
"""A quoted name: an identifier, a dotted name, a test glob, a path; code in backticks (``(namespace, tokens)``) is prose."""
SECTION = re.compile(r"^\s*# (R\d+)\b", re.M)
LISTED = re.compile(r"^\d+\. ``(\w+)``", re.M)
"""A module in the package docstring's numbered list."""


def model_modules() -> list[str]:
    """The modules of ``spec.model`` in reading order: the classes ``SpecCache`` extends, the first first, the package last."""
    chain = [cls.__module__ for cls in reversed(spec.model.SpecCache.__mro__) if cls.__module__.startswith("spec.model")]
    return list(dict.fromkeys(chain))


def path_of(module: str) -> Path:
    parts = module.split(".")
    return ROOT.joinpath(*parts, "__init__.py") if module == "spec.model" else ROOT.joinpath(*parts).with_suffix(".py")


def model_source(modules: list[str]) -> str:
    """The text of the modules, one after the other."""
    return "".join(path_of(module).read_text(encoding="utf-8") for module in modules)


def unread_or_unlisted(modules: list[str], files: list[str], docstring: str) -> list[str]:
    """The package's modules the chain leaves out, and where the docstring's list differs from the chain's order."""
    wrong = [f"spec/model/{file} is in no class of the chain" for file in files if file not in {path_of(module).name for module in modules}]
    chained = [module.rpartition(".")[2] for module in modules if module != "spec.model"]
    listed = LISTED.findall(docstring)
    if listed != chained:
        wrong.append(f"the package docstring lists {listed}, the classes run {chained}")
    return wrong


def fields(text: str) -> Iterator[tuple[str, str, list[str]]]:
    """Each *Implements:* and *Pinned by:* field: its rule (the ``## Rn`` heading above it), kind and quoted names."""
    for match in FIELD.finditer(text):
        heading = re.findall(r"^## (R\d+)\b", text[: match.start()], re.M)
        yield (heading[-1] if heading else "?"), match.group(1), QUOTED.findall(match.group(2))


def functions_of_tests() -> dict[str, set[str]]:
    """Every test function of ``stateful_tests``, by file name."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / "stateful_tests").rglob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found[path.name] = {
            node.name for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test")
        }
    return found


def source_words() -> set[str]:
    """Every identifier defined or assigned anywhere in the project's Python sources (for constants and rules of machines)."""
    words: set[str] = set()
    for folder in ("spec", "impl", "prefixspec", "stateful_tests"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    words.add(node.name)
                elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    words.add(node.id)
    return words


def implemented(name: str) -> bool:
    """A name of the definition: ``SpecCache.x``, a bare method of SpecCache, a function of the model, ``arith.x``, ``spec.api.X``,
    or a path of the repository."""
    name = name.removesuffix("()")
    if "/" in name:  # a module of the checker that implements the rule's comparison
        return (ROOT / name).exists()
    if name.startswith("spec.api."):
        return hasattr(spec.api, name.removeprefix("spec.api."))
    if name.startswith("arith."):
        return hasattr(spec.arith, name.removeprefix("arith."))
    if name.startswith("SpecCache."):
        name = name.removeprefix("SpecCache.")
    return hasattr(spec.model.SpecCache, name) or hasattr(spec.model, name) or hasattr(spec.api, name)


def pinned(name: str, tests: dict[str, set[str]], words: set[str]) -> bool:
    """A test (``file.py::test_x``, a glob ``test_r1_*``, ``test_x``), a path of the repository, or a name the sources define."""
    if "::" in name:
        file, _, pattern = name.partition("::")
        return any(fnmatch.fnmatch(test, pattern) for test in tests.get(file, ()))
    if "/" in name or name.endswith(".py"):
        return (ROOT / name).exists() or (ROOT / "stateful_tests" / name).exists()
    if name.startswith("test"):
        return any(fnmatch.fnmatch(test, name) for names in tests.values() for test in names)
    return name in words


def unknown_names(text: str) -> list[str]:
    tests, words = functions_of_tests(), source_words()
    unknown: list[str] = []
    for rule, kind, names in fields(text):
        for name in names:
            known = implemented(name) if kind == "Implements" else pinned(name, tests, words)
            if not known:
                unknown.append(f"{rule} {kind}: {name}")
    return unknown


def misplaced_sections(model_source: str, prose: str) -> list[str]:
    """The rules whose section is missing from the model, or out of the prose's order."""
    order = re.findall(r"^## (R\d+)\b", prose, re.M)
    sections = SECTION.findall(model_source)
    wrong = [f"{rule} has no section in spec/model/" for rule in order if rule not in sections]
    present = [rule for rule in sections if rule in order]
    if present != [rule for rule in order if rule in present]:
        wrong.append(f"the sections run {present}, the prose {order}")
    return wrong


def test_every_name_the_readme_gives_exists() -> None:
    text = README.read_text(encoding="utf-8")
    assert sum(len(names) for _, _, names in fields(text)) > 30, "the fields are read"
    assert unknown_names(text) == []


def test_the_model_has_a_section_per_rule_in_order() -> None:
    prose = README.read_text(encoding="utf-8")
    assert re.findall(r"^## (R\d+)\b", prose, re.M) == list(RULES)
    modules = model_modules()
    assert modules[0] == "spec.model.state" and modules[-1] == "spec.model"
    assert misplaced_sections(model_source(modules), prose) == []


def test_the_model_reads_every_module_of_the_package_in_the_listed_order() -> None:
    files = sorted(path.name for path in MODEL.glob("*.py"))
    assert unread_or_unlisted(model_modules(), files, spec.model.__doc__ or "") == []


def test_the_checks_fail_on_a_planted_wrong_name_and_section() -> None:
    """Negative controls: a method that is not there, a test that is not there, a section missing or moved."""
    planted = "## R3 X\n\n*Implements:* `SpecCache.no_such_call`, `arith.usable_prefix`.\n*Pinned by:* `test_no_such_test`, `test_errors.py::test_r1_*`.\n"
    assert unknown_names(planted) == ["R3 Implements: SpecCache.no_such_call", "R3 Pinned by: test_no_such_test"]
    prose = "## R1 a\n## R2 b\n## R3 c\n"
    assert misplaced_sections("# R1\n    # R3\n", prose) == ["R2 has no section in spec/model/"]
    assert misplaced_sections("# R1\n    # R3\n    # R2\n", prose) == ["the sections run ['R1', 'R3', 'R2'], the prose ['R1', 'R2', 'R3']"]


def test_the_package_checks_fail_on_modules_out_of_order_left_out_or_listed_wrong() -> None:
    """Negative controls: two modules read swapped, a module no class holds, the docstring's list out of order."""
    prose = README.read_text(encoding="utf-8")
    modules = model_modules()
    swapped = modules[:2] + [modules[3], modules[2]] + modules[4:]
    assert misplaced_sections(model_source(swapped), prose) == ["the sections run " + str(
        [rule for rule in SECTION.findall(model_source(swapped)) if rule in RULES]) + f", the prose {list(RULES)}"]
    files = sorted(path.name for path in MODEL.glob("*.py")) + ["stray.py"]
    docstring = spec.model.__doc__ or ""
    assert unread_or_unlisted(modules, files, docstring) == ["spec/model/stray.py is in no class of the chain"]
    moved = docstring.replace("1. ``state``", "1. ``contents``", 1)
    assert unread_or_unlisted(modules, files[:-1], moved)[0].startswith("the package docstring lists ['contents', 'contents'")

"""Planted bugs: a catalogue of exact source edits, each applied to a fresh copy of a package.

A catalogue is a TOML file (``catalogues/impl.toml`` for this project's
implementation)::

    package = "impl"            # the import package whose source is copied
    factory = "RadixCache"      # its attribute that makes a cache: factory(block_size), or
                                # factory(block_size, rules=R) under a run's rule set R (below)

    [[mutant]]
    id = "s07"
    bug = "a lock that pins nothing"
    file = "radix.py"           # relative to the package's folder
    find = "..."                # must occur exactly once in that file
    replace = "..."
    killed_by = ["a_locked_prefix_survives_eviction"]   # seed tests that must kill it

A mutant is never a flag or a branch in the production code: its package is
read from disk, the one edit applied, the package's own absolute imports
pointed at the copy, and the copy imported under a private name, so the real
package in ``sys.modules`` is untouched and many mutants live side by side.

A mutant is checked under the rule set of its run (``hunt --rules``, and ``check`` or ``replay`` of a
``CATALOGUE#ID`` target with ``--rules``): a factory with a parameter named ``rules``, as ``impl.RadixCache``,
makes its caches under it (``factory(block_size, rules=R)``; under strict, ``factory(block_size)``), so one
catalogue plants its bugs in every rule set the package implements; any other factory makes the cache it
makes, which the run holds to R.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import inspect
import itertools
import re
import sys
import tomllib
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from spec.api import CacheFactory, PrefixCache, Rules
from prefixspec.errors import TargetError, os_error_words
from prefixspec.formats.trace import decode_trace
from prefixspec.shipped import IMPL_CATALOGUE, definition_module
from prefixspec.vocabulary import TraceFormatError

DEFAULT_CATALOGUE = IMPL_CATALOGUE

_copies = itertools.count(1)


class CatalogueError(TargetError):
    """A catalogue that cannot be read, or an edit that no longer applies exactly once."""


@dataclass(frozen=True)
class Mutant:
    """One planted bug: an exact edit of one file of the package."""

    id: str
    bug: str
    file: str
    find: str
    replace: str
    killed_by: tuple[str, ...]


@dataclass(frozen=True)
class Catalogue:
    """The mutants of one package, and where its source lives."""

    path: Path
    package: str
    factory: str
    mutants: tuple[Mutant, ...]

    def package_folder(self) -> Path:
        """The folder of the package's source, found without importing the package."""
        try:
            found = importlib.util.find_spec(self.package)
        except (ImportError, ValueError) as error:  # a parent package that is missing, or a name no import can have
            raise CatalogueError(f"{self.path}: package {self.package!r} cannot be found ({type(error).__name__}: {error})") from None
        if found is None or not found.submodule_search_locations:
            raise CatalogueError(f"{self.path}: package {self.package!r} cannot be found")
        return Path(list(found.submodule_search_locations)[0])

    def mutant(self, mutant_id: str) -> Mutant:
        for mutant in self.mutants:
            if mutant.id == mutant_id:
                return mutant
        known = ", ".join(mutant.id for mutant in self.mutants)
        raise CatalogueError(f"{self.path}: no mutant {mutant_id!r} (known: {known})")

    def occurrences(self, mutant: Mutant) -> int:
        """How often the mutant's ``find`` text occurs in its file now."""
        return (self.package_folder() / mutant.file).read_text(encoding="utf-8").count(mutant.find)


def read_catalogue(path: Path) -> Catalogue:
    """A catalogue file, checked for shape; CatalogueError names what is wrong."""
    try:
        document = tomllib.loads(decode_trace(path.read_bytes()))  # UTF-8, or an error naming the line
    except OSError as error:
        raise CatalogueError(f"cannot read catalogue {path}: {error.strerror or os_error_words(error)}") from None
    except (tomllib.TOMLDecodeError, TraceFormatError) as error:
        raise CatalogueError(f"cannot read catalogue {path}: {error}") from None
    package, factory, entries = document.get("package"), document.get("factory"), document.get("mutant", [])
    if not isinstance(package, str) or not isinstance(factory, str) or not isinstance(entries, list):
        raise CatalogueError(f"{path}: needs package = \"...\", factory = \"...\" and [[mutant]] tables")
    mutants: list[Mutant] = []
    for number, entry in enumerate(entries, start=1):
        fields = ("id", "bug", "file", "find", "replace")
        if not isinstance(entry, dict) or not all(isinstance(entry.get(name), str) for name in fields):
            raise CatalogueError(f"{path}: mutant {number} needs the text fields {', '.join(fields)}")
        killed_by = entry.get("killed_by", [])
        if not isinstance(killed_by, list) or not all(isinstance(name, str) for name in killed_by):
            raise CatalogueError(f"{path}: mutant {entry['id']}: killed_by must be a list of test names")
        mutants.append(Mutant(entry["id"], entry["bug"], entry["file"], entry["find"], entry["replace"], tuple(killed_by)))
    repeated = sorted(name for name, count in Counter(mutant.id for mutant in mutants).items() if count > 1)
    if repeated:  # named: a catalogue of dozens of mutants is edited by hand
        raise CatalogueError(f"{path}: mutant ids repeat: {', '.join(repeated)} (each names one mutant: --mutant ID, the table)")
    if path.resolve() == IMPL_CATALOGUE.resolve():
        package = definition_module(package)  # the shipped catalogue's "impl" is prefixspec.impl once installed
    return Catalogue(path, package, factory, tuple(mutants))


class _SourcePackage(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves a package, under a private name, from source text held in memory."""

    def __init__(self, alias: str, sources: dict[str, str], origin: str) -> None:
        self.alias = alias
        self.sources = sources  # module path within the package ("" for __init__) -> source
        self.origin = origin

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.alias and not fullname.startswith(self.alias + "."):
            return None
        inner = fullname[len(self.alias) + 1 :]
        if inner not in self.sources:
            return None
        return importlib.util.spec_from_loader(fullname, self, is_package=inner == "")

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        inner = module.__name__[len(self.alias) + 1 :]
        filename = f"<{self.origin}>/{inner.replace('.', '/') or '__init__'}.py"
        exec(compile(self.sources[inner], filename, "exec"), module.__dict__)


def mutated_sources(catalogue: Catalogue, mutant: Mutant | None, alias: str) -> dict[str, str]:
    """Every module of the package as source, the mutant's edit applied, imports pointed at ``alias``."""
    folder = catalogue.package_folder()
    if mutant is not None and not (folder / mutant.file).is_file():
        raise CatalogueError(f"{catalogue.path}: mutant {mutant.id}: no file {catalogue.package}/{mutant.file}")
    own_import = re.compile(rf"^(\s*(?:from|import)\s+){re.escape(catalogue.package)}(?=[\s.])", re.MULTILINE)
    sources: dict[str, str] = {}
    applied = False
    for file in sorted(folder.rglob("*.py")):
        relative = file.relative_to(folder)
        source = file.read_text(encoding="utf-8")
        if mutant is not None and relative.as_posix() == mutant.file:
            count = source.count(mutant.find)
            if count != 1:
                raise CatalogueError(
                    f"{catalogue.path}: mutant {mutant.id}: its edit occurs {count} times in "
                    f"{catalogue.package}/{mutant.file}, not exactly once: update the catalogue"
                )
            source = source.replace(mutant.find, mutant.replace)
        parts = list(relative.with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        sources[".".join(parts)] = own_import.sub(rf"\g<1>{alias}", source)
        applied = applied or (mutant is not None and relative.as_posix() == mutant.file)
    if mutant is not None and not applied:  # `../other/cache.py` exists, but is no module of the package: nothing would be planted
        raise CatalogueError(
            f"{catalogue.path}: mutant {mutant.id}: {mutant.file} is not a module of package {catalogue.package} "
            f"(give its path inside {folder}, as a .py file)"
        )
    return sources


def load_mutant(catalogue: Catalogue, mutant: Mutant | None, rules: Rules | None = None) -> CacheFactory:
    """The cache factory of a fresh copy of the package with ``mutant`` applied (None: unmutated).

    With ``rules``, a factory that has a parameter named ``rules`` (``impl.RadixCache``) is called as
    ``factory(block_size, rules=rules)``; one without it as ``factory(block_size)``: it has no rule set to take.
    """
    label = mutant.id if mutant is not None else "original"
    alias = f"_prefixspec_mutant_{re.sub(r'[^A-Za-z0-9_]', '_', label)}_{next(_copies)}"
    finder = _SourcePackage(alias, mutated_sources(catalogue, mutant, alias), f"mutant {label} of {catalogue.package}")
    sys.meta_path.insert(0, finder)
    try:
        module = importlib.import_module(alias)
    except Exception as error:  # an edit that breaks the module's import is a catalogue problem
        raise CatalogueError(f"{catalogue.path}: mutant {label} does not import: {type(error).__name__}: {error}") from None
    finally:
        sys.meta_path.remove(finder)
    factory = getattr(module, catalogue.factory, None)
    if not callable(factory):
        raise CatalogueError(f"{catalogue.path}: {catalogue.package} has no callable {catalogue.factory!r}")
    if rules is None or not takes_rules(factory):
        checked: CacheFactory = factory
        return checked
    ruled: Callable[..., PrefixCache] = factory
    return lambda block_size: ruled(block_size, rules=rules)


def takes_rules(factory: Callable[..., object]) -> bool:
    """Whether ``factory`` has a parameter named ``rules`` (a signature that cannot be read has none)."""
    try:
        return "rules" in inspect.signature(factory).parameters
    except (TypeError, ValueError):  # a builtin, or a callable whose signature cannot be read
        return False


def load_mutant_target(target: str, rules: Rules | None = None) -> CacheFactory:
    """A ``CATALOGUE#ID`` target (``catalogues/impl.toml#s07``) as a cache factory, its caches made under ``rules``
    as the hunt makes them (``mutant_rules``): so the replay line of a mutant hunted under ``--rules`` reproduces
    the hunt's failure, and not the failure of a cache made under strict against a spec under other rules."""
    path, _, mutant_id = target.rpartition("#")
    catalogue = read_catalogue(Path(path) if path else DEFAULT_CATALOGUE)
    return load_mutant(catalogue, catalogue.mutant(mutant_id), mutant_rules(rules))


def mutant_rules(rules: Rules | None) -> Rules | None:
    """The rule set a catalogue's factory is called with, ``factory(block_size, rules)``, when a mutant is checked
    under ``rules``: none under strict (the seed's catalogue factories take the block size alone)."""
    return None if rules is None or rules == Rules() else rules

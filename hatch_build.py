"""The wheel's layout: one top-level package, ``prefixspec``, with the definition and the fast cache inside it.

A checkout keeps ``spec/`` (the definition) and ``impl/`` (the fast cache) at
its top, beside ``prefixspec/``, and imports them as ``spec`` and ``impl``.
Installed under those names they would claim two generic top-level names in
every environment the checker is installed into (and overwrite a ``spec``
package of another distribution).  So the wheel puts them at
``prefixspec/spec/`` and ``prefixspec/impl/``, and this hook writes every
module of the three packages with its absolute imports of ``spec`` and
``impl`` pointed there: ``from spec.api import X`` becomes ``from
prefixspec.spec.api import X`` and ``import spec`` becomes ``from prefixspec
import spec``.  Nothing else is changed; names the code computes at run time
(the default target, the shipped catalogue's package) come from
``prefixspec.shipped.definition_module``.  An import of another form (``import
spec.api``, ``import impl as x``) fails the build rather than ship a module
that would import the wrong thing.

An editable install (``pip install -e .``, what ``make`` does) is the checkout
itself and is left as it is.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

PACKAGES = ("prefixspec", "spec", "impl")
"""The checkout's packages, each copied whole into the wheel."""

MOVED = ("spec", "impl")
"""The packages the wheel puts under ``prefixspec/``."""

_FROM = re.compile(r"^(?P<indent>[ \t]*)from[ \t]+(?P<package>spec|impl)(?P<rest>(?:\.\w+)*[ \t]+import\b)", re.MULTILINE)
_IMPORT = re.compile(r"^(?P<indent>[ \t]*)import[ \t]+(?P<package>spec|impl)[ \t]*(?:#.*)?$", re.MULTILINE)
_ANY_IMPORT = re.compile(r"^[ \t]*(?:import[ \t]+(?:spec|impl)\b|from[ \t]+(?:spec|impl)\b)", re.MULTILINE)


class ImportForm(ValueError):
    """An import of ``spec`` or ``impl`` that the rewrite does not handle."""


def installed_source(text: str, where: str = "<source>") -> str:
    """``text`` (a module's source) with its absolute imports of ``spec`` and ``impl`` pointed under ``prefixspec``."""
    rewritten = _FROM.sub(r"\g<indent>from prefixspec.\g<package>\g<rest>", text)
    rewritten = _IMPORT.sub(r"\g<indent>from prefixspec import \g<package>", rewritten)
    left = _ANY_IMPORT.search(rewritten)
    if left is not None:
        number = rewritten.count("\n", 0, left.start()) + 1
        line = rewritten.splitlines()[number - 1].strip()
        raise ImportForm(f"{where}:{number}: `{line}` cannot be pointed under prefixspec: write `from spec... import` or `import spec`")
    return rewritten


def wheel_path(relative: Path) -> str:
    """Where a file of the checkout (``spec/api.py``) goes in the wheel (``prefixspec/spec/api.py``)."""
    return ("prefixspec/" if relative.parts[0] in MOVED else "") + relative.as_posix()


class WheelLayout(BuildHookInterface):  # type: ignore[type-arg]
    """Writes the three packages into a scratch folder, imports rewritten, and has the wheel take them from there."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or version == "editable":
            return
        root = Path(self.root)
        self._scratch = Path(tempfile.mkdtemp(prefix="prefixspec-wheel-"))
        for package in PACKAGES:
            for file in sorted((root / package).rglob("*")):
                relative = file.relative_to(root)
                if not file.is_file() or "__pycache__" in relative.parts:
                    continue
                target = self._scratch / wheel_path(relative)
                target.parent.mkdir(parents=True, exist_ok=True)
                if file.suffix == ".py":
                    target.write_text(installed_source(file.read_text(encoding="utf-8"), relative.as_posix()), encoding="utf-8")
                else:
                    shutil.copyfile(file, target)
                build_data["force_include"][str(target)] = wheel_path(relative)

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        scratch = getattr(self, "_scratch", None)
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)

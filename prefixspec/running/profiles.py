"""Hypothesis settings profiles of the package: ``ci`` (reproducible, a few minutes), ``deep`` (long), ``dev``.

The profiles belong to the package, not to a test suite's conftest: every
entry point (``prefixspec check``, ``hunt``, ``identify`` and
``conformance_suite`` in a user's own project) takes ``ci`` unless a profile
is named, by argument or by ``HYPOTHESIS_PROFILE``.  They are built from
Hypothesis's own ``default`` profile and held here, never registered with
Hypothesis on import: a user's project that registers or loads a ``ci`` of its
own keeps it, and the settings of the user's other Hypothesis tests are not
changed by importing the checker.  ``load_profile`` (for a command's process,
or this repository's test suite) registers and loads one.

``deadline`` is off in every profile because one example runs thousands of
engine steps, whose time grows with the step count, not with a regression.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

from hypothesis import HealthCheck, settings
from hypothesis.configuration import set_hypothesis_home_dir
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.errors import InvalidArgument

from prefixspec.errors import UsageError

PROFILE_ENV = "HYPOTHESIS_PROFILE"
PROFILES = ("ci", "deep", "dev")
DEFAULT_PROFILE = "ci"
PROFILE_HELP = f"Hypothesis profile: ci (reproducible, minutes), deep (long) or dev (a handful of examples); default {PROFILE_ENV}, else ci"

# A single engine example legitimately takes seconds, far past the 1 s that
# too_slow allows, and the macro-step rules draw seeds, not large data.
_SLOW_BY_DESIGN = [HealthCheck.too_slow]

_BASE = settings.get_profile("default")
"""Hypothesis's own defaults, whatever profile the process has loaded: the profiles mean the same everywhere."""

PROFILE_SETTINGS: dict[str, settings] = {
    "ci": settings(
        _BASE,
        max_examples=12,
        derandomize=True,
        database=None,
        deadline=None,
        print_blob=True,
        suppress_health_check=_SLOW_BY_DESIGN,
    ),
    "deep": settings(
        _BASE,
        max_examples=1000,
        database=DirectoryBasedExampleDatabase(".hypothesis/examples"),
        deadline=None,
        print_blob=True,
        suppress_health_check=_SLOW_BY_DESIGN,
    ),
    "dev": settings(
        _BASE,
        max_examples=6,
        deadline=None,
        suppress_health_check=_SLOW_BY_DESIGN,
    ),
}
"""Each profile's settings, by name."""


class UnknownProfile(UsageError, ValueError):
    """A profile name that is neither one of ``PROFILES`` nor one the caller registered with Hypothesis (one line, exit 2)."""


def chosen_profile(name: str | None = None) -> str:
    """``name``, else the one ``HYPOTHESIS_PROFILE`` names, else ``ci``."""
    return name or os.environ.get(PROFILE_ENV) or DEFAULT_PROFILE


def profile_settings(name: str | None = None) -> tuple[str, settings]:
    """The chosen profile (``chosen_profile``) and its settings, without loading it into Hypothesis.

    A name of ``PROFILES`` is the package's profile; any other name must be a
    profile the caller registered with Hypothesis (``settings.register_profile``),
    whose settings are then used as they are.
    """
    chosen = chosen_profile(name)
    if chosen in PROFILE_SETTINGS:
        return chosen, PROFILE_SETTINGS[chosen]
    try:
        return chosen, settings.get_profile(chosen)
    except InvalidArgument:  # a name never registered
        source = f"{PROFILE_ENV}={chosen}" if not name else repr(chosen)
        raise UnknownProfile(
            f"unknown Hypothesis profile {source}: choose one of {', '.join(PROFILES)}, or register it with hypothesis.settings.register_profile"
        ) from None


def load_profile(name: str | None = None) -> str:
    """Register and load the chosen profile of ``PROFILES`` into Hypothesis, for a whole process; returns its name.

    For a command's process and this repository's test suite; a user's tests
    get the profile through ``conformance_suite`` instead, which loads nothing.
    """
    chosen = chosen_profile(name)
    if chosen not in PROFILES:
        raise UnknownProfile(f"unknown profile {chosen!r}: choose one of {', '.join(PROFILES)}")
    settings.register_profile(chosen, PROFILE_SETTINGS[chosen])
    settings.load_profile(chosen)
    if settings().database is None:
        keep_no_storage_behind()
    return chosen


_scratch: list[str] = []


def scratch_storage() -> str:
    """This process's folder for Hypothesis's storage, made on first use and removed when the process exits.

    A process that forks a supervised child makes it first (``run_supervised``):
    the child inherits it and ends with ``os._exit`` (or by its target's hand),
    which runs no exit handler, so only the parent can remove it.
    """
    if not _scratch:
        _scratch.append(tempfile.mkdtemp(prefix="prefixspec-hypothesis-"))
        atexit.register(shutil.rmtree, _scratch[0], True)
    return _scratch[0]


def keep_no_storage_behind() -> None:
    """Point Hypothesis's storage (its cache of the constants in the source) at ``scratch_storage()``.

    A profile without an example database promises to leave nothing behind:
    without this, every run writes ``.hypothesis/constants`` into the working
    directory.
    """
    set_hypothesis_home_dir(scratch_storage())

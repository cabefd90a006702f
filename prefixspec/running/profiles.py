"""Hypothesis settings profiles: ``ci`` (reproducible, a few minutes), ``deep`` (long), ``dev``.

One environment variable, ``HYPOTHESIS_PROFILE``, selects the profile for the
test suite; ``prefixspec check --profile`` selects it for the command line.
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

PROFILE_ENV = "HYPOTHESIS_PROFILE"
PROFILES = ("ci", "deep", "dev")
DEFAULT_PROFILE = "dev"

# A single engine example legitimately takes seconds, far past the 1 s that
# too_slow allows, and the macro-step rules draw seeds, not large data.
_SLOW_BY_DESIGN = [HealthCheck.too_slow]

settings.register_profile(
    "ci",
    max_examples=12,
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=True,
    suppress_health_check=_SLOW_BY_DESIGN,
)
settings.register_profile(
    "deep",
    max_examples=1000,
    database=DirectoryBasedExampleDatabase(".hypothesis/examples"),
    deadline=None,
    print_blob=True,
    suppress_health_check=_SLOW_BY_DESIGN,
)
settings.register_profile(
    "dev",
    max_examples=6,
    deadline=None,
    suppress_health_check=_SLOW_BY_DESIGN,
)


def load_profile(name: str | None = None) -> str:
    """Load ``name``, else the one ``HYPOTHESIS_PROFILE`` names, else ``dev``; returns its name."""
    chosen = name or os.environ.get(PROFILE_ENV) or DEFAULT_PROFILE
    if chosen not in PROFILES:
        raise ValueError(f"unknown profile {chosen!r}: choose one of {', '.join(PROFILES)}")
    settings.load_profile(chosen)
    if settings().database is None:
        keep_no_storage_behind()
    return chosen


_scratch: list[str] = []


def keep_no_storage_behind() -> None:
    """Point Hypothesis's storage (its cache of the constants in the source) at a folder removed at exit.

    A profile without an example database promises to leave nothing behind:
    without this, every run writes ``.hypothesis/constants`` into the working
    directory.
    """
    if _scratch:
        return
    _scratch.append(tempfile.mkdtemp(prefix="prefixspec-hypothesis-"))
    set_hypothesis_home_dir(_scratch[0])
    atexit.register(shutil.rmtree, _scratch[0], True)

"""The check's stages run on impl once per test process and read by every test that asserts something of the same run.

A test that reads a shared run carries ``SHARED_RUNS`` (one xdist group), so that under ``-n`` the runs it shares
are made once, on one worker: the ci call machine and the extremes stage were each run twice by ``make test``, by
tests that ask different questions of one derandomized run.
"""

from __future__ import annotations

import functools
import os

import pytest

import impl
from prefixspec.running.profiles import PROFILE_ENV
from prefixspec.running.report import StageResult
from prefixspec.running.stages import RunPlan, run_stage

SUITE_PROFILE = os.environ.get(PROFILE_ENV) or "dev"
"""The profile this suite runs in: ``HYPOTHESIS_PROFILE`` (``make test`` exports ``ci``), else dev (a handful of examples)."""

SHARED_RUNS = pytest.mark.xdist_group("stages on impl")


@functools.cache
def stage_on_impl(name: str, profile: str) -> StageResult:
    """The stage ``name`` on ``impl.RadixCache`` under ``profile``'s plan (``RunPlan.of_profile``), run once a process.

    Readers share the result: none may change it."""
    return run_stage(name, impl.RadixCache, RunPlan.of_profile(profile))

"""Engines driven over the line protocol (docs/protocol.md): the spec served as an engine, and misbehaving ones."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SERVE = f"cd {shlex.quote(str(ROOT))} && exec {shlex.quote(sys.executable)} -m stateful_tests.engines.serve"
"""The spec served as an engine in Python (``stateful_tests/engines/serve.py``), as a shell command."""

CALL_LIMIT = "2"
"""``--timeout`` of the suite's engine cases, a call's limit apart from the start's (``--start-timeout``): a hang
in a call costs a case these seconds, and serve.py answers a good call in milliseconds, loaded or not."""

"""A commit checked out beside this tree, for a benchmark that runs both side by side."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
"""This tree."""


@contextmanager
def checked_out(revision: str) -> Iterator[Path]:
    """``revision`` checked out (``git worktree add --detach``) in a scratch folder, removed at the end."""
    scratch = Path(tempfile.mkdtemp(prefix="prefixspec-against-"))
    base = scratch / "tree"
    subprocess.run(["git", "-C", str(HERE), "worktree", "add", "--detach", str(base), revision], check=True, capture_output=True)
    try:
        yield base
    finally:
        subprocess.run(["git", "-C", str(HERE), "worktree", "remove", "--force", str(base)], check=False, capture_output=True)
        shutil.rmtree(scratch, ignore_errors=True)

"""The Rust example engine (examples/rust/) as a Python cache factory, so that ``prefixspec hunt`` can take its bugs.

``prefixspec hunt examples/rust/mutants.toml`` plants each catalogued bug by
an exact edit of ``PLANTED_BUG`` below, in a fresh copy of this package; the
copy's factory starts the engine with ``PREFIXCACHE_BUG`` set to it, and the
engine's Rust code takes the planted branch.  The engine must be built first::

    cargo build --release --offline --manifest-path examples/rust/Cargo.toml
"""

from __future__ import annotations

import shlex
from pathlib import Path

import spec
from prefixspec.targets.pipe import PipeCache, PipeEngine

BINARY = Path(spec.__file__).resolve().parent.parent / "examples" / "rust" / "target" / "release" / "prefixcache"

PLANTED_BUG = ""
"""The bug the engine plants (its PREFIXCACHE_BUG); empty for none. The catalogue's mutants edit this line."""

if not BINARY.is_file():
    raise RuntimeError(f"the Rust example engine is not built: run cargo build --release --offline --manifest-path {BINARY.parents[2] / 'Cargo.toml'}")

ENGINE = PipeEngine(f"PREFIXCACHE_BUG={shlex.quote(PLANTED_BUG)} exec {shlex.quote(str(BINARY))}")


def factory(block_size: int) -> PipeCache:
    """A fresh cache of the engine, over the line protocol."""
    return ENGINE(block_size)

"""Engines driven over the line protocol (docs/protocol.md): the spec served as an engine, and misbehaving ones."""

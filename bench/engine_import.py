"""An engine's modules, imported once on first use, or the reason they cannot be imported here.

SGLang (``bench/sglang_loading.py``) and vLLM (``examples/vllm/loading.py``) are optional: ``make test``
runs without either, and their tests and adapters ask ``ImportOnce.get`` and skip or explain with
``ImportOnce.failure``.  An import that failed is not tried again (it costs seconds and fails the same way).
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Generic, TypeVar

Loaded = TypeVar("Loaded")


def quiet_imports(*names: str) -> list[ModuleType]:
    """The modules ``names``, imported with their import-time warnings silenced (engines warn of GPUs they lack)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [importlib.import_module(name) for name in names]


class ImportOnce(Generic[Loaded]):
    """``build()`` once, on the first ``get``; None from then on when it raised ImportError (``failure`` says why)."""

    def __init__(self, build: Callable[[], Loaded]) -> None:
        self.build = build
        self.loaded: Loaded | None = None
        self.failed: str | None = None

    def get(self) -> Loaded | None:
        if self.loaded is None and self.failed is None:
            try:
                self.loaded = self.build()
            except ImportError as error:
                self.failed = f"{type(error).__name__}: {error}"
        return self.loaded

    def failure(self) -> str:
        """Why ``get`` returned None; empty when it did not (or was not called yet)."""
        return self.failed or ""

"""Importing SGLang's radix cache without torchvision.

``sglang.srt.mem_cache.radix_cache`` pulls in SGLang's model configs, two of
which import torchvision at module level: ``sglang.srt.multimodal.internvl_utils``
and ``sglang.srt.configs.deepseek_ocr``.  torchvision is not installed on
purpose: its wheel pins a torch build of its own and would replace the CPU
torch with a CUDA build of several GB.  So ``load_sglang`` stands those two
modules in with placeholders (any name taken from them is an empty class)
before the import.  Neither is used by the radix cache.  ``make bench`` and
``make engines`` install SGLang this way into ``.venv-bench``.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from bench.engine_import import ImportOnce, quiet_imports

PLACEHOLDER_MODULES = ("sglang.srt.multimodal.internvl_utils", "sglang.srt.configs.deepseek_ocr")


class _Placeholder(types.ModuleType):
    """A module whose every attribute is an empty class (with the ``model_type``
    SGLang's config registry reads), standing in for a module that needs torchvision."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        value = type(name, (), {"__module__": self.__name__, "model_type": f"placeholder-{name}"})
        setattr(self, name, value)
        return value


class Sglang:
    """The SGLang names the adapters use, imported once."""

    def __init__(self) -> None:
        for name in PLACEHOLDER_MODULES:
            if name not in sys.modules:
                sys.modules[name] = _Placeholder(name)
        radix, base, init_params, sglang, torch = quiet_imports(
            "sglang.srt.mem_cache.radix_cache",
            "sglang.srt.mem_cache.base_prefix_cache",
            "sglang.srt.mem_cache.cache_init_params",
            "sglang",  # by name: mypy need not find SGLang or torch where they are absent
            "torch",
        )
        self.torch = torch
        self.RadixCache = radix.RadixCache
        self.RadixKey = radix.RadixKey
        self.TreeNode = radix.TreeNode
        self.CacheInitParams = init_params.CacheInitParams
        self.MatchPrefixParams = base.MatchPrefixParams
        self.InsertParams = base.InsertParams
        self.EvictParams = base.EvictParams
        self.base = base
        self.version = getattr(sglang, "__version__", "unknown")
        self.torch_version = torch.__version__


class SglangUnified(Sglang):
    """Beside ``Sglang``'s names, SGLang's ``UnifiedRadixCache`` (the server's default cache in 0.5.23,
    ``mem_cache/registry.py`` ``default_radix_cache_factory``) and the names its adapter uses.

    Its import reaches ``sglang.srt.server_args``, which needs ``openai`` and ``partial_json_parser``
    (``make .venv-bench`` installs both); the Rust TreeCore is imported on its first use, by
    ``rust_available``."""

    def __init__(self) -> None:
        super().__init__()
        unified, components = quiet_imports(
            "sglang.srt.mem_cache.unified_radix_cache", "sglang.srt.mem_cache.unified_cache.component_type"
        )
        self.UnifiedRadixCache = unified.UnifiedRadixCache
        self.ComponentType = components.ComponentType
        self.DecLockRefParams = self.base.DecLockRefParams
        self._rust_reason: str | None | bool = False  # False: not tried yet

    def rust_unavailable(self) -> str | None:
        """None when SGLang's Rust TreeCore imports here, else why not (the import's error)."""
        if self._rust_reason is False:
            try:
                quiet_imports("sglang.srt.mem_cache.rust_tree_core.adapter")
                self._rust_reason = None
            except Exception as error:  # a failed native import raises ImportError, OSError or RuntimeError
                self._rust_reason = f"{type(error).__name__}: {error}"
        reason = self._rust_reason
        return reason if isinstance(reason, str) else None


_SGLANG = ImportOnce(Sglang)
_UNIFIED = ImportOnce(SglangUnified)


def load_sglang() -> Sglang | None:
    """SGLang's RadixCache and friends, or None when SGLang cannot be imported here."""
    return _SGLANG.get()


class FreedSlots:
    """The KV allocator SGLang's caches are given: records the slots evict frees, does nothing else."""

    device = "cpu"

    def __init__(self) -> None:
        self.freed: list[Any] = []

    def free_segment(self, values: Any, start_pos: int = 0) -> None:
        self.freed.append(values)


def load_unified() -> SglangUnified | None:
    """SGLang with its UnifiedRadixCache, or None when it cannot be imported here (``unified_unavailable`` says why)."""
    return _UNIFIED.get()


def unified_unavailable() -> str | None:
    """None when ``load_unified`` succeeds, else the import error that stopped it."""
    return None if load_unified() is not None else _UNIFIED.failure()

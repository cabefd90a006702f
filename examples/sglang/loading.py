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

import importlib
import sys
import types
import warnings
from typing import Any

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
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            radix = importlib.import_module("sglang.srt.mem_cache.radix_cache")
            base = importlib.import_module("sglang.srt.mem_cache.base_prefix_cache")
            init_params = importlib.import_module("sglang.srt.mem_cache.cache_init_params")
            import sglang
            import torch
        self.torch = torch
        self.RadixCache = radix.RadixCache
        self.RadixKey = radix.RadixKey
        self.TreeNode = radix.TreeNode
        self.CacheInitParams = init_params.CacheInitParams
        self.MatchPrefixParams = base.MatchPrefixParams
        self.InsertParams = base.InsertParams
        self.EvictParams = base.EvictParams
        self.version = getattr(sglang, "__version__", "unknown")
        self.torch_version = torch.__version__


_LOADED: Sglang | None = None


def load_sglang() -> Sglang | None:
    """SGLang's RadixCache and friends, or None when SGLang cannot be imported here."""
    global _LOADED
    if _LOADED is None:
        try:
            _LOADED = Sglang()
        except ImportError:
            return None
    return _LOADED


class FreedSlots:
    """The KV allocator SGLang's RadixCache is given: records the slots evict frees, does nothing else."""

    device = "cpu"

    def __init__(self) -> None:
        self.freed: list[Any] = []

    def free_segment(self, values: Any, start_pos: int = 0) -> None:
        self.freed.append(values)

"""Importing vLLM's KV cache manager, once, or saying why it cannot be imported.

``make engines`` installs vLLM's CPU wheel without its dependencies into
``.venv-vllm`` (the Makefile says why); the modules below are all the adapter
needs.  Importing them pulls in vLLM's config and logging machinery, which is
why the import chain needs about 25 packages, though the cache itself is plain
Python over integers.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from bench.engine_import import ImportOnce, quiet_imports


class Vllm:
    """The vLLM names the adapter uses, imported once."""

    def __init__(self) -> None:
        # vLLM logs at INFO on import and on each manager it builds; the checker builds thousands.
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
        manager, pool, utils, interface, request, sampling, events, hashing, gc_utils, torch, vllm = quiet_imports(
            "vllm.v1.core.kv_cache_manager",
            "vllm.v1.core.block_pool",
            "vllm.v1.core.kv_cache_utils",
            "vllm.v1.kv_cache_interface",
            "vllm.v1.request",
            "vllm.sampling_params",
            "vllm.distributed.kv_events",
            "vllm.utils.hashing",
            "vllm.utils.gc_utils",
            "torch",
            "vllm",
        )
        logging.getLogger("vllm").setLevel(logging.WARNING)
        self.torch = torch
        self.manager = manager
        self.KVCacheManager: Any = manager.KVCacheManager
        self.BlockPool: Any = pool.BlockPool
        self.utils = utils
        self.interface = interface
        self.Request: Any = request.Request
        self.SamplingParams: Any = sampling.SamplingParams
        self.events = events
        self.version: str = getattr(vllm, "__version__", "unknown")
        self.torch_version: str = torch.__version__
        self.KVCacheBlock: Any = utils.KVCacheBlock
        # vLLM's default prefix-caching hash (CacheConfig.prefix_caching_hash_algo = "sha256"); the
        # engine seeds NONE_HASH once per process (kv_cache_utils.py:160-172), as EngineCore does.
        self.hash_function: Any = hashing.sha256
        utils.init_none_hash(self.hash_function)
        self.sampling: Any = sampling.SamplingParams(max_tokens=1)
        self.spec_class: Any = interface.FullAttentionSpec
        # As vLLM's engine does once it is up (``freeze_gc_heap``, utils/gc_utils.py:120-131, core.py:1529): the
        # millions of objects torch and vLLM import are frozen out of the collector's walks, which otherwise took
        # half of an insert of 2^16 blocks.
        gc_utils.freeze_gc_heap()

    def new_manager(self, block_size: int) -> Any:
        """A ``KVCacheManager`` as the scheduler builds it for one full-attention group of block size B, with
        prefix caching and KV events on; its pool starts with the null block alone (the adapter grows it)."""
        spec = self.interface.FullAttentionSpec(block_size=block_size, num_kv_heads=1, head_size=1, dtype=self.torch.float32)
        config = self.interface.KVCacheConfig(
            num_blocks=1, kv_cache_tensors=[], kv_cache_groups=[self.interface.KVCacheGroupSpec(["layer.0"], spec)]
        )
        return self.KVCacheManager(
            config,
            max_model_len=1 << 40,
            scheduler_block_size=block_size,
            hash_block_size=block_size,
            enable_caching=True,
            enable_kv_cache_events=True,
        )

    def block_hasher(self, block_size: int) -> Any:
        """The function a request computes its block hashes with (``get_request_block_hasher``, kv_cache_utils.py:941)."""
        return self.utils.get_request_block_hasher(block_size, self.hash_function)

    def external_hash(self, key: Any) -> Any:
        """A block's hash key as vLLM's events write it (``maybe_convert_block_hash(get_block_hash(key))``)."""
        return self.utils.maybe_convert_block_hash(self.utils.get_block_hash(key))


_VLLM = ImportOnce(Vllm)


def load_vllm() -> Vllm | None:
    """vLLM's KV cache modules, or None when vLLM cannot be imported here (``import_failure`` says why)."""
    return _VLLM.get()


def import_failure() -> str:
    """Why ``load_vllm`` returned None (empty when it did not)."""
    return _VLLM.failure()

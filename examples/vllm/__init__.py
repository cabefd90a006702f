"""vLLM's real KVCacheManager checked through the kit (``make engines-vllm``, ``.venv-vllm``)."""

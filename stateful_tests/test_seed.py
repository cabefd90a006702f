"""The seed's eight tests, under its names and with its numbers, on the spec and on the implementation.

The bodies live in ``prefixspec/drive/seed_tests.py`` so that ``prefixspec hunt`` can run them on mutants.
"""

from __future__ import annotations

from prefixspec.drive import seed_tests
from spec.api import CacheFactory


def test_hand_example_shared_system_prompt(make_cache: CacheFactory) -> None:
    seed_tests.hand_example_shared_system_prompt(make_cache)


def test_the_last_prompt_token_is_never_covered(make_cache: CacheFactory) -> None:
    seed_tests.the_last_prompt_token_is_never_covered(make_cache)


def test_insert_takes_exactly_the_full_blocks(make_cache: CacheFactory) -> None:
    seed_tests.insert_takes_exactly_the_full_blocks(make_cache)


def test_a_prefix_computed_twice_is_kept_once(make_cache: CacheFactory) -> None:
    seed_tests.a_prefix_computed_twice_is_kept_once(make_cache)


def test_a_locked_prefix_survives_eviction(make_cache: CacheFactory) -> None:
    seed_tests.a_locked_prefix_survives_eviction(make_cache)


def test_eviction_frees_the_least_recently_used_first(make_cache: CacheFactory) -> None:
    seed_tests.eviction_frees_the_least_recently_used_first(make_cache)


def test_golden_reference_trace(make_cache: CacheFactory) -> None:
    seed_tests.golden_reference_trace(make_cache)


def test_blocks_are_conserved_and_locked_prefixes_stay(make_cache: CacheFactory) -> None:
    seed_tests.blocks_are_conserved_and_locked_prefixes_stay(make_cache)


def test_the_seed_tests_are_all_here() -> None:
    assert list(seed_tests.SEED_TESTS) == [
        "hand_example_shared_system_prompt",
        "the_last_prompt_token_is_never_covered",
        "insert_takes_exactly_the_full_blocks",
        "a_prefix_computed_twice_is_kept_once",
        "a_locked_prefix_survives_eviction",
        "eviction_frees_the_least_recently_used_first",
        "golden_reference_trace",
        "blocks_are_conserved_and_locked_prefixes_stay",
    ]

"""strHash of LEGACY_KV.md (SPEC A6) with its published test vectors."""

import pytest

from memory.hashing import content_hash, str_hash


@pytest.mark.parametrize(
    ("text", "expected"),
    [("a", "61"), ("owner|你好", "632bf406"), ("owner|🐱", "633d097d"), ("", "0")],
)
def test_str_hash_matches_the_legacy_vectors(text, expected):
    assert str_hash(text) == expected


def test_content_hash_is_str_hash_of_profile_bar_content():
    assert content_hash("owner", "你好") == "632bf406"


def test_str_hash_wraps_at_32_bits_on_long_text():
    value = int(str_hash("x" * 10_000), 16)
    assert 0 <= value < 2**32

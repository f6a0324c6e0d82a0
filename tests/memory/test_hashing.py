"""strHash of LEGACY_KV.md (SPEC A6) with its published test vectors."""


import pytest
from hypothesis import given
from hypothesis import strategies as st

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


def _reference(text: str) -> str:
    """strHash as LEGACY_KV.md spells it, one UTF-16 unit at a time."""
    h = 0
    data = text.encode("utf-16-le", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (h * 31 + (data[i] | data[i + 1] << 8)) & 0xFFFFFFFF
    return format(h, "x")


@pytest.mark.parametrize("length", [0, 1, 39, 40, 41, 42, 100, 1000, 5000, 70_000])
def test_long_texts_hash_as_the_unit_by_unit_definition(length):
    """BENCH §3 (issue 25 point 3): the vectorised path for long lines gives the very same hash,
    across its threshold, past the power table's growth, with astral characters (two units)."""
    text = ("猫🐱a\uffff é" * (length // 6 + 1))[:length]
    assert str_hash(text) == _reference(text)
    assert str_hash("owner|" + text) == _reference("owner|" + text)


@given(st.text(min_size=30, max_size=400))
def test_any_text_hashes_as_the_unit_by_unit_definition(text):
    assert str_hash(text) == _reference(text)

"""strHash of LEGACY_KV.md (SPEC A6) with its published test vectors."""

import random

import pytest

from memory.hashing import VECTOR_FROM, content_hash, str_hash


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


def test_long_texts_hash_as_the_character_loop_does():
    """The numpy sum for long texts (a history import hashes 150k lines; BENCH §5) gives the
    loop's value bit for bit, astral characters (surrogate pairs) included."""
    def loop(text):
        h, data = 0, text.encode("utf-16-le", "surrogatepass")
        for i in range(0, len(data), 2):
            h = (h * 31 + (data[i] | data[i + 1] << 8)) & 0xFFFFFFFF
        return format(h, "x")

    rng = random.Random(7)
    for n in (VECTOR_FROM - 1, VECTOR_FROM, 300, 20_000):
        text = "".join(chr(rng.choice((rng.randint(32, 126), rng.randint(0x4E00, 0x9FFF), 0x1F600))) for _ in range(n))
        assert str_hash(text) == loop(text)

"""One marker grammar (SPEC A5, C2; LEGACY_KV.md rule 1): `[[name:body]]`, stripped wherever it is."""

import re
import sys

from hypothesis import given
from hypothesis import strategies as st

from memory.markers import StreamCleaner, clean, clean_reply, loose


def test_every_marker_is_stripped_and_only_fav_is_collected():
    assert clean("好的[[fav:喜欢猫]] ok [[mood:happy]] [[remind_me:9am]]") == ("好的 ok", ["喜欢猫"])


def test_brackets_that_are_not_markers_stay():
    assert clean_reply("[[1:x]] [[ fav:x]] [[fav x]] [x]") == "[[1:x]] [[ fav:x]] [[fav x]] [x]"


def test_an_unterminated_marker_is_text():
    assert clean_reply("see [[fav:abc") == "see [[fav:abc"


pieces = st.sampled_from(["[[", "]]", "[", "]", "fav", "mood", ":", "x", " ", "猫", "\n", "_", "1"])


@given(st.lists(pieces, max_size=30), st.data())
def test_the_stream_shows_what_clean_keeps_however_it_is_chunked(parts, data):
    raw = "".join(parts)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(raw)), max_size=6)))
    chunks = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
    cleaner = StreamCleaner()
    shown = "".join(cleaner.feed(c) for c in chunks) + cleaner.finish()
    assert cleaner.raw == raw
    # The stream drops markers but leaves the spacing tidy-up to the final clean.
    assert clean_reply(shown) == clean_reply(raw)


def test_loose_collapses_every_kind_of_whitespace_as_its_regex_does():
    # loose() skips the regex for text with single spaces only (BENCH §3); the result must be
    # the regex's on every whitespace character there is, alone, doubled and between words.
    spaces = [chr(i) for i in range(sys.maxunicode + 1) if re.match(r"\s", chr(i))]
    samples = ["", "a", " a ", "a b", "你好 世界", "a  b", "🐱 cat", "x\u200by"]
    samples += [f"a{w}b" for w in spaces] + [f"{w}a{w}{w}b{w}" for w in spaces]
    for text in samples:
        assert loose(text) == re.sub(r"\s+", " ", text).strip(), repr(text)


@given(st.text())
def test_loose_is_the_whitespace_regex_on_any_text(text):
    assert loose(text) == re.sub(r"\s+", " ", text).strip()

"""One marker grammar (SPEC A5, C2; LEGACY_KV.md rule 1): `[[name:body]]`, stripped wherever it is."""

from hypothesis import given
from hypothesis import strategies as st

from memory.markers import StreamCleaner, clean, clean_reply


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

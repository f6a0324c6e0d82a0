"""[[fav:]] markers (SPEC A5): stripped from what is shown and stored, even split across chunks."""

from previously.chat.markers import StreamCleaner, clean


def test_clean_removes_markers_and_collects_quotes():
    assert clean("Nice. [[fav:我的猫]] Bye [[fav: two ]]") == ("Nice. Bye", ["我的猫", "two"])


def test_a_marker_split_over_chunks_is_never_shown():
    cleaner = StreamCleaner()
    shown = "".join(cleaner.feed(c) for c in ["Hi [", "[fa", "v:sec", "ret]", "] there [", "x"]) + cleaner.finish()
    assert shown == "Hi  there [x"
    assert cleaner.raw == "Hi [[fav:secret]] there [x"


def test_an_unterminated_marker_is_just_text_at_the_end():
    cleaner = StreamCleaner()
    shown = cleaner.feed("see [[fav:abc") + cleaner.finish()
    assert shown == "see [[fav:abc"

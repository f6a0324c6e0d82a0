"""[[fav:]] markers (SPEC A5): stripped from what is shown and stored, even split across chunks."""

import json

import pytest

from memory.interop.kv_import import import_kv
from memory.markers import StreamCleaner, clean
from memory.models import Message


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


RAW_REPLIES = [
    "好的，我记住了。[[fav:喜欢猫]]",
    "[[mood:happy]]Sure  thing [[FAV:x]] and [[remind_me:周五]]\t\nbye",
    "[[[fav:a]] [[ fav:b]] [[fav:c [[note:d]] e]]",
    "keep [[1:x]] and [[fav x]]",
]


@pytest.mark.django_db
@pytest.mark.parametrize("raw", RAW_REPLIES)
def test_the_live_chat_and_the_legacy_import_strip_the_same_markers(raw, tmp_path, django_user_model):
    """LEGACY_KV rule 1: an orphan assistant fragment is cleaned exactly like a live reply (A5)."""
    user = django_user_model.objects.create_superuser(username="root", password="pw-root-123")
    value = {"role": "assistant", "content": raw, "ts": 1760968800000, "day_key": "2025-10-20", "hour": 21,
             "period": "evening"}
    dump = tmp_path / "dump.json"
    dump.write_text(json.dumps([{"key": "mem:owner:1760968800000_q1", "value": json.dumps(value)}]))
    with dump.open(encoding="utf-8") as fh:
        import_kv(fh=fh, user=user)
    cleaner = StreamCleaner()
    streamed = cleaner.feed(raw) + cleaner.finish()
    assert Message.objects.get().content == clean(raw)[0] == clean(streamed)[0]

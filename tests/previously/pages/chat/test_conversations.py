"""Issue 17 point 7: the profile's conversations at hand on the chat page — newest first, a
page at a time, with their local start time, first words and line count; a past one shown in
place (htmx) or on the chat page itself (no JavaScript), with "Back to now"; the query count
does not grow with the list."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from memory.archive import archive_message
from memory.models import Message, Slice
from previously.pages.chat import views
from tests.factories import ProfileFactory

pytestmark = pytest.mark.django_db

START = datetime(2026, 8, 16, 14, 13, tzinfo=UTC)


@pytest.fixture
def profile(user):
    return ProfileFactory(user=user, key="owner", language="en")


def conversation(profile, day: int, words: list[str], *, tz="Asia/Shanghai"):
    """One slice of `words` (user and companion in turn) on day `day` after START."""
    at = START + timedelta(days=day)
    for i, text in enumerate(words):
        n = day * 100 + i
        speaker = "user" if i % 2 == 0 else "assistant"
        mid = f"c_{n:016x}" if speaker == "user" else f"a_{int(at.timestamp() * 1000) + i}_x{n:03d}"
        archive_message(profile=profile, mid=mid, speaker=speaker, content=text, tz=tz,
                        created_at=at + timedelta(minutes=i), new_conversation=(i == 0 and day > 0))
    return Slice.objects.for_profile(profile).order_by("-started_at").first()


def test_the_panel_lists_conversations_newest_first_with_local_time_first_words_and_count(logged_in, profile):
    first = conversation(profile, 0, ["Morning run, 5 km", "Well done!", "tired now"])
    second = conversation(profile, 1, ["我妹妹下周来", "太好了"])
    Message.objects.filter(slice=first, content="tired now").update(deleted_at=START)  # hidden: not counted
    Slice.objects.filter(pk=first.pk).update(ended_at=START)

    page = logged_in.get(reverse("home")).content.decode()
    panel = page[page.index('id="conversation-list"'):page.index("</ol>", page.index('id="conversation-list"'))]
    assert panel.index(second.key) < panel.index(first.key)  # newest first
    assert ">2026-08-17 22:13</time>" in panel and ">2026-08-16 22:13</time>" in panel  # Asia/Shanghai, not UTC
    assert "我妹妹下周来" in panel and "Morning run, 5 km" in panel
    assert "2 lines" in panel  # the hidden line is not counted in the first one either
    assert "3 lines" not in panel
    # The open one is now, marked as on view, and its link goes back to the live conversation.
    now_item = panel[panel.index(f'data-key="{second.key}"'):]
    assert 'class="back-to-now"' in now_item.split("</li>")[0] and 'aria-current="true"' in now_item.split("</li>")[0]
    past_item = panel[panel.index(f'data-key="{first.key}"'):].split("</li>")[0]
    assert f"conversation={first.key}" in past_item and "aria-current" not in past_item
    assert reverse("chat_conversation", args=[first.key]) in past_item  # hx-get


def test_a_past_conversation_in_place_and_on_the_page_without_javascript(logged_in, profile):
    first = conversation(profile, 0, ["Morning run, 5 km", "**Well** done!"])
    conversation(profile, 1, ["next day"])

    partial = logged_in.get(reverse("chat_conversation", args=[first.key]), headers={"HX-Request": "true"})
    body = partial.content.decode()
    assert partial.status_code == 200 and "<html" not in body
    assert "Conversation of 2026-08-16 22:13" in body and "Back to now" in body
    assert "Morning run, 5 km" in body and "<strong>Well</strong> done!" in body  # the reply's Markdown
    assert "next day" not in body
    assert 'id="msg-' not in body  # no ids that the live list may hold too

    plain = logged_in.get(reverse("chat_conversation", args=[first.key]))
    assert plain.status_code == 302 and plain["Location"].endswith(f"conversation={first.key}")
    page = logged_in.get(plain["Location"]).content.decode()
    assert 'class="past-view"' in page and "Morning run, 5 km" in page and 'id="composer"' in page
    past_item = page[page.index(f'data-key="{first.key}"'):].split("</li>")[0]
    assert 'aria-current="true"' in past_item  # the one on view is marked

    assert logged_in.get(reverse("chat_conversation", args=["2020-01-01-0000"]), headers={"HX-Request": "true"}).status_code == 404
    assert logged_in.get(reverse("chat_conversation", args=["nope&x=1"])).status_code == 404


def test_another_users_conversation_is_not_shown(logged_in, profile, django_user_model):
    other = ProfileFactory(user=django_user_model.objects.create(username="other"), key="owner", language="en")
    theirs = conversation(other, 3, ["their secret"])
    conversation(profile, 0, ["mine"])
    response = logged_in.get(reverse("chat_conversation", args=[theirs.key]), headers={"HX-Request": "true"})
    assert response.status_code == 404  # a key only the other user's profile has
    assert "their secret" not in logged_in.get(reverse("home") + f"?conversation={theirs.key}").content.decode()


def test_the_list_is_paged_and_its_query_count_does_not_grow(logged_in, profile, monkeypatch):
    monkeypatch.setattr(views, "CONVERSATIONS_PAGE", 3)
    for day in range(4):
        conversation(profile, day, [f"day {day} hello", "hi"])
    with CaptureQueriesContext(connection) as few:
        views.conversations_page(profile)
    for day in range(4, 9):
        conversation(profile, day, [f"day {day} hello", "hi", "more"])
    with CaptureQueriesContext(connection) as many:
        rows, more = views.conversations_page(profile)
    assert len(many.captured_queries) == len(few.captured_queries) == 1
    assert [r.first_words for r in rows] == ["day 8 hello", "day 7 hello", "day 6 hello"]
    assert [r.n_lines for r in rows] == [3, 3, 3]
    assert more == rows[-1].key

    page = logged_in.get(reverse("home")).content.decode()
    panel = page[page.index('class="conversations-panel"'):page.index("</aside>")]
    assert "day 6 hello" in panel and "day 5 hello" not in panel and "More conversations" in panel
    nxt = logged_in.get(reverse("chat_conversations") + f"?before={more}", headers={"HX-Request": "true"}).content.decode()
    assert "day 5 hello" in nxt and "day 3 hello" in nxt and "day 6 hello" not in nxt
    assert "More conversations" in nxt
    plain = logged_in.get(reverse("chat_conversations") + f"?before={more}")
    assert plain.status_code == 302 and reverse("timeline") in plain["Location"] and f"before={more}" in plain["Location"]


def test_the_panel_speaks_chinese(logged_in, profile):
    profile.language = "zh"
    profile.save(update_fields=["language"])
    first = conversation(profile, 0, ["早上跑步", "很好", "嗯"])
    conversation(profile, 1, ["第二天"])
    page = logged_in.get(reverse("home")).content.decode()
    panel = page[page.index('class="conversations-panel"'):page.index("</aside>")]
    assert "Conversations" not in panel and "lines" not in panel and "More conversations" not in panel
    body = logged_in.get(reverse("chat_conversation", args=[first.key]), headers={"HX-Request": "true"}).content.decode()
    assert "Back to now" not in body and "Conversation of" not in body

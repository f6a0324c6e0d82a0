"""Proactive messages (SPEC K15, K6, K14) with a controlled clock: a due Horizon item makes
exactly one message; the daily limit (legacy count included), conversations, the switch and
quiet hours hold it back; delivery over the socket or at the next page load."""

from datetime import UTC, datetime, timedelta

import pytest
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.core.management import call_command
from django.urls import reverse

from memory import proactive as rules
from memory.deletion import hard_delete_message
from memory.models import LegacyMeta, Message, ProactiveSend
from previously.chat import proactive
from previously.llm import reset_provider
from previously.llm.offline import Offline
from previously.routing import websocket_urlpatterns
from tests.factories import MessageFactory
from tests.llm_server import Turn
from tests.memory.card.samples import SEED_CARD
from tests.previously.agent.helpers import make_slice, set_card

DUE = datetime(2026, 8, 21, 9, 0, tzinfo=UTC)  # the seed card's Horizon item is due this day
ITEM = "Draft the wedding speech for Lao Zhou"
TWO_ITEMS = SEED_CARD.replace(
    f"- {ITEM} — by: 2026-08-21 — refs: [2026/08/15/2030]",
    f"- {ITEM} — by: 2026-08-21 — refs: [2026/08/15/2030]\n"
    "- Book the train to Hangzhou — by: 2026-08-20 — refs: [2026/08/15/2030]",
)


@pytest.fixture
def offline():
    reset_provider(Offline())
    yield
    reset_provider(None)


@pytest.fixture
def owner(profile):
    """An English profile with the seed card and one old, closed conversation."""
    profile.language = "en"
    profile.save()
    set_card(profile, SEED_CARD)
    make_slice(profile, "2026-08-15-2030", lines=[("user", "I promised Lao Zhou a speech")], at=DUE - timedelta(days=6))
    return profile


def proactive_rows(profile):
    return list(
        Message.objects.for_profile(profile).filter(message_type="proactive").values_list("speaker", "content")
    )


@pytest.mark.django_db
def test_a_due_item_makes_exactly_one_reminder_even_when_the_check_runs_twice(owner, offline):
    first = proactive.check_all(now=DUE)
    again = proactive.check_all(now=DUE + timedelta(hours=2))
    assert [o.message is not None for o in first] == [True]
    assert again == []  # nothing else is due: the item was announced
    assert proactive_rows(owner) == [
        ("assistant", f"Reminder from your card: “{ITEM}” is due today (2026-08-21).")
    ]
    send = ProactiveSend.objects.get(profile=owner)
    assert (send.reason, send.day, send.message.mid) == ("horizon_due", DUE.date(), first[0].message.mid)


@pytest.mark.django_db
def test_offline_wording_is_chinese_for_a_chinese_profile_and_says_when_it_was_due(owner, offline):
    owner.language = "zh"
    owner.save()
    proactive.check_all(now=DUE + timedelta(days=2))
    assert proactive_rows(owner) == [("assistant", f"来自你的卡片的提醒：「{ITEM}」的期限是 2026-08-21。进展如何？")]


@pytest.mark.django_db
def test_the_english_reminder_for_a_past_date_says_it_was_due(owner, offline):
    proactive.check_all(now=DUE + timedelta(days=1))
    assert proactive_rows(owner)[0][1] == f"Reminder from your card: “{ITEM}” was due on 2026-08-21. How did it go?"


@pytest.mark.django_db
def test_the_daily_limit_is_respected(owner, offline, settings):
    settings.PREVIOUSLY_PROACTIVE_PER_DAY = 1
    set_card(owner, TWO_ITEMS, version=2)
    proactive.check_all(now=DUE)
    later = proactive.check_all(now=DUE + timedelta(hours=3))  # long after that message: not a conversation
    assert [o.skipped for o in later] == ["daily limit reached"]
    assert len(proactive_rows(owner)) == 1
    proactive.check_all(now=DUE + timedelta(days=1))  # a new day: the second item
    assert len(proactive_rows(owner)) == 2


@pytest.mark.django_db
def test_two_due_items_make_two_messages_one_per_pass_never_one_twice(owner, offline):
    set_card(owner, TWO_ITEMS, version=2)
    for hours in (0, 1, 2, 3):
        proactive.check_all(now=DUE + timedelta(hours=hours))
    texts = [c for _, c in proactive_rows(owner)]
    assert len(texts) == 2 and ITEM in texts[0] and "Book the train to Hangzhou" in texts[1]


@pytest.mark.django_db
def test_the_legacy_proactive_count_of_the_day_is_honoured(owner, offline, settings):
    settings.PREVIOUSLY_PROACTIVE_PER_DAY = 3
    LegacyMeta.objects.create(profile=owner, key="meta_proactiveCount:owner:2026-08-21", value="3")
    assert [o.skipped for o in proactive.check_all(now=DUE)] == ["daily limit reached"]
    assert proactive_rows(owner) == []
    assert len(proactive.check_all(now=DUE + timedelta(days=1))) == 1  # another day, another count


@pytest.mark.django_db
def test_legacy_count_shapes(owner):
    day = DUE.date()
    LegacyMeta.objects.create(profile=owner, key="meta_proactive:owner:2026-08-21", value="1")
    LegacyMeta.objects.create(profile=owner, key="meta_proactiveCount:owner", value='{"date": "2026-08-21", "count": 2}')
    LegacyMeta.objects.create(profile=owner, key="meta_proactiveCount:owner:2026-08-20", value="5")
    assert rules.legacy_count(owner, day) == 3
    LegacyMeta.objects.filter(key="meta_proactiveCount:owner").update(value="2026-08-20:4")
    assert rules.legacy_count(owner, day) == 1
    assert rules.legacy_count(owner, day - timedelta(days=1)) == 9


@pytest.mark.django_db
def test_nothing_is_sent_mid_conversation(owner, offline):
    make_slice(owner, "2026-08-21-0850", closed=False, lines=[("user", "hi")], at=DUE - timedelta(minutes=5))
    assert [o.skipped for o in proactive.check_all(now=DUE)] == ["mid-conversation"]
    assert proactive_rows(owner) == []
    # The conversation went quiet: the reminder comes, in a new slice, and the idle one is closed.
    proactive.check_all(now=DUE + timedelta(hours=1))
    message = Message.objects.get(message_type="proactive")
    assert message.slice.key != "2026-08-21-0850" and message.slice.is_open
    assert owner.slices.get(key="2026-08-21-0850").ended_at is not None


@pytest.mark.django_db
def test_switched_off_means_none(owner, offline, client):
    client.force_login(owner.user)
    response = client.post(reverse("chat_proactive"), {"enabled": "0"}, headers={"HX-Request": "true"})
    assert "Companion writes first: off" in response.content.decode()
    owner.refresh_from_db()
    assert owner.proactive_enabled is False
    assert proactive.check_all(now=DUE) == []
    assert proactive_rows(owner) == []
    client.post(reverse("chat_proactive"), {"enabled": "1"})
    owner.refresh_from_db()
    assert owner.proactive_enabled is True


@pytest.mark.django_db
def test_no_messages_in_quiet_hours(owner, offline):
    assert [o.skipped for o in proactive.check_all(now=DUE.replace(hour=3))] == ["quiet hours"]
    assert proactive_rows(owner) == []


@pytest.mark.django_db
def test_a_companions_own_quiet_hours_win_over_the_environments(owner, offline, settings):
    """Issue 17 point 8: quiet 09:00-12:00 on the settings page; the environment allows any hour."""
    settings.PREVIOUSLY_PROACTIVE_HOURS = ""
    owner.quiet_from, owner.quiet_until = 9, 12
    owner.save()
    assert [o.skipped for o in proactive.check_all(now=DUE.replace(hour=10))] == ["quiet hours"]
    assert proactive_rows(owner) == []
    owner.quiet_from = owner.quiet_until = None  # none of its own: the environment's (any hour)
    owner.save()
    assert [o.skipped for o in proactive.check_all(now=DUE.replace(hour=10))] != ["quiet hours"]


def test_quiet_hours_windows(settings):
    at = lambda h: DUE.replace(hour=h)  # noqa: E731
    settings.PREVIOUSLY_PROACTIVE_HOURS = "8-22"
    assert [rules.quiet_hours(at(h)) for h in (7, 8, 21, 22)] == [True, False, False, True]
    settings.PREVIOUSLY_PROACTIVE_HOURS = "20-2"  # across midnight
    assert [rules.quiet_hours(at(h)) for h in (19, 20, 1, 2)] == [True, False, False, True]
    settings.PREVIOUSLY_PROACTIVE_HOURS = ""
    assert not rules.quiet_hours(at(3))


@pytest.mark.django_db
def test_the_command_has_a_dry_run_and_a_controlled_clock(owner, offline, capsys):
    call_command("send_proactive", "--dry-run", "--now", "2026-08-21T09:00:00+00:00")
    assert "would send 1 proactive message" in capsys.readouterr().out
    assert proactive_rows(owner) == []
    call_command("send_proactive", "--now", "2026-08-21T09:00:00")
    out = capsys.readouterr().out
    assert "sent 1 proactive message" in out and ITEM in out
    call_command("send_proactive", "--now", "2026-08-21T10:00:00")
    assert "sent 0 proactive messages" in capsys.readouterr().out
    assert len(proactive_rows(owner)) == 1


@pytest.mark.django_db
def test_with_a_model_the_text_is_the_models_from_a_short_instruction(owner, llm_server, llm_provider):
    llm_server.script(Turn(content="Alex, the speech for Lao Zhou is due today — how is the draft? [[fav:x]]"))
    proactive.check_all(now=DUE)
    assert proactive_rows(owner) == [("assistant", "Alex, the speech for Lao Zhou is due today — how is the draft?")]
    system = llm_server.requests[-1]["messages"][0]["content"]
    assert ITEM in system and "Write in English" in system and "Write first" in system


@pytest.mark.django_db
def test_a_failing_model_falls_back_to_the_plain_reminder(owner, llm_server, llm_provider):
    llm_server.script(Turn(status=500), Turn(status=500))  # the SDK retries once
    proactive.check_all(now=DUE)
    assert proactive_rows(owner)[0][1].startswith("Reminder from your card:")


@pytest.mark.django_db
def test_a_reminder_sent_while_away_is_on_the_page_at_the_next_visit(owner, offline, client):
    proactive.check_all(now=DUE)
    client.force_login(owner.user)
    page = client.get(reverse("home")).content.decode()
    assert "Your companion wrote first" in page and "Reminder from your card" in page


@pytest.mark.django_db
def test_hard_deleting_a_reminder_keeps_it_counted_and_announced(owner, offline):
    proactive.check_all(now=DUE)
    hard_delete_message(Message.objects.get(message_type="proactive"))
    assert proactive.check_all(now=DUE + timedelta(hours=2)) == []
    assert rules.sent_on(owner, DUE.date()) == 1


# --- delivery over the socket --------------------------------------------------------------


async def _connect(user, key="owner"):
    communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/chat/{key}/")
    communicator.scope["user"] = user
    connected, _ = await communicator.connect()
    assert connected
    return communicator


@pytest.mark.django_db(transaction=True)
async def test_an_open_chat_page_receives_the_reminder_live(owner, offline):
    ws = await _connect(owner.user)
    try:
        assert await ws.receive_nothing()
        await database_sync_to_async(proactive.check_all)(now=DUE)
        frame = await ws.receive_from(timeout=5)
        assert 'id="messages" hx-swap-oob="beforeend"' in frame
        assert "msg assistant" in frame and "proactive" in frame and f"“{ITEM}” is due today" in frame
        assert await ws.receive_nothing()
    finally:
        await ws.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_opening_the_chat_after_a_long_gap_brings_a_welcome_back_once(owner, settings, llm_server, llm_provider):
    settings.PREVIOUSLY_PROACTIVE_RETURN_HOURS = 24
    settings.PREVIOUSLY_PROACTIVE_HOURS = "0-0"  # quiet all day: the user is here, so it does not apply
    await database_sync_to_async(MessageFactory)(
        profile=owner, content="see you", created_at=datetime.now(UTC) - timedelta(days=3),
        slice=await database_sync_to_async(owner.slices.get)(),
    )
    llm_server.script(Turn(content="Welcome back, Alex! How did the speech go?"))
    ws = await _connect(owner.user)
    try:
        frame = await ws.receive_from(timeout=5)
        assert "Welcome back, Alex! How did the speech go?" in frame and "proactive" in frame
    finally:
        await ws.disconnect()
    system = llm_server.requests[-1]["messages"][0]["content"]
    assert "3 days away" in system and "Greet them by name, <<< Alex >>>" in system  # K14's briefing
    again = await _connect(owner.user)  # a reload: the gap is over, nothing new
    try:
        assert await again.receive_nothing()
    finally:
        await again.disconnect()
    rows = await database_sync_to_async(proactive_rows)(owner)
    assert rows == [("assistant", "Welcome back, Alex! How did the speech go?")]
    assert len(llm_server.requests) == 1


@pytest.mark.django_db(transaction=True)
async def test_offline_there_is_no_welcome_back(owner, settings, offline):
    settings.PREVIOUSLY_PROACTIVE_RETURN_HOURS = 24
    settings.PREVIOUSLY_PROACTIVE_HOURS = ""
    ws = await _connect(owner.user)
    try:
        assert await ws.receive_nothing()
    finally:
        await ws.disconnect()
    assert await database_sync_to_async(proactive_rows)(owner) == []

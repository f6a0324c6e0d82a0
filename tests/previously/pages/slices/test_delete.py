"""D6, D7 from the slice page: a whole conversation deleted for good, after a confirmation that
lists what goes with it and lets the person choose about citing card lines and quoting replies."""

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse

from memory.card import parse, render
from memory.card.format import Card as ParsedCard
from memory.card.format import Fact
from memory.card.lines import card_lines
from memory.models import Card, EvolutionRun, Message, Slice, Tombstone
from tests.factories import HighlightFactory, ProfileFactory, UserFactory
from tests.previously.agent.helpers import T0, make_slice
from tests.previously.pages.conftest import assert_no_inline_script

pytestmark = pytest.mark.django_db
SAID = "I finally told my sister about the new job in Lyon"


@pytest.fixture
def conversation(profile):
    slice_ = make_slice(profile, lines=[("user", SAID), ("assistant", "That took courage.")])
    later = make_slice(profile, key="2026-08-18-0900", at=T0 + timedelta(days=1),
                       lines=[("user", "hi again"), ("assistant", f"Yesterday you said: {SAID}. How did she take it?")])
    HighlightFactory(message=slice_.messages.get(speaker="user"), hid="h_lyon")
    text = render(ParsedCard(facts=(Fact("Moving to Lyon for a new job", (slice_.ref,)),
                                    Fact("Close to her sister", (slice_.ref,)),
                                    Fact("Says hi a lot", (later.ref,)))))
    Card.objects.update_or_create(profile=profile, defaults={"text": text, "version": 1})
    return slice_


def url(slice_, profile_key="owner"):
    return reverse("slice_delete", args=[slice_.key]) + f"?profile={profile_key}"


def key_of(profile, words):
    return next(x.key for x in card_lines(parse(Card.objects.get(profile=profile).text)) if x.words == words)


def test_the_slice_page_links_to_a_confirmation_that_lists_what_goes_and_deletes_nothing(logged_in, profile, conversation):
    page = logged_in.get(reverse("slice", args=[conversation.key])).content.decode()
    assert url(conversation) in page
    response = logged_in.get(url(conversation))
    html = response.content.decode()
    assert response.status_code == 200
    assert "Delete this conversation for good?" in html and "2 lines" in html
    assert "h_lyon" in html or SAID[:40] in html  # the highlight
    assert f'name="drop_line" value="{key_of(profile, "Moving to Lyon for a new job")}"' in html
    assert f'name="drop_line" value="{key_of(profile, "Close to her sister")}"' in html
    assert "Says hi a lot" not in html  # cites another conversation
    assert "How did she take it?" in html and 'name="keep_replies"' in html  # the quoting reply elsewhere
    assert 'name="csrfmiddlewaretoken"' in html
    cancel = re.search(r'<a href="([^"]+)">Cancel</a>', html).group(1)
    assert cancel == reverse("slice", args=[conversation.key]) + "?profile=owner"
    assert "javascript:" not in html
    assert_no_inline_script(html)
    assert Slice.objects.filter(pk=conversation.pk).exists() and Message.objects.count() == 4


def test_confirming_deletes_the_conversation_and_the_chosen_card_line(logged_in, profile, conversation):
    mids = list(conversation.messages.values_list("mid", flat=True))
    lyon = key_of(profile, "Moving to Lyon for a new job")

    response = logged_in.post(url(conversation), {"drop_line": [lyon], "keep_replies": "1"}, follow=True)

    assert response.redirect_chain[-1][0] == reverse("timeline") + "?profile=owner"
    html = response.content.decode()
    assert "Conversation 2026/08/17/0515 and its 2 lines were deleted for good." in html
    assert "1 line of the card went with it." in html
    assert not Slice.objects.filter(pk=conversation.pk).exists()
    assert not Message.objects.filter(mid__in=mids).exists()
    assert set(Tombstone.objects.filter(kind="msg").values_list("object_id", flat=True)) == set(mids)
    assert Tombstone.objects.filter(kind="hl", object_id="h_lyon").exists()
    assert [f.text for f in parse(Card.objects.get(profile=profile).text).facts] == ["Close to her sister", "Says hi a lot"]
    assert EvolutionRun.objects.filter(trigger="forget").count() == 1
    kept = Message.objects.get(speaker="assistant")  # the quoting reply, kept by choice
    assert SAID not in kept.content and "[deleted]" in kept.content


def test_replies_quoting_it_go_unless_kept(logged_in, profile, conversation):
    logged_in.post(url(conversation))
    assert list(Message.objects.values_list("content", flat=True)) == ["hi again"]
    assert len(parse(Card.objects.get(profile=profile).text).facts) == 3  # no line chosen: all stay


def test_the_notice_is_translated(logged_in, profile, conversation):
    response = logged_in.post(url(conversation), {}, follow=True, HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert "对话 2026/08/17/0515 及其 2 条消息已永久删除。" in response.content.decode()


def test_another_users_conversation_is_a_404_and_stays(logged_in, profile):
    stranger = ProfileFactory(user=UserFactory(), key="owner")
    theirs = make_slice(stranger, key="2026-08-20-1000", at=T0 + timedelta(days=3), lines=[("user", "mine, not yours")])
    path = reverse("slice_delete", args=[theirs.key])
    assert logged_in.get(path).status_code == 404
    assert logged_in.post(path).status_code == 404
    assert logged_in.post(path + "?profile=owner").status_code == 404
    assert Slice.objects.filter(pk=theirs.pk).exists() and Message.objects.filter(slice=theirs).count() == 1


def test_the_delete_needs_the_csrf_token(user, profile, conversation):
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    assert client.post(url(conversation)).status_code == 403
    assert Slice.objects.filter(pk=conversation.pk).exists()


def test_the_companion_settings_page_links_to_deleting_the_companion(logged_in, profile):
    html = logged_in.get(reverse("profile_edit", args=[profile.key])).content.decode()
    assert reverse("profile_delete", args=[profile.key]) in html

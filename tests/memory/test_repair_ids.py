"""Issue 16 point 5 (SPEC S5): a message id stored before ids were full-matched (one with '/'
or a trailing newline) is repairable from the admin; its highlight follows and the pages that
link to it work again."""

import pytest
from django.urls import reverse

from memory.models import Highlight, Message
from tests.factories import HighlightFactory, MessageFactory, ProfileFactory

pytestmark = pytest.mark.django_db


def test_the_admin_repairs_bad_stored_ids_and_their_highlights_follow(admin_client, admin_user):
    profile = ProfileFactory(user=admin_user, key="owner")
    bad = MessageFactory(profile=profile, mid="imp/ort\n", content="一行 🐱")
    good = MessageFactory(profile=profile, mid="c_00000000000000ab", content="fine")
    HighlightFactory(profile=profile, message=bad, mid=bad.mid, content="一行 🐱")
    response = admin_client.post(reverse("admin:memory_message_changelist"), {
        "action": "repair_message_ids", "_selected_action": [bad.pk, good.pk]}, follow=True)
    assert "Repaired 1 message id(s)." in response.content.decode()
    bad.refresh_from_db()
    assert bad.mid.startswith("r_") and len(bad.mid) == 18 and bad.legacy_extra["original_mid"] == "imp/ort\n"
    assert Highlight.objects.get(profile=profile).mid == bad.mid
    assert Message.objects.get(pk=good.pk).mid == "c_00000000000000ab"
    assert admin_client.get(reverse("curation:messages", args=["owner"])).status_code == 200
    assert admin_client.get(reverse("archive")).status_code == 200

"""S1: "new conversation" from the chat page closes the open slice."""

import pytest
from django.urls import reverse

from memory.models import Message
from tests.previously.agent.helpers import make_slice

pytestmark = pytest.mark.django_db


def test_new_conversation_closes_the_open_slice(logged_in, profile):
    from previously.llm import reset_provider
    from previously.llm.offline import Offline

    slice_ = make_slice(profile, closed=False, lines=[("user", "hi")])
    reset_provider(Offline())
    try:
        response = logged_in.post(reverse("new_conversation"))
    finally:
        reset_provider(None)

    assert response.status_code == 302
    slice_.refresh_from_db()
    assert slice_.ended_at is not None
    assert Message.objects.filter(slice=slice_).count() == 1

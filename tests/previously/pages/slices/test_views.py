"""K13, S2: slice transcripts and their cognitive log, deleted lines, profiles by query."""

import pytest
from django.urls import reverse

from memory.models import CardSnapshot, SliceLogEntry
from tests.factories import MessageFactory, ProfileFactory
from tests.previously.agent.helpers import make_slice

pytestmark = pytest.mark.django_db


def test_a_slice_page_shows_every_line_and_the_cognitive_log(logged_in, profile):
    slice_ = make_slice(profile, lines=[("user", "我今天跑了 5 公里 🏃"), ("assistant", "太棒了!")])
    SliceLogEntry.objects.create(slice=slice_, kind="analyzer", summary="worth evolving: new habit")
    CardSnapshot.objects.create(profile=profile, slice=slice_, text="")

    html = logged_in.get(reverse("slice", args=[slice_.key])).content.decode()

    assert "我今天跑了 5 公里 🏃" in html and "太棒了!" in html
    assert "worth evolving: new habit" in html
    assert f"/card/?at={slice_.key}" in html


def test_deleted_lines_are_not_shown(logged_in, profile):
    from django.utils import timezone

    slice_ = make_slice(profile)
    MessageFactory(profile=profile, slice=slice_, content="gone for good", deleted_at=timezone.now())
    html = logged_in.get(reverse("slice", args=[slice_.key])).content.decode()
    assert "gone for good" not in html


def test_another_of_my_profiles_by_query(logged_in, user, profile):
    other = ProfileFactory(user=user, key="coach")
    slice_ = make_slice(other, lines=[("user", "coach line")])
    url = reverse("slice", args=[slice_.key])
    assert logged_in.get(url).status_code == 404  # not in the default profile
    assert "coach line" in logged_in.get(url, {"profile": "coach"}).content.decode()

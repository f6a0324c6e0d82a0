"""Issue 17 point 9 (R7): every time on every page in the person's own zone, the clock that
names slices. The bug this pins: a browser that sent only its local time (+08:00) got a slice
named "22:13" whose lines the timeline and the slice page listed at "14:13 – 14:22" (UTC)."""

from datetime import UTC, datetime

import pytest
from django.urls import reverse

from memory.archive import archive_message
from memory.models import Profile, Slice
from tests.factories import HighlightFactory

pytestmark = pytest.mark.django_db

START = datetime(2026, 8, 16, 14, 13, tzinfo=UTC)
LATER = datetime(2026, 8, 16, 14, 22, tzinfo=UTC)


def say(profile, n, at, *, tz="", local_time=None, speaker="user"):
    mid = f"c_{n:016x}" if speaker == "user" else f"a_{int(at.timestamp() * 1000)}_x{n:03d}"
    return archive_message(profile=profile, mid=mid, speaker=speaker, content=f"第{n}句 line {n}",
                           created_at=at, tz=tz, local_time=local_time).message


@pytest.mark.parametrize(
    ("tz", "local_start", "local_later", "named"),
    [
        ("", "2026-08-16T22:13:00+08:00", "2026-08-16T22:22:00+08:00", "22:13"),  # offset only
        ("Asia/Shanghai", None, None, "22:13"),
        ("America/New_York", None, None, "10:13"),
    ],
)
def test_the_timeline_and_slice_page_agree_with_the_slice_name(logged_in, profile, tz, local_start, local_later, named):
    say(profile, 1, START, tz=tz, local_time=local_start)
    say(profile, 2, LATER, tz=tz, local_time=local_later, speaker="assistant")
    slice_ = Slice.objects.get(profile=profile)
    assert slice_.key.endswith(named.replace(":", ""))
    Slice.objects.filter(pk=slice_.pk).update(ended_at=LATER)
    later = f"{named[:3]}{int(named[3:]) + 9:02d}"  # nine minutes on, same zone

    timeline = logged_in.get(reverse("timeline")).content.decode()
    assert f"<strong>{named}</strong>" in timeline
    assert f"{named}</time> –" in timeline and f"{later}</time>" in timeline
    assert "14:13" not in timeline.replace(named, "") or named == "14:13"

    page = logged_in.get(reverse("slice", args=[slice_.key])).content.decode()
    assert f">{named}</time>" in page and f">{later}</time>" in page  # each line's own time
    assert "14:13" not in page and "14:22" not in page


def test_the_persons_zone_is_kept_and_used_by_every_page(logged_in, profile):
    message = say(profile, 1, START, tz="Asia/Shanghai")
    assert Profile.objects.get(pk=profile.pk).tz == "Asia/Shanghai"  # remembered as the slice opened
    HighlightFactory(message=message, created_at=START)
    # Times without a slice's zone of their own (highlights, the curation list) use the person's.
    highlights = logged_in.get(reverse("curation:highlights", args=[profile.key])).content.decode()
    assert "2026-08-16 22:13" in highlights and "2026-08-16 14:13" not in highlights
    lines = logged_in.get(reverse("curation:messages", args=[profile.key])).content.decode()
    assert ">2026-08-16 22:13<" in lines and ">2026-08-16 14:13<" not in lines


def test_a_bare_utc_fallback_does_not_replace_the_persons_zone(profile):
    say(profile, 1, START, tz="Asia/Shanghai")
    Slice.objects.update(ended_at=START)
    archive_message(profile=profile, mid="c_00000000000000ff", speaker="user", content="x",
                    created_at=LATER, tz="", local_time=None, new_conversation=True)
    assert Slice.objects.filter(profile=profile).count() == 2
    assert Profile.objects.get(pk=profile.pk).tz == "Asia/Shanghai"


def test_without_any_zone_pages_show_utc(logged_in, profile):
    say(profile, 1, START)
    assert Profile.objects.get(pk=profile.pk).tz == ""
    page = logged_in.get(reverse("timeline")).content.decode()
    assert "<strong>14:13</strong>" in page and "14:13</time>" in page

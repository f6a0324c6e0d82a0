"""A4: the archive, searched through the production ranking (zh/en), filtered, paginated."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from memory.archive import archive_message
from memory.models import Message
from previously.pages.archive import views as archive_views
from tests.factories import ProfileFactory, UserFactory
from tests.previously.pages.conftest import assert_no_inline_script

pytestmark = pytest.mark.django_db
T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def say(profile, n, speaker, content, *, at):
    mid = f"c_{n:016x}" if speaker == "user" else f"a_{1760000000000 + n}_x{n:03d}"
    return archive_message(profile=profile, mid=mid, speaker=speaker, content=content, created_at=at, tz="UTC").message


@pytest.fixture
def archive(profile):
    return [
        say(profile, 1, "user", "我们周末去海边看日落吧", at=T0),
        say(profile, 2, "assistant", "好呀！海边的日落最美了", at=T0 + timedelta(minutes=1)),
        say(profile, 3, "user", "I bought a new bicycle for the beach path", at=T0 + timedelta(days=3)),
        say(profile, 4, "user", "The sunset at the beach was unreal", at=T0 + timedelta(days=10)),
        say(profile, 5, "assistant", "Tell me about the bicycle ride", at=T0 + timedelta(days=10, minutes=1)),
    ]


def test_a_chinese_search_finds_chinese_lines_with_the_terms_marked(logged_in, archive):
    html = logged_in.get(reverse("archive"), {"q": "海边"}).content.decode()
    assert "2 lines match" in html
    assert "我们周末去<mark>海边</mark>看日落吧" in html
    assert "bicycle" not in html
    assert_no_inline_script(html)


def test_an_english_search_matches_stems_and_is_ordered_by_the_production_ranking(logged_in, archive):
    response = logged_in.get(reverse("archive"), {"q": "bicycle"})
    lines = response.context["lines"]
    assert {m.mid for m in lines} == {archive[2].mid, archive[4].mid}


def test_newest_first_sorts_the_hits_by_time(logged_in, archive):
    response = logged_in.get(reverse("archive"), {"q": "beach sunset 海边", "sort": "newest"})
    times = [m.created_at for m in response.context["lines"]]
    assert times == sorted(times, reverse=True) and len(times) >= 3


def test_the_speaker_and_date_filters_narrow_the_hits(logged_in, archive):
    response = logged_in.get(reverse("archive"), {"q": "海边", "speaker": "assistant"})
    assert [m.mid for m in response.context["lines"]] == [archive[1].mid]
    response = logged_in.get(reverse("archive"), {"q": "beach", "date_from": "2026-03-05", "date_to": "2026-03-31"})
    assert [m.mid for m in response.context["lines"]] == [archive[3].mid]
    response = logged_in.get(reverse("archive"), {"date_from": "2026-03-04", "date_to": "2026-03-04"})
    assert [m.mid for m in response.context["lines"]] == [archive[2].mid]


def test_a_reversed_date_range_is_a_form_error(logged_in, archive):
    html = logged_in.get(reverse("archive"), {"date_from": "2026-03-05", "date_to": "2026-03-01"}).content.decode()
    assert "“From” is after “To”." in html


def test_a_hit_links_to_its_slice_with_the_line_in_view(logged_in, profile, archive):
    html = logged_in.get(reverse("archive"), {"q": "unreal"}).content.decode()
    url = f'{reverse("slice", args=[archive[3].slice.key])}?profile=owner#msg-{archive[3].mid}'
    assert url in html
    slice_html = logged_in.get(url.split("#")[0]).content.decode()
    assert f'id="msg-{archive[3].mid}"' in slice_html


def test_each_hit_carries_the_message_actions(logged_in, profile, archive):
    html = logged_in.get(reverse("archive"), {"q": "unreal"}).content.decode()
    assert reverse("curation:favourite", args=["owner", archive[3].mid]) in html
    assert reverse("curation:hide", args=["owner", archive[3].mid]) in html
    assert reverse("curation:delete", args=["owner", archive[3].mid]) in html


def test_a_hidden_line_is_not_found_and_a_deleted_one_is_gone(logged_in, profile, archive):
    logged_in.post(reverse("curation:hide", args=["owner", archive[3].mid]))
    logged_in.post(reverse("curation:delete", args=["owner", archive[2].mid]))
    html = logged_in.get(reverse("archive"), {"q": "beach"}).content.decode()
    assert "unreal" not in html and "new bicycle" not in html


def test_browsing_without_a_query_is_newest_first_and_keyset_paged(logged_in, profile, monkeypatch):
    monkeypatch.setattr(archive_views, "PAGE_SIZE", 2)
    made = [say(profile, n, "user", f"line {n}", at=T0 + timedelta(minutes=n)) for n in range(1, 6)]
    first = logged_in.get(reverse("archive"))
    assert [m.mid for m in first.context["lines"]] == [made[4].mid, made[3].mid]
    assert f"before={made[3].mid}" in first.content.decode()
    second = logged_in.get(reverse("archive"), {"before": made[3].mid})
    assert [m.mid for m in second.context["lines"]] == [made[2].mid, made[1].mid]
    last = logged_in.get(reverse("archive"), {"before": made[1].mid})
    assert [m.mid for m in last.context["lines"]] == [made[0].mid]
    assert last.context["next_before"] == ""


def test_search_results_are_paged_with_a_bounded_offset(logged_in, profile, monkeypatch):
    monkeypatch.setattr(archive_views, "PAGE_SIZE", 2)
    for n in range(1, 6):
        say(profile, n, "user", f"kayak trip number {n}", at=T0 + timedelta(minutes=n))
    seen = []
    for page in (1, 2, 3):
        response = logged_in.get(reverse("archive"), {"q": "kayak", "page": page})
        assert response.context["pages"] == 3
        seen += [m.mid for m in response.context["lines"]]
    assert len(seen) == 5 == len(set(seen))
    assert logged_in.get(reverse("archive"), {"q": "kayak", "page": "999"}).context["page"] == 3
    assert logged_in.get(reverse("archive"), {"q": "kayak", "page": "x"}).status_code == 200


def test_htmx_gets_only_the_results_fragment(logged_in, archive):
    html = logged_in.get(reverse("archive"), {"q": "海边"}, headers={"HX-Request": "true"}).content.decode()
    assert html.lstrip().startswith('<section id="results"') and "<html" not in html


def _queries(client, params) -> int:
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(reverse("archive"), params).status_code == 200
    return len(ctx.captured_queries)


def test_the_query_count_does_not_grow_with_the_archive(logged_in, profile):
    for n in range(1, 4):
        say(profile, n, "user", f"river walk {n}", at=T0 + timedelta(minutes=n))
    _queries(logged_in, {})  # the first visit stores the current profile in the session
    small = (_queries(logged_in, {"q": "river"}), _queries(logged_in, {}))
    for n in range(4, 80):
        say(profile, n, "assistant" if n % 2 else "user", f"river walk {n}", at=T0 + timedelta(minutes=n))
    assert (_queries(logged_in, {"q": "river"}), _queries(logged_in, {})) == small


def test_another_users_lines_are_never_found(client, profile, archive):
    client.force_login(UserFactory())
    response = client.get(reverse("archive"), {"q": "海边"})
    assert response.context["lines"] == []
    ProfileFactory(user=response.wsgi_request.user, key="mine")
    assert client.get(reverse("archive"), {"q": "海边", "profile": "mine"}).context["lines"] == []
    assert Message.objects.count() == 5


def test_another_users_message_actions_are_404_and_change_nothing(client, profile, archive):
    client.force_login(UserFactory())
    for name in ("curation:hide", "curation:delete", "curation:favourite"):
        assert client.post(reverse(name, args=["owner", archive[0].mid])).status_code == 404
    archive[0].refresh_from_db()
    assert archive[0].deleted_at is None


def test_lines_close_in_meaning_are_listed_beside_the_exact_matches_r8(logged_in, profile):
    say(profile, 1, "user", "我的猫今天生病了，我带它去看了兽医。", at=T0)
    say(profile, 2, "user", "The cat knocked a glass off the table", at=T0 + timedelta(minutes=1))
    say(profile, 3, "user", "Remember to buy batteries for the remote.", at=T0 + timedelta(minutes=2))
    response = logged_in.get(reverse("archive"), {"q": "cat vet"})
    assert [m.content for m in response.context["lines"]] == ["The cat knocked a glass off the table"]
    similar = [m.content for m in response.context["similar"]]
    assert similar[0] == "我的猫今天生病了，我带它去看了兽医。"
    assert "batteries" not in " ".join(similar)
    html = response.content.decode()
    assert "Similar meaning" in html and 'id="similar-c_0000000000000001"' in html


def test_a_date_range_is_applied_before_ranking_and_the_cut_is_said(logged_in, profile, monkeypatch):
    monkeypatch.setattr(archive_views, "MAX_HITS", 3)
    monkeypatch.setattr(archive_views, "SEARCH_CONFIG", archive_views.dataclasses.replace(archive_views.SEARCH_CONFIG, n_candidates=3))
    for n in range(1, 7):  # six strong matches early in March, outranking the one we want
        say(profile, n, "user", f"river river river walk {n}", at=T0 + timedelta(minutes=n))
    late = [say(profile, 10 + n, "user", f"a long day, then a river walk {n}", at=T0 + timedelta(days=20, minutes=n)) for n in range(4)]
    response = logged_in.get(reverse("archive"), {"q": "river", "date_from": "2026-03-15", "date_to": "2026-03-31"})
    found = {m.pk for m in response.context["lines"]}
    assert found and found <= {m.pk for m in late}
    assert len(found) == 3
    assert response.context["capped"]
    assert "the 3 best of these dates" in response.content.decode()


def test_a_one_character_chinese_search_finds_the_lines_that_contain_it(logged_in, profile):
    say(profile, 1, "user", "我的猫叫年糕", at=T0)
    say(profile, 2, "user", "猫粮快吃完了", at=T0 + timedelta(minutes=1))
    say(profile, 3, "user", "今天下雨了", at=T0 + timedelta(minutes=2))
    lines = logged_in.get(reverse("archive"), {"q": "猫"}).context["lines"]
    assert {m.content for m in lines} == {"我的猫叫年糕", "猫粮快吃完了"}

"""Favourites, highlights, experiences and relations (SPEC C1-C7)."""

import pytest

from memory.curation import (
    ExperienceRefused,
    HighlightRefused,
    RelationRefused,
    add_favourite,
    add_highlight,
    link,
    propose_experience,
)
from memory.deletion import hide_message
from memory.models import Experience, ExperienceHistory, Favourite, Highlight, Relation
from tests.factories import (
    ExperienceFactory,
    HighlightFactory,
    MessageFactory,
    ProfileFactory,
    RelationFactory,
)

pytestmark = pytest.mark.django_db


# --- C1, C2: highlights and favourites ---


def test_a_verbatim_excerpt_becomes_a_highlight_of_its_message(profile):
    message = MessageFactory(profile=profile, content="We walked by the sea at dusk.")
    highlight = add_highlight(profile=profile, message=message, text="by the sea", source="user")
    assert (highlight.message, highlight.mid, highlight.content) == (message, message.mid, "by the sea")


def test_a_cjk_and_emoji_substring_is_accepted_verbatim(profile):
    message = MessageFactory(profile=profile, content="今天去海边散步了🌊，风很大。")
    highlight = add_highlight(profile=profile, message=message, text="海边散步了🌊", source="assistant")
    assert highlight.content == "海边散步了🌊"


def test_a_paraphrase_is_refused_naming_the_reason(profile):
    message = MessageFactory(profile=profile, content="今天去海边散步了")
    with pytest.raises(HighlightRefused) as refused:
        add_highlight(profile=profile, message=message, text="今天去了海边", source="assistant")
    assert refused.value.code == "not_verbatim" and "verbatim" in refused.value.reason
    assert not Highlight.objects.exists()


def test_a_different_emoji_is_not_verbatim(profile):
    message = MessageFactory(profile=profile, content="good night 🌙")
    with pytest.raises(HighlightRefused):
        add_highlight(profile=profile, message=message, text="good night 🌛", source="user")


def test_an_empty_excerpt_is_refused(profile):
    message = MessageFactory(profile=profile, content="hello")
    with pytest.raises(HighlightRefused) as refused:
        add_highlight(profile=profile, message=message, text="   ", source="user")
    assert refused.value.code == "empty"


def test_a_message_of_another_profile_is_refused(profile):
    message = MessageFactory(content="hello")
    with pytest.raises(HighlightRefused) as refused:
        add_highlight(profile=profile, message=message, text="hello", source="user")
    assert refused.value.code == "not_found"


def test_a_hidden_message_cannot_be_highlighted(profile):
    message = MessageFactory(profile=profile, content="hello")
    hide_message(message)
    with pytest.raises(HighlightRefused) as refused:
        add_highlight(profile=profile, message=message, text="hello", source="user")
    assert refused.value.code == "message_deleted"


def test_with_strict_mid_off_a_paraphrase_is_kept_and_marked_unverified(profile, settings):
    settings.STRICT_MID = False
    message = MessageFactory(profile=profile, content="今天去海边散步了")
    highlight = add_highlight(profile=profile, message=message, text="去了海边", source="assistant")
    assert highlight.legacy_extra == {"verbatim": False}


def test_the_same_quote_twice_returns_the_same_highlight(profile):
    message = MessageFactory(profile=profile, content="hello there")
    first = add_highlight(profile=profile, message=message, text="there", source="assistant")
    again = add_highlight(profile=profile, message=message, text="there", source="assistant")
    assert first == again and Highlight.objects.count() == 1


def test_favouriting_a_whole_message_makes_a_favourite_and_a_highlight(profile):
    message = MessageFactory(profile=profile, content="你好 👋 hello")
    favourite = add_favourite(profile=profile, message=message)
    assert favourite.excerpt == "" and favourite.highlight.content == "你好 👋 hello"
    assert favourite.highlight.source == Highlight.Source.USER


def test_favouriting_a_part_quotes_only_that_part(profile):
    message = MessageFactory(profile=profile, content="你好 👋 hello")
    favourite = add_favourite(profile=profile, message=message, excerpt="👋 hel")
    assert favourite.highlight.content == "👋 hel"


def test_a_non_verbatim_favourite_stores_nothing(profile):
    message = MessageFactory(profile=profile, content="hello")
    with pytest.raises(HighlightRefused):
        add_favourite(profile=profile, message=message, excerpt="goodbye")
    assert not Favourite.objects.exists() and not Highlight.objects.exists()


def test_favouriting_twice_keeps_one_favourite(profile):
    message = MessageFactory(profile=profile, content="hello")
    add_favourite(profile=profile, message=message)
    add_favourite(profile=profile, message=message)
    assert Favourite.objects.count() == 1


# --- C3: proposing experiences ---


def test_a_proposed_experience_is_a_candidate_citing_its_sources(profile):
    a = MessageFactory(profile=profile, mid="c_00000000000000a1")
    b = MessageFactory(profile=profile, mid="c_00000000000000b2")
    experience = propose_experience(
        profile=profile, title="Moved to Berlin", content="They moved in May.", source_mids=[a.mid, b.mid]
    )
    assert experience.status == Experience.Status.CANDIDATE
    assert experience.source_mids == [a.mid, b.mid]
    assert list(Experience.objects.candidates()) == [experience]


def test_proposing_writes_a_create_history_row_by_the_agent(profile):
    message = MessageFactory(profile=profile)
    experience = propose_experience(profile=profile, title="t", content="c", source_mids=[message.mid])
    row = experience.history.get()
    assert (row.action, row.actor, row.before) == ("create", "agent", None)
    assert row.after["source_mids"] == [message.mid]


def test_missing_source_mids_are_refused_by_name(profile):
    message = MessageFactory(profile=profile)
    with pytest.raises(ExperienceRefused) as refused:
        propose_experience(
            profile=profile, title="t", content="c", source_mids=[message.mid, "c_ffffffffffffffff"]
        )
    assert refused.value.missing_mids == ["c_ffffffffffffffff"]
    assert "c_ffffffffffffffff" in refused.value.reason
    assert not Experience.objects.exists()


def test_a_source_in_another_profile_counts_as_missing(profile):
    elsewhere = MessageFactory(profile=ProfileFactory(user=profile.user, key="other"))
    with pytest.raises(ExperienceRefused) as refused:
        propose_experience(profile=profile, title="t", content="c", source_mids=[elsewhere.mid])
    assert refused.value.missing_mids == [elsewhere.mid]


def test_a_hidden_source_counts_as_missing(profile):
    message = MessageFactory(profile=profile)
    hide_message(message)
    with pytest.raises(ExperienceRefused):
        propose_experience(profile=profile, title="t", content="c", source_mids=[message.mid])


def test_an_experience_without_sources_is_refused(profile):
    with pytest.raises(ExperienceRefused):
        propose_experience(profile=profile, title="t", content="c", source_mids=[])


def test_a_user_may_record_a_confirmed_experience(profile, user):
    message = MessageFactory(profile=profile)
    experience = propose_experience(
        profile=profile, title="t", content="c", source_mids=[message.mid],
        actor="user", actor_user=user, confirm=True,
    )
    assert experience.status == Experience.Status.ACTIVE
    assert experience.history.get().actor_user == user


# --- C3, C4, C5: lifecycle with history ---


def test_confirming_a_candidate_makes_it_active_with_a_history_row(profile, user):
    experience = ExperienceFactory(profile=profile, status="candidate")
    assert experience.confirm(by=user)
    row = experience.history.get()
    assert (row.action, row.actor, row.actor_user) == ("confirm", "user", user)
    assert (row.before["status"], row.after["status"]) == ("candidate", "active")
    assert list(Experience.objects.active()) == [experience]


def test_an_admin_rejection_is_recorded_with_the_admin_actor(profile, admin_user):
    experience = ExperienceFactory(profile=profile, status="candidate")
    experience.reject(by=admin_user, actor="admin", reason="not true")
    row = experience.history.get()
    assert (row.actor, row.reason, experience.status) == ("admin", "not true", "rejected")
    assert not Experience.objects.candidates().exists()


def test_confirming_twice_writes_one_history_row(profile, user):
    experience = ExperienceFactory(profile=profile, status="candidate")
    experience.confirm(by=user)
    assert experience.confirm(by=user) is False
    assert experience.history.count() == 1


def test_editing_keeps_the_previous_value(profile, user):
    experience = ExperienceFactory(profile=profile, title="Lives in Paris", content="c")
    experience.edit(by=user, title="Lives in Lyon", reason="moved")
    row = experience.history.get()
    assert (row.before["title"], row.after["title"], row.reason) == ("Lives in Paris", "Lives in Lyon", "moved")


def test_an_invalidated_experience_is_kept_but_not_active(profile, user):
    experience = ExperienceFactory(profile=profile, status="active")
    experience.invalidate(by=user, reason="no longer true")
    experience.refresh_from_db()
    assert experience.invalid_at is not None
    assert not Experience.objects.active().exists()
    assert Experience.objects.filter(pk=experience.pk).exists()
    assert experience.history.get().action == "invalidate"


def test_merging_combines_sources_and_invalidates_the_other(profile, user):
    a, b, c = (MessageFactory(profile=profile) for _ in range(3))
    survivor = propose_experience(profile=profile, title="s", content="c", source_mids=[a.mid, b.mid])
    other = propose_experience(profile=profile, title="o", content="c", source_mids=[b.mid, c.mid])
    survivor.merge(other, by=user, reason="same event")
    other.refresh_from_db()
    assert survivor.source_mids == [a.mid, b.mid, c.mid]
    assert other.invalid_at is not None
    merged_into = other.history.get(action="merged_into")
    assert merged_into.after["merged_into"] == survivor.eid and merged_into.actor_user == user
    assert survivor.history.get(action="merge").after["merged_from"] == other.eid


def test_an_experience_cannot_merge_with_itself(profile):
    experience = ExperienceFactory(profile=profile)
    with pytest.raises(Exception, match="two different"):
        experience.merge(experience)


# --- C6, C7: relations ---


def test_a_highlight_and_an_experience_can_be_related(profile):
    highlight = HighlightFactory(message=MessageFactory(profile=profile))
    experience = ExperienceFactory(profile=profile)
    relation = link(profile=profile, from_item=highlight, to_item=experience, type="causes")
    assert (relation.from_id, relation.type, relation.to_id) == (highlight.hid, "causes", experience.eid)
    assert (relation.source, relation.target) == (highlight, experience)


def test_an_unknown_relation_type_is_refused(profile):
    a, b = ExperienceFactory(profile=profile), ExperienceFactory(profile=profile)
    with pytest.raises(RelationRefused):
        link(profile=profile, from_item=a, to_item=b, type="loves")


def test_items_of_another_profile_cannot_be_related(profile):
    mine, theirs = ExperienceFactory(profile=profile), ExperienceFactory()
    with pytest.raises(RelationRefused):
        link(profile=profile, from_item=mine, to_item=theirs, type="related")


def test_deleting_a_highlight_soft_deletes_its_relations_but_not_its_message(profile):
    relation = RelationFactory(profile=profile)
    highlight = relation.from_highlight
    highlight.soft_delete()
    relation.refresh_from_db()
    highlight.message.refresh_from_db()
    assert relation.deleted_at is not None and highlight.message.deleted_at is None


def test_deleting_an_experience_soft_deletes_its_relations(profile, user):
    relation = RelationFactory(profile=profile)
    relation.to_experience.soft_delete(by=user)
    relation.refresh_from_db()
    assert relation.deleted_at is not None
    assert Relation.objects.live().count() == 0
    assert ExperienceHistory.objects.filter(action="delete").count() == 1


def test_a_marker_quote_is_attached_to_the_newest_candidate_quoting_it(profile):
    older = MessageFactory(profile=profile, content="我们去看海吧")
    newer = MessageFactory(profile=profile, content="好呀，去看海")
    other = MessageFactory(profile=profile, content="晚安")
    highlight = add_highlight(profile=profile, text="看海", source="assistant", candidates=[older, newer, other])
    assert highlight.message == newer


def test_a_marker_quote_found_in_no_candidate_is_refused(profile):
    message = MessageFactory(profile=profile, content="晚安")
    with pytest.raises(HighlightRefused) as refused:
        add_highlight(profile=profile, text="看海", source="assistant", candidates=[message])
    assert refused.value.code == "not_verbatim"


def test_usable_highlights_exclude_those_of_hidden_messages(profile):
    kept = HighlightFactory(message=MessageFactory(profile=profile))
    hidden = HighlightFactory(message=MessageFactory(profile=profile))
    hide_message(hidden.message)
    assert list(Highlight.objects.usable()) == [kept]

"""Issue 25 point 7 (U-series): the experience refusals that were still English — the hand-edit
guard, "no longer true", "was rejected" (memory.consolidation), the archive and form checks of
memory.curation and the relation refusals — read in Chinese where a person sees them, while
the model (and the run's log text) still gets exactly the English it always got."""

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse
from django.utils import timezone, translation

from memory import consolidation
from memory.curation import ExperienceRefused, RelationRefused, link, propose_experience
from memory.phrases import shown
from tests.factories import HighlightFactory, MessageFactory, SliceFactory

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 8, 17, 9, 0, tzinfo=UTC)
WORD = re.compile(r"[A-Za-z][A-Za-z_]+")
# What a refusal names as it is: the tools' argument names, ids, the time zone.
NAMES = {"UTC", "exp", "id", "time_certainty", "source_mids", "unknown", "exact", "approximate", "type", "agent", "robot",
         "c_ffffffffffffffff", "supports", "contradicts", "related", "causes", "follows", "same"}


def english(text: str) -> set[str]:
    return {w for w in WORD.findall(text) if w not in NAMES}


def zh(reason) -> str:
    with translation.override("zh-hans"):
        return shown(reason)


@pytest.fixture
def said(profile):
    slice_ = SliceFactory(profile=profile, key="2026-08-17-0900", started_at=T0, last_message_at=T0, tz="UTC")

    def line(text, *, at=None):
        n = MessageFactory._meta.model.objects.count()
        return MessageFactory(profile=profile, slice=slice_, speaker="user", content=text,
                              created_at=at or T0 + timedelta(minutes=n), mid=f"c_{n:016x}")
    return line


@pytest.fixture
def berlin(profile, said):
    m = said("I live in Berlin, near the Spree. 我住在柏林。")
    exp = propose_experience(profile=profile, title="Lives in Berlin", content="They live in Berlin 柏林",
                             source_mids=[m.mid])
    exp.confirm(actor="agent")
    return exp


def refusal(call) -> str:
    with pytest.raises((ExperienceRefused, RelationRefused)) as refused:
        call()
    return refused.value.reason


@pytest.mark.parametrize("hand, who, done", [("edit", "本人", "已编辑"), ("confirm", "本人", "已确认"),
                                            ("admin", "管理员", "已编辑")])
def test_the_hand_edit_guard_reads_in_chinese(profile, said, berlin, hand, who, done):
    """Before: "experience exp_… was edited by the person on … UTC; the agent may change it only …" in zh too."""
    old = said("We left Berlin for Lisbon")
    if hand == "edit":
        berlin.edit(by=profile.user, title="Lives in Berlin (my words)")
    elif hand == "confirm":
        berlin.status = "candidate"
        berlin.save()
        berlin.confirm(by=profile.user)
    else:
        berlin.edit(actor="admin", reason="admin fix", content="They live in Berlin (checked)")
    reason = refusal(lambda: consolidation.invalidate_experience(
        profile=profile, eid=berlin.eid, stopped_at="2026-08-10", evidence_mids=[old.mid], reason="moved"))
    english_who = "the person" if who == "本人" else "an admin"
    assert re.fullmatch(
        rf"experience {berlin.eid} was (edited|confirmed) by {english_who} on \d{{4}}-\d\d-\d\d \d\d:\d\d UTC; the agent"
        r" may change it only with evidence newer than that \(none of the cited messages is\)", reason), reason
    chinese = zh(reason)
    assert berlin.eid in chinese and who in chinese and done in chinese and "代理" in chinese, chinese
    assert english(chinese.replace(berlin.eid, " ")) == set(), chinese


def test_no_longer_true_and_rejected_read_in_chinese(profile, said, berlin):
    m = said("We left Berlin")
    consolidation.invalidate_experience(profile=profile, eid=berlin.eid, stopped_at="2026-08-10",
                                        evidence_mids=[m.mid], reason="x")
    for call, verb in [
        (lambda: consolidation.update_experience(profile=profile, eid=berlin.eid, title="Berlin", content="Berlin again",
                                                 evidence_mids=[m.mid], reason="x"), "更新"),
        (lambda: consolidation.confirm_with_evidence(profile=profile, eid=berlin.eid, evidence_mids=[m.mid],
                                                     reason="x"), "确认"),
    ]:
        reason = refusal(call)
        assert reason.startswith(f"experience {berlin.eid} is no longer true (invalidated 2026-08-10); it cannot be")
        chinese = zh(reason)
        assert "不再成立" in chinese and "2026-08-10" in chinese and verb in chinese, chinese
        assert english(chinese.replace(berlin.eid, " ")) == set(), chinese

    newer = said("Berlin, again", at=timezone.now() + timedelta(seconds=1))
    rejected = propose_experience(profile=profile, title="Lives in Berlin", content="Berlin", source_mids=[newer.mid])
    rejected.reject(by=profile.user)
    reason = refusal(lambda: consolidation.update_experience(
        profile=profile, eid=rejected.eid, title="Left Berlin", content="Left Berlin", evidence_mids=[newer.mid],
        reason=""))
    assert reason == f"experience {rejected.eid} was rejected; it cannot be updated"
    assert zh(reason) == f"经历 {rejected.eid} 已被拒绝，不能再更新"


def test_curations_refusals_read_in_chinese_and_stay_english(profile, said):
    m = said("我养了一只猫")
    cases = [
        (lambda: propose_experience(profile=profile, title=" ", content="x", source_mids=[m.mid]),
         "an experience needs a non-empty title and content", "标题"),
        (lambda: propose_experience(profile=profile, title="猫", content="灰猫", source_mids=[m.mid],
                                    time_certainty="maybe"),
         "time_certainty must be one of exact, approximate, unknown", "之一"),
        (lambda: propose_experience(profile=profile, title="猫", content="灰猫", source_mids=[m.mid], actor="robot"),
         "unknown actor 'robot'", "操作者"),
        (lambda: propose_experience(profile=profile, title="猫", content="灰猫", source_mids=[]),
         "source_mids must name at least one archived message id", "至少"),
        (lambda: propose_experience(profile=profile, title="猫", content="灰猫", source_mids=["c_ffffffffffffffff"]),
         "these source message ids do not exist in this profile's archive (or are deleted): c_ffffffffffffffff."
         " Cite only message ids you were shown.", "存档"),
        (lambda: consolidation.evidence(profile, ["c_ffffffffffffffff"], about="猫"),
         "these evidence message ids do not exist in this person's archive (or are deleted): c_ffffffffffffffff."
         " Cite only message ids you were shown.", "证据"),
    ]
    for call, english_text, word in cases:
        reason = refusal(call)
        assert str(reason) == english_text or english_text in str(reason), reason
        chinese = zh(reason)
        assert word in chinese and english(chinese) == set(), chinese


def test_relation_refusals_read_in_chinese(profile, said):
    highlight = HighlightFactory(profile=profile, message=said("今天看海"), content="看海")
    reason = refusal(lambda: link(profile=profile, from_item=highlight, to_item=highlight, type="related"))
    assert reason == "an item cannot be related to itself"
    assert zh(reason) == "一项不能与自身关联"
    reason = refusal(lambda: link(profile=profile, from_item=highlight, to_item=None, type="related"))
    assert zh(reason) == "两端都必须是这位伙伴的高光或经历"


def test_the_experiences_page_shows_a_missing_source_in_chinese(client, profile):
    """Before: the form said "these source message ids do not exist in this profile's archive …" on a zh page."""
    client.force_login(profile.user)
    data = {"title": "养猫", "content": "灰猫", "source_mids": "c_ffffffffffffffff", "time_certainty": "unknown"}
    page = client.post(reverse("curation:experiences", args=[profile.key]), data, HTTP_ACCEPT_LANGUAGE="zh-hans")
    text = page.content.decode()
    assert "这些来源消息 id 不在这位伙伴的存档里（或已删除）：c_ffffffffffffffff" in text
    assert "do not exist" not in text

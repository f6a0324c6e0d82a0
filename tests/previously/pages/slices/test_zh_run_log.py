"""Issue 25 point 7 (U-series): the reasons a tool call of the Previously Agent was refused are
shown in the person's language, on the slice page's technical log and in the chat's run notice,
while the model still gets (and the run keeps) the English text."""

import pytest
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import translation

from memory.consolidation import update_experience
from memory.curation import ExperienceRefused
from memory.models import EvolutionRun, Slice, SliceLogEntry
from memory.phrases import shown
from memory.slices import on_closed
from previously.agent.evolve import create_run, execute_run
from previously.agent.tools import REGISTRY
from previously.pages.slices.log_lines import log_line
from tests.llm_server import Turn
from tests.previously.agent.helpers import make_slice
from tests.previously.pages.test_zh_pages import english

pytestmark = pytest.mark.django_db

REF = "2026/08/17/0515"
# What the refusals may name as they are: the tools, their arguments, the ref shape.
NAMES = {*REGISTRY, "ref", "refs", "summary", "text", "since", "event_time", "YYYY", "MM", "DD", "HHMM", "ISO",
         "JSON", "by", "evidence_mids", "reason", "eid", "read_slice", "core"}

REFUSED = [
    Turn(tool_calls=[("set_portrait", {"text": "小雨" * 1300})]),  # too long
    Turn(tool_calls=[("add_now", {"text": "在练陶艺", "refs": [], "since": "2026-08-17"})]),  # no refs
    Turn(tool_calls=[("add_now", {"text": "在练陶艺", "refs": [REF], "since": "下周"})]),  # not a date
    Turn(tool_calls=[("read_slice", {"ref": "不是"}), ("set_identity", "{不是 JSON"), ("丢掉", {})]),
    Turn(tool_calls=[("update_experience", {"eid": "exp_1"})]),  # not offered in the card phase
    Turn(tool_calls=[("finish", {"summary": " "})]),
    Turn(tool_calls=[("finish", {"summary": "没有新的事实。"}), ("add_now", {"text": "x"})]),  # after finish
]


def refused_run(profile, llm_server) -> EvolutionRun:
    profile.language = "zh"
    profile.save(update_fields=["language"])
    slice_ = make_slice(profile, lines=[("user", "我报了陶艺课")])
    llm_server.script(*REFUSED)
    run = execute_run(create_run(profile=profile, slice_=slice_, trigger=EvolutionRun.Trigger.MANUAL).pk)
    assert run.status == EvolutionRun.Status.UNCHANGED, run.error
    return run


def test_the_model_still_reads_english_refusals(profile, llm_server, llm_provider):
    """The stored/sent English form is unchanged: what the model and the run's steps hold."""
    run = refused_run(profile, llm_server)
    results = [s["result"] for s in run.steps if s["event"] == "tool"]
    assert results[0] == "refused: portrait is 2600 chars, limit 2400 — compress and retry"
    assert results[1].startswith("refused: refs are required — cite at least one slice as YYYY/MM/DD/HHMM")
    assert results[2] == "refused: since '下周' is not a date YYYY-MM-DD, e.g. '2026-08-21'"
    assert results[3] == "refused: no slice '不是' for this person — refs look like 2026/08/11/1426"
    assert results[5].startswith("unknown tool '丢掉' — use one of: set_identity, set_portrait")
    assert results[6].startswith("refused: update_experience is not offered in this step")
    assert results[-1] == "ignored: the run already finished"


def test_the_slice_pages_run_log_speaks_chinese(client, user, profile, llm_server, llm_provider):
    """Before: each refused call's line read e.g. "set_portrait 拒绝：refused: portrait is 2600 chars…"."""
    run = refused_run(profile, llm_server)
    tool_lines = SliceLogEntry.objects.filter(slice=run.slice, data__event="tool").count()
    assert tool_lines == 10
    client.force_login(user)
    client.cookies["django_language"] = "zh-hans"
    page = client.get(reverse("slice", args=[run.slice.key]), headers={"accept-language": "zh-CN"})
    assert page.status_code == 200
    text = page.content.decode()
    assert "2600" in text and "不是" in text  # the refusals are there, with what they name
    assert english(text) - NAMES == set(), [line for line in text.splitlines() if english(line) - NAMES]


def test_the_chats_run_notice_speaks_chinese(profile, llm_server, llm_provider):
    run = refused_run(profile, llm_server)
    steps = [s for s in run.steps if s["event"] == "tool" and not s["accepted"]]
    with translation.override("zh-hans"):
        shown = [render_to_string("card/evolution.html#tool", {"run": run, "step": s, "event": "tool"})
                 for s in steps]
    left = [{w for w in english(html) - NAMES if not any(n.startswith(w) for n in NAMES)} for html in shown]
    assert left == [set()] * len(shown)  # (a name cut by the notice's 160 characters is still a name)


@pytest.mark.parametrize("eid", ["exp_不存在", "  "])
def test_an_experience_refusal_reads_in_chinese_and_stays_english_for_the_model(profile, eid):
    """The experience phase's refusals (memory.consolidation) are phrases too."""
    with pytest.raises(ExperienceRefused) as refused:
        update_experience(profile=profile, eid=eid, title="晨跑", content="每天跑", evidence_mids=[], reason="")
    reason = refused.value.reason
    assert str(reason).startswith(("no experience 'exp_不存在' for this person", "name the experience by its id"))
    with translation.override("zh-hans"):
        assert english(shown(reason)) - NAMES - {"exp_"} == set(), shown(reason)


def test_a_closed_slices_note_reads_in_chinese(client, user, profile):
    """Issue 25 point 7 (U-series): the slice log's "slice closed (…)" note was shown as stored,
    in English, on a Chinese slice page; in English it reads as before."""
    slice_ = make_slice(profile, lines=[("user", "晚安")])
    slice_.close_reason = Slice.CloseReason.NEW_CONVERSATION
    on_closed(slice_)  # (make_slice gives a slice already ended)
    entry = SliceLogEntry.objects.get(slice=slice_, data__event="closed")
    assert entry.summary == "slice closed (new conversation)"
    assert log_line(entry) == "slice closed (new conversation)"
    client.force_login(user)
    page = client.get(reverse("slice", args=[slice_.key]), headers={"accept-language": "zh-hans"}).content.decode()
    assert "对话片段已结束（" in page and "slice closed" not in page

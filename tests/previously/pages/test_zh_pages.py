"""Issue 17 point 9: zh pages speak Chinese. Every page family is rendered for a person whose
browser and companion speak Chinese, over an archive written in Chinese; no English word may
show (text, and the labels people read: title, aria-label, placeholder, alt, data-* labels),
except names that are not translated (the product's name, format names, environment variables)."""

import html
import re
from datetime import UTC, datetime

import pytest
from django.urls import reverse

from memory.archive import archive_message
from memory.curation import add_favourite
from memory.models import Card, EvolutionRun, Profile, Slice
from tests.factories import CardSnapshotFactory, ExperienceFactory, HighlightFactory

pytestmark = pytest.mark.django_db

ZH_CARD = """\
# Previously On

_Active slice: 2026-08-17-2213 | Format: user card v2 | Updated: 2026-08-17T14:27:48Z_

## Identity

- Name: 小艾
- Address them as: 你
- Alias: 艾艾

## Past

小艾是工程师，喜欢有证据的回答。

- 2021 年毕业；2024 年五月换了工作 — refs: [2026/08/16/2211]

## Now

- 在练五公里 — refs: [2026/08/16/2211] | since: 2026-08-11

## Horizon

- 给老周写婚礼致辞 — by: 2026-08-21 — refs: [2026/08/16/2211]

## Self-model

- 小艾倾诉时先共情 — refs: [2026/08/16/2211]
"""
LINES = [
    ("user", "今天早上跑了五公里，感觉很好"),
    ("assistant", "太棒了！**上班前**跑五公里可不容易。"),
    ("user", "我妹妹小雨下周来，我们打算去爬香山"),
    ("assistant", "听起来很美，香山的秋天很漂亮。"),
]
# Words that stay as they are in Chinese: the product's and formats' names, units, variables.
ALLOWED = {
    "Previously", "On", "Markdown", "JSON", "JSONL", "jsonl", "json", "zip", "PNG", "SillyTavern", "KV", "ID", "IDs", "API", "LLM", "URL", "OpenAI",
    "Enter", "Shift", "Esc", "MB", "KB", "UTC", "HH", "MM", "YYYY", "DD", "PREVIOUSLY_LLM_BASE_URL",
    "PREVIOUSLY_LLM_MODEL", "PREVIOUSLY_AGENT_MODEL", "PREVIOUSLY_BACKUP_HOURS", "STRICT_MID", "MEM_READ_LEGACY", "token", "IANA",
    "Asia", "Shanghai", "Europe", "Berlin",  # the time zone field's examples
    "English",  # the language menu names each language in its own tongue
    "ChatGPT", "Claude", "Open", "WebUI",  # the apps a history comes from (H1)
    "beach",  # the archive's example of searching in any language
    "owner",  # the profile key, an identifier shown beside the companion's name
    "alice",  # the account's user name
    "id",  # "消息 id": the ids a person types
}
# The admin also shows what third-party apps and Django's own catalogue leave in English.
ADMIN_ALLOWED = {"Django", "Access", "attempts", "failures", "logs", "Axes", "Tasks", "Task", "Results", "Database",
                 "Backend", "Select", "an", "option", "Search"}
# Identifiers (message, highlight and mid prefixes) and {placeholders} filled in by a script.
IDENTIFIERS = re.compile(r"\b(?:[ach]_[0-9a-z_]*|mem_)|\{[a-z_]+\}")
LABEL_ATTRS = re.compile(r'\s(?:title|aria-label|placeholder|alt|data-(?!mid|key|now|lang|max-bytes|hid|src)[a-z-]+)="([^"]*)"')
WORD = re.compile(r"[A-Za-z][A-Za-z_'’]+")


def seed(user) -> tuple[Profile, Slice, str]:
    sea = Profile.objects.create(user=user, key="owner", name="小海", language="zh", persona="你是小海。", tz="Asia/Shanghai")
    for n, (speaker, text) in enumerate(LINES, 1):
        mid = f"c_{n:016x}" if speaker == "user" else f"a_{1786000000000 + n}_abc{n:03d}"
        archive_message(profile=sea, mid=mid, speaker=speaker, content=text, tz="Asia/Shanghai",
                        created_at=datetime(2026, 8, 16 if n < 3 else 17, 14, 10 + n, tzinfo=UTC), new_conversation=(n == 3))
    first = Slice.objects.filter(profile=sea).order_by("started_at").first()
    first.close(reason="new_conversation")
    Card.objects.update_or_create(profile=sea, defaults={"text": ZH_CARD})
    CardSnapshotFactory(slice=first, text=ZH_CARD)
    for status, summary in (("changed", "记下了晨跑。"), ("unchanged", "没有新的事实。"), ("skipped", "")):
        EvolutionRun.objects.create(profile=sea, slice=first, trigger="slice_close", status=status, summary=summary,
                                    diff="+- 在练五公里 [2026/08/16/2211]" if status == "changed" else "",
                                    skip_reason="太短" if status == "skipped" else "")
    line = sea.messages.filter(speaker="user").first()
    HighlightFactory(message=line, content=line.content)
    add_favourite(profile=sea, message=sea.messages.filter(speaker="assistant").first())
    hidden = sea.messages.filter(speaker="user").last()
    hidden.deleted_at = datetime(2026, 8, 18, tzinfo=UTC)
    hidden.save(update_fields=["deleted_at"])
    ExperienceFactory(profile=sea, title="晨跑", content="上班前跑了五公里，感觉很好。")
    reply = sea.messages.filter(speaker="assistant").last()
    reply.prompt_trace = {"recalled": [line.pk], "highlights": [], "experiences": [], "card_version": 1, "recent": 1,
                          "tokens": {"total": 900, "system": 400, "recent": 100, "user": 20, "recalled": 30,
                                     "highlights": 0, "experiences": 0, "card": 300}}
    reply.save(update_fields=["prompt_trace"])
    return sea, first, reply.mid


def english(page: str) -> set[str]:
    # Scripts, styles and commands to type (<code>) are not prose.
    page = re.sub(r"<(script|style|code)\b.*?</\1>", " ", page, flags=re.S)
    labels = " ".join(LABEL_ATTRS.findall(page))
    text = re.sub(r"<[^>]+>", " ", page)
    words = set(WORD.findall(IDENTIFIERS.sub(" ", html.unescape(text + " " + labels))))
    return {w for w in words if w not in ALLOWED}


def test_no_english_on_chinese_pages(client, user):
    sea, first, mid = seed(user)
    user.is_staff = user.is_superuser = True
    user.save(update_fields=["is_staff", "is_superuser"])
    client.force_login(user)
    client.cookies["django_language"] = "zh-hans"
    pages = {
        "chat": reverse("home"),
        "chat-past": reverse("home") + f"?conversation={first.key}",
        "archive": reverse("archive") + "?q=%E9%A6%99%E5%B1%B1",
        "timeline": reverse("timeline"),
        "slice": reverse("slice", args=[first.key]),
        "card": reverse("card"),
        "beliefs": reverse("beliefs"),
        "profiles": reverse("profiles"),
        "settings": reverse("profile_edit", args=["owner"]),
        "data": reverse("data"),
        "about": reverse("about"),
        "experiences": reverse("curation:experiences", args=["owner"]),
        "lines": reverse("curation:messages", args=["owner"]),
        "highlights": reverse("curation:highlights", args=["owner"]),
        "favourites": reverse("curation:favourites", args=["owner"]),
        "why": reverse("chat_why", args=[mid]),
        "admin-runs": reverse("admin:memory_evolutionrun_changelist"),
    }
    found = {}
    for name, url in pages.items():
        response = client.get(url, headers={"accept-language": "zh-CN"})
        assert response.status_code == 200, (name, response.status_code)
        words = english(response.content.decode()) - (ADMIN_ALLOWED if name.startswith("admin") else set())
        if words:
            found[name] = sorted(words)
    assert not found, "\n".join(f"{k}: {v}" for k, v in found.items())



def test_a_hand_edit_is_told_in_the_persons_language(client, user):
    sea, first, _mid = seed(user)
    EvolutionRun.objects.create(profile=sea, slice=first, trigger="hand_edit", status="changed",
                                summary="You corrected Now: “在练五公里” → “在练十公里”", diff="-a\n+b")
    EvolutionRun.objects.create(profile=sea, slice=first, trigger="hand_edit", status="changed",
                                summary="You restored the card as it was at the end of slice 2026/08/16/2211 (2 line(s) out, 1 in)")
    client.force_login(user)
    client.cookies["django_language"] = "zh-hans"
    page = client.get(reverse("timeline")).content.decode()
    assert "你更正了「现在」：“在练五公里” → “在练十公里”" in page
    assert "你把卡片恢复到对话 2026/08/16/2211 结束时的样子（移出 2 行，加入 1 行）" in page
    assert "You corrected" not in page and "You restored" not in page
    client.cookies["django_language"] = "en"
    assert "You corrected Now: “在练五公里” → “在练十公里”" in client.get(reverse("timeline")).content.decode()


@pytest.mark.parametrize("view", ["chat_favourite", "curation:favourite"])
def test_notices_have_a_kind_and_a_refusal_speaks_chinese(client, user, view):
    sea, _first, mid = seed(user)
    client.force_login(user)
    client.cookies["django_language"] = "zh-hans"
    url = reverse(view, args=[mid]) if view == "chat_favourite" else reverse(view, args=["owner", mid])
    saved = client.post(url, headers={"HX-Request": "true"}).content.decode()
    assert 'class="notice ok" role="status"' in saved and "Saved" not in saved
    refused = client.post(url, {"excerpt": "不在这句话里的字"}, headers={"HX-Request": "true"}).content.decode()
    assert 'class="notice error" role="alert"' in refused
    assert "这些文字与原消息不完全一致" in refused and "verbatim" not in refused

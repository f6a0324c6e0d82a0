"""Issue 25 point 7 (U-series): a refused import's record-level detail — which record, which
field, what is wrong — is in the person's language on the data page, not only its lead sentence.
The record is still named as the file names it (profile key, kind, position, id, field)."""

import html
import json
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from tests.factories import MessageFactory
from tests.previously.pages.test_zh_pages import english

pytestmark = pytest.mark.django_db

# What the detail names as the file spells it: the JSON keys of the export and the formats.
NAMES = {"owner", "messages", "speaker", "created_at", "mid", "content", "profiles", "key", "ISO", "user", "assistant", "system",
         "tombstones", "YYYY", "MM", "DD", "HHMM"}
ERROR = re.compile(r'<p class="notice error" role="alert">(.*?)</p>', re.S)


@pytest.fixture
def storage(settings, tmp_path):
    settings.STORAGES = {**settings.STORAGES, "default": {
        "BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {"location": str(tmp_path)}}}


def refusal(client, profile, spoil) -> str:
    MessageFactory(profile=profile, content="今天跑了五公里 🏃")
    client.force_login(profile.user)
    export = json.loads(client.get(reverse("data_export")).content)
    spoil(export)
    upload = SimpleUploadedFile("e.json", json.dumps(export, ensure_ascii=False).encode(), "application/json")
    response = client.post(reverse("data_import_preview"), {"export": upload}, HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert response.status_code == 400
    (error,) = ERROR.findall(response.content.decode())
    return html.unescape(error)


@pytest.mark.parametrize("spoil, named", [
    (lambda e: e["profiles"][0]["messages"][0].update(speaker="机器人"), "'机器人'"),
    (lambda e: e["profiles"][0]["messages"][0].update(created_at="昨天"), "'昨天'"),
    (lambda e: e["profiles"][0]["messages"][0].pop("mid"), "'mid'"),
    (lambda e: e["profiles"][0]["messages"][0].update(content=7), "int"),
    (lambda e: e["profiles"][0].update(messages="全部"), "messages"),
    (lambda e: e["profiles"][0].update(key="不是 key"), "不是 key"),
], ids=["not-a-speaker", "not-a-time", "missing-field", "not-text", "not-a-list", "bad-profile-key"])
def test_a_refused_records_detail_is_in_chinese(client, profile, storage, spoil, named):
    """Before: "无法导入此文件；没有写入任何内容。详情：profile 'owner', messages[0] (…): field 'speaker': '机器人'
    is not one of user, assistant, system"."""
    error = refusal(client, profile, spoil)
    assert named in error  # the record and its value are still named
    assert english(error.replace("'", " ")) - NAMES - {"int"} == set(), error  # (quotes are not words)

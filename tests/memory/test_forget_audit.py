"""End-to-end forget audit (SPEC D6): after a line is deleted for good, a full dump of every
table and the bytes of the database files hold its words nowhere.

A line is archived, the companion's reply quotes it, the scripted Previously Agent reads the
slice and writes a card line quoting it; the person deletes the line with the command the
page uses. Then every table is dumped and scanned, and on SQLite the database file and its
WAL are scanned byte by byte."""

import json
import secrets
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection

from memory.archive import MidTombstoned, archive_message
from memory.card import parse
from memory.card.store import injected_card_for
from memory.curation import add_favourite
from memory.models import Card, CardSnapshot, EvolutionRun, Message, Slice, Tombstone
from memory.slices import close_slice
from previously.agent.evolve import create_run, execute_run
from tests.factories import ProfileFactory
from tests.llm_server import Turn
from tests.sqlite_file import database_bytes

pytestmark = pytest.mark.django_db(transaction=True)


def dump_all_tables() -> str:
    """Every row of every table as text: SQLite's own SQL dump, or each row cast to text."""
    if connection.vendor == "sqlite":
        connection.ensure_connection()
        return "\n".join(connection.connection.iterdump())
    out = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names(cursor):
            cursor.execute(f'SELECT t::text FROM "{table}" t')
            out += [row[0] for row in cursor.fetchall()]
    return "\n".join(out)


def forms(text: str) -> list[str]:
    """The text as UTF-8 and as JSON escapes it (JSON columns store \\uXXXX)."""
    return [text, json.dumps(text)[1:-1], json.dumps(text, ensure_ascii=False)[1:-1]]


def leaks(haystack: str, needles: list[str]) -> list[str]:
    return [n for n in needles if n in haystack]


def file_leaks(needles: list[str]) -> list[str]:
    blobs = database_bytes(connection.settings_dict["NAME"])
    return [n for n in needles if n.encode() in blobs]


def test_a_line_deleted_for_good_is_nowhere_in_the_database(llm_server, llm_provider, user):
    profile = ProfileFactory(user=user, key="owner", language="zh")
    marker = secrets.token_hex(8)
    secret = f"我的秘密代号是紫藤{marker}，藏在蓝色盒子里 🔵 don't tell anyone"
    said = archive_message(profile=profile, mid=f"c_{secrets.token_hex(8)}", speaker="user", content=secret,
                           tz="Asia/Shanghai").message
    slice_ = said.slice
    injected_card_for(slice_)
    reply = archive_message(profile=profile, mid="a_1760000000000_abc", speaker="assistant",
                            content=f"离线模式：你说过「{secret}」", created_at=said.created_at + timedelta(seconds=5)).message
    add_favourite(profile=profile, message=said, excerpt=f"紫藤{marker}")
    close_slice(Slice.objects.get(pk=slice_.pk), reason=Slice.CloseReason.NEW_CONVERSATION)
    ref = slice_.ref
    llm_server.script(
        Turn(tool_calls=[("read_slice", {"ref": ref})]),
        Turn(tool_calls=[("add_anchor_fact", {"text": f"Keeps a code: 紫藤{marker}，藏在蓝色盒子里", "refs": [ref]})]),
        Turn(tool_calls=[("finish", {"summary": f"Noted the code 紫藤{marker}，藏在蓝色盒子里."})]),
    )
    run = execute_run(create_run(profile=profile, slice_=Slice.objects.get(pk=slice_.pk), trigger="manual").pk)
    assert run.status == EvolutionRun.Status.CHANGED, run.error
    needles = forms(secret) + forms(f"紫藤{marker}，藏在蓝色盒子里") + forms(f"紫藤{marker}")
    # The audit can fail: before the delete the words are in the card, the run, the reply...
    before = dump_all_tables()
    assert marker in Card.objects.get(profile=profile).text
    assert len(leaks(before, needles)) >= 3
    assert "read_slice" in json.dumps(run.steps) and secret in json.dumps(run.steps, ensure_ascii=False)

    call_command("delete_message", "--profile", "owner", "--user", user.username, "--mid", said.mid,
                 "--hard", "--force")

    dump = dump_all_tables()
    assert leaks(dump, needles) == []
    if connection.vendor == "sqlite":
        assert file_leaks(needles) == []
    assert not Message.objects.filter(pk__in=[said.pk, reply.pk]).exists()  # the quoting reply went too
    assert Tombstone.objects.filter(profile=profile, kind="msg", object_id=said.mid).exists()
    card = Card.objects.get(profile=profile)
    assert parse(card.text).facts == ()
    forget = EvolutionRun.objects.get(profile=profile, trigger=EvolutionRun.Trigger.FORGET)
    assert "[deleted]" in forget.diff and "-- Keeps a code:" in forget.diff
    assert "[deleted]" in EvolutionRun.objects.get(pk=run.pk).summary
    assert "[deleted]" in CardSnapshot.objects.get(slice=slice_).text
    with pytest.raises(MidTombstoned):
        archive_message(profile=profile, mid=said.mid, speaker="user", content=secret)


def test_a_whole_conversation_and_a_whole_profile_leave_no_copy(user):
    from memory.deletion import delete_profile, delete_slice

    profile = ProfileFactory(user=user, key="owner")
    marker = secrets.token_hex(8)
    first = f"the locker code is {marker} and the key is under the mat"
    second = f"另一个秘密：{marker}在抽屉里"
    a = archive_message(profile=profile, mid=f"c_{secrets.token_hex(8)}", speaker="user", content=first).message
    archive_message(profile=profile, mid=f"c_{secrets.token_hex(8)}", speaker="user", content=second)
    injected_card_for(a.slice)
    Card.objects.update_or_create(profile=profile, defaults={"text": ""})
    delete_slice(Slice.objects.get(pk=a.slice_id))
    needles = forms(first) + forms(second) + [marker]
    assert leaks(dump_all_tables(), needles) == []
    if connection.vendor == "sqlite":
        assert file_leaks(needles) == []
    assert not Slice.objects.filter(pk=a.slice_id).exists()
    assert Tombstone.objects.filter(profile=profile, kind="msg").count() == 2

    other = ProfileFactory(user=user, key="second")
    again = f"second profile secret {marker} 第二个"
    archive_message(profile=other, mid=f"c_{secrets.token_hex(8)}", speaker="user", content=again)
    delete_profile(other)
    assert leaks(dump_all_tables(), forms(again)) == []
    if connection.vendor == "sqlite":
        assert file_leaks(forms(again)) == []

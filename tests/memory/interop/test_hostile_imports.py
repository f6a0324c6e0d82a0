"""Hostile input to both importers (SPEC X4, LEGACY_KV.md rule 8; issue 14 point 6).

A valid export / legacy dump is parsed, then cut and corrupted as a structure -- keys
dropped, values of the wrong type, lists truncated or doubled, bad ids, bad base64 -- so
the importer itself is reached, not the JSON parser. Whatever happens must be one of two
things: the importer refuses with its own error and every table is exactly as before, or
it imports everything, which its report and the rows written must agree on. Any other
exception fails the test.
"""

import base64
import contextlib
import copy
import json
from io import StringIO

import pytest
from django.apps import apps
from django.core.management import call_command
from django.db import connection, transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.synthetic import generate
from memory.interop.export import export_json
from memory.interop.full_import import KINDS as FULL_KINDS
from memory.interop.full_import import BadExport, import_full
from memory.interop.kv_import import BadDump, import_kv
from memory.models import (
    Experience,
    Highlight,
    LegacyFragment,
    LegacyMeta,
    Message,
    Profile,
    Relation,
    Slice,
    Tombstone,
)
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

HOSTILE = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)


def snapshot() -> dict:
    """Every row of every memory table (all its columns), so "nothing changed" means exactly that.
    Plain SQL: building ~30 querysets a call was most of these tests' time."""
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        rows = {}
        for m in apps.get_app_config("memory").get_models():
            cursor.execute(f"SELECT * FROM {quote(m._meta.db_table)} ORDER BY {quote(m._meta.pk.column)}")
            rows[m._meta.label] = cursor.fetchall()
        return rows


@contextlib.contextmanager
def one_example():
    """An example's writes undone when it ends: every example starts from the same rows, and
    `snapshot()` reads those, not every earlier example's too (the run stays linear in them)."""
    with transaction.atomic():
        yield
        transaction.set_rollback(True)


# ---------------------------------------------------------------- corrupting a parsed structure

WRONG = st.sampled_from(
    [None, True, 0, -1, 2**70, 1.5, "", "x" * 300, "not a date", "2026-13-45T99:00:00Z", "9999-12-31T23:59:59Z",
     [], {}, ["a"], {"a": 1}]
)
BAD_IDS = st.sampled_from(["", "x" * 65, "x" * 200, "../..", "a:b:c", "\x00", "c_0000000000000000 ", "🐱" * 40])


def _containers(doc, path=()):
    """Paths of every dict and list inside `doc` (the root included)."""
    yield path
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for k, v in items:
        if isinstance(v, (dict, list)):
            yield from _containers(v, (*path, k))


def _at(doc, path):
    for k in path:
        doc = doc[k]
    return doc


@st.composite
def corrupted(draw, original):
    """`original` with one to three structural corruptions."""
    doc = copy.deepcopy(original)
    for _ in range(draw(st.integers(1, 3))):
        paths = list(_containers(doc))
        target = _at(doc, draw(st.sampled_from(paths)))
        if not target:
            continue
        slot = draw(st.sampled_from(sorted(target) if isinstance(target, dict) else range(len(target))))
        op = draw(st.sampled_from(["drop", "wrong type", "bad id", "truncate", "double", "empty"]))
        if op == "drop":
            del target[slot]
        elif op == "wrong type":
            target[slot] = draw(WRONG)
        elif op == "bad id":
            target[slot] = draw(BAD_IDS)
        elif op == "truncate" and isinstance(target, list):
            del target[draw(st.integers(0, len(target))) :]
        elif op == "double" and isinstance(target, list):
            target.append(copy.deepcopy(target[slot]))
        elif isinstance(target[slot], (dict, list, str)):
            target[slot] = type(target[slot])()
    return doc


# ---------------------------------------------------------------- the legacy KV importer


def _parsed_dump(keys: int, seed: int) -> list[dict]:
    """A synthetic dump with every value parsed (base64 ones decoded, the flag kept)."""
    entries = []
    for item in generate(keys=keys, seed=seed):
        text = base64.b64decode(item["value"]).decode() if item.get("base64") else item["value"]
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = text  # meta_ values are plain text
        entries.append({**item, "value": value if isinstance(value, dict) else text})
    return entries


def _dump_text(entries) -> str:
    """The bulk-put file for a (corrupted) parsed dump: object values as JSON text, base64 where flagged."""
    if not isinstance(entries, list):
        return json.dumps(entries)
    out = []
    for e in entries:
        if isinstance(e, dict) and isinstance(e.get("value"), (dict, list)):
            text = json.dumps(e["value"], ensure_ascii=False)
            e = {**e, "value": base64.b64encode(text.encode()).decode() if e.get("base64") is True else text}
        out.append(e)
    return json.dumps(out, ensure_ascii=False)


BASE64_JUNK = st.sampled_from(["%%% not base64", base64.b64encode(b"\xff\xfe\xfa").decode(), "YQ", "=="])


@st.composite
def hostile_dumps(draw):
    entries = draw(corrupted(_parsed_dump(160, seed=draw(st.integers(1, 3)))))
    if isinstance(entries, list) and entries and draw(st.booleans()):
        victim = entries[draw(st.integers(0, len(entries) - 1))]
        if isinstance(victim, dict):
            victim.update(value=draw(BASE64_JUNK), base64=True)
    return _dump_text(entries)


KV_MODELS = {Message: ("msg", "mem", "mem_"), Highlight: ("hl",), Experience: ("exp",), Relation: ("rel",),
             Tombstone: ("tomb",), LegacyMeta: ("meta",)}
OUTCOMES = ("created", "existing", "merged", "duplicate", "tombstoned", "errors")


def _import(text: str, user):
    return import_kv(fh=StringIO(text), user=user)


@HOSTILE
@given(text=hostile_dumps())
def test_a_corrupted_legacy_dump_is_refused_untouched_or_imported_whole(text):
    with one_example():
        user = UserFactory()
        before = snapshot()
        counts = {m: m.objects.count() for m in KV_MODELS}
        try:
            report = _import(text, user)
        except BadDump:
            assert snapshot() == before, "a refused import changed the database"
            return
        result = report.as_dict()
        assert result["total"]["errors"] == 0
        for family, c in result["families"].items():
            assert c["read"] == sum(c[o] for o in OUTCOMES), f"{family}: every record read has one outcome"
        for model, families in KV_MODELS.items():
            created = sum(result["families"].get(f, {}).get("created", 0) for f in families)
            assert model.objects.count() - counts[model] == created, f"{model.__name__}: the report and the rows agree"
        after = snapshot()
        again = _import(text, user)
        assert again.as_dict()["total"]["created"] == 0
        assert snapshot() == after, "re-importing what was imported writes nothing"


SMALL = [
    {"key": "msg:owner:c_0000000000000001", "value": {
        "speaker": "user", "content": "你好 🐱", "created_at": "2026-10-20T12:00:00.000Z", "message_type": "text",
        "attachment": None, "deleted_at": None}},
    {"key": "mem:owner:1760961600003_ab", "value": {
        "role": "user", "content": "你好 🐱", "ts": 1760961600003, "day_key": "2026-10-20", "hour": 20,
        "period": "evening"}},
    {"key": "hl:owner:h_1", "value": {"mid": "c_0000000000000001", "content": "你好", "created_at": 1760961660000}},
    {"key": "exp:owner:e_1", "value": {
        "title": "t", "content": "c", "source_mids": ["c_0000000000000001"], "status": "active",
        "time_certainty": "exact", "event_time": "去年夏天", "created_at": "2026-10-20T12:00:00.000Z"}},
    {"key": "rel:owner:r_1", "value": {
        "from_id": "h_1", "to_id": "e_1", "type": "related", "created_at": "2026-10-20T12:00:00.000Z"}},
    {"key": "tomb:owner:msg:c_0000000000000002", "value": {
        "kind": "msg", "id": "c_0000000000000002", "deleted_at": "2026-10-21T12:00:00.000Z", "content_hash": "61"},
     "expiration": 1798761600, "metadata": {"v": 1}},
    {"key": "meta_lastTs:owner", "value": "1760961600000"},
]
FIELDS = [(i, None, k) for i, e in enumerate(SMALL) for k in e] + [
    (i, "value", k) for i, e in enumerate(SMALL) if isinstance(e["value"], dict) for k in e["value"]
]


@settings(max_examples=500, deadline=None)
@given(target=st.sampled_from(FIELDS), new=WRONG | BAD_IDS | st.just(KeyError))
def test_any_one_field_of_a_small_dump_set_wrong_is_refused_untouched_or_imported_whole(target, new):
    """Every field of every kind of record, dropped or set to a wrong value, one at a time."""
    with one_example():
        entries = copy.deepcopy(SMALL)
        i, inner, k = target
        where = entries[i] if inner is None else entries[i][inner]
        if new is KeyError:
            del where[k]
        else:
            where[k] = new
        user = UserFactory()
        before = snapshot()
        try:
            report = _import(_dump_text(entries), user)
        except BadDump:
            assert snapshot() == before
            return
        created = report.as_dict()["total"]["created"]
        assert sum(m.objects.filter(profile__user=user).count() for m in KV_MODELS) == created


# ---------------------------------------------------------------- our own export (full import)


@pytest.fixture
def exported(tmp_path):
    owner = UserFactory(is_superuser=True)
    dump = tmp_path / "in.json"
    dump.write_text(_dump_text(_parsed_dump(120, seed=5)), encoding="utf-8")
    call_command("import_kv", str(dump), "--user", owner.username, stdout=StringIO())
    return export_json(profiles=Profile.objects.filter(user=owner))


FULL_MODELS = {"tombstones": Tombstone, "slices": Slice, "messages": Message, "legacy_fragments": LegacyFragment,
               "highlights": Highlight, "experiences": Experience, "relations": Relation, "legacy_meta": LegacyMeta}


@HOSTILE
@given(data=st.data())
def test_a_corrupted_export_is_refused_untouched_or_imported_whole(exported, data):
    with one_example():
        doc = data.draw(corrupted(exported))
        user = UserFactory()
        before = snapshot()
        try:
            report = import_full(data=doc, user=user)
        except BadExport:
            assert snapshot() == before, "a refused import changed the database"
            return
        for kind in FULL_KINDS:
            c = report.counts[kind]
            assert c["read"] == c["created"] + c["existing"] + c["tombstoned"], f"{kind}: every record has one outcome"
        for kind, model in FULL_MODELS.items():
            rows = model.objects.filter(profile__user=user).count()
            if kind == "slices":  # plus one per run of messages whose slice the file does not name
                assert rows >= report.counts[kind]["created"]
            else:
                assert rows == report.counts[kind]["created"], f"{kind}: the report and the rows agree"
        after = snapshot()
        import_full(data=doc, user=user)
        assert snapshot() == after, "re-importing what was imported writes nothing"

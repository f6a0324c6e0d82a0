"""Issue 16 point 2 (SPEC S4, X2, X4): the full import's apply checks the whole file without
writing, then writes in batches of PREVIOUSLY_IMPORT_BATCH_ROWS, each in its own short
transaction — another writer gets SQLite's lock between two — and an apply stopped by a
database error part-way finishes when run again, with exactly the rows of a clean one."""

import json
import threading
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import OperationalError, connection
from django.test.utils import CaptureQueriesContext

from bench.synthetic import write_dump
from memory.interop.export import export_json
from memory.interop.full.write import _Met
from memory.interop.full_import import BadExport, ImportInterrupted, import_full
from memory.models import (
    Card,
    CardSnapshot,
    LegacyMeta,
    Message,
    Profile,
    RecallDocument,
    RecallStats,
    Slice,
)
from memory.models.curation import Favourite, RelationType
from tests.factories import MessageFactory, ProfileFactory, SliceFactory, UserFactory


def _rich_export(tmp_path) -> dict:
    """Every kind of record (a synthetic legacy dump imported, plus a card, a snapshot,
    favourites, a tombstone and a relation), and some lines whose slice the file does not name (they
    join one by the idle gap, S1)."""
    owner = UserFactory(is_superuser=True)
    dump = tmp_path / "in.json"
    write_dump(str(dump), keys=400, seed=4)
    call_command("import_kv", str(dump), "--user", owner.username, stdout=StringIO())
    profile = Profile.objects.filter(user=owner).order_by("key").first()
    Card.objects.update_or_create(profile=profile, defaults={"text": "# Previously On\n\ncard\n", "version": 3})
    CardSnapshot.objects.create(profile=profile, slice=Slice.objects.filter(profile=profile).first(), text="then")
    for line in Message.objects.filter(profile=profile, deleted_at__isnull=True)[:3]:
        Favourite.objects.create(profile=profile, message=line, excerpt="")
    data = export_json(profiles=Profile.objects.filter(user=owner))
    for m in data["profiles"][0]["messages"][-6:]:
        del m["slice"]
    data["profiles"][0]["tombstones"].append({
        "kind": "msg", "object_id": "c_00000000deadbeef", "deleted_at": "2026-01-01T00:00:00+00:00",
        "expires_at": "2027-01-01T00:00:00+00:00"})
    first = data["profiles"][0]
    first["relations"].append({"rid": "r_batches", "type": RelationType.values[0], "from_id": first["highlights"][0]["hid"],
                               "to_id": first["experiences"][0]["eid"], "created_at": "2026-01-02T00:00:00+00:00"})
    return json.loads(json.dumps(data))


def rows_of(user) -> dict:
    """What the user holds, independent of primary keys: the export of their profiles, plus
    the recall index (documents by mid, and each profile's statistics)."""
    profiles = Profile.objects.filter(user=user).order_by("key")
    held = export_json(profiles=profiles)
    del held["exported_at"]
    for p in held["profiles"]:  # the times of the import itself, not of the file
        history = [h for e in p["experiences"] for h in e["history"]]
        for row in (p["card"] or {}, *p["card_snapshots"], *p["favourites"], *history):
            row.pop("updated_at", None), row.pop("created_at", None)
    docs = sorted(RecallDocument.objects.filter(profile__user=user).values_list(
        "profile__key", "message__mid", "tokens", "pos", "slice__key", "speaker", "day"))
    stats = sorted(RecallStats.objects.filter(profile__user=user).values_list(
        "profile__key", "n_docs", "n_tokens", "next_pos"))
    return {"export": held, "index": docs, "stats": stats}


class FailAfter:
    """A database error at the `nth` write statement after `batches` committed batches, as a
    locked or lost database would raise it (Django's execute wrapper, so every write counts:
    the rows, the recall index's own statements)."""

    def __init__(self, batches: int, nth: int = 1):
        self.batches, self.nth, self.done, self.writes, self.stages = batches, nth, 0, 0, []

    def __call__(self, execute, sql, params, many, context):
        if self.done == self.batches and sql.lstrip().split(None, 1)[0].upper() in ("INSERT", "UPDATE", "DELETE"):
            self.writes += 1
            if self.writes == self.nth:
                raise OperationalError("database is locked (injected)")
        return execute(sql, params, many, context)

    def progress(self, stage: str, done: int, total: int) -> None:
        if stage.startswith("writing "):
            self.done += 1
            self.stages.append(stage)


@pytest.mark.django_db
def test_an_interrupted_apply_run_again_ends_with_exactly_the_rows_of_a_clean_one(tmp_path, settings):
    settings.PREVIOUSLY_IMPORT_BATCH_ROWS = 40
    data = _rich_export(tmp_path)
    clean = UserFactory()
    stages = []
    import_full(data=data, user=clean, progress=lambda stage, *_: stages.append(stage))
    expected = rows_of(clean)
    assert expected["index"] and expected["export"]["profiles"][0]["card"]
    batches = [s for s in stages if s.startswith("writing ")]
    # The first batch of each kind (failing in the first write after the batch before it:
    # that batch, or a single write between — the card, the index's merge), a batch in the
    # middle of the lines (failing in a later write, after its lines went in: the recall
    # index), and the last batch.
    firsts = sorted({batches.index(s) for s in batches})
    middle = batches.index("writing messages") + 2
    points = [(i, 1) for i in firsts] + [(middle, 2), (len(batches) - 1, 1)]
    assert len(firsts) == 10, " | ".join(sorted(set(batches)))
    for at, nth in points:
        user = UserFactory()
        fail = FailAfter(at, nth)
        with connection.execute_wrapper(fail), pytest.raises(ImportInterrupted) as stopped:
            import_full(data=data, user=user, progress=fail.progress)
        said = str(stopped.value)
        assert f"The {at:,} batches written before it are kept" in said and "the same import run again finishes it" in said
        assert len(fail.stages) == at
        import_full(data=data, user=user)
        assert rows_of(user) == expected, f"stopped in batch {at} ({batches[at]}), insert {nth}"


@pytest.mark.django_db(transaction=True)
def test_another_writer_gets_the_lock_between_two_batches_of_a_long_apply(tmp_path, settings):
    """With one row per batch, another connection writes a chat line after each of the first
    batches; it waits at most 2 s for the lock (an apply holding it throughout fails it)."""
    settings.PREVIOUSLY_IMPORT_BATCH_ROWS = 1
    data = _rich_export(tmp_path)
    other = ProfileFactory()
    other_slice = SliceFactory(profile=other)
    outcomes: list[str] = []

    def chat_line() -> None:
        try:
            if connection.vendor == "sqlite":
                with connection.cursor() as cursor:
                    cursor.execute("PRAGMA busy_timeout = 2000")
            MessageFactory(profile=other, slice=other_slice, content=f"said while importing {len(outcomes)}")
            outcomes.append("saved")
        except Exception as exc:  # noqa: BLE001 — the outcome is what the test reads
            outcomes.append(f"{type(exc).__name__}: {exc}")
        finally:
            connection.close()

    def between_batches(stage: str, done: int, total: int) -> None:
        if stage.startswith("writing ") and len(outcomes) < 5:
            assert not connection.in_atomic_block, "progress is called inside a transaction"
            writer = threading.Thread(target=chat_line)
            writer.start()
            writer.join(30)

    report = import_full(data=data, user=UserFactory(), progress=between_batches)
    assert outcomes == ["saved"] * 5
    assert Message.objects.filter(profile=other).count() == 5
    assert report.counts["messages"]["created"] > 5


@pytest.mark.django_db
@pytest.mark.parametrize(("kind", "change", "said"), [
    ("legacy_meta", {"expiration": ""}, "field 'expiration'"),
    ("legacy_meta", {"expiration": 2**70}, "field 'expiration'"),
    ("legacy_fragments", {"day_key": None}, "field 'day_key' cannot be empty"),
    ("legacy_fragments", {"role": "x" * 5000}, "field 'role'"),
    ("legacy_fragments", {"legacy_extra": {"k": ["ok", "a\x00b"]}}, "field 'legacy_extra': a text inside it contains a NUL"),
    ("legacy_meta", {"metadata": {"\ud800": 1}}, "field 'metadata': a text inside it contains a lone surrogate"),
    ("tombstones", {"expires_at": "2020-01-01T00:00:00+00:00", "deleted_at": "2021-01-01T00:00:00+00:00"},
     "breaks the database's rule 'tombstone_expires_after_deletion'"),
    ("legacy_fragments", {"disposition": "lost"}, "disposition 'lost': breaks the database's rule"),
    ("profile", {"language": "xx"}, "language 'xx': breaks the database's rule 'profile_language_valid'"),
    ("card", {"version": -1}, "the card: field 'version': -1 cannot be stored"),
    ("card", {"version": "v2"}, "field 'version'"),
])
def test_a_value_the_database_would_refuse_is_refused_before_any_batch(tmp_path, kind, change, said):
    data = _rich_export(tmp_path)
    profile = data["profiles"][0]
    if kind == "profile":
        profile.update(change)
    elif kind == "card":
        profile["card"].update(change)
    else:
        assert profile[kind], kind
        profile[kind][-1].update(change)
    user = UserFactory()
    with pytest.raises(BadExport) as refused:
        import_full(data=data, user=user)
    assert said in str(refused.value)
    assert not Profile.objects.filter(user=user).exists()
    assert not LegacyMeta.objects.filter(profile__user=user).exists()


@pytest.mark.django_db
@pytest.mark.parametrize("dry_run", [True, False])
def test_a_line_the_file_gives_twice_goes_in_once_across_chunks_and_without_a_slice(settings, dry_run):
    """Issue 24 point 6 (SPEC X2): lines stream a chunk at a time and only the chunk's mids are
    held while writing; a line given again a chunk later, or again without a slice (written at
    the end), is still counted as existing and written once."""
    settings.PREVIOUSLY_IMPORT_BATCH_ROWS = 50
    at = "2026-01-01T00:00:00+00:00"
    lines = [{"mid": f"c_{n:05d}", "created_at": at, "speaker": "user", "content": f"第 {n} 行 line {n} 🐱",
              "slice": "2026-01-01-0000"} for n in range(1500)]
    lines[2]["slice"] = None  # loose in the first chunk: written at the end, and given again in the last
    lines += [dict(lines[3]), {**lines[5], "slice": None}, dict(lines[2]), {**lines[1400], "mid": "c_loose"},
              {**lines[1401], "mid": "c_loose", "slice": None}]
    lines[-2]["slice"] = None
    data = {"format": "previously-export", "version": 1, "profiles": [{
        "key": "owner", "slices": [{"key": "2026-01-01-0000", "started_at": at, "last_message_at": at}],
        "messages": lines}]}
    user = UserFactory()
    report = import_full(data=data, user=user, dry_run=dry_run)
    assert report.counts["messages"] == {"read": 1505, "created": 1501, "existing": 4, "tombstoned": 0}
    if not dry_run:
        assert Message.objects.filter(profile__user=user).count() == 1501
        assert Message.objects.get(profile__user=user, mid="c_loose").slice_id is not None
        assert Message.objects.get(profile__user=user, mid="c_00002").slice_id is not None


@pytest.mark.django_db
def test_lines_are_looked_up_by_their_unique_index_not_in_the_archive_order(settings):
    """Issue 24 point 6 (SPEC S4): each chunk's and each batch's lines are looked up by mid
    without the model's created_at ordering; ordered, SQLite chose the profile's created_at index
    and walked every line of the profile for each batch, so a 1M-line apply grew with the square
    of its lines (the lookups were 19 s of a 100k-line apply)."""
    settings.PREVIOUSLY_IMPORT_BATCH_ROWS = 2
    at = "2026-01-01T00:00:00+00:00"
    data = {"format": "previously-export", "version": 1, "profiles": [{
        "key": "owner", "slices": [{"key": "2026-01-01-0000", "started_at": at, "last_message_at": at}],
        "messages": [{"mid": f"c_{n}", "created_at": at, "speaker": "user", "content": f"第 {n} 行 🐱",
                      "slice": "2026-01-01-0000"} for n in range(5)]}]}
    with CaptureQueriesContext(connection) as queries:
        import_full(data=data, user=UserFactory())
    lookups = [q["sql"] for q in queries.captured_queries
               if q["sql"].startswith('SELECT "memory_message"."mid"') and '"mid" IN' in q["sql"]]
    assert lookups, "the lines are looked up by mid"
    assert not [sql for sql in lookups if "ORDER BY" in sql]


@pytest.mark.django_db
def test_replies_and_traces_are_linked_by_mid_a_chunk_at_a_time(settings, monkeypatch):
    """Issue 24 point 6 with issue 28 point 4: a line's `reply_of` and its prompt trace's
    recalled lines are found by mid after every line is in, by lookups of one chunk's mids (the
    chunk's lines and the lines they name), never the profile's every mid; a link to a line
    chunks earlier or later is found, and re-running the import changes nothing (X2)."""
    from memory.interop.full import write as write_module

    settings.PREVIOUSLY_IMPORT_BATCH_ROWS = 2
    monkeypatch.setattr(write_module, "_chunk_rows", lambda out: 4)
    asked = []
    keys = write_module._message_keys
    monkeypatch.setattr(write_module, "_message_keys", lambda pid, mids: asked.append(set(mids)) or keys(pid, mids))
    at = "2026-01-01T00:00:00+00:00"
    lines = [{"mid": f"c_{n:02d}", "created_at": at, "speaker": "user" if n % 2 else "assistant",
              "content": f"第 {n} 行 🐱",
              "slice": "2026-01-01-0000"} for n in range(20)]
    lines[0]["reply_of"] = "c_19"  # a line written chunks later
    lines[18].update(reply_of="c_01", prompt_trace={"recalled": ["c_03", "c_gone"], "lore": []})
    data = {"format": "previously-export", "version": 2, "profiles": [{
        "key": "owner", "slices": [{"key": "2026-01-01-0000", "started_at": at, "last_message_at": at}],
        "messages": lines}]}
    user = UserFactory()
    import_full(data=data, user=user)
    rows = {m.mid: m for m in Message.objects.filter(profile__user=user)}
    assert rows["c_00"].reply_of_id == rows["c_19"].pk
    assert rows["c_18"].reply_of_id == rows["c_01"].pk
    assert rows["c_18"].prompt_trace["recalled"] == [rows["c_03"].pk]
    assert rows["c_05"].reply_of_id is None and rows["c_05"].prompt_trace is None
    assert asked and max(len(mids) for mids in asked) <= 8, "no lookup holds more than a chunk's mids and links"
    report = import_full(data=data, user=user)
    assert report.counts["messages"]["created"] == 0
    again = {m.mid: (m.reply_of_id, m.prompt_trace) for m in Message.objects.filter(profile__user=user)}
    assert again == {mid: (m.reply_of_id, m.prompt_trace) for mid, m in rows.items()}


def test_the_checking_pass_keeps_the_lines_it_met_as_hashes_in_few_merged_runs():
    """Issue 24 point 6: a preview meets every line of the file (a line given twice is found), held
    as 8-byte hashes in sorted runs that merge as they double, not as a million strings."""
    met, seen = _Met(), set()
    for n in range(1, 200):
        chunk = {f"c_{n:04d}_{i}" if i % 2 else f"第{n}行_{i}_🐱" for i in range(n % 17 + 1)}
        met.add(chunk)
        seen |= chunk
    assert len(met.runs) <= len(seen).bit_length()
    assert sum(len(run) for run in met.runs) == len(seen)
    asked = {*list(seen)[::7], "c_never", "从未 never 🐶", "c_0001_1x"}
    assert met.among(asked) == asked & seen
    assert met.among(set()) == set() and _Met().among({"c_0001_1"}) == set()

"""Issue 24 point 3 (SPEC D6, S4): deleting a long line for good finds its words outside the
write transaction, writes in short transactions, and still leaves no derived copy — not even
one written between the search and the write."""

import random

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memory import deletion
from memory.deleted_words import DELETED, Quotes
from memory.deletion import delete_message
from memory.models import CardSnapshot, EvolutionRun, Message, SliceLogEntry
from tests.factories import SliceFactory
from tests.previously.agent.helpers import make_slice

pytestmark = pytest.mark.django_db

WORDS = "river lantern orchard copper meadow violet harbor quiet amber falcon willow ember".split()


def long_line(n: int, seed: int = 7) -> str:
    rng = random.Random(seed)
    out, size = [], 0
    while size < n:
        word = f"{rng.choice(WORDS)}{rng.randint(0, 9999)}"
        out.append(word)
        size += len(word) + 1
    return " ".join(out)[:n]


@pytest.fixture
def pasted(profile):
    """A 60k-character line, a reply quoting a run of it, and derived copies of it: a card
    snapshot holding a run, a run's steps holding the whole line, a log entry holding a run."""
    line = long_line(60_000)
    slice_ = make_slice(profile, lines=[("user", line), ("assistant", f"You wrote: {line[30_000:30_080]}")])
    said = Message.objects.get(profile=profile, speaker="user")
    other = make_slice(profile, key="2026-08-18-0900")
    CardSnapshot.objects.create(profile=profile, slice=other, text=f"## Now\n- {line[10_000:10_050]}\n")
    EvolutionRun.objects.create(profile=profile, slice=slice_, trigger="slice_close", status="changed",
                                steps=[{"kind": "read", "transcript": f"user: {line}"}])
    SliceLogEntry.objects.create(slice=slice_, kind="note", summary="read", data={"said": line[500:700]})
    return line, said


def held(profile, line: str) -> list[str]:
    """Runs of `line` still held by a derived row (a run of 40 characters every 997)."""
    texts = [s.text for s in CardSnapshot.objects.filter(profile=profile)]
    texts += [str(r.steps) for r in EvolutionRun.objects.filter(profile=profile)]
    texts += [str(e.data) for e in SliceLogEntry.objects.filter(slice__profile=profile)]
    texts += [m.content for m in Message.objects.filter(profile=profile)]
    runs = [line[i : i + 40] for i in range(0, len(line) - 40, 997)]
    return [r for r in runs if any(r in t for t in texts)]


def test_the_words_are_searched_outside_the_write_transaction(profile, pasted, monkeypatch):
    line, said = pasted
    depth = len(connection.atomic_blocks)  # the test's own transaction
    searched = {"inside": 0, "outside": 0}
    spans_many = Quotes.spans_many

    def counting(self, texts):
        searched["inside" if len(connection.atomic_blocks) > depth else "outside"] += sum(map(len, texts))
        return spans_many(self, texts)

    monkeypatch.setattr(Quotes, "spans_many", counting)
    with CaptureQueriesContext(connection) as queries:
        result = delete_message(profile=profile, mid=said.mid, hard=True, force=True)
    assert result.status == "deleted" and len(result.replies_deleted) == 1
    assert held(profile, line) == []
    snapshot = CardSnapshot.objects.get(profile=profile)
    assert DELETED in snapshot.text and "## Now" in snapshot.text
    # The copies (the run's 60k-character transcript above all) were searched before the lock.
    assert searched["outside"] > len(line)
    assert searched["inside"] < len(line) // 4, searched
    # No pre-filter of one LIKE per few characters: the query count does not grow with the line.
    likes = [q["sql"] for q in queries.captured_queries if " LIKE " in q["sql"].upper()]
    assert len(likes) < 5, len(likes)
    assert len(queries.captured_queries) < 200


def test_a_copy_written_between_the_search_and_the_write_is_scrubbed(profile, pasted, monkeypatch):
    """D6 holds across the gap: a snapshot changed after it was read keeps its new words but
    not the deleted ones; a log entry written after the search is found in the last write."""
    line, said = pasted
    write_fixes = deletion._write_fixes

    def meanwhile(fixes, quotes):
        CardSnapshot.objects.filter(profile=profile).update(text=f"new words {line[20_000:20_060]} and more")
        slice_ = said.slice
        SliceLogEntry.objects.create(slice=slice_, kind="note", summary=f"late {line[40_000:40_030]}", data={})
        return write_fixes(fixes, quotes)

    monkeypatch.setattr(deletion, "_write_fixes", meanwhile)
    delete_message(profile=profile, mid=said.mid, hard=True, force=True)
    assert held(profile, line) == []
    assert CardSnapshot.objects.get(profile=profile).text == f"new words {DELETED} and more"
    assert SliceLogEntry.objects.filter(summary=f"late {DELETED}").exists()


def test_a_reply_quoting_it_written_meanwhile_goes_with_it(profile, pasted, monkeypatch):
    line, said = pasted
    write_fixes = deletion._write_fixes

    def meanwhile(fixes, quotes):
        Message.objects.create(profile=profile, slice=said.slice, speaker="assistant", mid="a_1760000009_late",
                               content=f"About {line[50_000:50_040]}", created_at=said.created_at)
        return write_fixes(fixes, quotes)

    monkeypatch.setattr(deletion, "_write_fixes", meanwhile)
    result = delete_message(profile=profile, mid=said.mid, hard=True, force=True)
    assert "a_1760000009_late" in result.replies_deleted
    assert not Message.objects.filter(mid="a_1760000009_late").exists()


def test_the_write_is_cut_in_short_transactions(profile, monkeypatch):
    """Many derived copies are written a few rows per transaction, not all under one lock."""
    line = long_line(2_000)
    make_slice(profile, lines=[("user", line)])
    said = Message.objects.get(profile=profile)
    for v in range(1, 31):
        CardSnapshot.objects.create(profile=profile, slice=SliceFactory(profile=profile, key=f"2026-09-{v:02d}-0900"),
                                    card_version=v, text=f"- {line[v : v + 30]}")
    monkeypatch.setattr(deletion, "_ROWS_PER_WRITE", 4)
    monkeypatch.setattr(deletion, "_WRITE_BUDGET_SECONDS", 0)
    depth = len(connection.atomic_blocks)
    opened = []
    atomic = deletion.transaction.atomic

    def counting(*args, **kwargs):
        if len(connection.atomic_blocks) == depth:
            opened.append(1)
        return atomic(*args, **kwargs)

    monkeypatch.setattr(deletion.transaction, "atomic", counting)
    delete_message(profile=profile, mid=said.mid, hard=True, force=True)
    assert len(opened) >= 30 // 4
    assert not any(line[v : v + 30] in s.text for v, s in enumerate(CardSnapshot.objects.order_by("card_version"), 1))


def test_a_deleted_poem_of_short_lines_is_found_in_json():
    """Each window of a text of short lines holds a newline: the JSON strings are searched as
    stored, not as JSON escapes them ("\\n")."""
    poem = "\n".join(["rain on", "the tin", "roof at", "night, I", "kept it", "secret"] * 3)
    quotes = Quotes([poem])
    steps = [{"transcript": f"user: {poem}"}]
    assert quotes.found_json(steps)
    assert quotes.scrub_json(steps) == [{"transcript": f"user: {DELETED}"}]


def test_a_long_line_is_found_in_pieces_and_whole():
    """A text searched in overlapping pieces finds runs across a piece's edge; a companion line
    counted only whole is found whole, however long."""
    line = long_line(700_000, seed=3)
    quotes = Quotes([line[:1000]], whole=[line])
    edge = 1 << 18
    text = "x" * (edge - 20) + line[100:140] + "y" * 10 + line
    spans = quotes.spans(text)
    assert spans[0] == (edge - 20, edge + 20)
    assert spans[-1] == (len(text) - len(line), len(text))

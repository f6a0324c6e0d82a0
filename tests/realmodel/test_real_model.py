"""A real small model behind a real OpenAI-compatible server (issue 26 point 6, L4, R8):
llama-cpp-python serving SmolLM2-135M-Instruct on loopback. The model may say anything; these
tests check what Previously does with it. Figures are printed (`make realmodel` runs with -s),
never asserted."""

import asyncio
import json
import re
import threading
import time
import urllib.request

import pytest
from channels.db import database_sync_to_async
from django.template.loader import render_to_string

from memory.card.validate import violations
from memory.models import Card, EvolutionRun, Message, Profile
from memory.recall.budget import CJK
from previously.agent.analyzer import worth_evolving
from previously.agent.evolve import create_run, execute_run
from previously.chat import proactive
from previously.llm import gate
from previously.llm.base import Preempted
from previously.llm.select import context_tokens
from tests.previously.agent.helpers import make_slice, set_card
from tests.previously.chat.conftest import connect, new_mid  # noqa: F401 - the page fixture
from tests.realmodel.conftest import CONTEXT

pytestmark = [pytest.mark.realmodel, pytest.mark.django_db(transaction=True)]

CHATML_PER_MESSAGE = 5  # <|im_start|>role\n … <|im_end|>\n around each message
CHATML_REPLY = 3  # <|im_start|>assistant\n
TYPING_SECONDS = 6  # about 3 words a second
CJK_RUN = re.compile(f"(?:{CJK.pattern})+")


@database_sync_to_async
def rows(profile):
    return list(Message.objects.for_profile(profile).order_by("created_at", "id")
                .values_list("speaker", "content", "status", "prompt_trace"))


async def say(chat, text: str, mid: str, timeout: float) -> list[str]:
    await chat.send(text, mid=mid)
    return await chat.frames_until_reply(timeout=timeout)


def tokens_of(frames: list[str]) -> list[str]:
    return [f for f in frames if f.startswith('<span id="reply-')]


class Capture:
    """Wraps the provider's stream to keep the request the turn sent and when its first words came."""

    def __init__(self, provider):
        self.provider, self.requests, self.first_word = provider, [], []
        self._astream = provider.astream
        provider.astream = self

    def __call__(self, messages, **kwargs):
        self.requests.append(messages)
        started = time.monotonic()
        stream = self._astream(messages, **kwargs)

        async def timed():
            first = True
            async for chunk in stream:
                if first:
                    self.first_word.append(time.monotonic() - started)
                    first = False
                yield chunk
        return timed()


def server_prompt_tokens(provider, messages) -> int:
    response = provider._sync.chat.completions.create(model=provider.model, messages=messages, max_tokens=1)
    return response.usage.prompt_tokens


def server_token_count(base_url: str, text: str) -> int:
    """What the server's own tokenizer makes of a text (llama-cpp-python's /extras/tokenize/count)."""
    request = urllib.request.Request(
        base_url.removesuffix("/v1") + "/extras/tokenize/count", data=json.dumps({"input": text}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.load(response)["count"]


async def test_a_turn_streams_is_archived_once_and_why_this_reply_counts_match_the_server(connect, user, profile, real_provider, llama_server, settings):  # noqa: F811
    """How "why this reply" counts (memory/recall/budget.py): no model's tokenizer is assumed; a
    CJK character is one token, other text its UTF-8 bytes / 4. SmolLM2's vocabulary is mostly
    English and spends about two tokens on a Chinese character, so the tokenizer's difference
    is measured on the prompt's own runs of CJK characters with the server's tokenizer, and the
    rest of the count must match the server's within 15 %."""
    settings.PREVIOUSLY_REPLY_MAX_TOKENS = 64  # the turn's figures, not a long story
    capture = Capture(real_provider)
    chat = await connect(user)
    started = time.monotonic()
    frames = await say(chat, "Hi! My cat is called Mochi. What should I cook tonight?", new_mid(1), 300)
    elapsed = time.monotonic() - started
    assert len(tokens_of(frames)) > 1, "the reply streams in pieces"
    stored = await rows(profile)
    assert [(s, st) for s, _, st, _ in stored] in ([("user", "complete"), ("assistant", "complete")],
                                                   [("user", "complete"), ("assistant", "failed")])
    assert len(stored) == 2  # archived once
    if stored[1][2] == "failed":  # a blank reply is a failure with its notice, never an empty line
        assert "blank space" in frames[-1]
    trace = stored[1][3]
    ours = trace["tokens"]["total"]
    messages = capture.requests[0]
    theirs = await asyncio.to_thread(server_prompt_tokens, real_provider, messages)
    runs = [run for m in messages for run in CJK_RUN.findall(m["content"])]
    cjk = sum(len(run) for run in runs)
    spent = sum([await asyncio.to_thread(server_token_count, llama_server.base_url, run) for run in runs])
    per_character = spent / cjk if cjk else 1.0
    expected = ours - cjk + spent + CHATML_PER_MESSAGE * len(messages) + CHATML_REPLY
    print(f"\n[realmodel] chat turn: {elapsed:.1f} s, first word after {capture.first_word[0]:.1f} s; "
          f"prompt {sum(len(m['content']) for m in messages)} chars ({cjk} CJK); why-this-reply {ours} approx "
          f"tokens; the server counts {theirs}: its tokenizer spends {per_character:.2f} tokens per CJK character "
          f"where we count 1, and the chat template adds {CHATML_PER_MESSAGE * len(messages) + CHATML_REPLY}; "
          f"so expected {expected}")
    assert abs(theirs - expected) <= 0.15 * theirs, (theirs, expected)


async def test_stop_cuts_the_stream_and_regenerate_works(connect, user, profile, real_provider, settings):  # noqa: F811
    settings.PREVIOUSLY_REPLY_MAX_TOKENS = 400
    chat = await connect(user)
    await chat.send("Write a long story about a lighthouse keeper, please.", mid=new_mid(1))
    frames = []
    while not tokens_of(frames):
        frames.append(await chat.ws.receive_from(timeout=300))
    await chat.ws.send_to(text_data=json.dumps({"action": "stop"}))
    frames += await chat.frames_until_reply(timeout=60)
    stored = await rows(profile)
    assert stored[1][2] == "stopped"
    reply_mid = re.search(r'id="msg-(a_[^"]+)"', frames[-1]).group(1)
    settings.PREVIOUSLY_REPLY_MAX_TOKENS = 40
    await chat.ws.send_to(text_data=json.dumps({"action": "regenerate", "mid": reply_mid}))
    again = await chat.frames_until_reply(timeout=300)
    assert f'<div id="msg-{reply_mid}" hx-swap-oob="delete">' in again[0]
    live = [r for r in await rows(profile) if r[0] == "assistant"]
    assert [r[2] for r in live][0] == "stopped" and live[-1][2] in ("complete", "failed") and len(live) == 2


def test_the_analyzer_and_an_evolution_run_complete_and_the_card_stays_valid(profile, real_provider, settings):
    settings.PREVIOUSLY_AGENT_RUN_SECONDS = 900
    settings.PREVIOUSLY_AGENT_MAX_STEPS = 4
    settings.PREVIOUSLY_AGENT_STEP_MAX_TOKENS = 512
    settings.PREVIOUSLY_MODEL_CONTEXT_TOKENS = CONTEXT  # llama-cpp-python does not report its n_ctx
    slice_ = make_slice(profile, lines=[
        ("user", "Remember this: my sister Anna moved to Lyon last week."),
        ("assistant", "I'll remember that Anna moved to Lyon."),
        ("user", "I start my new job at the bakery on Monday."),
    ])
    set_card(profile, "")
    started = time.monotonic()
    verdict = worth_evolving(slice_, provider=real_provider)
    analyzer = time.monotonic() - started
    requests = []
    complete = real_provider.complete

    def recording(messages, **kwargs):
        result = complete(messages, **kwargs)
        requests.append((len(json.dumps(messages, ensure_ascii=False)) + len(json.dumps(kwargs.get("tools") or [])),
                         result.prompt_tokens))
        return result

    real_provider.complete = recording
    run = create_run(profile=profile, slice_=slice_, trigger=EvolutionRun.Trigger.EXPLICIT, request="remember Anna")
    started = time.monotonic()
    run = execute_run(run.pk, provider=real_provider)
    took = time.monotonic() - started
    assert run.status in (EvolutionRun.Status.CHANGED, EvolutionRun.Status.UNCHANGED, EvolutionRun.Status.FAILED)
    if run.status == EvolutionRun.Status.FAILED:
        assert run.error  # with its reason (e.g. "this model does not use tools")
    text = Card.objects.get(profile=profile).text if Card.objects.filter(profile=profile).exists() else ""
    assert not text.strip() or violations(text) == []  # K1-K3
    calls = [s for s in run.steps if s["event"] == "tool"]
    for call in calls:
        assert call["accepted"] or call["result"].split(":")[0] in ("refused", "unknown tool", "ignored") \
            or "not valid JSON" in call["result"] or "must be a JSON object" in call["result"], call
    final = next(s["event"] for s in reversed(run.steps) if s["event"] in ("finished", "failed", "skipped"))
    html = render_to_string(f"card/evolution.html#{final}", {"run": run, "step": run.steps[-1]})
    assert 'id="evolution"' in html  # the outcome as the chat shows it
    window = context_tokens()
    print(f"\n[realmodel] analyzer: {analyzer:.1f} s → {verdict}")
    print(f"[realmodel] evolution run: {took:.1f} s, {run.status}, error={run.error!r}, summary={run.summary!r}")
    fitted = [s["note"] for s in run.steps if s["event"] == "fitted"]
    print(f"[realmodel] first agent request: {requests[0][0]} chars, {requests[0][1]} tokens "
          f"(window {window}); {len(requests)} model calls; {fitted[0] if fitted else 'nothing left out'}")
    print("[realmodel] tool calls: " + "; ".join(
        f"{c['tool']} {'✓' if c['accepted'] else '✗'} {c['result'][:80]}" for c in calls))


@pytest.mark.parametrize("told", [False, True], ids=["server-refuses", "window-known"])
async def test_a_prompt_longer_than_the_window_gets_a_clear_notice_in_the_persons_language(connect, user, profile, real_provider, settings, told):  # noqa: F811
    settings.PREVIOUSLY_MODEL_CONTEXT_TOKENS = CONTEXT if told else 0  # known: refused before the call
    await database_sync_to_async(Profile.objects.filter(pk=profile.pk).update)(language="zh")
    chat = await connect(user)
    frames = await say(chat, "我今天去了公园看到很多花" * 300, new_mid(1), 120)
    assert "这段对话超出了模型的上下文窗口" in frames[-1]
    stored = await rows(profile)
    assert [(s, st) for s, _, st, _ in stored] == [("user", "complete"), ("assistant", "failed")]


async def test_the_first_word_does_not_wait_behind_a_welcome_back_being_written(connect, user, profile, real_provider, settings):  # noqa: F811
    settings.PREVIOUSLY_PROACTIVE_MAX_TOKENS = 300
    settings.PREVIOUSLY_REPLY_MAX_TOKENS = 30
    capture = Capture(real_provider)
    chat = await connect(user)
    await say(chat, "Hello there.", new_mid(1), 300)  # a warm cache, and the baseline
    baseline = capture.first_word[-1]
    done = {}

    def welcome_back():
        done["text"] = proactive._generate(profile, "Write a long, detailed welcome-back letter of many paragraphs.")
        done["at"] = time.monotonic()

    preempted = []
    streamed = real_provider._complete_streamed

    def counting(kwargs):
        try:
            return streamed(kwargs)
        except Preempted:
            preempted.append(time.monotonic())
            raise

    real_provider._complete_streamed = counting
    background = threading.Thread(target=welcome_back)
    background.start()
    await asyncio.sleep(3)  # the welcome-back is being written now
    writing = background.is_alive()
    for _ in range(TYPING_SECONDS // 2):  # "How are you today?" typed at a person's pace; the
        await chat.ws.send_to(text_data=json.dumps({"action": "typing"}))  # page's frame every 2 s
        await asyncio.sleep(2)
    sent = time.monotonic()
    frames = await say(chat, "How are you today?", new_mid(2), 300)
    first_word = capture.first_word[-1]
    replied = time.monotonic()
    await asyncio.to_thread(background.join, 600)
    # The reply's own prompt time: the same request again, alone, once the welcome-back has
    # been written (so the server's cache holds that, as it did when the turn came).
    replay = time.monotonic()
    await asyncio.to_thread(server_prompt_tokens, real_provider, capture.requests[-1])
    own = time.monotonic() - replay
    print(f"\n[realmodel] first word: {first_word:.1f} s after Send with a welcome-back being written "
          f"(set aside at the first keystroke, {TYPING_SECONDS} s before); the same request alone "
          f"{own:.1f} s (margin {first_word - own:+.1f} s); a first turn "
          f"{baseline:.1f} s; turn {replied - sent:.1f} s; the welcome-back gave way {len(preempted)} time(s) "
          f"and finished {done['at'] - replied:.1f} s after the reply ({len(done['text'])} chars)")
    assert tokens_of(frames)
    if writing:  # it gave way to the turn and was written again after it
        assert preempted and done["at"] > replied
    assert not gate.turn_in_flight()

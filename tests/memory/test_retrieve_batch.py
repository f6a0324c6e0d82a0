"""manage.py retrieve_batch: BENCH §1's protocol, ranked by the chat's recall, nothing committed."""

import json

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from memory.models import Message, Profile, RecallDocument, RecallTerm, Slice

pytestmark = pytest.mark.django_db

ZH = {
    "id": "zh-1", "speaker_a": "小明", "speaker_b": "小雨",
    "docs": [
        {"id": "D1:1", "text": "小明: 我下周要去杭州出差", "speaker": "小明", "timestamp": "2024-03-01T10:00", "session": 1, "order": 0},
        {"id": "D1:2", "text": "小雨: 记得带伞，杭州最近下雨", "speaker": "小雨", "timestamp": "2024-03-01T10:00", "session": 1, "order": 1},
        {"id": "D2:1", "text": "小明: 我的猫咪生病了", "speaker": "小明", "timestamp": "2024-03-05T20:00", "session": 2, "order": 2},
        {"id": "D2:2", "text": "小雨: 带它去看兽医吧", "speaker": "小雨", "timestamp": "2024-03-05T20:00", "session": 2, "order": 3,
         "image_caption": "a photo of a sleepy cat"},
    ],
    "queries": [{"qid": "zh-1:0", "question": "小明去哪里出差？"}, {"qid": "zh-1:1", "question": "猫咪怎么了？"}],
}
EN = {
    "id": "en-1", "speaker_a": "Caroline", "speaker_b": "Melanie",
    "docs": [
        {"id": "D1:1", "text": "Caroline: I went to a support group yesterday", "speaker": "Caroline", "timestamp": "2023-05-08T13:56", "session": 1, "order": 0},
        {"id": "D1:2", "text": "Melanie: I painted a sunrise last week", "speaker": "Melanie", "timestamp": "2023-05-08T13:56", "session": 1, "order": 1},
        {"id": "D2:1", "text": "Caroline: The adoption agency called", "speaker": "Caroline", "timestamp": "2023-06-02T09:00", "session": 2, "order": 2},
    ],
    "queries": [{"qid": "en-1:0", "question": "What did Melanie paint?"}, {"qid": "en-1:1", "question": "When did Caroline go to the support group?"}],
}


def _run(tmp_path, conversations, k=3):
    src, out = tmp_path / "in.json", tmp_path / "out.json"
    src.write_text(json.dumps({"format": "locomo-recall-v1", "conversations": conversations}, ensure_ascii=False))
    call_command("retrieve_batch", str(src), str(out), k=k, verbosity=0)
    return json.loads(out.read_text())


def test_output_has_results_and_latency_for_every_query(tmp_path):
    out = _run(tmp_path, [ZH, EN])
    assert set(out) == {"results", "latency_ms"}
    assert set(out["results"]) == set(out["latency_ms"]) == {"zh-1:0", "zh-1:1", "en-1:0", "en-1:1"}
    assert all(isinstance(ms, float | int) and ms >= 0 for ms in out["latency_ms"].values())


def test_chinese_questions_rank_their_evidence_first(tmp_path):
    out = _run(tmp_path, [ZH])
    assert out["results"]["zh-1:0"][0] == "D1:1"
    assert out["results"]["zh-1:1"][0] == "D2:1"


def test_english_questions_rank_their_evidence_first(tmp_path):
    out = _run(tmp_path, [EN])
    assert out["results"]["en-1:0"][0] == "D1:2"
    assert out["results"]["en-1:1"][0] == "D1:1"


def test_at_least_k_ids_when_the_conversation_has_them(tmp_path):
    out = _run(tmp_path, [ZH, EN], k=3)
    assert all(len(ids) >= 3 and len(ids) == len(set(ids)) for ids in out["results"].values())


def test_image_captions_are_searchable(tmp_path):
    conv = dict(ZH, queries=[{"qid": "zh-1:2", "question": "sleepy cat photo"}])
    assert _run(tmp_path, [conv])["results"]["zh-1:2"][0] == "D2:2"


def test_the_database_is_left_untouched(tmp_path):
    models = [get_user_model(), Profile, Slice, Message, RecallDocument, RecallTerm]
    before = [m.objects.count() for m in models]
    _run(tmp_path, [ZH, EN])
    assert [m.objects.count() for m in models] == before


def test_a_file_in_another_format_is_refused(tmp_path):
    src = tmp_path / "in.json"
    src.write_text(json.dumps({"format": "something-else"}))
    with pytest.raises(CommandError, match="locomo-recall-v1"):
        call_command("retrieve_batch", str(src), str(tmp_path / "out.json"))

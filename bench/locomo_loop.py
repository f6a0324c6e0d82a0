"""The loaded side of `bench.locomo_sweep` (imported once Django is set up): the ten LoCoMo
conversations as ten profiles of one scratch database, ranked by the chat's recall."""

import dataclasses
import json
import time
from collections.abc import Callable
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection

from bench.locomo import CATEGORIES, DATA, build_input, score
from memory.models import Profile
from memory.recall import embedding, vectors
from memory.recall.index import optimize_index
from memory.recall.rank import DEFAULT_CONFIG, RecallConfig, rank_messages
from memory.recall.tokenize import ANALYSER_VERSION
from memory.retrieve_batch import load_conversation

HEADER = f"{'configuration':32s} {'R@5':>6s} {'R@10':>6s} {'R@20':>6s}  R@10 by category  s"


def config_fields() -> dict[str, type]:
    """RecallConfig's fields and their types (int or float), for --set."""
    return {f.name: type(getattr(DEFAULT_CONFIG, f.name)) for f in dataclasses.fields(RecallConfig)}


def _model() -> str:
    embedder = embedding.current()
    return vectors.model_tag(embedder) if embedder else "off"


class Loop:
    """Load once (or reuse a load with the same data, analyser and model), then rank."""

    def __init__(self, *, data_path: Path | None = None, fresh: bool = False,
                 say: Callable[[str], None] = print) -> None:
        path = data_path or DATA
        self.data, self.gold = build_input(path)
        db = Path(connection.settings_dict["NAME"])  # the scratch file bench.locomo_sweep configured
        self._state = db.with_suffix(".json")
        key = {"data": str(path.resolve()), "size": path.stat().st_size, "analyser": ANALYSER_VERSION, "model": _model()}
        state = json.loads(self._state.read_text()) if self._state.exists() and not fresh else {}
        if state.get("key") != key:
            connection.close()
            db.unlink(missing_ok=True)
            call_command("migrate", verbosity=0)
            state = {"key": key, "profiles": self._load(say)}
            self._state.write_text(json.dumps(state))
        self.profiles = state["profiles"]

    def _load(self, say: Callable[[str], None]) -> dict:
        loaded = {}
        for conv in self.data["conversations"]:
            began = time.perf_counter()
            user = get_user_model().objects.create(username=f"locomo-{conv['id']}")
            profile = Profile.objects.create(user=user, key="locomo")
            doc_of = {str(mid): doc for mid, doc in load_conversation(profile, conv).items()}  # JSON keys
            loaded[conv["id"]] = {"profile": profile.pk, "docs": doc_of}
            say(f"{conv['id']}: {len(conv['docs'])} lines loaded in {time.perf_counter() - began:.1f} s")
        optimize_index()
        return loaded

    def rank(self, **changes) -> tuple[dict, float]:
        """(scores as bench.locomo.score gives them, seconds) under DEFAULT_CONFIG with `changes`."""
        cfg = dataclasses.replace(DEFAULT_CONFIG, **changes)
        began, results = time.perf_counter(), {}
        for conv in self.data["conversations"]:
            loaded = self.profiles[conv["id"]]
            names = {conv["speaker_a"]: "user", conv["speaker_b"]: "assistant"}
            for q in conv["queries"]:
                hits = rank_messages(profile_id=loaded["profile"], query=q["question"], limit=20,
                                     speaker_names=names, config=cfg)
                results[q["qid"]] = [loaded["docs"][str(h.message_id)] for h in hits]
        return score(results, self.gold), time.perf_counter() - began

    @staticmethod
    def line(label: str, ranked: tuple[dict, float]) -> str:
        scores, seconds = ranked
        o = scores["overall"]
        cats = " ".join(f"{name[:6]} {scores[name]['R@10']:.3f}" for name in CATEGORIES.values() if name in scores)
        return f"{label:32s} {o['R@5']:.4f} {o['R@10']:.4f} {o['R@20']:.4f}  {cats}  {seconds:.0f}"

"""Synthetic legacy KV dumps with every quirk LEGACY_KV.md lists (BENCH.md §3, tests).

    python -m memory.interop.synthetic OUT.json --keys 100000 [--shape put|get] [--seed 1]

Deterministic for a seed. Quirks: dual-written mem:/msg: pairs (assistant raw replies
with [[fav:]] markers), orphan v1 fragments and v0 `mem_` keys, retried duplicate
fragments (P3-11), soft-deleted records, hard deletes that left their fragment behind
(P0-2) next to the same words said at another time, an invalid profile key, highlights
(some not verbatim), experiences (some with missing sources), relations (some with a
missing end), tombstones with epoch and ISO expirations, metadata, base64 values,
image messages, meta_lastTs and other meta_ keys; Chinese, English, emoji, mixed.
"""

import argparse
import base64
import json
import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

from memory.hashing import content_hash
from memory.interop.legacy_shapes import iso_js

PROFILES = ("owner", "test_2", "Bad Profile!")
LINES = (
    "今天下班路上看到一只橘猫🐱",
    "I finally finished the marathon training plan",
    "周末想去爬山，你觉得天气会好吗？",
    "My sister's birthday is on the 14th 🎂",
    "最近在学 Django，感觉 ORM 很好用",
    "睡不着，有点焦虑 😔 about tomorrow's interview",
    "我们上次聊到的那本书叫《三体》",
    "Coffee or tea? 还是喝茶吧 🍵",
    "明天早上八点要开会",
    "I moved to Shanghai last spring",
)
REPLIES = (
    "听起来很治愈！橘猫总是很亲人。",
    "That's a big milestone — well done!",
    "记得带水，山上可能会冷。",
    "Want me to remind you a few days before?",
    "ORM 确实省心，注意 N+1 查询哦。",
    "深呼吸，你准备得已经很充分了 💪",
)
PERIODS = ((0, "small_hours"), (5, "early_morning"), (8, "morning"), (11, "noon"), (13, "afternoon"),
           (17, "dusk"), (19, "evening"), (23, "late_night"))
TZ_HOURS = 8  # the legacy users' clock: UTC+8


def _period(hour: int) -> str:
    return [p for h, p in PERIODS if hour >= h][-1]


def _frag_value(role: str, content: str, ts: int) -> dict:
    local = datetime.fromtimestamp(ts / 1000, tz=UTC) + timedelta(hours=TZ_HOURS)
    return {"role": role, "content": content, "ts": ts, "day_key": local.strftime("%Y-%m-%d"),
            "hour": local.hour, "period": _period(local.hour)}


class _Gen:
    def __init__(self, seed: int):
        self.rnd = random.Random(seed)
        self.n = 0

    def rand(self, k: int = 6) -> str:
        return "".join(self.rnd.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(k))

    def hex16(self) -> str:
        return f"{self.rnd.getrandbits(64):016x}"

    def entry(self, key: str, value, **attrs) -> dict:
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        item = {"key": key, "value": text}
        if self.rnd.random() < 0.02:
            item["value"] = base64.b64encode(text.encode()).decode()
            item["base64"] = True
        item.update(attrs)
        self.n += 1
        return item


def generate(*, keys: int, seed: int = 1) -> Iterator[dict]:
    """Yield about `keys` bulk-put entries (never fewer), in KV's key order is not promised."""
    g = _Gen(seed)
    rnd = g.rnd
    ts = int(datetime(2026, 10, 1, tzinfo=UTC).timestamp() * 1000)
    v2_from = ts + 2 * 24 * 3600 * 1000
    hids: dict[str, list[str]] = {p: [] for p in PROFILES}
    eids: dict[str, list[str]] = {p: [] for p in PROFILES}
    v0_left = max(5, keys // 200)
    while g.n < keys:
        # Conversations: a burst of turns, then an idle gap of an hour or more.
        ts += rnd.randint(60, 72) * 60_000 if rnd.random() < 0.15 else rnd.randint(5, 300) * 1000
        profile = "owner" if rnd.random() < 0.8 else rnd.choice(PROFILES[1:])
        line = rnd.choice(LINES)
        if v0_left and profile == "owner" and ts < v2_from:
            v0_left -= 1
            yield g.entry(f"mem_{ts}_{g.rand()}", _frag_value("user", line, ts))
            continue
        if ts < v2_from:
            # v1: fragments only; they become messages with deterministic ids.
            yield g.entry(f"mem:{profile}:{ts}_{g.rand()}", _frag_value("user", line, ts))
            continue
        roll = rnd.random()
        created = datetime.fromtimestamp(ts / 1000, tz=UTC)
        mid = f"c_{g.hex16()}"
        fkey = f"mem:{profile}:{ts + 3}_{g.rand()}"
        if roll < 0.01:
            # P0-2: hard delete left the fragment; later the same words are said again.
            chash = content_hash(profile, line)
            deleted = created + timedelta(days=1)
            expiration = int((deleted + timedelta(days=400)).timestamp())
            exp_attr = iso_js(datetime.fromtimestamp(expiration, tz=UTC)) if rnd.random() < 0.5 else expiration
            yield g.entry(f"tomb:{profile}:msg:{mid}",
                          {"kind": "msg", "id": mid, "deleted_at": iso_js(deleted), "content_hash": chash,
                           "created_at": iso_js(created)}, expiration=exp_attr)
            yield g.entry(fkey, _frag_value("user", line, ts + 3))
            later = ts + 3_600_000
            yield g.entry(f"mem:{profile}:{later}_{g.rand()}", _frag_value("user", line, later))
            continue
        deleted_at = iso_js(created + timedelta(days=3)) if roll < 0.03 else None
        image = rnd.random() < 0.02
        msg = {"profile_id": profile, "conversation_id": f"conv_{ts // 86_400_000}", "speaker": "user",
               "message_type": "image" if image else "text", "created_at": iso_js(created),
               "source_id": None, "sync_status": "synced", "deleted_at": deleted_at,
               "attachment": {"name": "cat.jpg", "mime": "image/jpeg", "size": 48213, "width": 800,
                              "height": 600} if image else None,
               "content": line}
        if rnd.random() < 0.7:
            msg["content_hash"] = content_hash(profile, line)
        yield g.entry(f"msg:{profile}:{mid}", msg)
        frag = g.entry(fkey, _frag_value("user", line, ts + 3))
        yield frag
        if rnd.random() < 0.01:
            yield g.entry(f"mem:{profile}:{ts + 3}_{g.rand()}", json.loads(_decoded(frag)))  # P3-11
        # The companion's reply: cleaned in msg:, raw (with a marker) in mem:.
        rts = ts + rnd.randint(1500, 4000)
        reply = rnd.choice(REPLIES)
        raw = reply + (f" [[fav:{line[:6]}]]" if rnd.random() < 0.2 else "")
        amid = f"a_{rts}_{g.rand(6)}"
        yield g.entry(f"msg:{profile}:{amid}",
                      {"profile_id": profile, "conversation_id": msg["conversation_id"],
                       "speaker": "assistant", "message_type": "text",
                       "created_at": iso_js(datetime.fromtimestamp(rts / 1000, tz=UTC)), "source_id": None,
                       "sync_status": "synced", "deleted_at": deleted_at, "attachment": None, "content": reply,
                       "content_hash": content_hash(profile, reply)})
        yield g.entry(f"mem:{profile}:{rts + 2}_{g.rand()}", _frag_value("assistant", raw, rts + 2))
        if rnd.random() < 0.05:
            hid = f"h_{g.hex16()[:12]}"
            verbatim = rnd.random() < 0.9
            yield g.entry(f"hl:{profile}:{hid}",
                          {"mid": mid, "content": line[:8] if verbatim else "not what was said",
                           "created_at": iso_js(created + timedelta(minutes=1)), "deleted_at": None,
                           "source": "user"})
            hids[profile].append(hid)
        if rnd.random() < 0.02:
            eid = f"e_{g.hex16()[:12]}"
            sources = [mid, amid] if rnd.random() < 0.9 else [mid, "c_ffffffffffffffff"]
            yield g.entry(f"exp:{profile}:{eid}",
                          {"title": "周末计划 weekend plan", "content": f"用户提到：{line}",
                           "source_mids": sources, "status": rnd.choice(("active", "candidate")),
                           "time_certainty": rnd.choice(("exact", "approximate", "unknown")),
                           "event_time": iso_js(created) if rnd.random() < 0.5 else "去年夏天",
                           "created_at": iso_js(created), "deleted_at": None})
            eids[profile].append(eid)
        if rnd.random() < 0.01 and hids[profile] and eids[profile]:
            ends = [rnd.choice(hids[profile]), rnd.choice(eids[profile])]
            if rnd.random() < 0.1:
                ends[1] = "e_missing"
            yield g.entry(f"rel:{profile}:r_{g.hex16()[:12]}",
                          {"from_id": ends[0], "to_id": ends[1],
                           "type": rnd.choice(("related", "causes", "follows", "contradicts", "part_of")),
                           "created_at": iso_js(created), "deleted_at": None}, metadata={"v": 2})
    for profile in PROFILES:
        yield g.entry(f"meta_lastTs:{profile}", str(ts), metadata={"v": 1})
        yield g.entry(f"meta_proactiveCount:{profile}:2026-10-20", "2")
    yield g.entry("meta_schemaVersion", "2")


def _decoded(item: dict) -> str:
    return base64.b64decode(item["value"]).decode() if item.get("base64") else item["value"]


def write_dump(path: str, *, keys: int, seed: int = 1, shape: str = "put") -> int:
    """Write a dump in the bulk-put or bulk-get shape; returns the number of keys."""
    n = 0
    with open(path, "w", encoding="utf-8") as out:
        out.write("[\n" if shape == "put" else "{\n")
        for i, item in enumerate(generate(keys=keys, seed=seed)):
            sep = ",\n" if i else ""
            if shape == "put":
                out.write(sep + json.dumps(item, ensure_ascii=False))
            else:
                value = _decoded(item)
                if "metadata" in item:
                    value = {"value": value, "metadata": item["metadata"]}
                out.write(sep + json.dumps(item["key"], ensure_ascii=False) + ": " + json.dumps(value, ensure_ascii=False))
            n += 1
        out.write("\n]\n" if shape == "put" else "\n}\nSuccess!\n")
    return n


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="Where to write the dump.")
    parser.add_argument("--keys", type=int, default=100_000, help="About how many keys.")
    parser.add_argument("--seed", type=int, default=1, help="Random seed (deterministic output).")
    parser.add_argument("--shape", choices=("put", "get"), default="put", help="bulk-put array or bulk-get object")
    args = parser.parse_args(argv)
    n = write_dump(args.out, keys=args.keys, seed=args.seed, shape=args.shape)
    print(f"wrote {n} keys to {args.out}")


if __name__ == "__main__":
    main()

"""Synthetic legacy KV dumps shaped like production, with every quirk LEGACY_KV.md lists
(BENCH.md §3, tests).

    python -m bench.synthetic OUT.json --keys 120000 [--shape put|get] [--seed 1]
    python -m bench.synthetic DUMP.json --describe   # family mix, line lengths, fragments per line

Benchmark and test data, so it lives in bench/, outside the product packages (issue 25 point 8).
Deterministic for a seed. Every line is worded differently (Chinese, English, emoji,
mixed scripts; drawn from word pools, never a short list repeated), and as varied as real
data (issue 25 point 3): a line is one to twenty-odd clauses (a few characters to several
hundred), a reply one to nine sentences, a line has zero to three mem: fragments. Quirks: nearly every
`msg:` beside its `mem:` twin from the old double write (assistant raw replies with
[[fav:]] and other markers), orphan v1 fragments and v0 `mem_` keys, retried duplicate
fragments (P3-11), soft-deleted records, ~2% tombstones -- hard deletes that left their
fragment behind (P0-2) next to the same words said at another time, deleted highlights
and experiences --, an invalid profile key, highlights (some not verbatim), experiences
(some with missing sources), relations (some with a missing end), epoch and ISO
expirations and an expiration_ttl, metadata, a few base64 values, image messages, meta_lastTs and
other meta_ keys; either dump shape (bulk put or bulk get with its trailing `Success!`).
"""

import argparse
import base64
import json
import random
import statistics
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

from memory.hashing import content_hash
from memory.interop.legacy_shapes import iso_js
from memory.markers import clean_reply

PROFILES = ("owner", "test_2", "Bad Profile!")
PERIODS = ((0, "small_hours"), (5, "early_morning"), (8, "morning"), (11, "noon"), (13, "afternoon"),
           (17, "dusk"), (19, "evening"), (23, "late_night"))
TZ_HOURS = 8  # the legacy users' clock: UTC+8

# Word pools: a line is one draw from each pool of a pattern, so lines rarely repeat; a
# line that does repeat is drawn again (see _Words.line).
ZH_WHEN = ("今天", "昨天晚上", "刚才", "上周末", "早上", "下班路上", "午休的时候", "半夜", "前天", "周三",
           "这几天", "刚到家", "出门前", "吃饭时", "地铁上", "下雨天")
ZH_WHO = ("我", "我妈", "同事小王", "室友", "我姐", "老板", "楼下的阿姨", "表弟", "我们组", "大学同学",
          "隔壁邻居", "我爸", "女朋友", "老同学阿杰")
ZH_DID = ("看到", "买了", "想起", "聊到", "做了", "修好了", "弄丢了", "借走了", "推荐了", "吐槽了",
          "终于读完了", "第一次尝试了", "偷偷订了", "认真研究了", "差点错过了")
ZH_WHAT = ("一只橘猫", "那本《三体》", "新的跑鞋", "一家云南菜馆", "旧相册", "咖啡机", "去杭州的车票",
           "一盆绿萝", "周末的计划", "奶奶的菜谱", "一部老电影", "吉他谱", "滑雪课", "手冲壶", "番茄炒蛋",
           "面试的题目", "新的键盘", "一幅拼图", "街角的面包店", "夜跑路线")
ZH_TAIL = ("，感觉挺开心的", "，有点累", "，你怎么看？", "，好久没这样了", "，还想再试一次", "，心情复杂",
           "，说不上来为什么", "，下次带你看", "", "，哈哈", "，其实有点紧张", "，挺意外的")
EN_OPEN = ("Honestly,", "So", "Guess what:", "Funny thing,", "Ugh,", "Okay so", "Quick update:", "Well,",
           "By the way,", "Random thought:", "Not gonna lie,", "Today")
EN_WHO = ("I", "my brother", "my manager", "Lily from work", "our neighbour", "my roommate", "the barista",
          "my dad", "my best friend", "the new intern", "my aunt", "the landlord")
EN_DID = ("finally fixed", "accidentally broke", "signed up for", "talked about", "cooked", "lost", "found",
          "booked", "painted", "returned", "started reading", "tried", "gave up on", "recommended")
EN_WHAT = ("the marathon plan", "a tiny bonsai", "the bike's back wheel", "a pottery class", "the blue sofa",
           "a sourdough starter", "tickets to Osaka", "the old laptop", "a chess opening", "the balcony garden",
           "a salsa lesson", "the tax forms", "a jigsaw of the Alps", "the birthday cake", "a podcast on Mars",
           "the rooftop bar", "a yoga mat", "the spare key")
EN_WHEN = ("this morning", "last night", "after lunch", "on Sunday", "before the meeting", "on the train",
           "at 2am", "yesterday", "during the storm", "at the airport", "over the weekend", "just now")
EMOJI = ("🐱", "🎂", "😔", "🍵", "💪", "🌧️", "🎸", "📚", "🏃", "😂", "🙃", "🍜", "✨", "🚲", "🌙", "🤔", "")
REPLY_ZH = ("听起来", "真好，", "辛苦了，", "哇，", "嗯嗯，", "我记住了，", "抱抱，", "原来如此，")
REPLY_ZH_2 = ("很治愈", "挺不容易的", "值得开心一下", "下次可以再试试", "要照顾好自己", "你做得很好",
              "我也想听听后来怎样了", "记得多喝水")
REPLY_EN = ("That sounds", "Oh wow,", "I hear you,", "Nice,", "Hmm,", "Good call,", "Take it easy,")
REPLY_EN_2 = ("like a lot of fun", "pretty brave", "worth remembering", "a little exhausting", "like progress",
              "exactly like you", "like a story for later")
OTHER_MARKERS = ("mood", "remind", "note")
TITLES = ("周末计划 weekend plan", "工作近况", "Family news", "学吉他 learning guitar", "旅行 trip",
          "健康 health", "搬家 moving", "读书 reading")


def _period(hour: int) -> str:
    return [p for h, p in PERIODS if hour >= h][-1]


def _frag_value(role: str, content: str, ts: int) -> dict:
    local = datetime.fromtimestamp(ts / 1000, tz=UTC) + timedelta(hours=TZ_HOURS)
    return {"role": role, "content": content, "ts": ts, "day_key": local.strftime("%Y-%m-%d"),
            "hour": local.hour, "period": _period(local.hour)}


# How varied real lines are (issue 25 point 3): a person's line is one clause as often as a
# paragraph of several, a reply is one to several sentences, so value lengths spread from a
# few characters to several hundred. Weights of the number of clauses in a user's line, and of
# sentences in a reply; a line of one clause is sometimes only an interjection.
LINE_CLAUSES = ((1, 44), (2, 25), (3, 13), (4, 8), (6, 5), (9, 3), (14, 1), (22, 1))
REPLY_SENTENCES = ((1, 12), (2, 26), (3, 28), (4, 18), (6, 11), (9, 5))
ZH_SHORT = ("嗯", "好的", "哈哈哈", "晚安", "在吗", "是啊", "累了", "好吧", "嗯嗯", "真的假的", "笑死", "行")
EN_SHORT = ("ok", "lol", "yeah", "night!", "hmm", "sure", "same", "thanks", "wait what", "haha")
ZH_LINK = ("，", "。", "，然后", "，不过", "。还有，", "；", "，所以", "……")
REPLY_ZH_3 = ("你说的{t}让我想到上次的事", "{t}这件事值得记下来", "如果是我，也会在意{t}", "关于{t}，慢慢来就好",
              "我猜{t}背后还有故事", "听你讲{t}的时候我很安心")
REPLY_EN_3 = ("Tell me more about {t}", "I remember you mentioned {t} before", "{t} is worth a note",
              "No rush with {t}", "I like how you put {t}", "Maybe {t} can wait until tomorrow")


# mem: fragments per msg: line (weights): the double write nearly always worked once.
FRAGMENTS_PER_LINE = ((1, 955), (0, 30), (2, 12), (3, 3))


def _weighted(rnd: random.Random, table: tuple[tuple[int, int], ...]) -> int:
    return rnd.choices([n for n, _ in table], weights=[w for _, w in table])[0]


class _Words:
    """Lines and replies, each worded differently from every other one of the dump."""

    def __init__(self, rnd: random.Random):
        self.rnd = rnd
        self.seen: set[str] = set()

    def _clause(self, kind: float) -> str:
        c = self.rnd.choice
        if kind < 0.45:
            return f"{c(ZH_WHEN)}{c(ZH_WHO)}{c(ZH_DID)}{c(ZH_WHAT)}{c(ZH_TAIL)}{c(EMOJI)}"
        if kind < 0.8:
            return f"{c(EN_OPEN)} {c(EN_WHO)} {c(EN_DID)} {c(EN_WHAT)} {c(EN_WHEN)} {c(EMOJI)}".rstrip()
        # Mixed scripts in one line.
        return f"{c(ZH_WHEN)}{c(ZH_WHO)} {c(EN_DID)} {c(EN_WHAT)}，{c(ZH_TAIL).lstrip('，') or '好吧'} {c(EMOJI)}".rstrip()

    def _draw(self, kind: float) -> str:
        rnd = self.rnd
        clauses = _weighted(rnd, LINE_CLAUSES)
        if clauses == 1 and rnd.random() < 0.3:
            return rnd.choice(ZH_SHORT if kind < 0.6 else EN_SHORT) + rnd.choice(EMOJI)
        parts = [self._clause(kind if i == 0 else rnd.random()) for i in range(clauses)]
        text = parts[0]
        for part in parts[1:]:
            text += (rnd.choice(ZH_LINK) if "\u4e00" <= part[:1] <= "\u9fff" else " ") + part
        return text

    def line(self) -> str:
        for attempt in range(50):
            text = self._draw(self.rnd.random())
            if attempt > 5:
                text += f" ({self.rnd.randint(2, 99)}{self.rnd.choice('次回号天')})"
            if text not in self.seen:
                self.seen.add(text)
                return text
        raise RuntimeError("word pools exhausted")  # pragma: no cover - pools hold millions of lines

    def _sentence(self, topic: str) -> str:
        rnd, c = self.rnd, self.rnd.choice
        roll = rnd.random()
        if roll < 0.35:
            return f"{c(REPLY_ZH)}{topic}{c(REPLY_ZH_2)}。{c(EMOJI)}"
        if roll < 0.55:
            return c(REPLY_ZH_3).format(t=topic) + c("。！～") + c(EMOJI)
        if roll < 0.8:
            return f"{c(REPLY_EN)} {topic} {c(REPLY_EN_2)}! {c(EMOJI)}".rstrip()
        return c(REPLY_EN_3).format(t=topic) + c(".!?") + (" " + c(EMOJI) if rnd.random() < 0.3 else "")

    def reply(self, line: str) -> str:
        rnd = self.rnd
        words = line.replace("，", " ").replace("。", " ").split() or [line]
        sentences = _weighted(rnd, REPLY_SENTENCES)
        for _ in range(50):
            topic = line.split("，")[0][-6:] if rnd.random() < 0.5 else rnd.choice(words)[-12:]
            text = " ".join(self._sentence(topic) for _ in range(sentences))
            if text not in self.seen:
                self.seen.add(text)
                return text
            sentences += 1
        raise RuntimeError("reply pools exhausted")  # pragma: no cover


class _Gen:
    def __init__(self, seed: int):
        self.rnd = random.Random(seed)
        self.words = _Words(self.rnd)
        self.n = 0

    def rand(self, k: int = 6) -> str:
        return "".join(self.rnd.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(k))

    def hex16(self) -> str:
        return f"{self.rnd.getrandbits(64):016x}"

    def entry(self, key: str, value, **attrs) -> dict:
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        item = {"key": key, "value": text}
        if self.rnd.random() < 0.005:
            item["value"] = base64.b64encode(text.encode()).decode()
            item["base64"] = True
        item.update(attrs)
        self.n += 1
        return item

    def tomb(self, profile: str, kind: str, oid: str, deleted: datetime, **value) -> dict:
        expiration = int((deleted + timedelta(days=400)).timestamp())
        exp_attr = iso_js(datetime.fromtimestamp(expiration, tz=UTC)) if self.rnd.random() < 0.5 else expiration
        return self.entry(f"tomb:{profile}:{kind}:{oid}",
                          {"kind": kind, "id": oid, "deleted_at": iso_js(deleted), **value}, expiration=exp_attr)


def _msg_value(profile: str, mid: str, speaker: str, content: str, created: datetime, *,
               deleted_at: str | None = None, attachment: dict | None = None) -> dict:
    return {"profile_id": profile, "conversation_id": f"conv_{int(created.timestamp()) // 86_400}",
            "speaker": speaker, "message_type": "image" if attachment else "text",
            "created_at": iso_js(created), "source_id": None, "sync_status": "synced",
            "deleted_at": deleted_at, "attachment": attachment, "content": content}


def _turn(g: _Gen, profile: str, ts: int, state: dict) -> Iterator[dict]:
    """One v2 turn: the user's line and the reply, each as msg: + its mem: twin, and what hangs off them."""
    rnd = g.rnd
    line = g.words.line()
    created = datetime.fromtimestamp(ts / 1000, tz=UTC)
    mid = f"c_{g.hex16()}"
    fkey = f"mem:{profile}:{ts + 3}_{g.rand()}"
    roll = rnd.random()
    if roll < 0.075:
        # P0-2: the hard delete left the fragment; later the same words are said again.
        yield g.tomb(profile, "msg", mid, created + timedelta(days=1),
                     content_hash=content_hash(profile, line), created_at=iso_js(created))
        yield g.entry(fkey, _frag_value("user", line, ts + 3))
        later = ts + 3_600_000
        yield g.entry(f"mem:{profile}:{later}_{g.rand()}", _frag_value("user", line, later))
        return
    deleted_at = iso_js(created + timedelta(days=3)) if roll < 0.095 else None
    image = rnd.random() < 0.02
    attachment = {"name": f"IMG_{g.rand(4)}.jpg", "mime": "image/jpeg", "size": rnd.randint(20_000, 900_000),
                  "width": 800, "height": 600} if image else None
    msg = _msg_value(profile, mid, "user", line, created, deleted_at=deleted_at, attachment=attachment)
    if rnd.random() < 0.7:
        msg["content_hash"] = content_hash(profile, line)
    yield g.entry(f"msg:{profile}:{mid}", msg)
    yield from _fragments(g, fkey, _frag_value("user", line, ts + 3))
    # The companion's reply: cleaned in msg:, raw (with its markers) in mem:.
    rts = ts + rnd.randint(1500, 4000)
    reply = g.words.reply(line)
    raw = reply
    if rnd.random() < 0.2:
        raw += f" [[fav:{line[:6]}]]"
    if rnd.random() < 0.05:
        raw = f"[[{rnd.choice(OTHER_MARKERS)}:{g.rand(5)}]]" + raw
    amid = f"a_{rts}_{g.rand(6)}"
    areply = _msg_value(profile, amid, "assistant", reply, datetime.fromtimestamp(rts / 1000, tz=UTC),
                        deleted_at=deleted_at)
    areply["content_hash"] = content_hash(profile, reply)
    yield g.entry(f"msg:{profile}:{amid}", areply)
    yield from _fragments(g, f"mem:{profile}:{rts + 2}_{g.rand()}", _frag_value("assistant", raw, rts + 2))
    yield from _curation(g, profile, created, line, mid, amid, state)


def _fragments(g: _Gen, key: str, value: dict) -> Iterator[dict]:
    """A line's mem: fragments from the old double write: nearly always one, none when that
    write failed, and two or three when it was retried under new random keys (P3-11)."""
    n = _weighted(g.rnd, FRAGMENTS_PER_LINE)
    if n:
        frag = g.entry(key, value)
        yield frag
        prefix = key.rsplit("_", 1)[0]
        for _ in range(n - 1):
            yield g.entry(f"{prefix}_{g.rand()}", json.loads(_decoded(frag)))


def _curation(g: _Gen, profile: str, created: datetime, line: str, mid: str, amid: str, state: dict) -> Iterator[dict]:
    rnd = g.rnd
    hids, eids = state["hids"][profile], state["eids"][profile]
    if rnd.random() < 0.05:
        hid = f"h_{g.hex16()[:12]}"
        if rnd.random() < 0.1:  # deleted for good later: only its tombstone is left
            yield g.tomb(profile, "hl", hid, created + timedelta(days=2))
            return
        verbatim = rnd.random() < 0.9
        start = rnd.randint(0, max(0, len(line) - 4))
        yield g.entry(f"hl:{profile}:{hid}",
                      {"mid": mid, "content": line[start:start + 8] if verbatim else "not what was said",
                       "created_at": iso_js(created + timedelta(minutes=1)),
                       "deleted_at": iso_js(created + timedelta(days=5)) if rnd.random() < 0.03 else None,
                       "source": "user"})
        hids.append(hid)
    if rnd.random() < 0.02:
        eid = f"e_{g.hex16()[:12]}"
        if rnd.random() < 0.1:
            yield g.tomb(profile, "exp", eid, created + timedelta(days=2))
            return
        sources = [mid, amid] if rnd.random() < 0.9 else [mid, "c_ffffffffffffffff"]
        yield g.entry(f"exp:{profile}:{eid}",
                      {"title": rnd.choice(TITLES), "content": f"用户提到：{line}",
                       "source_mids": sources, "status": rnd.choice(("active", "candidate")),
                       "time_certainty": rnd.choice(("exact", "approximate", "unknown")),
                       "event_time": iso_js(created) if rnd.random() < 0.5 else rnd.choice(("去年夏天", "last spring")),
                       "created_at": iso_js(created), "deleted_at": None})
        eids.append(eid)
    if rnd.random() < 0.01 and hids and eids:
        ends = [rnd.choice(hids), rnd.choice(eids)]
        if rnd.random() < 0.1:
            ends[1] = "e_missing"
        yield g.entry(f"rel:{profile}:r_{g.hex16()[:12]}",
                      {"from_id": ends[0], "to_id": ends[1],
                       "type": rnd.choice(("related", "causes", "follows", "contradicts", "part_of")),
                       "created_at": iso_js(created), "deleted_at": None}, metadata={"v": 2})


def generate(*, keys: int, seed: int = 1) -> Iterator[dict]:
    """Yield about `keys` bulk-put entries (never fewer); KV's key order is not promised."""
    g = _Gen(seed)
    rnd = g.rnd
    ts = int(datetime(2026, 3, 1, tzinfo=UTC).timestamp() * 1000)
    # The first few percent of the keys come from before the v2 archive: fragments only.
    v1_keys = max(10, keys // 25)
    v0_left = max(5, keys // 200)
    state = {"hids": {p: [] for p in PROFILES}, "eids": {p: [] for p in PROFILES}}
    while g.n < keys:
        # Conversations: a burst of turns, then an idle gap of an hour or more.
        ts += rnd.randint(60, 720) * 60_000 if rnd.random() < 0.12 else rnd.randint(5, 300) * 1000
        profile = "owner" if rnd.random() < 0.8 else rnd.choice(PROFILES[1:])
        if g.n < v1_keys:
            line = g.words.line()
            if v0_left and profile == "owner":
                v0_left -= 1
                yield g.entry(f"mem_{ts}_{g.rand()}", _frag_value("user", line, ts))
            else:
                # v1: fragments only; they become messages with deterministic ids.
                yield g.entry(f"mem:{profile}:{ts}_{g.rand()}", _frag_value("user", line, ts))
            continue
        yield from _turn(g, profile, ts, state)
    for profile in PROFILES:
        yield g.entry(f"meta_lastTs:{profile}", str(ts), metadata={"v": 1})
        yield g.entry(f"meta_proactiveCount:{profile}:2026-10-20", "2", expiration_ttl=86_400)
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


def _entries(path: str) -> Iterator[tuple[str, str]]:
    """(key, value text) of a dump of either shape."""
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    if text.rstrip().endswith("Success!"):
        text = text.rstrip()[: -len("Success!")]
    data = json.loads(text)
    items = data if isinstance(data, list) else [{"key": k, "value": v} for k, v in data.items()]
    for item in items:
        value = item["value"]
        if isinstance(value, dict) and "value" in value:
            value = value["value"]
        if item.get("base64"):
            value = base64.b64decode(value).decode()
        yield item["key"], value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def describe(path: str) -> dict:
    """What makes a dump costly to import, to compare a real dump with a generated one: the
    mix of key families, the length of the lines (msg: and mem: contents, in characters),
    and how many mem: fragments each msg: line has (same profile, speaker and words)."""
    families: Counter = Counter()
    lengths: dict[str, list[int]] = {"user": [], "assistant": []}
    value_chars = 0
    lines: Counter = Counter()
    frags: Counter = Counter()
    for key, text in _entries(path):
        family = "mem_" if key.startswith("mem_") else "meta" if key.startswith("meta_") else key.split(":", 1)[0]
        families[family] += 1
        value_chars += len(text)
        if family not in ("msg", "mem", "mem_"):
            continue
        value = json.loads(text)
        profile = value.get("profile_id", key.split(":")[1] if family == "mem" else "owner")
        speaker = value.get("speaker") or value.get("role") or ""
        words = value.get("content") or ""
        if family == "msg":
            lengths["assistant" if speaker == "assistant" else "user"].append(len(words))
            lines[(profile, speaker, words)] += 1
        else:
            if speaker == "assistant":
                words = clean_reply(words)
            frags[(profile, "user" if speaker == "user" else "assistant", words)] += 1
    per_line = Counter(min(frags.get(line, 0), 3) for line in lines)

    def spread(xs: list[int]) -> dict:
        if not xs:
            return {}
        xs = sorted(xs)
        at = lambda q: xs[min(len(xs) - 1, int(q * len(xs)))]  # noqa: E731
        return {"n": len(xs), "mean": round(statistics.fmean(xs), 1), "p10": at(0.1), "p50": at(0.5),
                "p90": at(0.9), "p99": at(0.99), "max": xs[-1]}

    total = sum(families.values())
    return {
        "keys": total,
        "value_chars_per_key": round(value_chars / max(1, total), 1),
        "families": {f: f"{n} ({100 * n / total:.1f}%)" for f, n in families.most_common()},
        "user_line_chars": spread(lengths["user"]),
        "reply_chars": spread(lengths["assistant"]),
        "fragments_per_msg_line": {("3+" if k == 3 else str(k)): v for k, v in sorted(per_line.items())},
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="Where to write the dump (with --describe: the dump to describe).")
    parser.add_argument("--describe", action="store_true",
                        help="Print what the dump OUT holds (family mix, line lengths, fragments per line).")
    parser.add_argument("--keys", type=int, default=120_000, help="About how many keys.")
    parser.add_argument("--seed", type=int, default=1, help="Random seed (deterministic output).")
    parser.add_argument("--shape", choices=("put", "get"), default="put", help="bulk-put array or bulk-get object")
    args = parser.parse_args(argv)
    if args.describe:
        print(json.dumps(describe(args.out), indent=2, ensure_ascii=False))
        return
    n = write_dump(args.out, keys=args.keys, seed=args.seed, shape=args.shape)
    print(f"wrote {n} keys to {args.out}")


if __name__ == "__main__":
    main()

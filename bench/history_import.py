"""BENCH.md §5: history import (a ChatGPT export zip of ~2,000 conversations / 150k messages).

    python -m bench.history_import [--conversations 2000] [--messages 150000] [--json OUT]

`generate()` writes a ChatGPT data export shaped like real ones: `conversations.json` in a
zip with `user.json`, `chat.html` and a few images; each conversation a `mapping` tree with
the null root, a hidden system message, custom instructions and memory on some, regenerated
replies and edited prompts (branches), tool calls and their output, reasoning, multimodal
parts (their image in the zip for some, missing for others), null times, and the metadata a
real node carries; every line worded differently, in Chinese and English.

Each phase runs in a child process of its own (fresh scratch SQLite), so peak RSS
(its VmHWM, `bench.machine.peak_rss_mb`) is that phase's alone:
- parse: a plain streamed parse of the same member (ijson's items, building each
  conversation and dropping it), the baseline of the ratio;
- import: `manage.py import_history` into an empty database;
- re-import: the same again; the child checks no row of any memory_* table was added;
- live: the same file through the data page of a real `previously.server` on loopback (upload,
  preview, apply as the page's task, polled to the end), while another signed-in person's chat
  page is fetched every 0.1 s: their p99 (bar ≤ 200 ms) and the server's peak RSS.
Seconds are wall clock around the call (Django start-up and migrate excluded), CPU seconds
beside them; the load average is printed with every figure.
"""

import argparse
import io
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from bench.import_upload import post_form, preview_token, session_cookies, upload, wait_for_import
from bench.machine import load_numbers, peak_rss_mb
from bench.stack import PRODUCTION_OVER_HTTP
from tests.hostile.server import Probe, SocketProbe, get, rss_bytes, start

ROOT = Path(__file__).resolve().parent.parent
BARS = {"seconds_import": 60, "peak_rss_mb": 400, "seconds_reimport": 20, "other_p99_ms": 200}  # BENCH.md §5

EN = ("river lantern piano autumn ticket bakery garden window letter morning station harbour violin museum "
      "bicycle meadow thunder pepper kettle notebook festival island compass mirror orchard pillow ribbon "
      "saddle tunnel umbrella valley whisper yogurt zipper anchor blossom candle dragon engine feather glacier "
      "honey insect jacket kitten ladder marble needle ocean parrot quilt rocket shadow teapot").split()
ZH = list("山水风雨花草树木日月星云天地人心爱情书画诗酒茶琴棋歌舞春夏秋冬东南西北红黄蓝绿白黑金银铜铁鱼鸟虫兽猫狗马牛羊猪家门窗床桌椅灯火")


# ---------------------------------------------------------------- the generator


class _Words:
    def __init__(self, rng: random.Random):
        self.rng, self.n = rng, 0

    def line(self) -> str:
        """A line no other line repeats: random words and a running number spelled in them."""
        self.n += 1
        r = self.rng
        if r.random() < 0.5:
            words = [r.choice(EN) for _ in range(r.randint(6, 40))]
            return f"{' '.join(words).capitalize()} (#{self.n})."
        chars = "".join(r.choice(ZH) for _ in range(r.randint(8, 60)))
        return f"{chars}，第{self.n}句。"


def _meta(rng: random.Random, slug: str) -> dict:
    return {"finish_details": {"type": "stop", "stop_tokens": [200002]}, "is_complete": True,
            "citations": [], "content_references": [], "model_slug": slug, "default_model_slug": slug,
            "parent_id": f"{rng.getrandbits(128):032x}", "request_id": f"{rng.getrandbits(64):016x}-SJC",
            "timestamp_": "absolute", "message_type": None, "model_switcher_deny": []}


def _msg(nid, role, content, t, rng, *, hidden=False, recipient="all", slug="gpt-4o") -> dict:
    meta = _meta(rng, slug)
    if hidden:
        meta["is_visually_hidden_from_conversation"] = True
    return {"id": nid, "author": {"role": role, "name": None, "metadata": {}}, "create_time": t,
            "update_time": None, "content": content, "status": "finished_successfully", "end_turn": True,
            "weight": 1.0, "metadata": meta, "recipient": recipient, "channel": None}


def conversation(i: int, n_messages: int, words: _Words, rng: random.Random, t0: float, images: list) -> dict:
    """One conversation whose mapping holds `n_messages` nodes with a message."""
    mapping, ids = {}, iter(range(10**9))

    def nid():
        return f"{i:05d}-{next(ids):05d}-{rng.getrandbits(48):012x}"

    def add(parent, message):
        key = message["id"] if message else nid()
        mapping[key] = {"id": key, "message": message, "parent": parent, "children": []}
        if parent:
            mapping[parent]["children"].append(key)
        return key

    root = add(None, None)
    t = t0
    made = 0
    head = add(root, _msg(nid(), "system", {"content_type": "text", "parts": [""]}, None, rng, hidden=True))
    made += 1
    if i % 5 == 0:
        head = add(head, _msg(nid(), "user", {"content_type": "user_editable_context",
                                             "user_profile": words.line(), "user_instructions": words.line()},
                              None, rng, hidden=True))
        head = add(head, _msg(nid(), "user", {"content_type": "model_editable_context",
                                             "model_set_context": words.line()}, None, rng, hidden=True))
        made += 2
    while made < n_messages:
        t += rng.randint(20, 400) if rng.random() > 0.03 else rng.randint(3600, 86400)
        r = rng.random()
        if r < 0.05 and made + 2 <= n_messages:  # an edited prompt: the old one and its reply stay behind
            old = add(head, _msg(nid(), "user", {"content_type": "text", "parts": [words.line()]}, t, rng))
            add(old, _msg(nid(), "assistant", {"content_type": "text", "parts": [words.line()]}, t + 5, rng))
            made += 2
            t += 30
        if r < 0.08:
            parts = [words.line(), {"content_type": "image_asset_pointer", "asset_pointer":
                                    f"file-service://file-{i:05d}{made:05d}", "size_bytes": 2000,
                                    "width": 8, "height": 6, "fovea": None, "metadata": None}]
            if rng.random() < 0.3:
                images.append(f"file-{i:05d}{made:05d}-photo.png")
            u = add(head, _msg(nid(), "user", {"content_type": "multimodal_text", "parts": parts}, t, rng))
        else:
            u = add(head, _msg(nid(), "user", {"content_type": "text", "parts": [words.line()]}, t, rng))
        made += 1
        if r > 0.9 and made < n_messages:  # a tool call, its output, then the reply
            call = add(u, _msg(nid(), "assistant", {"content_type": "code", "language": "unknown",
                                                    "text": words.line()}, t + 1, rng, recipient="python"))
            u = add(call, _msg(nid(), "tool", {"content_type": "execution_output", "text": words.line()},
                               t + 2, rng))
            made += 2
        if 0.85 < r <= 0.9 and made < n_messages:
            u = add(u, _msg(nid(), "assistant", {"content_type": "thoughts", "thoughts": [
                {"summary": "Thinking", "content": words.line()}]}, t + 1, rng))
            made += 1
        if 0.1 < r < 0.22 and made + 1 < n_messages:  # a regenerated reply
            add(u, _msg(nid(), "assistant", {"content_type": "text", "parts": [words.line()]}, t + 4, rng))
            made += 1
        if made >= n_messages:
            head = u
            break
        when = None if rng.random() < 0.02 else t + 8
        head = add(u, _msg(nid(), "assistant", {"content_type": "text", "parts": [words.line()]}, when, rng))
        made += 1
    cid = f"{rng.getrandbits(128):032x}"
    return {"title": words.line()[:40], "create_time": t0, "update_time": t, "mapping": mapping,
            "moderation_results": [], "current_node": head, "plugin_ids": None, "conversation_id": cid,
            "conversation_template_id": None, "gizmo_id": None, "is_archived": False, "safe_urls": [],
            "default_model_slug": "gpt-4o", "id": cid}


def generate(path: Path, *, conversations: int = 2000, messages: int = 150_000, seed: int = 1) -> dict:
    rng = random.Random(seed)
    words = _Words(rng)
    images: list[str] = []
    per = messages // conversations
    t0 = 1_650_000_000.0
    size = 0
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        with z.open("conversations.json", "w", force_zip64=True) as raw:
            out = io.TextIOWrapper(raw, encoding="utf-8")
            out.write("[")
            for i in range(conversations):
                n = per + (1 if i < messages - per * conversations else 0)
                text = json.dumps(conversation(i, n, words, rng, t0, images), ensure_ascii=False)
                size += len(text.encode())
                out.write(("," if i else "") + text)
                t0 += rng.randint(3600, 3 * 86400)
            out.write("]")
            out.flush()
            out.detach()
        z.writestr("user.json", json.dumps({"id": "user-bench", "email": "bench@example.com"}))
        z.writestr("chat.html", "<html><body>chats</body></html>")
        from PIL import Image
        png = io.BytesIO()
        Image.new("RGB", (8, 6), (30, 120, 200)).save(png, "PNG")
        for name in images:
            z.writestr(name, png.getvalue())
    return {"json_bytes": size, "zip_bytes": path.stat().st_size, "images_in_zip": len(images)}


# ---------------------------------------------------------------- child phases


def _setup_django():
    import django
    django.setup()


def _row_counts() -> dict:
    from django.apps import apps
    return {m._meta.db_table: m.objects.count() for m in apps.get_app_config("memory").get_models()}


def _phase(phase: str, path: str) -> dict:
    if phase == "parse":
        import ijson
        t0, c0 = time.perf_counter(), time.process_time()
        n = 0
        with zipfile.ZipFile(path) as z, z.open("conversations.json") as fh:
            for _conv in ijson.items(fh, "item", use_float=True):
                n += 1
        return {"seconds": time.perf_counter() - t0, "cpu": time.process_time() - c0, "peak_mb": peak_rss_mb(),
                "conversations": n}
    _setup_django()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    if phase == "setup":
        call_command("migrate", verbosity=0)
        get_user_model().objects.create_user(username="bench", password="bench-pw-123")
        return {"ok": True}
    before = _row_counts()
    out = io.StringIO()
    t0, c0 = time.perf_counter(), time.process_time()
    call_command("import_history", path, "--user", "bench", stdout=out, stderr=io.StringIO())
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    after = _row_counts()
    added = {t: after[t] - before[t] for t in after if after[t] != before[t]}
    if phase == "reimport" and added:
        raise SystemExit(f"re-import added rows: {added}")
    return {"seconds": seconds, "cpu": cpu, "peak_mb": peak_rss_mb(), "added": added,
            "summary": out.getvalue().strip().splitlines()[-1]}


def _child(phase: str, path: Path, db_dir: Path) -> dict:
    env = dict(os.environ, DATABASE_URL=f"sqlite:///{db_dir / 'bench.sqlite3'}", PREVIOUSLY_VAR_DIR=str(db_dir),
               DJANGO_DEBUG="0", DJANGO_SETTINGS_MODULE="previously.settings",
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-m", "bench.history_import", "--child", phase, str(path)],
                         cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"child {phase} failed ({out.returncode}):\n{out.stderr[-4000:]}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["load"] = load_numbers()
    return result


def live(path: Path, work: Path) -> dict:
    """The import as a person makes it, on the data page of a live server, with another person's
    chat page fetched meanwhile (BENCH §5's "another person's chat stays responsive")."""
    stack = start(work, env=PRODUCTION_OVER_HTTP)  # as `make bench` runs it, and as production does
    try:
        port, pid = stack.ports[0], stack.procs[0].pid
        bystander, importer = session_cookies(stack, "bystander", "importer")
        get(port, "/", bystander)  # their page is open already: its first render is not the import's doing
        server_start_mb = rss_bytes(pid) / 1024 / 1024
        # Their page fetched every 0.1 s, and their chat over the socket: a line every 0.5 s, timed
        # until its (offline) reply is archived and shown.
        with Probe(port, pid, path="/", cookie=bystander, every=0.1) as probe, \
                SocketProbe(port, pid, cookie=bystander) as chat:
            t0, m0 = time.perf_counter(), time.monotonic()
            status, page = upload(port, importer, path, url="/data/history/preview/", field="history",
                                  content_type="application/zip")
            preview_s = time.perf_counter() - t0
            if status != 200:
                raise RuntimeError(f"the history preview answered {status}: {page[-2000:]}")
            token = preview_token(page)
            t1, m1 = time.perf_counter(), time.monotonic()
            post_form(port, importer, "/data/history/apply/", {"token": token})
            state = wait_for_import(stack, token)
            apply_s = time.perf_counter() - t1
            time.sleep(1)  # a second of probes after
        if state.get("state") != "done":
            raise RuntimeError(f"the apply ended {state}")
        return {"preview_s": preview_s, "apply_s": apply_s, "peak_mb": probe.peak_rss / 1024 / 1024,
                "peak_with_children_mb": probe.peak_tree_rss / 1024 / 1024,
                "server_start_mb": server_start_mb, "other_p99_ms": probe.p99() * 1000, "other": probe.summary(),
                "socket_p99_ms": chat.p99() * 1000, "socket": chat.summary(), "socket_failed": len(chat.failures),
                # The same, of the probes begun during the preview (the upload read and checked in
                # the server's request) and during the apply (in its child process).
                "phases_p99_ms": {phase: {"page": round(probe.p99(*span) * 1000, 1),
                                          "socket": round(chat.p99(*span) * 1000, 1)}
                                  for phase, span in (("preview", (m0, m1)), ("apply", (m1, m1 + apply_s)))},
                "load": load_numbers()}
    finally:
        stack.stop()


def run(*, conversations: int = 2000, messages: int = 150_000, seed: int = 1) -> dict:
    scratch = Path(tempfile.mkdtemp(prefix="previously-history-bench-"))
    try:
        path = scratch / "chatgpt-export.zip"
        t0 = time.perf_counter()
        made = generate(path, conversations=conversations, messages=messages, seed=seed)
        made["seconds"] = round(time.perf_counter() - t0, 1)
        _child("setup", path, scratch)
        parse = _child("parse", path, scratch)
        first = _child("import", path, scratch)
        again = _child("reimport", path, scratch)
        served = live(path, scratch / "live")
        return {
            "conversations": conversations, "messages": messages, "generated": made, "parse": parse,
            "import": first, "reimport": again, "live": served, "bars": BARS,
            "other_p99_ms": round(served["other_p99_ms"], 1), "socket_p99_ms": round(served["socket_p99_ms"], 1),
            "seconds_import": round(first["seconds"], 1), "peak_rss_mb": round(first["peak_mb"]),
            "seconds_reimport": round(again["seconds"], 1), "peak_rss_mb_reimport": round(again["peak_mb"]),
            "ratio_to_parse": round(first["seconds"] / parse["seconds"], 1) if parse["seconds"] else None,
        }
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def summary(r: dict) -> str:
    ok = (r["seconds_import"] <= BARS["seconds_import"] and r["peak_rss_mb"] <= BARS["peak_rss_mb"]
          and r["seconds_reimport"] <= BARS["seconds_reimport"] and r["other_p99_ms"] <= BARS["other_p99_ms"]
          and r["socket_p99_ms"] <= BARS["other_p99_ms"] and not r["live"]["socket_failed"])
    lv = r["live"]
    g = r["generated"]
    return "\n".join([
        "## §5 History import (ChatGPT export)",
        "",
        f"{r['conversations']:,} conversations, {r['messages']:,} messages; {g['json_bytes'] / 1e6:.0f} MB of JSON"
        f" ({g['zip_bytes'] / 1e6:.0f} MB zipped, {g['images_in_zip']} images in the zip).",
        "",
        "| phase | seconds (CPU) | peak RSS MB | load average |",
        "|---|---|---|---|",
        f"| streamed parse (baseline) | {r['parse']['seconds']:.1f} ({r['parse']['cpu']:.1f}) | "
        f"{r['parse']['peak_mb']:.0f} | {r['parse']['load']} |",
        f"| import_history | {r['import']['seconds']:.1f} ({r['import']['cpu']:.1f}) | {r['import']['peak_mb']:.0f} |"
        f" {r['import']['load']} |",
        f"| re-import | {r['reimport']['seconds']:.1f} ({r['reimport']['cpu']:.1f}) | {r['reimport']['peak_mb']:.0f} |"
        f" {r['reimport']['load']} |",
        f"| the data page on a live server: preview + apply | {lv['preview_s']:.1f} + {lv['apply_s']:.1f} | "
        f"{lv['peak_mb']:.0f} (server; {lv['server_start_mb']:.0f} before the upload; with its child processes"
        f" {lv['peak_with_children_mb']:.0f}) | {lv['load']} |",
        "",
        f"Import / streamed parse: {r['ratio_to_parse']}×. {r['import']['summary']}",
        f"Another person's chat page meanwhile: {lv['other']}.",
        f"Another person's chat over the socket meanwhile (a line sent, its reply complete): {lv['socket']}.",
        "p99 by phase (page / socket): " + "; ".join(
            f"{phase} {p['page']} / {p['socket']} ms" for phase, p in lv["phases_p99_ms"].items()) + ".",
        f"Bar (import ≤ {BARS['seconds_import']} s, peak ≤ {BARS['peak_rss_mb']} MB, re-import ≤ "
        f"{BARS['seconds_reimport']} s, adding nothing, another person's page and socket p99 ≤ {BARS['other_p99_ms']} ms): "
        f"{'met' if ok else 'NOT met'}.",
    ])


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child":
        print(json.dumps(_phase(argv[1], argv[2])))
        return 0
    parser = argparse.ArgumentParser(prog="python -m bench.history_import", description=__doc__)
    parser.add_argument("--conversations", type=int, default=2000)
    parser.add_argument("--messages", type=int, default=150_000)
    parser.add_argument("--json", help="write the result here too")
    args = parser.parse_args(argv)
    result = run(conversations=args.conversations, messages=args.messages)
    print(summary(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

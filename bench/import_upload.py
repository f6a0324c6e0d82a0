"""Issue 24 points 1, 6 and 7 (SPEC S4, S6): the data page's import at real sizes, against a real
`previously.server` on loopback (bench.stack), while another signed-in person's page is probed.

    python -m bench.import_upload [--records 1000000] [--skip-anonymous]

1. ten 200 MB POSTs to /data/import/ at once without a session: what they add to the server's
   memory (goal <= 50 MB) and another person's page meanwhile (goal p99 < 200 ms);
6. an export of `--records` small records (realistic: varied wording, Chinese and English,
   emoji; 1,000,000 is ~200 MB), uploaded by a signed-in person, previewed and applied: the
   time of both (goal <= 120 s together), the server's peak memory (goal <= 400 MB; also with the
   child process that reads and writes the upload, previously/child.py) and
   another person's p99 throughout (goal <= 200 ms);
7. five logins of one person, each previewing: the pending files left (goal 1), and after a
   logout (goal 0).

The figures print beside their goals and the machine's load average (the machine is shared).
"""

import argparse
import http.client
import json
import random
import re
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.machine import load_average
from bench.stack import PRODUCTION_OVER_HTTP
from tests.hostile.server import REQUEST_TIMEOUT, Probe, rss_bytes, send_body, start

MB = 1024 * 1024
BOUNDARY = "benchimportboundary"

SESSIONS = """
from importlib import import_module
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
for name in {names!r}:
    user, _ = get_user_model().objects.get_or_create(username=name)
    store = import_module(settings.SESSION_ENGINE).SessionStore()
    store[SESSION_KEY] = str(user.pk)
    store[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    store[HASH_SESSION_KEY] = user.get_session_auth_hash()
    store.create()
    print(store.session_key)
"""

ZH = ("今天", "下班以后", "我们去了", "楼下那家", "新开的", "面馆", "味道", "还不错", "有点辣", "明天",
      "想早点睡", "周末", "爬山", "天气", "很好", "猫咪", "又把杯子", "打翻了", "工作", "有点累", "谢谢你",
      "记得", "提醒我", "交报告", "妈妈", "打电话来", "说", "家里", "一切都好", "学吉他", "第三周")
EN = ("today", "after work", "we tried", "the new", "noodle place", "downstairs", "it was", "pretty good",
      "a bit spicy", "tomorrow", "I want", "to sleep early", "this weekend", "hiking", "the weather", "lovely",
      "the cat", "knocked over", "my cup", "again", "work was", "tiring", "thanks", "remind me", "the report",
      "mum called", "everyone is fine", "guitar", "week three", "honestly", "maybe")
EMOJI = ("🙂", "😂", "🐱", "🍜", "⛰️", "☔", "🎸", "❤️", "😴", "✨")


def session_cookies(stack, *names: str) -> list[str]:
    """A signed-in session for each of `names` (each person made if missing; a name given twice
    gets two sessions, as two logins would), as Cookie header values: one `manage.py shell`,
    whose start (about 2 s) was most of what each session cost (issue 25 point 4)."""
    keys = stack.manage("shell", "-c", SESSIONS.format(names=list(names))).split()[-len(names):]
    return [f"sessionid={key}" for key in keys]


def _line(rng: random.Random) -> str:
    words = rng.choice((ZH, EN))
    parts = [rng.choice(words) for _ in range(rng.randint(1, 5))]
    text = ("" if words is ZH else " ").join(parts)
    if rng.random() < 0.3:
        text += rng.choice(EMOJI)
    if rng.random() < 0.2:
        text += " " + " ".join(rng.choice(EN if words is ZH else ZH) for _ in range(rng.randint(1, 3)))
    return text


def write_export(path: Path, records: int, seed: int = 24) -> int:
    """An export of `records` small records, ~200 bytes each (one profile, a slice per 40 lines),
    in our export's order (slices, highlights, tombstones, favourites, the lines last), written
    as it goes; its size in bytes. One line in 500 is highlighted, one in 1,000 a favourite, and
    one in 2,000 deleted (its tombstone, not the line, is in the file, as after a forget)."""
    rng = random.Random(seed)
    at = datetime(2024, 1, 1, tzinfo=UTC)
    times, tombs = [], []
    for n in range(records):  # the slices' and tombstones' times first: the export lists the lines last
        if n % 40 == 0:
            at += timedelta(hours=rng.randint(3, 30))
            times.append(at)
        at += timedelta(seconds=rng.randint(5, 300))
        if n % 2000 == 1999:
            tombs.append((f"c_{n:016x}", at))
    with open(path, "w", encoding="utf-8") as out:
        out.write('{"format": "previously-export", "version": 1, "exported_at": "2026-12-01T00:00:00+00:00",'
                  ' "profiles": [{"key": "owner", "name": "小满", "persona": "温柔 gentle", "language": "zh",'
                  ' "proactive_enabled": true, "slices": [')
        out.write(",".join(json.dumps({"key": t.strftime("%Y-%m-%d-%H%M"), "started_at": t.isoformat(),
                                       "last_message_at": t.isoformat(), "tz": "Asia/Shanghai"}) for t in times))
        out.write('], "highlights": [')
        out.write(",".join(json.dumps({"hid": f"h_{n:08x}", "mid": f"c_{n:016x}", "content": "记得 remember 🙂",
                                       "created_at": "2026-01-01T00:00:00+00:00"}, ensure_ascii=False)
                           for n in range(0, records, 500) if n % 2000 != 1999))
        out.write('], "tombstones": [')
        out.write(",".join(json.dumps({"kind": "msg", "object_id": mid, "deleted_at": t.isoformat(),
                                       "expires_at": (t + timedelta(days=365)).isoformat()}) for mid, t in tombs))
        out.write('], "favourites": [')
        out.write(",".join(json.dumps({"mid": f"c_{n:016x}", "excerpt": "", "created_at": "2026-01-02T00:00:00+00:00"})
                           for n in range(0, records, 1000) if n % 2000 != 1999))
        out.write('], "messages": [')
        rng, words = random.Random(seed), random.Random(seed + 1)  # the same times again; the words apart
        at, written = datetime(2024, 1, 1, tzinfo=UTC), 0
        for n in range(records):
            if n % 40 == 0:
                at += timedelta(hours=rng.randint(3, 30))
                key = at.strftime("%Y-%m-%d-%H%M")
            at += timedelta(seconds=rng.randint(5, 300))
            mid = f"c_{n:016x}"
            if n % 2000 == 1999:
                continue  # deleted: its tombstone is in the file
            out.write(("," if written else "") + json.dumps({
                "mid": mid, "created_at": at.isoformat(), "speaker": "user" if n % 2 == 0 else "assistant",
                "content": _line(words), "slice": key, "local_day_key": at.strftime("%Y-%m-%d"), "local_hour": at.hour},
                ensure_ascii=False, separators=(",", ":")))
            written += 1
        out.write("]}]}")
    return path.stat().st_size


def csrf(port: int, cookie: str) -> tuple[str, str]:
    """The data page's CSRF cookie and form token for this session."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT)
    conn.request("GET", "/data/", headers={"Cookie": cookie})
    response = conn.getresponse()
    page = response.read().decode()
    conn.close()
    csrf_cookie = re.search(r"csrftoken=([^;]+)", response.getheader("Set-Cookie") or "").group(1)
    return csrf_cookie, re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)


def upload(port: int, cookie: str, path: Path, timeout: float = 3600, *, url: str = "/data/import/",
           field: str = "export", content_type: str = "application/json") -> tuple[int, str]:
    """Preview a file as the data page's form at `url` does (the full import's by default; the
    history import's is /data/history/preview/ with field "history"): (status, page)."""
    csrf_cookie, token = csrf(port, cookie)
    head = (f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"csrfmiddlewaretoken\"\r\n\r\n{token}\r\n"
            f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"{field}\"; filename=\"{path.name}\"\r\n"
            f"Content-Type: {content_type}\r\n\r\n").encode()
    tail = f"\r\n--{BOUNDARY}--\r\n".encode()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    conn.putrequest("POST", url)
    conn.putheader("Content-Type", f"multipart/form-data; boundary={BOUNDARY}")
    conn.putheader("Content-Length", str(len(head) + path.stat().st_size + len(tail)))
    conn.putheader("Cookie", f"{cookie}; csrftoken={csrf_cookie}")
    conn.endheaders()
    conn.send(head)
    with open(path, "rb") as fh:
        while chunk := fh.read(MB):
            conn.send(chunk)
    conn.send(tail)
    response = conn.getresponse()
    page = response.read().decode()
    conn.close()
    return response.status, page


def post_form(port: int, cookie: str, path: str, fields: dict, timeout: float = 3600) -> tuple[int, str]:
    csrf_cookie, token = csrf(port, cookie)
    body = "&".join(f"{k}={v}" for k, v in {**fields, "csrfmiddlewaretoken": token}.items())
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    conn.request("POST", path, body=body, headers={
        "Content-Type": "application/x-www-form-urlencoded", "Cookie": f"{cookie}; csrftoken={csrf_cookie}"})
    response = conn.getresponse()
    page = response.read().decode()
    conn.close()
    return response.status, page


def preview_token(page: str) -> str:
    return re.search(r'name="token" value="([^"]+)"', page).group(1)


def wait_for_import(stack, token: str, limit: float = 1800) -> dict:
    """How the background apply of `token` ended, read from its progress file as the progress
    page reads it (previously/pages/data/progress.py), polled every 0.5 s."""
    path, began, state = Path(stack.var_dir) / "media" / "imports" / f"{token}.progress.json", time.monotonic(), {}
    while state.get("state") not in ("done", "refused", "stopped"):
        time.sleep(0.5)
        try:
            state = json.loads(path.read_text())
        except (OSError, ValueError):
            state = {}
        if time.monotonic() - began > limit:
            raise RuntimeError(f"the apply did not finish in {limit:.0f} s: {state}")
    return state


def anonymous(port: int, pid: int, bystander: str) -> dict:
    headers = {"Content-Type": f"multipart/form-data; boundary={BOUNDARY}", "Content-Length": str(200 * MB)}
    zeros = b"\0" * MB
    statuses = []

    def one():
        statuses.append(send_body(port, "/data/import/", headers, (zeros for _ in range(200))))

    before = rss_bytes(pid)
    with Probe(port, pid, path="/data/", cookie=bystander) as probe:
        threads = [threading.Thread(target=one) for _ in range(10)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        time.sleep(1)  # a second of probes after
    return {"statuses": sorted(statuses, key=str), "added_mb": (probe.peak_rss - before) / MB,
            "other_p99_ms": probe.p99() * 1000, "other": probe.summary()}


def import_at_size(stack, port: int, pid: int, cookie: str, bystander: str, export: Path) -> dict:
    before = rss_bytes(pid)
    with Probe(port, pid, path="/data/", cookie=bystander, every=0.2) as probe:
        began = time.monotonic()
        status, page = upload(port, cookie, export)
        preview_s = time.monotonic() - began
        applied_status = None
        if status == 200:
            began, token = time.monotonic(), preview_token(page)
            post_form(port, cookie, "/data/import/apply/", {"token": token})  # sent to its progress page
            applied_status = wait_for_import(stack, token).get("state")
        apply_s = time.monotonic() - began if status == 200 else 0.0
    return {"preview_status": status, "apply_status": applied_status, "preview_s": preview_s, "apply_s": apply_s,
            "peak_mb": probe.peak_rss / MB, "peak_with_children_mb": probe.peak_tree_rss / MB,
            "start_mb": before / MB, "other_p99_ms": probe.p99() * 1000, "other": probe.summary()}


def pending_after_logins(stack, port: int, export: Path) -> dict:
    folder = stack.var_dir / "media" / "imports"
    for cookie in session_cookies(stack, *["five-logins"] * 5):
        upload(port, cookie, export)
    left = len(list(folder.glob("*.json"))) if folder.exists() else 0
    post_form(port, cookie, "/logout/", {})
    after = len(list(folder.glob("*.json"))) if folder.exists() else 0
    return {"after_five_logins": left, "after_logout": after}


def run(records: int = 1_000_000, anonymous_too: bool = True) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-import-upload-") as tmp:
        work = Path(tmp)
        stack = start(work, env=PRODUCTION_OVER_HTTP)  # as `make bench` runs it, and as production does
        try:
            port, pid = stack.ports[0], stack.procs[0].pid
            bystander, uploader = session_cookies(stack, "bystander", "uploader")
            results = {"load_before": "load average " + load_average()}
            if anonymous_too:
                results["anonymous"] = anonymous(port, pid, bystander)
            small = work / "small.json"
            write_export(small, 200)
            results["pending"] = pending_after_logins(stack, port, small)
            export = work / "export.json"
            size = write_export(export, records)
            results["export_mb"] = size / MB
            results["records"] = records
            results["import"] = import_at_size(stack, port, pid, uploader, bystander, export)
            results["load_after"] = "load average " + load_average()
        finally:
            stack.stop()
    return results


def summary(r: dict) -> str:
    lines = ["## The data page's import at real sizes (issue 24 points 1, 6, 7)", "",
             f"{r['load_before']} at the start, {r['load_after']} at the end.", ""]
    if "anonymous" in r:
        a = r["anonymous"]
        lines.append(f"- 10 x 200 MB POST /data/import/ at once, no session: answered {a['statuses']}; the server"
                     f" grew {a['added_mb']:.0f} MB (goal <= 50 MB); another person's page p99"
                     f" {a['other_p99_ms']:.0f} ms (goal < 200 ms) [{a['other']}]")
    i = r["import"]
    lines.append(f"- import of {r['records']:,} small records ({r['export_mb']:.0f} MB): preview {i['preview_s']:.1f} s"
                 f" ({i['preview_status']}) + apply {i['apply_s']:.1f} s ({i['apply_status']}) ="
                 f" {i['preview_s'] + i['apply_s']:.1f} s (goal <= 120 s for 1,000,000); server peak"
                 f" {i['peak_mb']:.0f} MB from {i['start_mb']:.0f} MB, with the child process that reads the"
                 f" upload {i['peak_with_children_mb']:.0f} MB (goal <= 400 MB); another person's p99"
                 f" {i['other_p99_ms']:.0f} ms (goal <= 200 ms) [{i['other']}]")
    p = r["pending"]
    lines.append(f"- pending previews of one person after five logins: {p['after_five_logins']} (goal 1);"
                 f" after logout: {p['after_logout']} (goal 0)")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--skip-anonymous", action="store_true")
    args = parser.parse_args()
    print(summary(run(records=args.records, anonymous_too=not args.skip_anonymous)))


if __name__ == "__main__":
    main()

"""Server time of the memory pages at 100k archived messages (issue 8 §7: < 200 ms).

Seeds a scratch SQLite database (or DATABASE_URL if set) with N messages through the same
bulk path as BENCH §2 (50 lines per closed slice, indexed for recall), then renders every
page with Django's test client and reports the median of R runs, plus its query count.

Usage: python -m bench.pages [--messages 100000] [--rounds 7]
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ENGLISH = [
    "I went to the beach with my sister yesterday.", "The new job is going well so far.",
    "We talked about moving to a bigger apartment.", "My cat knocked the plant over again.",
    "I finally finished the book about the ocean.", "Running in the morning makes me feel better.",
    "The concert last night was amazing.", "I am thinking about learning the guitar.",
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.pages", description=__doc__)
    parser.add_argument("--messages", type=int, default=100_000, help="archived messages to seed")
    parser.add_argument("--rounds", type=int, default=7, help="timed renders per page (median reported)")
    args = parser.parse_args(argv)
    if not os.environ.get("DATABASE_URL"):
        scratch = Path(tempfile.mkdtemp(prefix="previously-pages-"))
        os.environ["DATABASE_URL"] = f"sqlite:///{scratch / 'pages.sqlite3'}"
    os.environ["DJANGO_DEBUG"] = "0"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "previously.settings")
    os.environ.setdefault("PREVIOUSLY_IDLE_CHECK_SECONDS", "0")
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from bench.turn_overhead import Synthetic, seed_archive
    from memory.models import (
        CardSnapshot,
        EvolutionRun,
        Experience,
        Highlight,
        Message,
        Profile,
        Slice,
    )
    from previously.llm import reset_provider
    from previously.llm.offline import Offline

    settings.ALLOWED_HOSTS = ["*"]
    call_command("migrate", verbosity=0)
    reset_provider(Offline())
    user = get_user_model().objects.create_user("bench", password="x" * 12)
    profile = Profile.objects.create(user=user, key="owner", language="zh")
    print(f"seeding {args.messages:,} messages into {settings.DATABASES['default']['NAME']} …", flush=True)
    seconds = seed_archive(profile, 0, args.messages, Synthetic(ENGLISH, ["Where did I go?"]))
    slices = list(Slice.objects.filter(profile=profile).order_by("-key")[:40])
    for s in slices:
        EvolutionRun.objects.create(profile=profile, slice=s, trigger="slice_close", status="changed",
                                    summary="Noted a thing.", diff="+ a line")
        CardSnapshot.objects.create(profile=profile, slice=s, text="")
    msgs = list(Message.objects.filter(profile=profile).order_by("-created_at")[:30])
    for k, m in enumerate(msgs):
        Highlight.objects.create(profile=profile, message=m, hid=f"h_{k}", mid=m.mid, content=m.content,
                                 created_at=m.created_at)
        Experience.objects.create(profile=profile, eid=f"e_{k}", title=f"experience {k}", content=m.content,
                                  status="candidate" if k % 2 else "active", recorded_at=m.created_at)
    print(f"seeded in {seconds:.1f} s", flush=True)

    client = Client()
    client.force_login(user)
    s = slices[0]
    pages = [
        ("chat /", "/", {}),
        ("archive (browse)", "/archive/", {}),
        ("archive (browse, page 200)", "/archive/", {"before": Message.objects.filter(profile=profile).order_by("-created_at")[5000].mid}),
        ("archive search zh", "/archive/", {"q": "海边 酒店"}),
        ("archive search en", "/archive/", {"q": "beach sister"}),
        ("archive search en, newest", "/archive/", {"q": "beach sister", "sort": "newest"}),
        ("archive search, dates+speaker", "/archive/", {"q": "猫咪", "speaker": "user", "date_from": "2025-01-01", "date_to": "2025-06-30"}),
        ("timeline", "/timeline/", {}),
        ("timeline (older page)", "/timeline/", {"before": slices[-1].key}),
        ("slice page (50 lines)", f"/slices/{s.key}/", {}),
        ("beliefs", "/beliefs/", {}),
        ("previously on /card/", "/card/", {}),
        ("profiles", "/profiles/", {}),
        ("profile delete (counts)", "/profiles/owner/delete/", {}),
        ("about", "/about/", {}),
        ("data", "/data/", {}),
    ]
    print(f"\n{'page':34} {'median ms':>10} {'max ms':>8} {'queries':>8}")
    worst = 0.0
    for label, url, params in pages:
        assert client.get(url, params, secure=True).status_code == 200, label  # warm (production settings: HTTPS)
        times = []
        for _ in range(args.rounds):
            began = time.perf_counter()
            client.get(url, params, secure=True)
            times.append((time.perf_counter() - began) * 1000)
        with CaptureQueriesContext(connection) as ctx:
            client.get(url, params, secure=True)
        med = statistics.median(times)
        worst = max(worst, med)
        print(f"{label:34} {med:10.1f} {max(times):8.1f} {len(ctx.captured_queries):8d}", flush=True)
    print(f"\nslowest median: {worst:.1f} ms at {Message.objects.count():,} messages, {Slice.objects.count():,} slices")
    return 0


if __name__ == "__main__":
    sys.exit(main())

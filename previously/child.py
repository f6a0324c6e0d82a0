"""Heavy work in a child process of the server (S4; BENCH §5, issue 27): a child Python has a GIL
of its own, so a history import's parsing and row building do not slow every other person's page
and socket in the server process, and the memory it took goes back to the system when it ends.

`run(command, payload)` starts `manage.py COMMAND`, hands it `payload` and this process's settings
on stdin, and waits; the command calls `received()`. `ask(command, payload)` does the same and
returns what the command handed back with `reply(...)` (a dict, pickled, base64 on one line), or
raises `Ended` when it ended without a word. The child reaches the same database
(DATABASE_URL of this process's connection) and sees the same media folder and storages,
secret key and tunables as this process, whatever set them (the environment, or a test)."""

import base64
import json
import logging
import os
import pickle
import subprocess
import sys
from urllib.parse import quote

from django.conf import settings
from django.core.files.storage import storages
from django.db import connections
from django.tasks import task_backends
from django.utils import translation
from django.utils.translation import gettext

from previously.task_backend import ThreadPoolBackend
from previously.tunables import TUNABLES

# What a child must see as this process does; every other setting comes from the environment.
# Its own: it maps none of an SQLite database into its memory (`environment`).
OWN = {"PREVIOUSLY_SQLITE_MMAP_BYTES": "0"}
CARRIED = ("SECRET_KEY", "MEDIA_ROOT", "STORAGES", *(name for name in TUNABLES if name not in OWN))
STDERR_KEPT = 4000  # characters of a failed child's output kept for the log

log = logging.getLogger(__name__)


class Ended(Exception):
    """A child that ended without answering (killed, out of memory, a broken start): its exit
    code, said in the language in force."""

    def __init__(self, code: int):
        self.code = code
        super().__init__(gettext("its process ended with code %(code)s") % {"code": code})


def database_url(alias: str = "default") -> str:
    """This process's database `alias` as a DATABASE_URL: the SQLite file, or the PostgreSQL
    database on its server (under test, the test database: the connection's own name)."""
    db = connections[alias].settings_dict
    if connections[alias].vendor == "postgresql":
        auth = quote(db.get("USER") or "", safe="") + (f":{quote(db['PASSWORD'], safe='')}" if db.get("PASSWORD") else "")
        host = quote(db.get("HOST") or "localhost", safe="")  # a socket folder's slashes encoded
        return f"postgres://{auth}@{host}:{db.get('PORT') or 5432}/{quote(db['NAME'], safe='')}"
    return f"sqlite:///{db['NAME']}"


def beside_server() -> bool:
    """Whether heavy work should go to a child: in the embedded set-up, where tasks run on the
    server's own threads (previously.task_backend), requests and tasks share the server's GIL.
    Elsewhere (the `db` backend's worker is a process of its own; the test suite's immediate
    backend runs in the test's own transaction, which a child could not see) it runs in place."""
    return isinstance(task_backends["default"], ThreadPoolBackend)


def environment() -> dict:
    """A child's environment: this process's, with its database and settings module, and what
    is the child's own (OWN). It streams what it reads and writes: on SQLite it maps none of
    the database file, which a map would count in its resident memory page by page as it goes
    (issue 24 point 6: 211 MB of a 1M-record apply's 307 MB, at the same speed)."""
    return dict(os.environ, DATABASE_URL=database_url(), **OWN,
                DJANGO_SETTINGS_MODULE=os.environ.get("DJANGO_SETTINGS_MODULE", "previously.settings"))


def run(command: str, payload: dict, *, answer: bool = False) -> subprocess.CompletedProcess:
    """Run `manage.py COMMAND` to its end with `payload`; its exit code and the tail of its
    error output come back, and with `answer` what it wrote (else its output is dropped)."""
    carried = {name: str(value) if name == "MEDIA_ROOT" else value
               for name in CARRIED if (value := getattr(settings, name, None)) is not None}
    done = subprocess.run(
        [sys.executable, str(settings.BASE_DIR / "manage.py"), command],
        input=json.dumps({"payload": payload, "settings": carried}, default=str), env=environment(), cwd=settings.BASE_DIR,
        stdout=subprocess.PIPE if answer else subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False,
    )
    done.stderr = (done.stderr or "")[-STDERR_KEPT:]
    return done


def ask(command: str, payload: dict) -> dict:
    """Run `manage.py COMMAND` with `payload` and the language in force (the child speaks it),
    and return its `reply`; raises Ended when it ended without one."""
    done = run(command, {**payload, "language": translation.get_language()}, answer=True)
    if done.returncode != 0 or not done.stdout.strip():  # a child that answers exits 0 after its word
        log.error("%s %s: its process ended with %s: %s", command, payload.get("token", ""), done.returncode, done.stderr)
        raise Ended(done.returncode)
    return pickle.loads(base64.b64decode(done.stdout))


def reply(stream, answer: dict) -> None:
    """In the child: hand `answer` back to the parent's `ask`."""
    stream.write(base64.b64encode(pickle.dumps(answer)).decode("ascii"))


def received(stream=None) -> dict:
    """In the child: take the parent's settings on (and the language `ask` sent), and give back
    its payload."""
    given = json.loads((stream or sys.stdin).read())
    if "backends" in storages.__dict__:  # a storage was made from the settings it had before
        raise RuntimeError("the storages were set up before the parent's settings were taken")
    for name, value in given["settings"].items():
        setattr(settings, name, value)
    if given["payload"].get("language"):
        translation.activate(given["payload"]["language"])
    return given["payload"]

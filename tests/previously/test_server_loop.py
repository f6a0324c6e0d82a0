"""The server runs on uvloop's event loop (BENCH §4: a turn cost its process 38.0 ms of CPU on
asyncio's own loop, 33.2 ms on uvloop's, in make loadtest's one-process scenario at 60 chats);
a test that imports the server module keeps the loop it had."""

import subprocess
import sys

from django.conf import settings

# The server's module run as the server (`python -m previously.server`), asked only for its
# help; as the interpreter exits, the class of the loop Daphne made for Twisted's reactor.
AS_SERVER = """
import atexit, runpy, sys
def loop():
    import daphne.server
    print("LOOP", type(daphne.server.twisted_loop).__module__)
atexit.register(loop)
sys.argv = ["previously.server", "--help"]
runpy.run_module("previously.server", run_name="__main__")
"""

IMPORTED = """
import previously.server, daphne.server
print("LOOP", type(daphne.server.twisted_loop).__module__)
"""


def _loop(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], cwd=settings.BASE_DIR, capture_output=True, text=True,
                          timeout=120)
    return next(line.split()[1] for line in done.stdout.splitlines() if line.startswith("LOOP "))


def test_the_server_runs_on_uvloop():
    assert _loop(AS_SERVER) == "uvloop"


def test_importing_the_server_module_leaves_the_event_loop_alone():
    assert _loop(IMPORTED) == "asyncio.unix_events"

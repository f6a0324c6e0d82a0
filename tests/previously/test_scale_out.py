"""Scale-out across processes (O3, issue 9): two Daphne processes + a django-tasks-db worker
on PostgreSQL + Redis, all real subprocesses on loopback. A page connected to process A sees
the evolution progress of a run started through process B and executed by the worker.

Skipped cleanly without PostgreSQL/Redis; required (a failure) when CI=true or
PREVIOUSLY_REQUIRE_SERVICES=1."""

import asyncio
import json
import os
import socket
import uuid

import pytest

from bench.stack import Stack, copy_of_migrated_postgresql
from tests.llm_server import FakeLLMServer, Turn
from tests.services import skip_or_fail
from tests.webclient import WebClient

pytestmark = pytest.mark.scale
PG = os.environ.get("PREVIOUSLY_SCALE_PG", "postgres://postgres@127.0.0.1:5432")
REDIS = os.environ.get("PREVIOUSLY_SCALE_REDIS", "redis://127.0.0.1:6379/13")

SETUP = """
from django.contrib.auth import get_user_model
from memory.archive import archive_message
from memory.models import Profile
user = get_user_model().objects.create_user("mei", password="pw-mei-12345")
profile = Profile.objects.create(user=user, key="owner", language="en")
archive_message(profile=profile, mid="c_00000000000000a1", speaker="user", content="I'm Mei, call me Mei.")
"""


def _reachable(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


@pytest.fixture
def database():
    if not (_reachable(5432) and _reachable(6379)):
        skip_or_fail("PostgreSQL (127.0.0.1:5432) and Redis (127.0.0.1:6379) are needed")
    import psycopg

    name = f"previously_xproc_{uuid.uuid4().hex[:8]}"
    # Made from the migrated template the suite's workers are made from: the stack's own
    # `migrate` then has nothing to apply (it was 8-10 s of this test on 2 cores).
    with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
        copy_of_migrated_postgresql({**os.environ, "DATABASE_URL": f"{PG}/{name}"}, conn.cursor(), name)
    yield f"{PG}/{name}"
    with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_evolution_progress_from_the_worker_reaches_a_page_on_another_process(database, tmp_path):
    import websockets

    llm = FakeLLMServer().start()
    llm.script(
        Turn(content=json.dumps({"worth": True, "reason": "a name"})),  # the "worth it?" gate
        Turn(tool_calls=[("set_portrait", {"text": "Mei likes to be called Mei."})]),
        Turn(tool_calls=[("finish", {"summary": "Recorded that she is called Mei."})]),
    )
    stack = Stack(processes=2, database_url=database, redis_url=REDIS, tasks="db", var_dir=str(tmp_path),
                  env={"PREVIOUSLY_LLM_BASE_URL": llm.base_url, "PREVIOUSLY_LLM_MODEL": "fake-model",
                       "PREVIOUSLY_TURN_ANALYZER_MODEL": "0"})
    try:
        stack.migrate()
        stack.manage("shell", "-c", SETUP)
        stack.start()
        a, b = (f"http://127.0.0.1:{p}" for p in stack.ports)
        client = WebClient(a)
        client.login("mei", "pw-mei-12345")
        client.get("/")  # the CSRF cookie

        async def scenario() -> list[str]:
            url, headers = client.ws_args(base=a)
            async with websockets.connect(url, additional_headers=headers, open_timeout=20) as ws:
                await asyncio.sleep(0.3)  # group_add done on A
                status = await asyncio.to_thread(client.post, "/chat/new/", {}, b)  # via process B
                assert status == 200
                frames = []
                async with asyncio.timeout(90):
                    while not any('class="evolution changed"' in f for f in frames):
                        frames.append(await ws.recv())
                return frames

        frames = asyncio.run(scenario())
    finally:
        stack.stop()
        llm.stop()
    joined = "\n".join(frames)
    assert "evolution running" in joined  # started / tool steps, live
    assert "Recorded that she is called Mei." in joined

import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from asgiref.sync import SyncToAsync
from channels.layers import channel_layers
from django.conf import settings
from django.db import connection, connections
from django.db.backends.postgresql.operations import DatabaseOperations as PostgreSQLOperations

from bench.stack import copy_of_migrated_postgresql, migrated_sqlite
from memory.recall import embedding
from memory.recall.index import ANALYZED_AFTER_A_LOAD


def _fresh_thread_pools_in_a_forked_child() -> None:
    """A live server (Channels' ChannelsLiveServerTestCase) is forked from the test process. If
    that process already ran async tests, asgiref's one thread for thread-sensitive calls did
    not survive the fork while its executor says it exists, and every database call of the
    server's consumers would wait forever. Under xdist the async chat tests may run before a
    browser test in the same worker, so the child gets a new executor (its thread starts on use)."""
    SyncToAsync.single_thread_executor = ThreadPoolExecutor(max_workers=1)
    # Likewise the channel layers: a Redis layer used by the parent holds its receive lock and
    # connections; the child makes its own on first use.
    channel_layers.backends.clear()


os.register_at_fork(after_in_child=_fresh_thread_pools_in_a_forked_child)


def pytest_configure(config):
    """Under pytest-xdist (`make test` runs `-n auto`, issue 25 point 4) each worker has its own
    test database (pytest-django suffixes its name with the worker id, `_gw0`, …). On the Redis
    channel layer (the PostgreSQL + Redis run) each worker also gets its own key prefix: their
    test databases hand out the same primary keys, so a push to one worker's `profile_1` group
    would otherwise reach the other's consumers. Live servers are forked, so they inherit it."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    layer = settings.CHANNEL_LAYERS.get("default", {})
    if worker and layer.get("BACKEND", "").startswith("channels_redis"):
        layer.setdefault("CONFIG", {})["prefix"] = f"asgi-{worker}"


# Tests that start servers and databases of their own, whatever the suite's engine: CI runs the
# whole suite twice (SQLite, then PostgreSQL + Redis) and they would do the same work twice.
# In a run of the whole suite each goes with the engine it exercises; named on the command line
# (`make hostile`, `make faults`, `pytest tests/hostile`), it runs whatever the engine.
OWN_SERVERS = {
    "tests/hostile/": "sqlite",  # scratch SQLite servers (tests/hostile/server.py)
    "tests/previously/test_scale_out.py": "postgresql",  # its own PostgreSQL database and Redis
}


def pytest_collection_modifyitems(config, items):
    root = Path(str(config.rootpath)) / "tests"
    if any(Path(arg.split("::")[0]).resolve() != root for arg in config.args):
        return  # a part of the suite was asked for: every test in it runs
    engine = connection.vendor
    for item in items:
        path = Path(str(item.path)).relative_to(config.rootpath).as_posix()
        for prefix, theirs in OWN_SERVERS.items():
            if path.startswith(prefix) and theirs != engine:
                item.add_marker(pytest.mark.skip(
                    reason=f"its servers are its own: run with the {theirs} suite (or name it: pytest {prefix})"))


@pytest.fixture(scope="session")
def django_db_keepdb(request, django_db_modify_db_settings, django_db_blocker) -> bool:
    """Each worker's test database starts as a copy of the migrated empty database bench.stack
    keeps per state of the migrations (made once under a lock, by whichever worker or hostile
    server asks first), and Django keeps it: its `migrate` then has nothing to apply. Migrating
    afresh was 9-13 s of each worker's start on 2 cores (issue 25 point 4). The copy replaces
    whatever an earlier run left: a file on SQLite, a database made from the template on
    PostgreSQL. `--reuse-db` keeps its meaning on both."""
    if request.config.getvalue("reuse_db"):
        return True
    if connection.vendor == "postgresql" and os.environ.get("DATABASE_URL"):
        with django_db_blocker.unblock(), connection.creation._nodb_cursor() as cursor:
            copy_of_migrated_postgresql(dict(os.environ), cursor, connection.creation._get_test_db_name())
        return True
    name = settings.DATABASES["default"].get("TEST", {}).get("NAME")
    if connection.vendor != "sqlite" or not name or ":memory:" in name:
        return False
    target = Path(name)
    for leftover in (target, Path(f"{name}-wal"), Path(f"{name}-shm")):
        leftover.unlink(missing_ok=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(migrated_sqlite(dict(os.environ)), target)
    return True


@pytest.fixture
def user(db, django_user_model):
    return django_user_model.objects.create_user(username="alice", password="pw-alice-123")


@pytest.fixture
def profile(user):
    from tests.factories import ProfileFactory

    return ProfileFactory(user=user, key="owner")


@pytest.fixture(autouse=True, scope="session")
def _cheaper_flush_on_postgresql():
    """A transactional test (TransactionTestCase, transaction=True, the live servers) empties
    every table after it. Django's PostgreSQL flush is one TRUNCATE of the 43 tables, which makes
    each table's files anew: 250-380 ms a flush on 2 cores, 82 s of the PostgreSQL suite's worker
    time in 269 such tests (issue 25 point 4). Here most tables are emptied with DELETE, which
    leaves the same empty tables (the foreign keys Django makes are checked at commit, and the
    flush is one transaction): the flush takes 55-70 ms.

    The tables a bulk load ANALYZEs (memory.recall.index.ANALYZED_AFTER_A_LOAD), and those that
    refer to them, are still truncated: a DELETE leaves their pages behind, and an ANALYZE of a
    few rows over many emptied pages told the planner those tables hold almost nothing at any
    size (a 10,000-line test took 130 s instead of 3). Sequences are not restarted, as Django's
    flush did not restart them either (reset_sequences=False); a flush that asks for that, or for
    CASCADE, is Django's own."""
    if connection.vendor != "postgresql":
        yield
        return
    truncate_all = PostgreSQLOperations.sql_flush
    truncated: set[str] = set()

    def sql_flush(self, style, tables, *, reset_sequences=False, allow_cascade=False):
        if reset_sequences or allow_cascade:
            return truncate_all(self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade)
        if not truncated:
            with self.connection.cursor() as cursor:
                cursor.execute(
                    "WITH RECURSIVE refers(child, parent) AS (SELECT conrelid::regclass::text, confrelid::regclass::text"
                    " FROM pg_constraint WHERE contype = 'f'),"
                    " closure(name) AS (SELECT unnest(%s::text[]) UNION SELECT child FROM refers"
                    " JOIN closure ON parent = name) SELECT name FROM closure", [list(ANALYZED_AFTER_A_LOAD)])
                truncated.update(row[0] for row in cursor.fetchall())
        kept = [table for table in tables if table not in truncated]
        cut = [table for table in tables if table in truncated]
        sql = truncate_all(self, style, cut) if cut else []
        return sql + [f"{style.SQL_KEYWORD('DELETE FROM')} {style.SQL_FIELD(self.quote_name(table))};" for table in kept]

    PostgreSQLOperations.sql_flush = sql_flush
    yield
    PostgreSQLOperations.sql_flush = truncate_all


@pytest.fixture(autouse=True, scope="session")
def _no_connections_left_open(django_db_setup, django_db_blocker):
    """A test database Django does not keep is dropped at the end (PostgreSQL's copies of the
    template are kept, and the next run's copy replaces them), which PostgreSQL refuses while a
    connection is open: connections close after each call here, as Django's test runner expects,
    not kept per thread as in production (DJANGO_CONN_MAX_AGE); and the chat's database threads
    (PostgreSQL, previously/chat/db.py), whose closing Channels' test communicator skips on
    purpose, close theirs at the end. Any other session still on the test database then (a
    forked child's, a thread's a test left) is ended: the database is dropped next, and each
    left "Error when trying to teardown test databases" behind."""
    connections.settings["default"]["CONN_MAX_AGE"] = 0
    yield
    from previously.chat.db import close_connections

    close_connections()
    # (Only when this run made one: pytest-django makes none when no test collected needs it.)
    if connection.vendor == "postgresql" and connection.settings_dict["NAME"] == connection.creation._get_test_db_name():
        with django_db_blocker.unblock(), connection.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                           " WHERE datname = current_database() AND pid <> pg_backend_pid()")
        connection.close()


@pytest.fixture(autouse=True)
def _english_unless_a_test_asks():
    """Each test starts in settings.LANGUAGE_CODE: a request in Chinese leaves its language
    active in the thread (LocaleMiddleware does not reset it), and a later test rendering a
    template outside a request would otherwise be translated by whichever test ran before."""
    from django.utils import translation

    translation.deactivate()
    yield
    translation.deactivate()


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    # PBKDF2 costs ~0.3 s a user; tests create many users.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _no_login_failures_carried_over():
    # previously.pages.login_guard counts failed logins per address in the (per-process) cache.
    from django.core.cache import cache

    cache.clear()


@pytest.fixture
def llm_server():
    """A local OpenAI-compatible server (real HTTP) for the real SDK to talk to."""
    from tests.llm_server import FakeLLMServer

    server = FakeLLMServer().start()
    yield server
    server.stop()


@pytest.fixture
def llm_provider(llm_server, settings):
    """The app's provider pointed at the local server, installed for the test's duration."""
    from previously.llm import reset_provider
    from previously.llm.openai_compat import OpenAICompatible

    provider = OpenAICompatible(base_url=llm_server.base_url, api_key="", model="fake-model")
    reset_provider(provider)
    yield provider
    reset_provider(None)


@pytest.fixture(autouse=True)
def _embedding_choice_read_afresh():
    """memory.recall.embedding keeps the connections page's embedding choice (O4) per process,
    until a change is noticed: each test reads its own database's."""
    embedding.forget_remote()
    yield
    embedding.forget_remote()


@pytest.fixture(autouse=True)
def _tasks_run_immediately(settings):
    # Tests see a task's effects when enqueue returns; the thread pool has its own test.
    settings.TASKS = {"default": {"BACKEND": "django.tasks.backends.immediate.ImmediateBackend"}}
    settings.PREVIOUSLY_IDLE_CHECK_SECONDS = 0
    # Proactive messages (K15) are off unless a test turns them on: they would take scripted
    # model answers meant for replies.
    settings.PREVIOUSLY_PROACTIVE_CHECK_SECONDS = 0
    settings.PREVIOUSLY_PROACTIVE_RETURN_HOURS = 0


@pytest.fixture(autouse=True)
def _backups_in_a_scratch_folder(settings, tmp_path_factory):
    """Backups and the forget journal (O6) never go to var/ from a test; the housekeeping pass
    takes no scheduled backup unless a test asks."""
    settings.PREVIOUSLY_BACKUP_DIR = str(tmp_path_factory.getbasetemp() / "backups")
    settings.PREVIOUSLY_BACKUP_HOURS = 0


@pytest.fixture
def media_in_tmp(settings, tmp_path):
    """Stored files (images, avatars, pending imports) go to the test's own folder."""
    settings.STORAGES = {**settings.STORAGES, "default": {
        "BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {"location": str(tmp_path / "media")}}}


@pytest.fixture
def embedded_texts(monkeypatch) -> list[tuple[str, bool]]:
    """Each text the local sentence model embeds from now on, with whether a transaction was open
    (SQLite's write lock is held from its BEGIN: no forward pass belongs inside one, issue 24
    point 11, BENCH §5). The embedding cache starts empty, so every text is embedded anew."""
    seen: list[tuple[str, bool]] = []
    real = embedding.LocalUSE.embed

    def spy(self, texts):
        seen.extend((t, connection.in_atomic_block) for t in texts)
        return real(self, texts)

    monkeypatch.setattr(embedding.LocalUSE, "embed", spy)
    embedding._cache.clear()
    return seen

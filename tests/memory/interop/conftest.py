import json

import pytest

from memory.hashing import content_hash


@pytest.fixture
def admin(db, django_user_model):
    return django_user_model.objects.create_superuser(username="root", password="pw-root-123")


def iso(ms: int) -> str:
    from datetime import UTC, datetime

    from memory.interop.legacy_shapes import iso_js

    return iso_js(datetime.fromtimestamp(ms / 1000, tz=UTC))


def msg(profile: str, mid: str, speaker: str, content: str, ts: int, **extra) -> dict:
    value = {
        "profile_id": profile, "conversation_id": "conv_1", "speaker": speaker,
        "message_type": "text", "created_at": iso(ts), "source_id": None, "sync_status": "synced",
        "deleted_at": None, "attachment": None, "content": content,
        "content_hash": content_hash(profile, content),
    }
    value.update(extra)
    return {"key": f"msg:{profile}:{mid}", "value": json.dumps(value, ensure_ascii=False)}


def mem(key: str, role: str, content: str, ts: int) -> dict:
    value = {"role": role, "content": content, "ts": ts, "day_key": "2025-10-20", "hour": 21, "period": "evening"}
    return {"key": key, "value": json.dumps(value, ensure_ascii=False)}


def entry(key: str, value: dict | str, **attrs) -> dict:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return {"key": key, "value": text, **attrs}


@pytest.fixture
def dump_file(tmp_path):
    """Write a bulk-put dump (list of entries) and return its path."""
    counter = iter(range(1000))

    def write(entries, *, raw: str | None = None) -> str:
        path = tmp_path / f"dump{next(counter)}.json"
        path.write_text(raw if raw is not None else json.dumps(entries, ensure_ascii=False), encoding="utf-8")
        return str(path)

    return write


@pytest.fixture
def run_import(admin):
    """Run the command; return (exit code, stdout+stderr)."""
    from io import StringIO

    from django.core.management import call_command
    from django.core.management.base import CommandError

    def run(path: str, *args: str) -> tuple[int, str]:
        out = StringIO()
        try:
            call_command("import_kv", path, *args, stdout=out, stderr=out)
        except CommandError as exc:
            return exc.returncode, str(exc)
        return 0, out.getvalue()

    return run

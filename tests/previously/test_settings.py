"""Settings from the environment (issue 2): embedded defaults, or the scaled-out services."""

import os
import subprocess
import sys

import pytest
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connection

from previously import tunables
from previously.apps import check_tunables

REQUIRE_SERVICES = os.environ.get("PREVIOUSLY_REQUIRE_SERVICES") == "1"


def test_ci_service_run_really_uses_postgresql_and_redis():
    if not REQUIRE_SERVICES:
        pytest.skip("only in the CI run against PostgreSQL + Redis")
    assert connection.vendor == "postgresql"
    assert settings.CHANNEL_LAYERS["default"]["BACKEND"] == "channels_redis.core.RedisChannelLayer"


def test_legacy_switches_keep_their_defaults_p4():
    assert settings.STRICT_MID is True
    assert settings.MEM_READ_LEGACY is True
    assert settings.PREVIOUSLY_TOMBSTONE_TTL_DAYS == 400


async def test_channel_layer_delivers_a_group_message():
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add("settings-test", channel)
    await layer.group_send("settings-test", {"type": "ping", "text": "你好 🐱"})
    assert (await layer.receive(channel)) == {"type": "ping", "text": "你好 🐱"}
    await layer.group_discard("settings-test", channel)


# --- tunables: defaults in one dict, a system check names a bad value (STYLE 11, issue 14) ------


def tunable_errors():
    return [e for e in check_tunables(None) if e.id == "previously.E001"]


def test_an_empty_environment_gives_every_default_and_passes_the_check(settings):
    values = tunables.from_environment({})
    assert values == {name: t.default for name, t in tunables.TUNABLES.items()}
    assert values["PREVIOUSLY_SLICE_GAP_MINUTES"] == 30 and values["STRICT_MID"] is True
    for name, value in values.items():
        setattr(settings, name, value)
    assert tunable_errors() == []


def test_good_spellings_read_as_before():
    values = tunables.from_environment({
        "PREVIOUSLY_SLICE_GAP_MINUTES": " 45 ", "PREVIOUSLY_CONTEXT_TOKENS": "",
        "STRICT_MID": "off", "MEM_READ_LEGACY": "0", "PREVIOUSLY_LLM_IMAGES": "Yes",
        "PREVIOUSLY_TASKS_BACKEND": " DB ", "PREVIOUSLY_PROACTIVE_HOURS": "", "PREVIOUSLY_LLM_MODEL": "qwen3",
    })
    assert values["PREVIOUSLY_SLICE_GAP_MINUTES"] == 45
    assert values["PREVIOUSLY_CONTEXT_TOKENS"] == 1500  # empty: the default, as before
    assert (values["STRICT_MID"], values["MEM_READ_LEGACY"], values["PREVIOUSLY_LLM_IMAGES"]) == (False, False, True)
    assert values["PREVIOUSLY_TASKS_BACKEND"] == "db"
    assert values["PREVIOUSLY_PROACTIVE_HOURS"] == ""  # empty: any time
    assert values["PREVIOUSLY_LLM_MODEL"] == "qwen3"


def test_the_running_settings_pass_the_check():
    assert tunable_errors() == []


def test_a_bad_whole_number_is_named_with_its_value_and_what_is_expected(settings):
    settings.PREVIOUSLY_SLICE_GAP_MINUTES = tunables.from_environment(
        {"PREVIOUSLY_SLICE_GAP_MINUTES": "abc"}
    )["PREVIOUSLY_SLICE_GAP_MINUTES"]
    [error] = tunable_errors()
    assert error.msg == "PREVIOUSLY_SLICE_GAP_MINUTES='abc': expected a whole number of at least 1."
    assert "unset it for the default (30)" in error.hint


def test_a_bad_switch_is_named_instead_of_read_as_off(settings):
    settings.STRICT_MID = tunables.from_environment({"STRICT_MID": "maybe"})["STRICT_MID"]
    [error] = tunable_errors()
    assert error.msg == "STRICT_MID='maybe': expected a switch: 1/true/yes/on or 0/false/no/off."


@pytest.mark.parametrize(
    ("name", "raw", "expected"),
    [
        ("PREVIOUSLY_TASK_THREADS", "0", "PREVIOUSLY_TASK_THREADS=0: expected a whole number of at least 1."),
        ("PREVIOUSLY_CONTEXT_TOKENS", "-5", "PREVIOUSLY_CONTEXT_TOKENS=-5: expected a whole number of at least 0."),
        ("PREVIOUSLY_TASKS_BACKEND", "celery", "PREVIOUSLY_TASKS_BACKEND='celery': expected one of thread, db, immediate."),
        ("PREVIOUSLY_PROACTIVE_HOURS", "8-25", "PREVIOUSLY_PROACTIVE_HOURS='8-25': expected local hours"),
        ("PREVIOUSLY_EMBEDDINGS", "sometimes",
         "PREVIOUSLY_EMBEDDINGS='sometimes': expected one of (unset), local, openai, off."),
        ("PREVIOUSLY_OLLAMA_URL", "ollama:11434", "PREVIOUSLY_OLLAMA_URL='ollama:11434': expected an http:// or https://"),
    ],
)
def test_a_value_out_of_range_is_named(settings, name, raw, expected):
    setattr(settings, name, tunables.from_environment({name: raw})[name])
    [error] = tunable_errors()
    assert error.msg.startswith(expected)


def test_manage_py_check_fails_at_start_up_naming_the_bad_variable(tmp_path):
    env = {**os.environ, "PREVIOUSLY_SLICE_GAP_MINUTES": "abc", "PREVIOUSLY_VAR_DIR": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=settings.BASE_DIR, env=env, capture_output=True, text=True,
        timeout=120,
    )
    assert out.returncode == 1
    assert "(previously.E001) PREVIOUSLY_SLICE_GAP_MINUTES='abc': expected a whole number of at least 1." in out.stderr

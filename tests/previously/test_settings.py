"""Settings from the environment (issue 2): embedded defaults, or the scaled-out services."""

import os

import pytest
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connection

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

"""Fixtures of the socket tests."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from channels.layers import get_channel_layer

from tests.liveserver import REDIS_URL


@pytest.fixture(params=["memory", "redis"])
async def layer(request: pytest.FixtureRequest, settings: Any):
    """The channel layer revocations travel on: this process's memory, or Redis (team mode)
    under a prefix of its own."""
    if request.param == "memory":
        settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
        yield
        return
    settings.REDIS_URL = REDIS_URL
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "koruweb.layers.RedisLayer",
            "CONFIG": {
                "hosts": [{"address": REDIS_URL, **settings.REDIS_CLIENT}],
                "prefix": f"koruweb-test-{uuid.uuid4().hex[:8]}",
                "brpop_timeout": 1,
            },
        }
    }
    yield
    channel_layer = get_channel_layer()
    await channel_layer.flush()
    await channel_layer.close_pools()

"""The Redis channel layer, with the blocking receive's timeout as a setting.

channels_redis keeps ``brpop_timeout`` as a class attribute; this takes it from the layer's
``CONFIG`` (``REDIS_BRPOP_TIMEOUT``), so tests can run it short and it can be kept below the
Redis client's socket timeout (docs/gotchas.md#idle-redis-receives-time-out).
"""

from __future__ import annotations

from typing import Any

from channels_redis.core import RedisChannelLayer


class RedisLayer(RedisChannelLayer):  # type: ignore[misc]
    def __init__(self, *, brpop_timeout: int = 5, **config: Any) -> None:
        super().__init__(**config)
        self.brpop_timeout = brpop_timeout

"""One notification to one browser, through its push service (``pywebpush``: the payload
encrypted to the subscription's keys, aes128gcm, with a VAPID token of this server's)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from pywebpush import WebPushException, webpush

from activity.models import PushDevice
from activity.notify import vapid

TIMEOUT = 10.0  # seconds for a push service to take it
TTL = 24 * 3600  # a push service keeps it this long for a browser that is offline
GONE = (404, 410)  # the push service says the subscription is no more


@dataclass(frozen=True)
class Sent:
    ok: bool
    gone: bool = False  # the device is to be forgotten
    error: str = ""


def claims(endpoint: str) -> dict[str, str | int]:
    parts = urlsplit(endpoint)
    return {"aud": f"{parts.scheme}://{parts.netloc}", "sub": settings.VAPID_SUBJECT}


def send(device: PushDevice, payload: dict[str, Any]) -> Sent:
    subscription = {
        "endpoint": device.endpoint,
        "keys": {"p256dh": device.p256dh, "auth": device.auth},
    }
    try:
        webpush(
            subscription,
            json.dumps(payload),
            vapid_private_key=vapid.key(),
            vapid_claims=claims(device.endpoint),
            timeout=TIMEOUT,
            ttl=TTL,
            headers={"Urgency": "high"},
        )
    except WebPushException as refused:
        status = getattr(refused.response, "status_code", None)
        return Sent(False, gone=status in GONE, error=f"{status or ''} {refused.message}"[:200])
    except Exception as fault:  # the push service cannot be reached: tried again later
        return Sent(False, error=repr(fault)[:200])
    return Sent(True)

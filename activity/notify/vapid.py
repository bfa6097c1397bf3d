"""This server's VAPID key pair (RFC 8292): push services take a notification only with a token
signed by it, and a browser subscribes with its public key (``public_key``).

The private key comes from ``KORUWEB_VAPID_PRIVATE_KEY`` (a PEM, or the raw 32 bytes in
base64url), else from ``var/vapid_private.pem``, made at first use like the secret key. Team
mode's processes must share it: set the variable, or share ``var/`` (docs/deploy.md).
"""

from __future__ import annotations

import functools
import os
import threading
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from django.conf import settings
from py_vapid import Vapid02, b64urlencode

_reading = threading.Lock()  # the first read makes the key: one thread at a time


def _path() -> Path:
    return Path(settings.VAR_DIR) / "vapid_private.pem"


@functools.cache
def _key(configured: str, path: Path) -> Vapid02:
    if configured:
        text = configured.strip()
        if "BEGIN" in text:
            return Vapid02.from_pem(text.encode())
        return Vapid02.from_raw(text.encode())
    if not path.exists():
        _make(path)
    return Vapid02.from_file(str(path))


def _make(path: Path) -> None:
    """Write a new key pair to ``path`` unless another thread or process did first: written
    whole under another name, then linked in place (a link fails if the file exists)."""
    made = Vapid02()
    made.generate_keys()
    path.parent.mkdir(parents=True, exist_ok=True)
    draft = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}")
    made.save_key(str(draft))
    os.chmod(draft, 0o600)
    try:
        os.link(draft, path)
    except FileExistsError:
        pass  # another one's is the key
    finally:
        draft.unlink()


def key() -> Vapid02:
    """The key pair (read once per process, and again when the settings change)."""
    with _reading:
        return _key(settings.VAPID_PRIVATE_KEY, _path())


def public_key() -> str:
    """The public key as a browser's ``applicationServerKey`` takes it: the uncompressed
    point, base64url without padding."""
    point = key().public_key.public_bytes(
        serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
    )
    return str(b64urlencode(point))

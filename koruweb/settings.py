"""koruweb settings: one file, read from the environment, safe defaults for development.

Every variable is listed in README.md. ``KORUWEB_ENV=production`` turns off DEBUG and makes
``SECRET_KEY`` and ``ALLOWED_HOSTS`` required.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import dj_database_url
import django_stubs_ext
from django.core.exceptions import ImproperlyConfigured
from django.utils.csp import CSP

from koruweb.env import envbool, envint, envlist, envstr

django_stubs_ext.monkeypatch()  # lets ModelAdmin[Model] and friends be subscripted at run time

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(envstr("KORUWEB_VAR_DIR", str(BASE_DIR / "var")))

ENVIRONMENT = envstr("KORUWEB_ENV", "development")
if ENVIRONMENT not in {"development", "production"}:
    raise ImproperlyConfigured(f"KORUWEB_ENV={ENVIRONMENT!r}: use 'development' or 'production'")
PRODUCTION = ENVIRONMENT == "production"

DEBUG = envbool("DEBUG", default=not PRODUCTION)
if PRODUCTION and DEBUG:
    raise ImproperlyConfigured("DEBUG cannot be on with KORUWEB_ENV=production")


def _development_secret_key() -> str:
    """A key generated once per checkout, kept in var/ so sessions survive a restart.

    Where var/ cannot be written (the runner on a laptop with only the package installed),
    a key for this process alone does: the runner signs nothing.
    """
    path = VAR_DIR / "secret_key"
    try:
        if not path.exists():
            VAR_DIR.mkdir(parents=True, exist_ok=True)
            path.write_text(secrets.token_urlsafe(50))
            path.chmod(0o600)
        return path.read_text().strip()
    except OSError:
        return secrets.token_urlsafe(50)


SECRET_KEY = envstr("SECRET_KEY", "")
if not SECRET_KEY:
    if PRODUCTION:
        raise ImproperlyConfigured("SECRET_KEY must be set when KORUWEB_ENV=production")
    SECRET_KEY = _development_secret_key()

ALLOWED_HOSTS = envlist(
    "ALLOWED_HOSTS", [] if PRODUCTION else ["127.0.0.1", "localhost", "[::1]", "testserver"]
)
if PRODUCTION and not ALLOWED_HOSTS:
    raise ImproperlyConfigured("ALLOWED_HOSTS must be set when KORUWEB_ENV=production")
CSRF_TRUSTED_ORIGINS = envlist("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "activity",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django_htmx.middleware.HtmxMiddleware",  # request.htmx (activity/web/requests.py)
    "django.contrib.messages.middleware.MessageMiddleware",
    "activity.web.notfound.NotFoundMiddleware",  # "not found, or not yours", even with DEBUG on
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "koruweb.urls"
ASGI_APPLICATION = "koruweb.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.csp",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]


# How long a request waits for a pooled PostgreSQL connection while the database is away.
DATABASE_POOL_TIMEOUT = envint("DATABASE_POOL_TIMEOUT", 10, minimum=1)


def _database(url: str) -> dict[str, Any]:
    config: dict[str, Any] = dict(dj_database_url.parse(url))
    engine = config["ENGINE"]
    if engine == "django.db.backends.sqlite3":
        # WAL lets viewers read while the agent path writes; IMMEDIATE avoids upgrade deadlocks.
        config["OPTIONS"] = {
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
        }
        # Keep each thread's connection (bench/README.md): the live path's database work runs
        # on one thread, and reopening it for every call cost a connect, the pragmas and, as
        # the last connection closed, a WAL checkpoint. Under ASGI each HTTP request has a
        # thread of its own; the connection it leaves is closed when the garbage collector
        # reclaims it (a few dozen at most were seen open), and SQLite has no server whose
        # connection slots could run out.
        config["CONN_MAX_AGE"] = None
        if config["NAME"] != ":memory:":
            Path(config["NAME"]).parent.mkdir(parents=True, exist_ok=True)
    elif engine == "django.db.backends.postgresql":
        from koruweb import dbpool

        config["CONN_MAX_AGE"] = 0
        config["OPTIONS"] = {
            "pool": {
                "min_size": 1,
                "max_size": 8,
                # A pooled connection is checked as it is handed out: one the server closed
                # (a restart, terminated sessions) is replaced, not used
                # (docs/gotchas.md#pooled-postgresql-connections-can-be-dead).
                "check": dbpool.check,
                "timeout": DATABASE_POOL_TIMEOUT,
            }
        }
        # Explicit, or a live-server child process looks for test_test_<name> (channels#2176).
        config["TEST"] = {"NAME": f"test_{config['NAME']}"}
    else:  # search and its migration are written for these two
        raise ImproperlyConfigured(f"DATABASE_URL: koruweb runs on SQLite or PostgreSQL, not {url}")
    return config


DATABASE_URL = envstr("DATABASE_URL", f"sqlite:///{VAR_DIR / 'koruweb.sqlite3'}")
DATABASES = {"default": _database(DATABASE_URL)}

REDIS_URL = envstr("REDIS_URL", "")
# A channel layer's receive blocks on Redis this long, then asks again; every other Redis command
# may take up to REDIS_SOCKET_TIMEOUT. redis-py 8's default socket timeout (5 s) equals
# channels_redis's 5 s blocking receive, so an idle process's receive timed out and closed every
# socket (docs/gotchas.md#idle-redis-receives-time-out): the socket timeout must outlast the
# blocking receive.
REDIS_BRPOP_TIMEOUT = envint("REDIS_BRPOP_TIMEOUT", 5, minimum=1)
REDIS_SOCKET_TIMEOUT = envint("REDIS_SOCKET_TIMEOUT", 15, minimum=2)
if REDIS_SOCKET_TIMEOUT <= REDIS_BRPOP_TIMEOUT:
    raise ImproperlyConfigured(
        f"REDIS_SOCKET_TIMEOUT={REDIS_SOCKET_TIMEOUT} must be longer than "
        f"REDIS_BRPOP_TIMEOUT={REDIS_BRPOP_TIMEOUT}, or idle sockets time out"
    )
# A pooled Redis connection idle this long is pinged before it is used, so one Redis restarted
# meanwhile is replaced rather than failing a command.
REDIS_HEALTH_CHECK_SECONDS = envint("REDIS_HEALTH_CHECK_SECONDS", 10, minimum=1)
REDIS_CLIENT: dict[str, Any] = {
    "socket_timeout": REDIS_SOCKET_TIMEOUT,
    "socket_connect_timeout": 5,
    "socket_keepalive": True,
    "health_check_interval": REDIS_HEALTH_CHECK_SECONDS,
}
if REDIS_URL:
    CHANNEL_LAYERS: dict[str, Any] = {
        "default": {
            "BACKEND": "koruweb.layers.RedisLayer",
            # redis-py 8 caps its pool at 100 and raises when it runs out
            # (docs/gotchas.md#redis-py-caps-its-connection-pool).
            "CONFIG": {
                "hosts": [{"address": REDIS_URL, "max_connections": 1000, **REDIS_CLIENT}],
                "capacity": 1000,
                "expiry": 30,
                "brpop_timeout": REDIS_BRPOP_TIMEOUT,
            },
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = envstr("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
# Daphne serves no files itself; WhiteNoise serves static/ straight from the finders.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "login"

SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF, CSP.NONCE],
    "style-src": [CSP.SELF],
    "img-src": [CSP.SELF, "data:"],
    "connect-src": [CSP.SELF],
    "object-src": [CSP.NONE],
    "base-uri": [CSP.NONE],
    "frame-ancestors": [CSP.NONE],
}
# HTTPS in production (`check --deploy` is clean with the defaults); each can be turned down.
SESSION_COOKIE_SECURE = envbool("SESSION_COOKIE_SECURE", PRODUCTION)
CSRF_COOKIE_SECURE = envbool("CSRF_COOKIE_SECURE", PRODUCTION)
SECURE_SSL_REDIRECT = envbool("SECURE_SSL_REDIRECT", PRODUCTION)
SECURE_HSTS_SECONDS = envint("SECURE_HSTS_SECONDS", 31_536_000 if PRODUCTION else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = envbool("SECURE_HSTS_INCLUDE_SUBDOMAINS", PRODUCTION)
SECURE_HSTS_PRELOAD = envbool("SECURE_HSTS_PRELOAD", PRODUCTION)
# The header a TLS-terminating proxy sets to "https" (e.g. X-Forwarded-Proto); it must strip the
# header from what clients send. Without it, a proxy's plain-HTTP hop looks insecure to Django.
_proxy_ssl_header = envstr("SECURE_PROXY_SSL_HEADER", "").strip()
SECURE_PROXY_SSL_HEADER: tuple[str, str] | None = (
    ("HTTP_" + _proxy_ssl_header.upper().replace("-", "_"), "https") if _proxy_ssl_header else None
)

# Wrong passwords: this many per user name, or per address, within the window lock both out
# until it ends (activity/people/login.py).
LOGIN_FAILURE_LIMIT = envint("LOGIN_FAILURE_LIMIT", 10, minimum=1)
LOGIN_LOCKOUT_SECONDS = envint("LOGIN_LOCKOUT_SECONDS", 900, minimum=1)
# What one person may ask of the others' runs (issue 25): messages waiting in a run's queue (queued
# or on their way), in all and per person, and comments per person per minute; past one, the page
# says which limit refused it (activity/live/drive.py, activity/people/limits.py).
DRIVE_QUEUE_PER_RUN = envint("DRIVE_QUEUE_PER_RUN", 20, minimum=1)
DRIVE_QUEUE_PER_PERSON = envint("DRIVE_QUEUE_PER_PERSON", 5, minimum=1)
COMMENTS_PER_MINUTE = envint("COMMENTS_PER_MINUTE", 30, minimum=1)
# Runs one person may ask the agent hosts to start within a minute (429 past it), and how long a
# run may stay *starting* before it fails and its token is revoked (activity/live/hosts.py).
HOST_STARTS_PER_MINUTE = envint("HOST_STARTS_PER_MINUTE", 10, minimum=1)
HOST_START_SECONDS = envint("HOST_START_SECONDS", 90, minimum=1)
# Floods on the live path (issue 25, activity/sockets/floods.py): the new chats one agent token may
# make within a minute (a hello past it closes with 4429, a reconnect to a chat never does); how
# long an agent or host socket may say nothing before its hello (closed with 4400); the sockets
# open at once per person (chat pages, inbox and needs sockets together), per agent token and per
# host token (a socket past one closes with 4429; a process that died frees its slots as its
# "watching" entries expire).
AGENT_NEW_CHATS_PER_MINUTE = envint("AGENT_NEW_CHATS_PER_MINUTE", 30, minimum=1)
HELLO_TIMEOUT_SECONDS = envint("HELLO_TIMEOUT_SECONDS", 10, minimum=1)
SOCKETS_PER_PERSON = envint("SOCKETS_PER_PERSON", 50, minimum=1)
SOCKETS_PER_TOKEN = envint("SOCKETS_PER_TOKEN", 20, minimum=1)
HOST_SOCKETS_PER_TOKEN = envint("HOST_SOCKETS_PER_TOKEN", 5, minimum=1)
# The pages open at once on one share link (activity/sockets/shared.py): a link handed around
# cannot hold more of the server than this.
SHARE_SOCKETS_PER_LINK = envint("SHARE_SOCKETS_PER_LINK", 20, minimum=1)
CACHES: dict[str, Any] = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "login_throttle": (
        {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": "koruweb",
            "OPTIONS": REDIS_CLIENT,
        }
        if REDIS_URL
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "login"}
    ),
    # Who is watching each chat (activity/push/watching.py): shared by every process through Redis.
    "watching": (
        {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": "koruweb",
            "OPTIONS": REDIS_CLIENT,
        }
        if REDIS_URL
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "watching"}
    ),
}

# What a local agent did is kept only in four bounded strings
# (docs/architecture.md#the-toolactivity-contract).
AGENT_CONTENT_CHARS = envint("AGENT_CONTENT_CHARS", 16_384, minimum=64)
AGENT_SHORT_CHARS = envint("AGENT_SHORT_CHARS", 512, minimum=64)
REPLY_MAX_CHARS = envint("REPLY_MAX_CHARS", 1_000_000, minimum=1_000)
# The most bytes one push or catch-up to a page may take: Daphne drops a message over 1 MiB
# (docs/gotchas.md#daphne-drops-messages-over-1-mib), so a larger change goes out in parts
# (activity/push/pushes.py).
PUSH_MAX_BYTES = envint("PUSH_MAX_BYTES", 512 * 1024, minimum=1024)
if PUSH_MAX_BYTES > 1_000_000:
    raise ImproperlyConfigured(
        f"PUSH_MAX_BYTES={PUSH_MAX_BYTES} would reach Daphne's 1 MiB message limit; keep it below"
    )
# How long a chat waits for its runner to come back before its turn is ended.
RUNNER_GRACE_SECONDS = envint("RUNNER_GRACE_SECONDS", 60, minimum=0)
# How often a runner's socket records that it is up. A chat whose runner's socket has recorded
# nothing for 3 heartbeats (or the grace period, if longer) counts its runner gone: the process
# holding that socket died. Keep the proxies' idle timeouts longer than this (docs/deploy.md).
RUNNER_HEARTBEAT_SECONDS = envint("RUNNER_HEARTBEAT_SECONDS", 15, minimum=1)
# How often each open chat page's socket renews its "watching" entry; one not renewed for 2.5
# heartbeats (its process was killed) is gone, and each process looks again this often.
WATCHING_HEARTBEAT_SECONDS = envint("WATCHING_HEARTBEAT_SECONDS", 10, minimum=1)
# How long a chat page hears nothing (no push, not even a heartbeat's version) before it asks
# the server for what changed since the version it shows (README "Live updates").
PAGE_QUIET_MS = envint("PAGE_QUIET_MS", WATCHING_HEARTBEAT_SECONDS * 2500, minimum=100)
# Notifications (activity/notify/): a prompt still open this long after it opened is pushed to
# the people who may answer it; each process looks for what is owed every NOTIFY_POLL_MS.
NOTIFY_DELAY_SECONDS = envint("NOTIFY_DELAY_SECONDS", 10, minimum=0)
NOTIFY_POLL_MS = envint("NOTIFY_POLL_MS", 2000, minimum=50)
# Web Push's VAPID key pair: the private key (PEM, or its raw 32 bytes base64url-encoded) from the
# environment, else made once and kept in var/vapid_private.pem (activity/notify/vapid.py); the
# subject push services may contact about this server.
VAPID_PRIVATE_KEY = envstr("KORUWEB_VAPID_PRIVATE_KEY", "")
VAPID_SUBJECT = envstr("KORUWEB_VAPID_SUBJECT", "mailto:koruweb@localhost")
# Browsers' push services are https:// addresses; a subscription to any other is refused, unless
# this is set (for a local fake push service in tests).
PUSH_ALLOW_HTTP = envbool("PUSH_ALLOW_HTTP", False)
# `manage.py prune_runs` deletes runs created more than this many days ago; 0 keeps them forever.
RETENTION_DAYS = envint("RETENTION_DAYS", 0, minimum=0)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"activity": {"handlers": ["console"], "level": envstr("LOG_LEVEL", "INFO")}},
}

# --- Email (issue 31: docs/email.md) -------------------------------------------------------
# Mail goes out through SMTP, set from the environment under the names Django's EMAIL_* settings
# had; Django 6.1 deprecates those settings for MAILERS, so they fill the default mailer's.
# Without a mail server named, a development server prints its mail (confirmation links among it)
# in its own output instead of failing to reach localhost:25; production always uses SMTP.
_PRINTED = not PRODUCTION and not envstr("EMAIL_HOST", "")
EMAIL_BACKEND_PATH = envstr(
    "EMAIL_BACKEND",
    "django.core.mail.backends.console.EmailBackend"
    if _PRINTED
    else "django.core.mail.backends.smtp.EmailBackend",
)
_smtp: dict[str, Any] = {
    "host": envstr("EMAIL_HOST", "localhost"),
    "port": envint("EMAIL_PORT", 25, minimum=1),
    "username": envstr("EMAIL_HOST_USER", ""),
    "password": envstr("EMAIL_HOST_PASSWORD", ""),
    "use_tls": envbool("EMAIL_USE_TLS", False),
    "use_ssl": envbool("EMAIL_USE_SSL", False),
    "timeout": envint("EMAIL_TIMEOUT", 20, minimum=1),
}
if _smtp["use_tls"] and _smtp["use_ssl"]:
    raise ImproperlyConfigured("EMAIL_USE_TLS and EMAIL_USE_SSL: set one of them, not both")
MAILERS = {
    "default": {
        "BACKEND": EMAIL_BACKEND_PATH,
        "OPTIONS": _smtp if EMAIL_BACKEND_PATH.endswith("smtp.EmailBackend") else {},
    }
}
DEFAULT_FROM_EMAIL = envstr("DEFAULT_FROM_EMAIL", "koruweb <koruweb@localhost>")
SERVER_EMAIL = DEFAULT_FROM_EMAIL
# The address people reach this server at: every link in a mail starts with it.
KORUWEB_BASE_URL = envstr("KORUWEB_BASE_URL", "http://127.0.0.1:8000").rstrip("/")
# How long an address's confirmation link works (hours), and a password reset link (seconds).
EMAIL_CONFIRM_HOURS = envint("EMAIL_CONFIRM_HOURS", 48, minimum=1)
PASSWORD_RESET_TIMEOUT = envint("PASSWORD_RESET_TIMEOUT", 3600, minimum=60)
# Password reset requests per address asked for, and per client address, within an hour.
PASSWORD_RESETS_PER_ADDRESS = envint("PASSWORD_RESETS_PER_ADDRESS", 5, minimum=1)
PASSWORD_RESETS_PER_CLIENT = envint("PASSWORD_RESETS_PER_CLIENT", 20, minimum=1)

# --- Webhooks (issue 31: docs/webhooks.md) -------------------------------------------------
# A webhook may post to loopback, link-local and private addresses only with this on (a cloud
# metadata address never); plain http to a public address only with WEBHOOKS_ALLOW_HTTP.
WEBHOOKS_ALLOW_PRIVATE = envbool("WEBHOOKS_ALLOW_PRIVATE", False)
WEBHOOKS_ALLOW_HTTP = envbool("WEBHOOKS_ALLOW_HTTP", False)
# Seconds one attempt may take to connect and to each read (the whole attempt at most twice).
WEBHOOK_TIMEOUT_SECONDS = envint("WEBHOOK_TIMEOUT_SECONDS", 10, minimum=1)
# A failed attempt is tried again WEBHOOK_RETRY_SECONDS * 2**(attempts-1) later, up to
# WEBHOOK_MAX_TRIES attempts in all; the delivery log keeps WEBHOOK_KEEP_DAYS of deliveries.
WEBHOOK_RETRY_SECONDS = envint("WEBHOOK_RETRY_SECONDS", 30, minimum=1)
WEBHOOK_MAX_TRIES = envint("WEBHOOK_MAX_TRIES", 8, minimum=1)
WEBHOOK_KEEP_DAYS = envint("WEBHOOK_KEEP_DAYS", 14, minimum=1)

"""Email's settings come from the environment under the names of Django's ``EMAIL_*`` settings
and fill Django 6.1's default mailer (``MAILERS``), with no deprecated setting defined: a
setting koruweb cannot send with stops it at start. docs/email.md."""

from __future__ import annotations

import json

from tests.server.test_settings import PRODUCTION, run

SHOW = (
    "import django, json; django.setup(); from django.conf import settings as s; "
    "print(json.dumps([s.MAILERS, s.DEFAULT_FROM_EMAIL, s.KORUWEB_BASE_URL, "
    "hasattr(s, 'EMAIL_HOST') and s.is_overridden('EMAIL_HOST')]))"
)


def test_the_smtp_server_the_sender_and_the_links_base_come_from_the_environment():
    shown = run(
        SHOW,
        EMAIL_HOST="smtp.example.com",
        EMAIL_PORT="587",
        EMAIL_HOST_USER="koruweb",
        EMAIL_HOST_PASSWORD="s3cret",
        EMAIL_USE_TLS="1",
        DEFAULT_FROM_EMAIL="koruweb <ops@example.com>",
        KORUWEB_BASE_URL="https://koruweb.example.com/",
    )
    assert shown.returncode == 0, shown.stderr
    mailers, sender, base, deprecated = json.loads(shown.stdout)
    assert mailers["default"]["BACKEND"] == "django.core.mail.backends.smtp.EmailBackend"
    options = mailers["default"]["OPTIONS"]
    assert (options["host"], options["port"], options["use_tls"]) == ("smtp.example.com", 587, True)
    assert (options["username"], options["password"], options["use_ssl"]) == (
        "koruweb",
        "s3cret",
        False,
    )
    assert sender == "koruweb <ops@example.com>" and base == "https://koruweb.example.com"
    assert deprecated is False
    assert "deprecated" not in shown.stderr


def test_tls_and_ssl_at_once_are_refused_at_start():
    started = run("import django; django.setup()", EMAIL_USE_TLS="1", EMAIL_USE_SSL="1")
    assert started.returncode != 0 and "set one of them, not both" in started.stderr


def test_another_backend_takes_no_smtp_options():
    shown = run(SHOW, EMAIL_BACKEND="django.core.mail.backends.console.EmailBackend")
    mailers = json.loads(shown.stdout)[0]
    assert mailers["default"]["OPTIONS"] == {}


def test_a_development_server_without_a_mail_server_prints_its_mail_and_production_uses_smtp():
    development = json.loads(run(SHOW, KORUWEB_ENV="development").stdout)[0]
    assert development["default"]["BACKEND"] == "django.core.mail.backends.console.EmailBackend"
    production = json.loads(run(SHOW, **PRODUCTION).stdout)[0]
    assert production["default"]["BACKEND"] == "django.core.mail.backends.smtp.EmailBackend"

"""Expected faults are one line at WARNING; anything else keeps its traceback at ERROR."""

from __future__ import annotations

import logging

import pytest
from django.db import OperationalError
from redis.exceptions import ConnectionError as RedisConnectionError

from activity.live import faults

log = logging.getLogger("koruweb.test")

# How faults are logged: no database.
pytestmark = pytest.mark.once


@pytest.mark.parametrize(
    "fault",
    [
        OperationalError("terminating connection due to administrator command\nSSL closed"),
        RedisConnectionError("Connection closed by server."),
        ConnectionRefusedError(111, "Connection refused"),
    ],
)
def test_an_expected_fault_is_logged_as_one_line_at_warning(caplog, fault):
    with caplog.at_level(logging.INFO, logger="koruweb.test"):
        try:
            raise fault
        except Exception:
            faults.report(log, "pushing chat %s failed", "c-1")
    (record,) = caplog.records
    assert record.levelno == logging.WARNING and record.exc_info is None
    message = record.getMessage()
    assert message.startswith(f"pushing chat c-1 failed: {type(fault).__name__}: ")
    assert "\n" not in message


def test_an_unexpected_fault_keeps_its_traceback_at_error(caplog):
    with caplog.at_level(logging.INFO, logger="koruweb.test"):
        try:
            raise KeyError("rows")
        except Exception:
            faults.report(log, "pushing chat %s failed", "c-1")
    (record,) = caplog.records
    assert record.levelno == logging.ERROR and record.exc_info is not None
    assert record.getMessage() == "pushing chat c-1 failed"

"""The address rules of webhooks (activity/notify/hookaddr.py): what each address is, and what a
URL may be. Pure but for the settings: no socket is opened (IP literals resolve to themselves)."""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest

from activity.notify import hookaddr

pytestmark = pytest.mark.once  # no database: run once, not again on PostgreSQL


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "a loopback address"),
        ("::1", "a loopback address"),
        ("::ffff:127.0.0.1", "a loopback address"),  # IPv4 inside IPv6
        ("64:ff9b::a00:1", "a private address"),  # NAT64 of 10.0.0.1
        ("169.254.169.254", "a cloud metadata address"),
        ("fd00:ec2::254", "a cloud metadata address"),
        ("169.254.1.1", "a link-local address"),
        ("fe80::1", "a link-local address"),
        ("10.1.2.3", "a private address"),
        ("172.16.0.1", "a private address"),
        ("192.168.1.1", "a private address"),
        ("fc00::1", "a private address"),
        ("0.0.0.0", "an unspecified address"),
        ("224.0.0.1", "a multicast address"),
        ("100.64.0.1", "not a public address"),  # carrier-grade NAT
        ("240.0.0.1", "a private address"),
        ("93.184.216.34", None),
        ("2606:4700::1111", None),
    ],
)
def test_each_address_is_what_the_rules_say(address: str, kind: str | None) -> None:
    assert hookaddr.kind(ipaddress.ip_address(address)) == kind


def test_metadata_is_refused_even_where_private_addresses_are_allowed(settings: Any) -> None:
    settings.WEBHOOKS_ALLOW_PRIVATE = True
    assert hookaddr.check("http://10.0.0.1:8080/in?x=1").path == "/in?x=1"
    with pytest.raises(hookaddr.Refused, match="metadata"):
        hookaddr.check("http://169.254.169.254/latest/meta-data/")


def test_plain_http_goes_to_a_public_address_only_where_the_deploy_allows_it(
    settings: Any,
) -> None:
    settings.WEBHOOKS_ALLOW_HTTP = False
    with pytest.raises(hookaddr.Refused, match="use https://"):
        hookaddr.check("http://93.184.216.34/in")
    settings.WEBHOOKS_ALLOW_HTTP = True
    target = hookaddr.check("http://93.184.216.34/in")
    assert (target.scheme, target.ip, target.port) == ("http", "93.184.216.34", 80)
    assert hookaddr.check("https://[2606:4700::1111]/x").port == 443


def test_the_page_shows_a_url_without_its_paths_token() -> None:
    token = "T04AB12CD/B05EF34GH/a1B2c3D4e5F6g7H8i9J0k1L2"  # the path is the webhook's secret
    slack = f"https://hooks.slack.com/services/{token}"
    assert hookaddr.shown(slack) == "https://hooks.slack.com/service…"
    assert not any(part in hookaddr.shown(slack) for part in token.split("/"))
    assert hookaddr.shown("https://example.com/") == "https://example.com/"

"""A workspace's webhooks on its admin page (activity/web/hooks.py): adding one (its secret shown
once), bad URLs refused with why and nothing written, a test event, off and on, deleting, the
delivery log, and who may do any of it."""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.test import Client

from activity.models import Delivery, HookEvent, Webhook, Workspace
from activity.notify import hooklog, hookqueue
from tests.members import logged_in
from tests.notify.hookreceiver import Receiver, running, verified

pytestmark = pytest.mark.django_db(transaction=True)
SECRET = re.compile(r'<pre class="copy" id="webhook-secret">(kwh_[\w-]+)</pre>')


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    yield from running()


@pytest.fixture(autouse=True)
def quick(settings: Any) -> None:
    settings.WEBHOOKS_ALLOW_PRIVATE = True  # the receiver is on 127.0.0.1
    settings.WEBHOOK_RETRY_SECONDS = 0.05
    settings.WEBHOOK_MAX_TRIES = 2


def form(url: str, **more: Any) -> dict[str, Any]:
    return {"name": "#agent-runs", "url": url, "format": "json", "events": HookEvent.values, **more}


def made(workspace: Workspace, url: str = "https://10.0.0.7/x") -> Webhook:
    return Webhook.objects.create(
        workspace=workspace, name="ops", url=url, events=HookEvent.values, secret="kwh_s3cret-value"
    )


def tick() -> None:
    async_to_sync(hookqueue.tick)()


def test_an_admin_adds_a_webhook_and_sees_its_secret_once(as_admin, acme, receiver):
    url = receiver.url()
    added = as_admin.post(f"/workspaces/{acme.slug}/webhooks/create", form(url, format="slack"))
    assert added.status_code == 200
    (hook,) = Webhook.objects.all()
    secret = SECRET.search(added.content.decode())
    assert secret and secret.group(1) == hook.secret and len(hook.secret) > 40
    assert hook.format == "slack" and hook.events == HookEvent.values and hook.active
    assert hook.created_by is not None and hook.created_by.get_username() == "carol"
    again = as_admin.get(f"/workspaces/{acme.slug}/").content.decode()
    assert hook.secret not in again and "#agent-runs" in again
    assert url not in again and f"127.0.0.1:{receiver.port}/ok/" in again  # no path's token


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("ftp://hooks.acme.test/x", "starts with https://"),
        ("https://user:pw@hooks.acme.test/x", "no user name or password"),
        ("not a url at all", "no spaces or control characters"),
        ("notaurl", "starts with https://"),
        ("https:///x", "needs a host name"),
        ("http://169.254.169.254/latest/meta-data/", "a cloud metadata address"),
        ("http://[fd00:ec2::254]/", "a cloud metadata address"),
        ("http://public.acme.test/x", "use https://"),
        ("https://nowhere.invalid/x", "cannot be resolved"),
    ],
)
def test_a_bad_url_is_refused_with_why_and_nothing_is_written(
    as_admin, acme, url, why, monkeypatch
):
    real = socket.getaddrinfo

    def resolve(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "public.acme.test":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", port))]
        if host == "nowhere.invalid":
            raise socket.gaierror("Name or service not known")
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    refused = as_admin.post(f"/workspaces/{acme.slug}/webhooks/create", form(url))
    assert refused.status_code == 400
    assert why in refused.content.decode() and "That URL cannot be used" in refused.content.decode()
    assert not Webhook.objects.exists()


def test_a_private_address_is_refused_unless_the_deploy_allows_it(as_admin, acme, settings):
    settings.WEBHOOKS_ALLOW_PRIVATE = False
    for url in ("http://127.0.0.1:9/x", "https://10.0.0.7/x", "http://[::1]/x"):
        refused = as_admin.post(f"/workspaces/{acme.slug}/webhooks/create", form(url))
        assert refused.status_code == 400 and "WEBHOOKS_ALLOW_PRIVATE" in refused.content.decode()
    assert not Webhook.objects.exists()
    settings.WEBHOOKS_ALLOW_PRIVATE = True
    assert as_admin.post(f"/workspaces/{acme.slug}/webhooks/create", form("http://10.0.0.7/x"))
    assert Webhook.objects.count() == 1


def test_other_bad_input_is_refused_and_a_workspace_has_at_most_twenty(as_admin, acme):
    create = f"/workspaces/{acme.slug}/webhooks/create"
    url = "https://10.0.0.7/x"
    for bad, why in (
        (form(url, name=""), "Give the webhook a name"),
        (form(url, events=[]), "at least one of the events"),
        (form(url, events=["run.deleted"]), "at least one of the events"),
        (form(url, format="xml"), "Slack-compatible format"),
    ):
        refused = as_admin.post(create, bad)
        assert refused.status_code == 400 and why in refused.content.decode()
    assert not Webhook.objects.exists()
    for _ in range(hooklog.MAX_HOOKS):
        made(acme)
    full = as_admin.post(create, form(url))
    assert full.status_code == 400 and "at most 20 webhooks" in full.content.decode()
    assert Webhook.objects.count() == hooklog.MAX_HOOKS


def test_a_test_event_is_posted_off_the_request_and_logged_on_the_page(as_admin, acme, receiver):
    hook = made(acme, receiver.url())
    sent = as_admin.post(f"/workspaces/{acme.slug}/webhooks/{hook.pk}/test")
    assert sent.status_code == 302 and receiver.to(hook.url) == []  # not on the request
    tick()
    (post,) = receiver.to(hook.url)
    ping = verified(post, hook.secret)
    assert ping["event"] == "ping" and ping["workspace"]["slug"] == "acme" and ping["run"] is None
    assert "sent by carol" in ping["text"] and hook.secret not in post.body.decode()
    failing = made(acme, receiver.url("down"))
    as_admin.post(f"/workspaces/{acme.slug}/webhooks/{failing.pk}/test")
    for _ in range(50):
        tick()
        if Delivery.objects.filter(webhook=failing, failed_at__isnull=False).exists():
            break
    page = as_admin.get(f"/workspaces/{acme.slug}/").content.decode()
    ok = Delivery.objects.get(webhook=hook)
    row = re.search(
        rf'<tr id="delivery-{ok.pk}" class="delivery is-delivered">(.*?)</tr>', page, re.S
    )
    assert row and "<code>ping</code>" in row.group(1) and "<td>200</td>" in row.group(1)
    bad = Delivery.objects.get(webhook=failing)
    row = re.search(
        rf'<tr id="delivery-{bad.pk}" class="delivery is-failed">(.*?)</tr>', page, re.S
    )
    assert row and "<td>2</td>" in row.group(1) and "HTTP 500" in row.group(1)


def test_a_webhook_turned_off_is_told_nothing_and_deleting_it_drops_its_log(as_admin, acme):
    hook = made(acme)
    owed = hookqueue.ping(hook, "carol")
    base = f"/workspaces/{acme.slug}/webhooks/{hook.pk}"
    assert as_admin.post(f"{base}/switch", {"active": "off"}).status_code == 302
    hook.refresh_from_db()
    owed.refresh_from_db()
    assert not hook.active and owed.failed_at and "turned off" in owed.error
    assert hookqueue.take() == []
    assert as_admin.post(f"{base}/test").status_code == 400  # off: no test event
    assert as_admin.post(f"{base}/switch", {"active": "sideways"}).status_code == 400
    assert as_admin.post(f"{base}/switch", {"active": "on"}).status_code == 302
    assert Webhook.objects.get(pk=hook.pk).active
    assert as_admin.post(f"{base}/delete").status_code == 302
    assert not Webhook.objects.exists() and not Delivery.objects.exists()


ACTIONS = [
    ("create", lambda slug, pk: f"/workspaces/{slug}/webhooks/create"),
    ("test", lambda slug, pk: f"/workspaces/{slug}/webhooks/{pk}/test"),
    ("switch", lambda slug, pk: f"/workspaces/{slug}/webhooks/{pk}/switch"),
    ("delete", lambda slug, pk: f"/workspaces/{slug}/webhooks/{pk}/delete"),
]


@pytest.mark.parametrize(("name", "path"), ACTIONS)
def test_only_the_workspaces_admins_may_touch_its_webhooks(
    name, path, acme, acme_admin, as_viewer, as_approver, as_outsider
):
    hook = made(acme)
    url = path(acme.slug, hook.pk)
    body = {**form("https://10.0.0.7/y"), "active": "off"}
    for member in (as_viewer, as_approver):
        refused = member.post(url, body)
        assert refused.status_code == 403 and "takes the admin role" in refused.content.decode()
    assert as_outsider.post(url, body).status_code == 404
    anonymous = Client().post(url, body)
    assert anonymous.status_code == 302 and "/login/?next=" in anonymous["Location"]
    forged = Client(enforce_csrf_checks=True)
    forged.force_login(acme_admin)
    assert forged.post(url, body).status_code == 403
    assert logged_in(acme_admin).get(url).status_code == 405  # a form's post only
    assert Webhook.objects.get(pk=hook.pk).active and Webhook.objects.count() == 1
    assert not Delivery.objects.exists()
    other = made(Workspace.objects.create(slug="globex-2", name="Globex 2"))
    if name != "create":  # another workspace's webhook is not found from this one's pages
        assert logged_in(acme_admin).post(path(acme.slug, other.pk), body).status_code == 404
    assert Webhook.objects.get(pk=other.pk).active


def test_the_page_lists_webhooks_for_admins_only(as_admin, as_viewer, acme):
    made(acme)
    page = as_admin.get(f"/workspaces/{acme.slug}/").content.decode()
    assert 'id="webhooks"' in page and "Send a test event" in page
    assert "kwh_s3cret-value" not in page
    assert as_viewer.get(f"/workspaces/{acme.slug}/").status_code == 403

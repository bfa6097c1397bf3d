"""A run that outlives its runner, on the server: Stop and Resume from the run's page (who may,
what the runner and the host are sent, what the page says), the secret a resume replaces, and
the whole change a runner reports at each turn's end (``changes`` frames, the Changes page)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from activity.core import groups
from activity.live import boundary, hosts, presence
from activity.live.ingest import Item, ingest
from activity.models import Chat, InferenceAttempt, TurnDiff, WebPrompt, Workspace
from activity.models.accounts import AgentHost, AgentToken, HostRun, TokenKind
from activity.wire.frames import runner_frame
from activity.wire.hostframes import Exited, Start, Started
from tests import frames
from tests.live.test_hosts import FAKE_CHANNEL, ROOT, started_run, starts_sent

pytestmark = pytest.mark.django_db(transaction=True)
RUNNER = "specific.test!runner"
SECRET = "s" * 43
DIFF = """diff --git a/notes.txt b/notes.txt
--- a/notes.txt
+++ b/notes.txt
@@ -1,2 +1,2 @@
 first line
-second line
+second line! ANTHROPIC_API_KEY=sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGH
diff --git a/new.py b/new.py
new file mode 100644
--- /dev/null
+++ b/new.py
@@ -0,0 +1 @@
+print("hi")
"""


@pytest.fixture(autouse=True)
def fresh_layer() -> Iterator[None]:
    yield
    async_to_sync(get_channel_layer().flush)()


@pytest.fixture
def host(acme: Workspace) -> AgentHost:
    """A host of Acme, online on a socket the test reads (``starts_sent``)."""
    token, _ = AgentToken.issue(acme, "build-box", TokenKind.HOST)
    return AgentHost.objects.create(
        workspace=acme,
        token=token,
        name="build-box",
        agents=[{"name": "sdk", "command": "python sdk_agent.py"}],
        roots=[ROOT],
        online=True,
        channel=FAKE_CHANNEL,
        seen_at=timezone.now(),
    )


def said(chat_id: uuid.UUID, *made: dict[str, Any]) -> list[tuple[int, str]]:
    """The runner's frames, applied as the pipeline does (cleaned and masked at the boundary):
    the errors they got."""
    loaded: list[Item] = [
        runner_frame.validate_python(boundary.load(json.dumps(frame))) for frame in made
    ]
    return ingest(chat_id, loaded).errors


def session_info(seq: int, resumable: bool = True) -> dict[str, Any]:
    return {
        "type": "session_info",
        "seq": seq,
        "at": frames.T0 + seq,
        "allow_web": True,
        "stays": True,
        "session_id": "sess-1",
        "resumable": resumable,
        "closable": True,
    }


def to_runner(chat_id: uuid.UUID) -> list[dict[str, Any]]:
    """What the server sent the chat's runner (its group, on the in-memory layer)."""
    queue = get_channel_layer().channels.get(RUNNER)
    found = []
    while queue is not None and not queue.empty():
        found.append(queue.get_nowait()[1])
    return found


def host_run(host: AgentHost, client: Client, resumable: bool = True) -> tuple[HostRun, Start]:
    """A run the host started, its runner connected and its agent's session told."""
    run, start = started_run(host, client)
    token = AgentToken.find(start.token)
    assert token is not None
    presence.claim(host.workspace_id, start.chat_id, RUNNER, 0, SECRET, token.pk)
    hosts.started(host.pk, Started(id=run.pk, chat_url=f"http://x/chats/{start.chat_id}/"))
    async_to_sync(get_channel_layer().group_add)(groups.runner(start.chat_id), RUNNER)
    assert said(start.chat_id, session_info(1, resumable)) == []
    starts_sent()  # the first start, read
    return run, start


def gone(host: AgentHost, run: HostRun) -> None:
    """The runner's socket closed and its host said it exited."""
    assert run.chat_id is not None
    presence.disconnect(run.chat_id, RUNNER)
    hosts.exited(host.pk, Exited(id=run.pk, code=0))


def post(client: Client, run: HostRun, action: str) -> tuple[int, str]:
    response = client.post(f"/chats/{run.chat_id}/{action}", HTTP_HX_REQUEST="true")
    return response.status_code, response.content.decode()


def test_the_agents_session_and_what_it_can_do_with_it_are_kept(host, as_approver):
    run, first = host_run(host, as_approver)
    chat = Chat.objects.get(pk=first.chat_id)
    assert (chat.agent_session_id, chat.agent_resumes, chat.agent_closes) == ("sess-1", True, True)
    assert run.root == ROOT and run.path == "app"


def test_stop_tells_the_runner_says_who_stopped_and_removes_the_waiting_messages(
    host, as_approver, acme_approver: User
):
    run, first = host_run(host, as_approver)
    as_approver.post(f"/chats/{first.chat_id}/messages", {"text": "then this"}, HTTP_HX_REQUEST="1")
    to_runner(first.chat_id)
    assert (
        'class="run-control stop-run drive-control"'
        in as_approver.get(f"/chats/{first.chat_id}/").content.decode()
    )
    status, words = post(as_approver, run, "stop")
    assert status == 200 and "Asked the runner to end the run" in words
    [stop] = to_runner(first.chat_id)
    assert '"type":"stop"' in stop["text"] and '"by":"alice"' in stop["text"]
    chat = Chat.objects.get(pk=first.chat_id)
    assert chat.stopped_by == acme_approver and chat.stopped_at is not None
    [message] = WebPrompt.objects.filter(chat_id=first.chat_id)
    assert message.status == "removed" and message.removed_by == acme_approver
    assert (
        "Stopped by <bdi>alice</bdi>"
        in as_approver.get(f"/chats/{first.chat_id}/").content.decode()
    )


def test_a_viewer_may_neither_stop_nor_resume_and_an_outsider_does_not_find_the_run(
    host, as_approver, as_viewer, as_outsider
):
    run, first = host_run(host, as_approver)
    assert post(as_viewer, run, "stop")[0] == 403
    assert post(as_outsider, run, "stop")[0] == 404
    gone(host, run)
    assert post(as_viewer, run, "resume")[0] == 403
    assert post(as_outsider, run, "resume")[0] == 404
    assert to_runner(first.chat_id) == [] and starts_sent() == []
    chat = Chat.objects.get(pk=first.chat_id)
    assert chat.stopped_at is None and chat.resumed_at is None
    assert chat.runner_secret_hash == presence.digest(SECRET)


def test_stop_and_resume_need_the_csrf_token(host, as_approver, acme_approver):
    run, first = host_run(host, as_approver)
    client = Client(enforce_csrf_checks=True)
    client.force_login(acme_approver)
    assert post(client, run, "stop")[0] == 403
    gone(host, run)
    assert post(client, run, "resume")[0] == 403
    assert to_runner(first.chat_id) == [] and starts_sent() == []


def test_a_run_is_not_resumed_while_its_runner_is_connected(host, as_approver):
    run, first = host_run(host, as_approver)
    status, words = post(as_approver, run, "resume")
    assert status == 409 and "still connected" in words
    assert starts_sent() == []
    assert Chat.objects.get(pk=first.chat_id).runner_secret_hash == presence.digest(SECRET)


def test_resume_asks_the_host_with_a_new_secret_the_old_runner_is_refused_and_its_turn_ends(
    host, as_approver, acme_approver
):
    run, first = host_run(host, as_approver)
    attempt = uuid.uuid4()
    assert said(first.chat_id, frames.turn_started(2, attempt, uuid.uuid4())) == []
    assert said(first.chat_id, {**changes(3, attempt), "base": "b" * 40}) == []
    gone(host, run)
    page = as_approver.get(f"/chats/{first.chat_id}/").content.decode()
    assert (
        'class="run-control resume-run drive-control"' in page and "on <bdi>build-box</bdi>" in page
    )

    status, words = post(as_approver, run, "resume")
    assert status == 200 and "resume the run" in words
    [asked] = starts_sent()
    resumed = Start.model_validate_json(asked["text"])
    assert resumed.resume is not None and resumed.resume.session_id == "sess-1"
    assert resumed.resume.base == "b" * 40  # the whole change counts from the run's start
    assert (resumed.chat_id, resumed.root, resumed.path, resumed.prompt) == (
        first.chat_id,
        ROOT,
        "app",
        None,
    )
    again = HostRun.objects.get(pk=resumed.id)
    assert again.resumes and again.requested_by == acme_approver
    chat = Chat.objects.get(pk=first.chat_id)
    assert chat.resumed_by == acme_approver and chat.resumed_via == "host build-box"
    assert (
        "Resumed by <bdi>alice</bdi> with <bdi>host build-box</bdi>"
        in as_approver.get(f"/chats/{first.chat_id}/").content.decode()
    )

    token = AgentToken.find(resumed.token)
    assert token is not None and token.chat_id == first.chat_id
    with pytest.raises(presence.Refused):  # the runner that had the chat, back
        presence.claim(host.workspace_id, resumed.chat_id, "specific.test!old", 2, SECRET)
    mine = "m" * 43
    presence.claim(
        host.workspace_id, resumed.chat_id, RUNNER, 0, resumed.resume.secret, token.pk, mine
    )
    chat.refresh_from_db()
    assert chat.runner_connected and chat.runner_secret_hash == presence.digest(mine)
    assert chat.resumed_by == acme_approver  # the person who pressed Resume, still
    lost = InferenceAttempt.objects.get(pk=attempt)
    assert lost.stop_reason == "runner_replaced" and lost.ended_at is not None  # nobody will


def test_a_laptops_resume_needs_the_chats_secret_and_says_its_token(acme):
    token, _ = AgentToken.issue(acme, "alice-laptop")
    chat_id = uuid.uuid4()
    presence.claim(acme.pk, chat_id, RUNNER, 0, SECRET, token.pk)
    with pytest.raises(presence.Refused, match="still connected"):
        presence.claim(acme.pk, chat_id, "specific.test!2", 0, SECRET, token.pk, "n" * 43)
    presence.disconnect(chat_id, RUNNER)
    with pytest.raises(presence.Refused, match="secret differs"):
        presence.claim(acme.pk, chat_id, "specific.test!2", 0, "x" * 43, token.pk, "n" * 43)
    with pytest.raises(presence.Refused, match="deleted"):  # a resume never makes a chat
        presence.claim(acme.pk, uuid.uuid4(), "specific.test!2", 0, SECRET, token.pk, "n" * 43)
    presence.claim(acme.pk, chat_id, "specific.test!2", 0, SECRET, token.pk, "n" * 43)
    chat = Chat.objects.get(pk=chat_id)
    assert chat.resumed_via == "token alice-laptop" and chat.resumed_by is None
    assert chat.runner_secret_hash == presence.digest("n" * 43)
    # the same resume again (its ack was lost): taken as a reconnect, not refused
    presence.claim(acme.pk, chat_id, "specific.test!3", 0, SECRET, token.pk, "n" * 43)


def test_an_agent_that_cannot_resume_is_said_so_and_no_resume_is_offered(host, as_approver):
    run, first = host_run(host, as_approver, resumable=False)
    gone(host, run)
    page = as_approver.get(f"/chats/{first.chat_id}/").content.decode()
    assert "cannot resume its sessions" in page and "resume-run" not in page
    status, words = post(as_approver, run, "resume")
    assert status == 409 and "cannot resume its sessions" in words
    assert starts_sent() == []


def changes(seq: int, attempt: uuid.UUID, **more: Any) -> dict[str, Any]:
    files = [
        {"path": "notes.txt", "added": 1, "removed": 1},
        {"path": "new.py", "added": 1, "removed": 0},
        {"path": "logo.png", "added": None, "removed": None},
    ]
    change = {"diff": DIFF, "files": files}
    return {
        "type": "changes",
        "seq": seq,
        "at": frames.T0 + seq,
        "attempt_id": str(attempt),
        "turn": change,
        "run": change,
        **more,
    }


def test_a_turns_changes_are_kept_masked_counted_and_shown(acme, as_approver, as_outsider):
    chat_id, attempt = uuid.uuid4(), uuid.uuid4()
    presence.claim(acme.pk, chat_id, RUNNER, 0, SECRET)
    assert said(chat_id, frames.turn_started(1, attempt, uuid.uuid4()), changes(2, attempt)) == []
    diff = TurnDiff.objects.get(attempt_id=attempt)
    assert "sk-ant-api03-abcdefghij" not in diff.run_diff and "second line!" in diff.run_diff
    assert InferenceAttempt.objects.get(pk=attempt).changed == {
        "files": 3,
        "added": 2,
        "removed": 1,
    }
    assert Chat.objects.get(pk=chat_id).changed == {"files": 3, "added": 2, "removed": 1}
    page = as_approver.get(f"/chats/{chat_id}/").content.decode()
    assert f"/chats/{chat_id}/changes/" in page and "3 files" in page
    shown = as_approver.get(f"/chats/{chat_id}/changes/").content.decode()
    assert "What the run changed" in shown and "since the run started" in shown
    assert "notes.txt" in shown and "new.py" in shown and "binary" in shown
    assert 'class="output-block diff-file"' in shown and "sk-ant-api03-abcdefghij" not in shown
    turn = as_approver.get(f"/chats/{chat_id}/changes/?turn={attempt}").content.decode()
    assert "What one turn changed" in turn and "new.py" in turn
    assert as_approver.get(f"/chats/{chat_id}/changes/?turn={uuid.uuid4()}").status_code == 404
    assert as_outsider.get(f"/chats/{chat_id}/changes/").status_code == 404


def test_a_run_outside_git_says_so_and_changes_for_another_turn_are_refused_alone(
    acme, as_approver
):
    chat_id, attempt = uuid.uuid4(), uuid.uuid4()
    presence.claim(acme.pk, chat_id, RUNNER, 0, SECRET)
    outside = {
        "type": "changes",
        "seq": 1,
        "at": frames.T0,
        "outside": "/home/ann/scratch is not in a git working tree",
    }
    assert said(chat_id, outside) == []
    assert "not in a git working tree" in as_approver.get(f"/chats/{chat_id}/").content.decode()
    shown = as_approver.get(f"/chats/{chat_id}/changes/").content.decode()
    assert "No changes to show" in shown and "not in a git working tree" in shown
    [(seq, error)] = said(chat_id, changes(2, attempt))
    assert seq == 2 and "which this chat does not have" in error
    assert Chat.objects.get(pk=chat_id).last_seq == 2 and not TurnDiff.objects.exists()


def test_a_resume_that_failed_on_the_host_says_so_and_offers_resume_again(host, as_approver):
    run, first = host_run(host, as_approver)
    gone(host, run)
    assert post(as_approver, run, "resume")[0] == 200
    [asked] = starts_sent()
    again = Start.model_validate_json(asked["text"])
    hosts.exited(host.pk, Exited(id=again.id, code=8))  # the agent could not take it up
    page = as_approver.get(f"/chats/{first.chat_id}/").content.decode()
    assert "The last resume on <bdi>build-box</bdi> failed: the runner exited with code 8" in page
    assert 'class="run-control resume-run drive-control"' in page  # try again


def test_a_turn_a_resume_ended_is_never_reopened_by_a_later_hello_or_heartbeat(acme):
    token, _ = AgentToken.issue(acme, "laptop")
    chat_id, attempt = uuid.uuid4(), uuid.uuid4()
    presence.claim(acme.pk, chat_id, RUNNER, 0, SECRET, token.pk)
    assert said(chat_id, frames.turn_started(1, attempt, uuid.uuid4())) == []
    presence.disconnect(chat_id, RUNNER)
    mine = "n" * 43
    presence.claim(acme.pk, chat_id, "specific.test!2", 1, SECRET, token.pk, mine)
    presence.disconnect(chat_id, "specific.test!2")  # a blip, then the same runner again
    presence.claim(acme.pk, chat_id, "specific.test!3", 1, mine, token.pk)
    presence.alive(chat_id, "specific.test!3")
    lost = InferenceAttempt.objects.get(pk=attempt)
    assert (lost.stop_reason, lost.ended_at is not None) == ("runner_replaced", True)


def test_a_turn_a_sweep_ended_before_a_resume_stays_ended_after_it(acme):
    token, _ = AgentToken.issue(acme, "laptop")
    chat_id, attempt = uuid.uuid4(), uuid.uuid4()
    presence.claim(acme.pk, chat_id, RUNNER, 0, SECRET, token.pk)
    assert said(chat_id, frames.turn_started(1, attempt, uuid.uuid4())) == []
    presence.disconnect(chat_id, RUNNER)
    presence.abandon(chat_id, frames.T0)  # the grace passed: the turn is runner_lost
    presence.claim(acme.pk, chat_id, "specific.test!2", 1, SECRET, token.pk, "n" * 43)
    presence.disconnect(chat_id, "specific.test!2")
    presence.claim(acme.pk, chat_id, "specific.test!3", 1, "n" * 43, token.pk)
    assert InferenceAttempt.objects.get(pk=attempt).stop_reason == "runner_replaced"


def test_a_resumes_new_token_outlives_the_sweep_until_its_runner_says_hello(host, as_approver):
    from datetime import timedelta

    from django.conf import settings

    from activity.live import run_tokens

    run, first = host_run(host, as_approver)
    gone(host, run)
    Chat.objects.filter(pk=first.chat_id).update(
        runner_left_at=timezone.now() - timedelta(seconds=settings.RUNNER_GRACE_SECONDS * 3)
    )
    assert post(as_approver, run, "resume")[0] == 200
    [asked] = starts_sent()
    resumed = Start.model_validate_json(asked["text"])
    run_tokens.sweep()
    token = AgentToken.find(resumed.token)
    assert token is not None and token.revoked_at is None


def test_messages_wait_while_a_run_is_stopped_and_go_once_it_is_resumed(host, as_approver):
    run, first = host_run(host, as_approver)
    as_approver.post(f"/chats/{first.chat_id}/stop", HTTP_HX_REQUEST="true")
    to_runner(first.chat_id)
    as_approver.post(f"/chats/{first.chat_id}/messages", {"text": "later"}, HTTP_HX_REQUEST="1")
    [message] = WebPrompt.objects.filter(chat_id=first.chat_id, text="later")
    assert message.status == "queued" and to_runner(first.chat_id) == []  # not to the stopping one

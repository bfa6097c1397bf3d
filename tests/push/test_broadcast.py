"""Pushes: rendered once, immediate, chained by version, never queued behind a slow fan-out."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import uuid
from collections.abc import Callable

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.contrib.auth.models import User
from django.db import connections
from django.test import Client

from activity.core import groups
from activity.live import presence
from activity.live.ingest import ingest
from activity.models import Chat, Workspace
from activity.push import broadcast, pushes
from activity.review import filters
from activity.review.reads import on_page
from activity.show import dom
from activity.wire.frames import runner_frame
from tests import frames
from tests.factories import HeldPage

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
async def close_connections():
    yield
    await database_sync_to_async(connections.close_all)()


@database_sync_to_async
def new_chat() -> uuid.UUID:
    workspace = Workspace.objects.create(slug=f"w{uuid.uuid4().hex[:8]}", name="W")
    change, _ = presence.connect(workspace.pk, uuid.uuid4(), "runner")
    ingest(
        change.chat_id,
        [runner_frame.validate_python(frames.turn_started(1, uuid.uuid4(), uuid.uuid4()))],
    )
    return change.chat_id


async def apply(chat_id: uuid.UUID, *raw: dict) -> None:
    result = await database_sync_to_async(ingest)(
        chat_id, [runner_frame.validate_python(r) for r in raw]
    )
    await broadcast.announce(result.change)


async def received_on(channel: str, quiet: float) -> list[dict]:
    layer = get_channel_layer()
    received: list[dict] = []
    while True:
        try:
            event = await asyncio.wait_for(layer.receive(channel), quiet)
        except TimeoutError:
            return received
        received.append(json.loads(event["text"]))


async def subscribe(chat_id: uuid.UUID) -> str:
    layer = get_channel_layer()
    channel: str = await layer.new_channel()
    await layer.group_add(groups.chat(chat_id), channel)
    return channel


async def test_a_change_to_an_idle_chat_is_pushed_at_once():
    chat_id = await new_chat()
    channel = await subscribe(chat_id)
    await apply(chat_id, frames.tool_call(2, "c1", "Read a.py", status="pending"))
    event = await asyncio.wait_for(get_channel_layer().receive(channel), 0.2)
    assert "Read a.py" in json.loads(event["text"])["content"]


async def test_a_change_after_a_push_is_out_goes_out_at_once():
    chat_id = await new_chat()
    channel = await subscribe(chat_id)
    layer = get_channel_layer()
    await apply(chat_id, frames.tool_call(2, "c1", "Read a.py", status="pending"))
    first = json.loads((await asyncio.wait_for(layer.receive(channel), 0.5))["text"])
    await apply(chat_id, frames.tool_update(3, "c1", status="completed"))
    second = json.loads((await asyncio.wait_for(layer.receive(channel), 0.5))["text"])
    assert second["from"] == first["to"] and "Succeeded" in second["content"]


async def a_second_push_behind_a_held_one(
    chat_id: uuid.UUID,
) -> tuple[str, HeldPage, asyncio.Task[None]]:
    """A viewer here holds the first push; the second change is being pushed meanwhile."""
    channel = await subscribe(chat_id)
    page = HeldPage()
    await broadcast.join(chat_id, page)
    await apply(chat_id, frames.tool_call(2, "c1", "step 2", status="pending"))
    second = asyncio.create_task(apply(chat_id, frames.tool_update(3, "c1", title="step 3")))
    return channel, page, second


async def test_a_push_waits_for_this_processs_viewers_to_have_the_last_one(monkeypatch):
    monkeypatch.setattr(broadcast, "HAND_ON_WAIT", 5)
    chat_id = await new_chat()
    channel, page, second = await a_second_push_behind_a_held_one(chat_id)
    try:
        first = await received_on(channel, quiet=0.3)
        assert len(first) == 1 and not second.done()  # held: the viewer has not got the first
        page.release.set()
        await asyncio.wait_for(second, 2)
        assert "step 3" in (await received_on(channel, quiet=0.3))[0]["content"]
    finally:
        page.release.set()
        await broadcast.leave(chat_id, page)


async def test_a_viewer_that_never_takes_a_push_holds_the_next_for_a_moment_only(monkeypatch):
    monkeypatch.setattr(broadcast, "HAND_ON_WAIT", 0.2)
    chat_id = await new_chat()
    channel = await subscribe(chat_id)
    page = HeldPage()  # never released
    await broadcast.join(chat_id, page)
    try:
        await apply(chat_id, frames.tool_call(2, "c1", "step 0", status="pending"))
        await asyncio.wait_for(apply(chat_id, frames.tool_update(3, "c1", title="step 3")), 2)
        received = await received_on(channel, quiet=0.5)
    finally:
        page.release.set()
        await broadcast.leave(chat_id, page)
    assert "step 3" in received[-1]["content"]


def test_a_push_looks_only_for_the_kinds_that_changed_and_misses_none():
    from django.db import connection
    from django.db.models import F
    from django.test.utils import CaptureQueriesContext

    from activity.models import Chat

    chat_id = async_to_sync(new_chat)()

    def step(*raw: dict) -> int:
        return ingest(chat_id, [runner_frame.validate_python(r) for r in raw]).change.since

    def render(since: int) -> tuple[str, int]:
        with CaptureQueriesContext(connection) as queries:
            html, _ = pushes.render_changes(chat_id, since)
        return html, len(queries)

    def every_kind_changed_at_the_last_version() -> None:
        version = F("version")
        Chat.objects.filter(pk=chat_id).update(
            turns_version=version,
            replies_version=version,
            rows_version=version,
            facets_version=version,
        )

    def filter_bar_queries() -> int:
        version = Chat.objects.get(pk=chat_id).version
        with CaptureQueriesContext(connection) as queries:
            filters.panel(chat_id, filters.unfiltered(), version, on_page)
        return len(queries)

    start = step(frames.tool_call(2, "c1", "Read a.py", status="pending"))
    text_since = step(frames.say(3, "Reading."))
    text, text_queries = render(text_since)
    assert "Reading." in text and "Read a.py" not in text and "run-filter" not in text
    every_kind_changed_at_the_last_version()
    looked, looked_queries = render(text_since)
    # It looked for turns and rows too, and drew the filter bar again: a row may have changed.
    assert looked.startswith(text) and 'id="run-filter"' in looked.removeprefix(text)
    assert looked_queries == text_queries + 2 + filter_bar_queries() <= text_queries + 6
    row_since = step(frames.tool_update(4, "c1", status="completed"))
    row, row_queries = render(row_since)
    assert "Succeeded" in row and "Reading." not in row
    both, _ = render(start)  # a page further behind gets both
    assert "Reading." in both and "Succeeded" in both
    every_kind_changed_at_the_last_version()
    assert render(row_since) == (row, row_queries + 2)  # it looked for turns and replies too


def test_a_push_draws_the_filter_bar_only_when_what_it_counts_changed():
    chat_id = async_to_sync(new_chat)()

    def pushed(*raw: dict) -> str:
        since = ingest(chat_id, [runner_frame.validate_python(r) for r in raw]).change.since
        html, _ = pushes.render_changes(chat_id, since)
        return html

    assert 'id="run-filter"' in pushed(frames.tool_call(2, "c1", "Run pytest", kind="execute"))
    retitled = pushed(frames.tool_update(3, "c1", title="Run pytest -q"))  # counts the same
    assert "Run pytest -q" in retitled and 'id="run-filter"' not in retitled
    output = pushed(
        frames.tool_update(
            4, "c1", content=[{"type": "content", "content": {"type": "text", "text": "1 passed"}}]
        )
    )
    assert "1 passed" in output and 'id="run-filter"' not in output
    failed = pushed(frames.tool_update(5, "c1", status="failed"))  # a status: counted
    assert 'id="run-filter"' in failed and "failed <span" in failed.split('id="run-filter"')[1]
    asked = pushed(frames.permission(6, 1, "c1", "Run pytest -q"))  # a prompt: the jump to it
    assert 'id="run-filter"' in asked and "jump-prompt" in asked


def test_a_chat_written_by_code_without_kind_versions_pushes_every_kind():
    from activity.models import Chat

    chat_id = async_to_sync(new_chat)()
    since = ingest(
        chat_id, [runner_frame.validate_python(frames.tool_call(2, "c1", "Read a.py"))]
    ).change.since
    Chat.objects.filter(pk=chat_id).update(  # as an older process would have left it
        meta_version=0, turns_version=0, replies_version=0, rows_version=0
    )
    html, _ = pushes.render_changes(chat_id, since)
    assert "Read a.py" in html


async def test_a_push_does_not_wait_for_a_room_that_has_not_joined_the_group_yet(monkeypatch):
    monkeypatch.setattr(broadcast, "HAND_ON_WAIT", 5)
    chat_id = await new_chat()
    joining = broadcast.Room(chat_id)  # its first viewer is still being let in
    monkeypatch.setitem(broadcast._rooms, chat_id, joining)
    await asyncio.wait_for(apply(chat_id, frames.tool_call(2, "c1", "step 2")), 2)
    await asyncio.wait_for(apply(chat_id, frames.tool_update(3, "c1", title="step 3")), 2)


async def test_a_push_waiting_on_a_room_goes_out_when_its_last_viewer_leaves(monkeypatch):
    monkeypatch.setattr(broadcast, "HAND_ON_WAIT", 5)
    chat_id = await new_chat()
    channel, page, second = await a_second_push_behind_a_held_one(chat_id)
    try:
        await asyncio.sleep(0.2)
        await broadcast.leave(chat_id, page)  # the tab closed with a push in its hands
        await asyncio.wait_for(second, 2)
    finally:
        page.release.set()
    assert "step 3" in (await received_on(channel, quiet=0.3))[-1]["content"]


# --- no push is too big ----------------------------------------------------------------------

VOID = {"area", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}


class Node:
    def __init__(self, tag: str, attrs: dict[str, str | None]) -> None:
        self.tag, self.attrs = tag, attrs
        self.children: list[Node | str] = []

    def __str__(self) -> str:
        shown = {k: v for k, v in self.attrs.items() if k != "hx-swap-oob"}
        attrs = "".join(f' {k}="{v}"' if v is not None else f" {k}" for k, v in shown.items())
        if self.tag in VOID:  # an <input> of the filter bar has no end tag
            return f"<{self.tag}{attrs}>"
        return f"<{self.tag}{attrs}>{''.join(map(str, self.children))}</{self.tag}>"

    def find(self, element_id: str) -> tuple[Node, int] | None:
        """The parent of the element with this id, and its place there."""
        for i, child in enumerate(self.children):
            if isinstance(child, Node):
                if child.attrs.get("id") == element_id:
                    return self, i
                found = child.find(element_id)
                if found:
                    return found
        return None


def parse(html: str) -> Node:
    from html.parser import HTMLParser

    root = Node("root", {})
    stack = [root]

    class Builder(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            node = Node(tag, dict(attrs))
            stack[-1].children.append(node)
            if tag not in VOID:
                stack.append(node)

        def handle_endtag(self, tag: str) -> None:
            while stack[-1].tag != tag:
                stack.pop()
            stack.pop()

        def handle_data(self, data: str) -> None:
            stack[-1].children.append(data)

    Builder(convert_charrefs=False).feed(html)
    return root


def oob(node: Node) -> list[Node]:
    """The out-of-band elements of a push, as htmx finds them (not inside one another)."""
    if "hx-swap-oob" in node.attrs:
        return [node]
    return [found for child in node.children if isinstance(child, Node) for found in oob(child)]


def apply_push(page: Node, content: str) -> None:
    """What htmx does with a push's out-of-band fragments: it looks up every target on the page
    first, then swaps; a target the page lacks is skipped without a word (asserted here)."""
    swaps = []
    for element in oob(parse(content)):
        how = element.attrs["hx-swap-oob"] or ""
        target_id = element.attrs["id"] if how == "outerMorph" else how.removeprefix("beforeend:#")
        assert how == "outerMorph" or how.startswith("beforeend:#"), how
        found = page.find(target_id or "")
        assert found, f"no #{target_id} on the page before the push"
        swaps.append((how, element, *found))
    for how, element, parent, i in swaps:
        if how == "outerMorph":
            parent.children[i] = element
        else:
            target = parent.children[i]
            assert isinstance(target, Node)
            target.children += element.children


def blank_page() -> Node:
    return parse(
        '<section id="chat-head"></section><section id="run-filter"></section>'
        '<div id="turns"></div><section id="drive"></section>'
    )


def built_by(page: Node, texts: list[str], since: int) -> tuple[str, int]:
    """The page the pushes build, applied in order as live.js does: each starts where the page
    stands, the parts of one change one after the other."""
    shown, part = since, 0
    for text in texts:
        push = json.loads(text)
        assert push["from"] == shown and push["to"] > shown
        if "parts" in push:
            assert push["part"] == part + 1
            part = push["part"]
        apply_push(page, push["content"])
        if push.get("parts", 1) == part or "parts" not in push:
            shown, part = push["to"], 0
    assert part == 0, "the last part never came"
    return str(page), shown


def many_calls(first_seq: int, count: int, turn: str = "") -> list[dict]:
    return [
        frames.tool_call(
            first_seq + n,
            f"call{turn}_{n}",
            f"Read src/module_{n}.py",
            kind="read",
            status="pending",
            rawInput={"path": f"src/module_{n}.py", "why": "ä < b & 'c' " * 20},
        )
        for n in range(count)
    ]


def test_a_change_many_times_the_bound_arrives_in_parts_whose_versions_chain_into_the_same_page(
    settings,
):
    settings.PUSH_MAX_BYTES = 4_000
    chat_id = async_to_sync(new_chat)()
    ingest(chat_id, [runner_frame.validate_python(f) for f in many_calls(2, 40)])

    single, version = pushes.render_changes(chat_id, 0)  # what one push would have carried
    assert len(pushes.push_text(0, version, single)) > 10 * settings.PUSH_MAX_BYTES
    texts = pushes.render_push(chat_id, 0)

    assert len(texts) > 10
    assert all(len(text.encode()) <= settings.PUSH_MAX_BYTES for text in texts)
    parts = [json.loads(text) for text in texts]
    assert [(p["from"], p["to"], p["part"], p["parts"]) for p in parts] == [
        (0, version, k, len(texts)) for k in range(1, len(texts) + 1)
    ]
    from_parts, shown = built_by(blank_page(), texts, 0)
    assert shown == version
    assert from_parts == built_by(blank_page(), [pushes.push_text(0, version, single)], 0)[0]
    assert from_parts.count('<tr id="tool-') == 40


def test_changed_and_new_rows_of_a_turn_the_page_shows_arrive_in_parts_that_build_the_same_page(
    settings,
):
    settings.PUSH_MAX_BYTES = 4_000
    chat_id = async_to_sync(new_chat)()
    ingest(chat_id, [runner_frame.validate_python(f) for f in many_calls(2, 10)])
    page_then = blank_page()
    _, since = built_by(page_then, pushes.render_push(chat_id, 0), 0)

    burst = [frames.tool_update(12 + n, f"call_{n}", status="completed") for n in range(10)]
    burst += many_calls(22, 30, turn="b") + [frames.say(52, "Read them all. " * 50)]
    ingest(chat_id, [runner_frame.validate_python(f) for f in burst])
    texts = pushes.render_push(chat_id, since)
    single, version = pushes.render_changes(chat_id, since)

    assert len(texts) > 3 and all(len(t) <= settings.PUSH_MAX_BYTES for t in texts)
    from_parts, shown = built_by(parse(str(page_then)), texts, since)
    at_once, _ = built_by(parse(str(page_then)), [pushes.push_text(since, version, single)], since)
    assert shown == version and from_parts == at_once
    assert from_parts.count(">Succeeded<") == 10 and from_parts.count('<tr id="tool-') == 40


def test_a_new_turn_in_parts_reaches_the_page_with_every_call_it_brought(settings):
    """Two turns: the second starts and makes its calls while the page looks away; the parts
    that bring it bring every one of its calls, not only those after its section's part."""
    settings.PUSH_MAX_BYTES = 12_000  # a turn's section and a few calls fit in one part
    chat_id = async_to_sync(new_chat)()
    attempt = uuid.uuid4()
    ingest(chat_id, [runner_frame.validate_python(f) for f in many_calls(2, 5)])
    page_then = blank_page()
    _, since = built_by(page_then, pushes.render_push(chat_id, 0), 0)

    burst = [frames.turn_ended(7, Chat.objects.get(pk=chat_id).attempts.get().pk)]
    burst += [frames.turn_started(8, attempt, uuid.uuid4(), prompt="Now the slow tests")]
    burst += many_calls(9, 30, turn="b")
    ingest(chat_id, [runner_frame.validate_python(f) for f in burst])
    texts = pushes.render_push(chat_id, since)
    single, version = pushes.render_changes(chat_id, since)

    assert len(texts) > 3 and all(len(t) <= settings.PUSH_MAX_BYTES for t in texts)
    from_parts, shown = built_by(parse(str(page_then)), texts, since)
    at_once, _ = built_by(parse(str(page_then)), [pushes.push_text(since, version, single)], since)
    assert shown == version and from_parts == at_once
    assert from_parts.count('<tr id="tool-') == 35


def regions_of(html: str) -> dict[str, str]:
    """Each region of a chat page (activity/show/dom.py, REGIONS) as it stands: what differs between
    viewers left out (a form's CSRF token on a page, the link to its own page in a push) and
    the whitespace between elements, which no one sees."""
    page, drawn = parse(html), {}
    for region in dom.REGIONS:
        found = page.find(region)
        assert found, f"no #{region}"
        parent, i = found
        text = str(parent.children[i])
        text = re.sub(r'<input type="hidden" name="csrfmiddlewaretoken" value="[^"]*">', "", text)
        text = re.sub(r'<a class="own-page" href="[^"]*">[^<]*</a>', "", text)
        drawn[region] = re.sub(r">\s+<", "><", text)
    return drawn


def test_a_catch_up_from_nothing_draws_every_region_as_a_fresh_page_does():
    chat_id = async_to_sync(new_chat)()
    attempt = Chat.objects.get(pk=chat_id).attempts.get().pk
    plan = {"content": "Find the flaky test", "priority": "high", "status": "in_progress"}
    usage = {"sessionUpdate": "usage_update", "used": 12_345, "size": 200_000}
    raw = [
        frames.update(2, {"sessionUpdate": "plan", "entries": [plan]}),
        frames.update(3, {**usage, "cost": {"amount": 0.5, "currency": "USD"}}),
        frames.tool_call(4, "c1", "Read a.py", kind="read", status="completed"),
        frames.tool_call(5, "c2", "Run pytest", kind="execute", status="failed"),
        frames.tool_call(6, "c3", "Run rm -rf build", kind="execute"),
        frames.permission(7, 1, "c3", "Run rm -rf build"),
        frames.say(8, "The clock is **mocked** twice."),
    ]
    ingest(chat_id, [runner_frame.validate_python(f) for f in raw])
    client = Client()
    client.force_login(User.objects.create_superuser("root"))

    waiting = []
    for step in ([], [frames.outcome(9, 1, "reject")], [frames.turn_ended(10, attempt)]):
        ingest(chat_id, [runner_frame.validate_python(f) for f in step])
        page, version = built_by(blank_page(), pushes.render_push(chat_id, 0), 0)
        fresh = client.get(f"/chats/{chat_id}/").content.decode()
        assert f'data-version="{version}"' in fresh
        drawn = regions_of(page)
        assert drawn == regions_of(fresh)
        assert "Jump to the next failure" in drawn["run-filter"] and "$0.50" in drawn["chat-head"]
        assert "Find the flaky test" in drawn["turns"] and "<strong>mocked</strong>" in page
        waiting.append("waiting for a person" in drawn["run-filter"])
    assert waiting == [True, False, False]


def test_a_change_that_fits_is_one_push_rendered_once_as_before(settings, monkeypatch):
    settings.PUSH_MAX_BYTES = 8_000  # a turn with one call: about 4 kB
    chat_id = async_to_sync(new_chat)()
    ingest(chat_id, [runner_frame.validate_python(f) for f in many_calls(2, 1)])
    split: list[tuple] = []

    def splitting(*args: object) -> list[str]:
        split.append(args)
        return []

    monkeypatch.setattr(pushes, "split", splitting)
    (text,) = pushes.render_push(chat_id, 0)
    html, version = pushes.render_changes(chat_id, 0)
    assert text == pushes.push_text(0, version, html) and not split


def test_a_fragment_no_push_can_carry_tells_the_page_to_fetch_its_regions(settings):
    settings.PUSH_MAX_BYTES = 4_000
    chat_id = async_to_sync(new_chat)()
    since = ingest(
        chat_id, [runner_frame.validate_python(frames.say(2, "A long reply. " * 1_000))]
    ).change.since
    (text,) = pushes.render_push(chat_id, since)
    push = json.loads(text)
    assert push == {"from": since, "to": push["to"], "reload": True} and push["to"] > since


async def test_a_change_in_parts_reaches_this_processs_viewers_in_order(settings):
    settings.PUSH_MAX_BYTES = 4_000
    chat_id = await new_chat()
    channel = await subscribe(chat_id)
    page = HeldPage()
    page.release.set()
    got: list[str] = []

    async def deliver(text: str) -> None:
        got.append(text)

    page.deliver = deliver  # type: ignore[method-assign]
    await broadcast.join(chat_id, page)
    try:
        await apply(chat_id, *many_calls(2, 40))
        sent = await received_on(channel, quiet=0.3)
        for _ in range(50):
            if len(got) == len(sent):
                break
            await asyncio.sleep(0.02)
    finally:
        await broadcast.leave(chat_id, page)
    assert len(sent) == 1  # one message on the channel layer: its parts travel together
    parts = [json.loads(text) for text in got]
    assert [p["part"] for p in parts] == list(range(1, len(parts) + 1)) and len(parts) > 10
    assert all(len(text) <= settings.PUSH_MAX_BYTES for text in got)


class GonePage(HeldPage):
    """A viewer whose socket is gone: every push to it fails."""

    async def deliver(self, text: str) -> None:
        raise OSError("the socket is closed")


async def test_a_viewer_whose_socket_fails_is_dropped_and_the_others_get_every_push():
    chat_id = await new_chat()
    gone, kept = GonePage(), HeldPage()
    kept.release.set()
    got: list[str] = []

    async def deliver(text: str) -> None:
        got.append(text)

    kept.deliver = deliver  # type: ignore[method-assign]
    await broadcast.join(chat_id, gone)
    await broadcast.join(chat_id, kept)
    try:
        await apply(chat_id, frames.tool_call(2, "c1", "step 2"))
        await apply(chat_id, frames.tool_update(3, "c1", title="step 3"))
        for _ in range(50):
            if len(got) == 2:
                break
            await asyncio.sleep(0.02)
        assert broadcast._rooms[chat_id].viewers == {kept}
        assert "step 3" in json.loads(got[-1])["content"]
    finally:
        await broadcast.leave(chat_id, kept)
    assert chat_id not in broadcast._rooms


async def test_a_room_whose_last_viewer_is_gone_closes_and_leaves_its_group():
    chat_id = await new_chat()
    await broadcast.join(chat_id, GonePage())
    room = broadcast._rooms[chat_id]
    await apply(chat_id, frames.tool_call(2, "c1", "step 2"))
    for _ in range(50):
        if room.closed:
            break
        await asyncio.sleep(0.02)
    assert room.closed and chat_id not in broadcast._rooms
    assert room.channel not in get_channel_layer().groups.get(groups.chat(chat_id), {})


# --- a room's heartbeat --------------------------------------------------------------------


class Listening(HeldPage):
    """A viewer here that takes every message, a moment over each (``slow`` s)."""

    def __init__(self, slow: float = 0) -> None:
        super().__init__()
        self.slow = slow
        self.got: list[dict] = []

    async def deliver(self, text: str) -> None:
        self.got.append(json.loads(text))
        await asyncio.sleep(self.slow)

    async def until(self, what: str, done: Callable[[list[dict]], bool]) -> None:
        for _ in range(250):
            if done(self.got):
                return
            await asyncio.sleep(0.02)
        raise AssertionError(f"{what} never came; the last messages: {self.got[-5:]}")

    async def told(self, version: int) -> None:
        """Until the room's heartbeat has told this viewer the chat is at ``version``."""
        beacon = {"from": version, "to": version, "content": ""}
        await self.until(f"a heartbeat at {version}", lambda got: beacon in got)

    async def pushed_then_told(self, version: int) -> None:
        """Until the push to ``version`` has come, its last part too, and a heartbeat after."""
        beacon = {"from": version, "to": version, "content": ""}

        def done(got: list[dict]) -> bool:
            last = [
                i
                for i, push in enumerate(got)
                if push["to"] == version
                and push["content"]
                and push.get("part") == push.get("parts")
            ]
            return bool(last) and beacon in got[last[-1] :]

        await self.until(f"the push to {version}, then a heartbeat", done)


@database_sync_to_async
def version_now(chat_id: uuid.UUID) -> int:
    return Chat.objects.get(pk=chat_id).version


async def test_a_heartbeat_reaches_a_viewer_between_pushes_never_amid_the_parts_of_one(settings):
    settings.PUSH_MAX_BYTES = 4_000
    settings.WATCHING_HEARTBEAT_SECONDS = 0.01  # many beats while the parts are handed on
    chat_id = await new_chat()
    page = Listening(slow=0.005)
    await broadcast.join(chat_id, page)
    try:
        await apply(chat_id, *many_calls(2, 40))
        await page.pushed_then_told(await version_now(chat_id))
    finally:
        await broadcast.leave(chat_id, page)
    parts = [i for i, push in enumerate(page.got) if "parts" in push]
    assert len(parts) > 10 and parts == list(range(parts[0], parts[0] + len(parts)))
    assert all(push["content"] == "" for push in page.got[: parts[0]] + page.got[parts[-1] + 1 :])


async def test_a_heartbeat_that_fails_is_logged_and_tried_again_at_the_next(
    settings, monkeypatch, caplog
):
    settings.WATCHING_HEARTBEAT_SECONDS = 0.01
    chat_id = await new_chat()
    page = Listening()
    await broadcast.join(chat_id, page)
    room = broadcast._rooms[chat_id]
    layer = get_channel_layer()
    group_add, version_of = layer.group_add, broadcast.version_of
    faults = {"group_add": 1, "version_of": 1}

    async def away(group: str, channel: str) -> None:
        if faults["group_add"]:
            faults["group_add"] -= 1
            raise ConnectionError("Redis is away")
        await group_add(group, channel)

    def database_away(chat_id: uuid.UUID) -> int | None:
        if faults["version_of"]:
            faults["version_of"] -= 1
            raise ConnectionError("the database is away")
        return version_of(chat_id)

    monkeypatch.setattr(layer, "group_add", away)
    monkeypatch.setattr(broadcast, "version_of", database_away)
    try:
        with caplog.at_level(logging.WARNING, logger="activity.push.broadcast"):
            await page.told(await version_now(chat_id))
        assert faults == {"group_add": 0, "version_of": 0}
        assert caplog.text.count("missed a heartbeat") == 2
        assert broadcast._rooms[chat_id] is room and not room.task.done()  # type: ignore[union-attr]
        await apply(chat_id, frames.tool_call(2, "c1", "Read a.py", status="pending"))
        await page.pushed_then_told(await version_now(chat_id))  # the room went on
    finally:
        await broadcast.leave(chat_id, page)


async def test_a_rooms_heartbeat_ends_with_the_room():
    chat_id = await new_chat()
    page = Listening()
    await broadcast.join(chat_id, page)
    room = broadcast._rooms[chat_id]
    assert room.beating is not None and not room.beating.done()
    await broadcast.leave(chat_id, page)  # the last viewer left: the room closed
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.wait_for(room.beating, 2)
    assert room.beating.cancelled()
    assert room.channel not in get_channel_layer().groups.get(groups.chat(chat_id), {})

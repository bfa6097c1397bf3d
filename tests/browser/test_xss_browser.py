"""Nothing an agent or a person writes runs in a reader's browser.

A corpus of XSS payload classes goes into every field an agent or a user controls, through the
real paths (the runner's socket, the page's own forms and POSTs), and every page that shows them
is opened in Chromium with four sentinels: a dialog (``alert``), a request to a tiny HTTP server
of the test's own (the payloads fetch ``/hit?<n>`` from it), ``window.__xss`` (the payloads set
it), and the DOM itself: no element may carry an event handler, a ``javascript:`` URL, an
``srcdoc``, an htmx attribute or a style an agent wrote. CSP violations count too: a payload
the CSP stopped was still markup that should have been text.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlencode

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Page, expect

from activity.models import AgentToken, Chat, Membership, Prompt, Role, ToolActivity, Workspace
from activity.review import shares
from activity.review.mentions import add_comment
from activity.review.reads import on_page
from tests import frames
from tests.browser.helpers import Live, Team, open_chat, password_hash, sign_in
from tests.browser.runner import Runner
from tests.liveserver import Server

pytestmark = [pytest.mark.django_db(transaction=True)]

# {n}: the payload's number; {url}: the sentinel server's /hit?{n}. A handler sets
# window.__xss or calls alert; a URL payload fetches the sentinel.
CORPUS = [
    # script tags
    "<script>window.__xss={n}</script>",
    '<script src="{url}"></script>',
    "<ScRiPt>alert({n})</sCrIpT>",
    # event-handler attributes
    "<img src=x onerror=window.__xss={n}>",
    '<img src="{url}">',
    "<body onload=alert({n})>",
    "<details open ontoggle=window.__xss={n}>x</details>",
    "<input autofocus onfocus=window.__xss={n}>",
    # javascript: URLs, in Markdown and in HTML
    "[click me](javascript:window.__xss={n})",
    "![image](javascript:alert({n}))",
    "![image]({url})",
    "<javascript:alert({n})>",
    "[entity](jav&#x61;script:alert({n}))",
    '[title](http://example.com "t\\" onmouseover=alert({n}) x=\\"")',
    "[data](data:text/html,<script>alert({n})</script>)",
    '<a href="javascript:window.__xss={n}">x</a>',
    '<form action="javascript:alert({n})"><button>go</button></form>',
    # SVG and MathML with handlers
    "<svg onload=window.__xss={n}>",
    "<svg><animate onbegin=window.__xss={n} attributeName=x dur=1s></animate></svg>",
    '<svg><a xlink:href="javascript:alert({n})"><text y="20">x</text></a></svg>',
    "<math><mtext><table><mglyph><style><img src=x onerror=window.__xss={n}>",
    '<math href="javascript:alert({n})">x</math>',
    # frames and objects
    '<iframe srcdoc="<script>parent.__xss={n}</script>"></iframe>',
    '<iframe src="{url}"></iframe>',
    '<object data="{url}"></object><embed src="{url}">',
    '<meta http-equiv="refresh" content="0;url=javascript:alert({n})">',
    '<base href="{url}"><link rel=stylesheet href="{url}">',
    # htmx attributes written as text
    '<div hx-get="{url}" hx-trigger="load">x</div>',
    '<div hx-on::load="window.__xss={n}" hx-on:htmx:load="window.__xss={n}">x</div>',
    '<div id="live" hx-swap-oob="beforeend:body"><img src="{url}"></div>',
    '<div hx-swap-oob="true" id="chat-head"><img src=x onerror=window.__xss={n}></div>',
    # template injection
    "{{{{ csp_nonce }}}}{{% debug %}}<img src=x onerror=window.__xss={n}>",
    "{{% if 1 %}}<script>window.__xss={n}</script>{{% endif %}}",
    # CSS
    '<div style="background:url(javascript:alert({n}))">x</div>',
    '<div style="width:expression(alert({n}))">x</div>',
    "<style>@import '{url}';</style>",
    '<div style="background-image:url({url})">x</div>',
    # entity and unicode-escape variants
    "&lt;img src=x onerror=window.__xss={n}&gt;",
    "&#60;script&#62;window.__xss={n}&#60;/script&#62;",
    '<a href="&#106;avascript:alert({n})">x</a>',
    "\\u003cimg src=x onerror=window.__xss={n}\\u003e",
    "\uff1cscript\uff1ewindow.__xss={n}\uff1c/script\uff1e",
    # breakouts: textarea, script, comment, title
    "</textarea><img src=x onerror=window.__xss={n}>",
    "</script><script>window.__xss={n}</script>",
    "--><img src=x onerror=window.__xss={n}><!--",
    "</title><img src=x onerror=window.__xss={n}>",
    # attribute breakouts
    '"><svg onload=window.__xss={n}>',
    "'><svg onload=window.__xss={n}>",
    '" autofocus onfocus=window.__xss={n} x="',
    "' onmouseover=alert({n}) x='",
    # JSON breakouts (data- attributes, hx-vals, a push's JSON)
    '"}}]</script><img src=x onerror=window.__xss={n}>',
    '","x":"<img src=x onerror=window.__xss={n}>',
    '\\"}};window.__xss={n};//',
]

DOM_SCAN = """(port) => {
  const bad = [];
  const marker = new RegExp("__xss|/hit\\\\?|:" + port, "i");
  const scheme = /^[\\s\\u0000-\\u001f]*(javascript|vbscript|data)\\s*:/i;
  const urls = ["href", "src", "action", "formaction", "xlink:href", "data", "poster", "srcset"];
  // Where a payload may stand as escaped text (a class too: plan-<status> is the agent's).
  const text = ["value", "title", "aria-label", "placeholder", "content", "class"];
  const foreign = ["iframe", "frame", "object", "embed", "base", "math", "animate", "set",
                   "img", "body > style", "applet", "portal"];
  for (const el of document.querySelectorAll(foreign.join(","))) {
    bad.push("element <" + el.localName + ">: " + el.outerHTML.slice(0, 120));
  }
  for (const el of document.querySelectorAll("body style, body link, body meta, body script")) {
    if (el.localName === "script" && el.nonce) continue;
    bad.push("element <" + el.localName + "> in the body: " + el.outerHTML.slice(0, 120));
  }
  for (const el of document.querySelectorAll("svg")) {
    if (!el.classList.contains("timeline-svg")) bad.push("an <svg>: " + el.outerHTML.slice(0, 120));
  }
  for (const el of document.querySelectorAll("*")) {
    if (el.matches('head > link[rel=icon][href="data:,"]')) continue;  // base.html's no-favicon
    for (const attr of el.attributes) {
      const name = attr.name.toLowerCase(), value = attr.value;
      const shown = JSON.stringify(value.slice(0, 80));
      const where = "<" + el.localName + " " + name + "=" + shown + ">";
      if (!/^[a-z][a-z0-9:._-]*$/.test(name)) bad.push("a broken-out attribute " + where);
      else if (name.startsWith("on")) bad.push("a handler " + where);
      else if (name === "srcdoc") bad.push("srcdoc " + where);
      else if (name.startsWith("hx-on")) bad.push("hx-on " + where);
      else if (urls.includes(name)) {
        let origin = "";
        try { origin = new URL(value, location.href).origin; } catch (e) { origin = "bad"; }
        const sentinel = origin === "bad" || origin.endsWith(":" + port);
        if (scheme.test(value) || sentinel) bad.push("a URL " + where);
      }
      else if (name === "style") bad.push("a style attribute " + where);
      else if (!text.includes(name) && !name.startsWith("data-") && marker.test(value))
        bad.push("an attribute with a payload " + where);
    }
  }
  return bad;
}"""

WATCH_CSP = """
window.__csp = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__csp.push(e.violatedDirective + " " + e.blockedURI + " " + (e.sample || ""));
});
"""


SETTLED = """() => new Promise((settled) =>
  requestAnimationFrame(() => requestAnimationFrame(() => setTimeout(settled))))"""


def payloads(port: int) -> list[str]:
    url = f"http://127.0.0.1:{port}/hit"
    return [p.format(n=n, url=f"{url}?{n}") for n, p in enumerate(CORPUS, start=1)]


# --- the sentinels ---------------------------------------------------------------------------


@dataclass
class Sentinel:
    """A tiny HTTP server that records every request, and a page's dialogs and requests."""

    port: int = 0
    hits: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)

    def watch(self, page: Page) -> None:
        page.on("dialog", self._dialog)
        page.on("request", self._request)
        page.on("popup", lambda p: self.dialogs.append(f"a popup to {p.url}"))
        page.context.add_init_script(WATCH_CSP)

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()

    def _request(self, request: Any) -> None:
        if f":{self.port}" in request.url or request.url.startswith(("javascript:", "data:")):
            self.requests.append(request.url)

    def assert_nothing_ran(self, page: Page, where: str) -> None:
        page.wait_for_load_state("load")
        # Two frames after load: a late onload, an htmx "load" trigger, a swap have run.
        page.evaluate(SETTLED)
        ran = page.evaluate("() => window.__xss")
        violations = page.evaluate("() => window.__csp || []")
        injected = page.evaluate(DOM_SCAN, self.port)
        problems = {
            "window.__xss": ran,
            "dialogs": self.dialogs,
            "requests to the sentinel": self.requests,
            "hits on the sentinel server": self.hits,
            "CSP violations": violations,
            "markup injected": injected,
        }
        assert ran is None and not any(problems[k] for k in list(problems)[1:]), (
            f"on {where} ({page.url}): {json.dumps(problems, indent=1)}"
        )


@pytest.fixture
def sentinel() -> Iterator[Sentinel]:
    found = Sentinel()

    class Hit(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            found.hits.append(self.path)
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Hit)
    found.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield found
    finally:
        server.shutdown()
        server.server_close()


# --- the agent's fields ----------------------------------------------------------------------


class Seq:
    def __init__(self, start: int = 0) -> None:
        self.n = start

    def __call__(self) -> int:
        self.n += 1
        return self.n


def packed(texts: list[str], limit: int) -> list[str]:
    """The texts joined by spaces into as few strings of at most ``limit`` characters as keep
    each whole (one longer than ``limit`` is cut, alone): a field that takes one line of a
    person's tries them all in a few submissions."""
    groups: list[str] = []
    for text in texts:
        if groups and len(groups[-1]) + 1 + len(text) <= limit:
            groups[-1] += " " + text
        else:
            groups.append(text[:limit])
    return groups


def every_agent_field(runner: Runner, seq: Seq, corpus: list[str], tag: str) -> None:
    """One turn with every payload in every per-call and per-turn field, then one small turn
    per payload for the chat's own fields (title, agent name and version, mode) and its notes."""
    everything = "\n".join(corpus)
    runner.send(
        frames.turn_started(seq(), uuid.uuid4(), uuid.uuid4(), prompt=everything, title=everything)
    )
    batch: list[dict[str, Any]] = []
    for n, p in enumerate(corpus, start=1):
        call, ask = f"{tag}_call_{n}", f"{tag}_ask_{n}"
        batch += [
            frames.tool_call(
                seq(), call, p, kind="execute", name=p, status="in_progress",
                rawInput={"command": p, p: [p]},
                locations=[{"path": p, "line": 1}],
            ),
            frames.tool_update(
                seq(), call, status=p,
                content=[
                    {"type": "content", "content": {"type": "text", "text": p}},
                    {"type": "diff", "path": p, "oldText": p, "newText": f"{p}\n{p}"},
                ],
                rawOutput={"output": p, "stderr": p},
            ),
            frames.tool_update(seq(), call, status="failed", rawOutput={"error": p}),
            frames.tool_call(seq(), f"{tag}_raw_{n}", "", status="completed",
                             rawOutput={"aggregated_output": p}),
            frames.acp(seq(), {
                "jsonrpc": "2.0", "id": f"{tag}-perm-{n}", "method": "session/request_permission",
                "params": {
                    "sessionId": "s1", "title": p, "description": p,
                    "toolCall": {"toolCallId": ask, "title": p, "rawInput": {"cmd": p}},
                    "options": [
                        {"optionId": p, "name": p, "kind": "allow_once"},
                        {"optionId": "reject", "name": p, "kind": "reject_once"},
                    ],
                },
            }),
            frames.elicitation(seq(), (20_000 if tag == "live" else 10_000) + n, {
                f"q{n}": {
                    "type": "string", "title": p, "description": p,
                    "oneOf": [{"const": p, "title": p, "description": p}],
                },
                f"q{n}_custom": {"type": "string", "title": p},
                f"free{n}": {"type": "string", "title": p, "description": p},
            }, message=p),
            frames.say(seq(), f"\n\n{p}\n\n`{p}`\n\n```\n{p}\n```\n\n> {p}\n\n- {p}\n"),
            frames.update(seq(), {"sessionUpdate": "agent_thought_chunk",
                                  "content": {"type": "text", "text": f"{p}\n"}}),
        ]  # fmt: skip
    batch.append(
        frames.update(seq(), {
            "sessionUpdate": "plan",
            "entries": [{"content": p, "priority": p, "status": p} for p in corpus],
        })
    )  # fmt: skip
    runner.send(*batch)
    for p in corpus:  # the chat's own fields change with every turn; notes are per turn
        attempt = uuid.uuid4()
        start = frames.turn_started(seq(), attempt, uuid.uuid4(), prompt=p, title=p)
        start.update(agent_name=p, agent_version=p, mode=p[:100])
        runner.send(
            start,
            frames.acp(seq(), {"jsonrpc": "2.0", "method": p, "params": {}}),
            frames.acp(seq(), {"jsonrpc": "2.0", "id": f"{tag}-{p}", "method": p}),
            frames.update(seq(), {"sessionUpdate": p}),
            frames.turn_ended(seq(), attempt, stop_reason="end_turn"),
        )


# --- the test --------------------------------------------------------------------------------


def test_no_payload_in_any_field_an_agent_or_a_person_controls_runs_on_any_page(
    page: Page, live: Live, server: Server, team: Team, runner: Runner, sentinel: Sentinel
):
    corpus = payloads(sentinel.port)
    root = User.objects.create(username="root", password=password_hash(), is_superuser=True)
    workspace = team.workspace
    Workspace.objects.filter(pk=workspace.pk).update(name="\n".join(corpus)[:200])
    Membership.objects.create(workspace=workspace, user=root, role=Role.ADMIN)
    seq = Seq()

    # A workspace named after each payload, with a run whose title, agent and mode are it.
    for n, p in enumerate(corpus, start=1):
        other = Workspace.objects.create(slug=f"xss-{n}", name=p[:200])
        _, token = AgentToken.issue(other, "laptop")
        elsewhere = Runner(server.port, token, uuid.uuid4())
        elsewhere.connect()
        start = frames.turn_started(1, uuid.uuid4(), uuid.uuid4(), prompt=p, title=p)
        start.update(agent_name=p, agent_version=p, mode=p[:100])
        elsewhere.send(start, frames.tool_call(2, "call", p, status="completed"))
        elsewhere.close()

    # The agent's fields, on the page's first render.
    every_agent_field(runner, seq, corpus, "first")
    # The calls the page's first render shows (a run's page shows its latest calls, and those
    # waiting for a person: activity/review/reads.py, on_page), so every comment is on it.
    calls = ToolActivity.objects.filter(chat_id=runner.chat_id)
    rows = list(on_page(calls).filter(tool_call_id__startswith="first_call").order_by("position"))
    assert len(rows) >= 4
    # People named after each payload, commenting on the calls.
    for n, p in enumerate(corpus):
        person = User.objects.create(username=p[:150], password=password_hash())
        Membership.objects.create(workspace=workspace, user=person, role=Role.VIEWER)
        add_comment(rows[n % len(rows)], person, p)

    sentinel.watch(page)
    sign_in(page, root)
    open_chat(page, live, runner.chat_id)
    sentinel.assert_nothing_ran(page, "the chat page, first render")

    # Live: the same again while the page is open, and comments POSTed through the server.
    every_agent_field(runner, seq, corpus, "live")
    csrf = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    for n, p in enumerate(corpus):
        response = page.request.post(
            f"/tools/{rows[n % len(rows)].pk}/comments",
            form={"text": p},
            headers={"X-CSRFToken": csrf, "HX-Request": "true"},
        )
        assert response.status == 204, response.text()
    version = Chat.objects.get(pk=runner.chat_id).version
    expect(page.locator("#live")).to_have_attribute("data-version", str(version), timeout=20_000)
    expect(page.locator(".comment")).to_have_count(2 * len(corpus))
    sentinel.assert_nothing_ran(page, "the chat page, after live pushes")
    page.reload()
    sentinel.assert_nothing_ran(page, "the chat page, reloaded")
    said = page.locator(".reply .reply-part", has_text="{% debug %}")  # as text, between calls
    expect(said.first).to_be_visible()
    shown = page.locator("#live ~ .answering").inner_text()
    assert [p for p in corpus if p not in shown] == [], "payloads missing: the test lost a field"

    # The turn as it happened, a permalink, a prompt's and a comment's own pages, the run as a
    # share link shows it (and the workspace page that lists the link).
    big_turn = rows[0].attempt_id
    link = shares.make(Chat.objects.get(pk=runner.chat_id), root, 24)
    for path in (
        f"/s/{link.token}/",
        f"/chats/{runner.chat_id}/turns/{big_turn}/",
        f"/chats/{runner.chat_id}/turns/{big_turn}/?page=2",  # a turn page holds 100 calls
        f"/tools/{rows[3].pk}/",
        f"/tools/{rows[3].pk}/comments",
        f"/prompts/{Prompt.objects.filter(chat_id=runner.chat_id).earliest('opened_at').pk}/answer",
        "/inbox/",
        "/",
        "/workspaces/",
        f"/workspaces/{workspace.slug}/",
    ):
        page.goto(path)
        sentinel.assert_nothing_ran(page, path)

    # The transcript is Markdown for download, never HTML.
    export = page.request.get(f"/chats/{runner.chat_id}/transcript.md")
    assert export.headers["content-type"].startswith("text/markdown")
    assert "attachment" in export.headers.get("content-disposition", "")

    # Search: each payload as the query, echoed and matched in snippets.
    for n, p in enumerate(corpus, start=1):
        page.goto("/search/?" + urlencode({"q": p}))
        sentinel.assert_nothing_ran(page, f"search for payload {n}")

    # A person's fields through the workspace page's own forms: token names (POSTed, then
    # listed), and a username that is no one's (the refusal repeats it).
    page.goto(f"/workspaces/{workspace.slug}/")
    csrf = page.locator("input[name=csrfmiddlewaretoken]").first.input_value()
    for p in corpus:
        created = page.request.post(
            f"/workspaces/{workspace.slug}/tokens/create",
            form={"name": p[:100], "csrfmiddlewaretoken": csrf},
        )
        assert created.ok, created.text()
    for n, names in enumerate(packed([f"nobody {p}" for p in corpus], 150), start=1):
        page.get_by_role("textbox", name="Username").fill(names)
        page.get_by_role("button", name="Add member").click()
        sentinel.assert_nothing_ran(page, f"the workspace page, adding users {names!r} ({n})")
    page.goto(f"/workspaces/{workspace.slug}/")
    sentinel.assert_nothing_ran(page, "the workspace page with every token")

    # The sentinels do see a payload that became markup.
    page.evaluate("(html) => document.body.insertAdjacentHTML('beforeend', html)", corpus[3])
    with pytest.raises(AssertionError, match="onerror"):
        sentinel.assert_nothing_ran(page, "a page with a payload put in as markup")

"""The runner takes prompts, cancels and mode switches from the web (issue 16): the real runner,
in this process, with the scripted SDK agent (``tests/agents/sdk_agent.py``) against a fake
koruweb — a tiny ``websockets`` server that commits every frame in order, acknowledges it, and
sends the runner what a test gives it, as the server sends a person's requests."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from acp.connection import StreamDirection, StreamEvent
from pydantic import BaseModel
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from activity.runner import cli, setup
from activity.runner import link as link_module
from activity.runner import web as web_module
from activity.runner.main import Runner
from activity.runner.options import Options
from activity.runner.outbox import Outbox
from activity.runner.turns import TurnTable
from activity.runner.web import NOT_ALLOWED, NOT_RUNNING, Web
from activity.wire.frames import SessionInfo, runner_frame
from activity.wire.orders import Answer, WebCancel, WebMode, WebPromptFrame

AGENT = [sys.executable, str(Path(__file__).resolve().parent.parent / "agents" / "sdk_agent.py")]
WITHIN = 30.0  # a runner that has not got there by then never will: fail rather than hang
ALLOW = {"outcome": "selected", "optionId": "o0"}  # the runner's id for the first option


class Koru:
    """A fake koruweb for one runner: ``frames`` are the runner's numbered frames as committed;
    ``on_hello`` are sent after every hello's ack, as the server resends a message not yet
    started."""

    def __init__(self) -> None:
        self.frames: list[dict[str, Any]] = []
        self.runner: Runner | None = None  # the runner under test
        self.on_hello: list[BaseModel] = []
        self.socket: ServerConnection | None = None
        self.connected = asyncio.Event()
        self.changed = asyncio.Event()

    async def handle(self, socket: ServerConnection) -> None:
        await socket.recv()  # the hello
        await socket.send(json.dumps({"type": "ack", "seq": len(self.frames)}))
        for frame in self.on_hello:
            await socket.send(frame.model_dump_json())
        self.socket = socket
        self.connected.set()
        with contextlib.suppress(ConnectionClosed):  # the runner stopped, or a test closed it
            async for text in socket:
                frame = json.loads(text)
                runner_frame.validate_python(frame)  # the server would refuse it otherwise
                if frame["seq"] == len(self.frames) + 1:
                    self.frames.append(frame)
                await socket.send(json.dumps({"type": "ack", "seq": len(self.frames)}))
                self.changed.set()

    async def send(self, frame: BaseModel) -> None:
        await self.connected.wait()
        assert self.socket is not None
        await self.socket.send(frame.model_dump_json())

    async def reconnect(self) -> None:
        """Drop the runner's socket, as a server restart does: it reconnects and says hello."""
        assert self.socket is not None
        self.connected.clear()
        await self.socket.close(1012, "restart")
        await self.connected.wait()

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [frame for frame in self.frames if frame["type"] == kind]

    async def until[T](self, check: Callable[[], T | None]) -> T:
        """Wait until ``check`` finds what it looks for in the frames committed so far."""

        async def wait() -> T:
            while not (found := check()):
                self.changed.clear()
                await self.changed.wait()
            return found

        return await asyncio.wait_for(wait(), WITHIN)

    async def turns_ended(self, count: int) -> list[dict[str, Any]]:
        return await self.until(
            lambda: self.of("turn_ended")[count - 1 :] and self.of("turn_ended")
        )

    async def refusal(self, request_id: uuid.UUID) -> list[dict[str, Any]]:
        """The runner's refusals of request ``request_id``, once there is one."""
        return await self.until(
            lambda: [f for f in self.of("web_refused") if f["id"] == str(request_id)]
        )

    async def permission(self) -> str | int:
        """The id of the agent's open permission request, once it has been forwarded."""

        def asked() -> list[str | int]:  # a list: the id may well be 0
            return [
                frame["message"]["id"]
                for frame in self.of("acp")
                if frame["message"].get("method") == "session/request_permission"
            ]

        return (await self.until(asked))[0]

    async def info(self, **fields: Any) -> dict[str, Any]:
        """The last ``session_info``, once one says ``fields``."""

        def says() -> dict[str, Any] | None:
            infos = self.of("session_info")
            last = infos[-1] if infos else None
            return last if last and all(last[k] == v for k, v in fields.items()) else None

        return await self.until(says)


@pytest.fixture(autouse=True)
def _quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(link_module, "BACKOFF_SECONDS", 0.001)
    monkeypatch.setattr(link_module, "BACKOFF_MAX", 0.01)


@pytest.fixture(autouse=True)
def _stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    """Standard input that has ended (a test that types gives its own)."""
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))


@pytest.fixture
def mode_switches(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every mode the runner asks the agent to switch to."""
    asked: list[str] = []
    real = web_module.set_mode

    async def spy(conn: Any, session_id: str, modes: Any, mode: str) -> None:
        asked.append(mode)
        await real(conn, session_id, modes, mode)

    monkeypatch.setattr(web_module, "set_mode", spy)
    return asked


@contextlib.asynccontextmanager
async def runner(**options: Any) -> AsyncIterator[tuple[Koru, asyncio.Task[int]]]:
    """A runner of the SDK agent against a fake koruweb; stopped (as by SIGTERM) at the end
    if it is still running."""
    koru = Koru()
    async with serve(koru.handle, "127.0.0.1", 0, max_size=None) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        url = f"ws://127.0.0.1:{port}"
        koru.runner = Runner(Options(server=url, token="t", command=AGENT, **options))
        run = asyncio.create_task(koru.runner.run())
        try:
            yield koru, run
        finally:
            run.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await run


async def still_running(koru: Koru, run: asyncio.Task[int]) -> None:
    """The runner has not stopped: it still answers (a prompt it refuses comes back)."""
    probe = WebCancel(id=uuid.uuid4(), attempt_id=uuid.uuid4())
    await koru.send(probe)
    await koru.refusal(probe.id)
    assert not run.done()


def web_prompt(text: str) -> WebPromptFrame:
    return WebPromptFrame(id=uuid.uuid4(), text=text, by="ana")


async def test_a_web_prompt_starts_a_turn_that_carries_its_id():
    async with runner(allow_web=True) as (koru, run):
        info = await koru.info()
        assert info["allow_web"] is True and info["stays"] is True
        assert [m["id"] for m in info["modes"]] == ["default", "auto"] and info["mode"] == "default"
        prompt = web_prompt("basic")
        await koru.send(prompt)
        await koru.turns_ended(1)
        (started,) = koru.of("turn_started")
        assert started["web_prompt_id"] == str(prompt.id) and started["prompt"] == "basic"
        assert koru.of("turn_ended")[0]["stop_reason"] == "end_turn"
        assert not run.done()


async def test_the_same_prompt_sent_twice_and_again_after_a_reconnect_runs_once():
    async with runner(allow_web=True) as (koru, run):
        await koru.info()
        first, second = web_prompt("basic"), web_prompt("basic again")
        await koru.send(first)
        await koru.send(first)
        await koru.turns_ended(1)
        koru.on_hello = [first]  # the server resends a message on every hello until it knows
        await koru.reconnect()
        await koru.send(second)
        await koru.turns_ended(2)
        ids = [frame["web_prompt_id"] for frame in koru.of("turn_started")]
        assert ids == [str(first.id), str(second.id)]


async def test_a_prompt_sent_during_a_turn_runs_after_it():
    async with runner(allow_web=True) as (koru, run):
        await koru.info()
        during = web_prompt("basic")
        await koru.send(web_prompt("permission"))
        request_id = await koru.permission()
        await koru.send(during)
        await koru.send(Answer(request_id=request_id, outcome=ALLOW))
        await koru.turns_ended(2)
        kinds = [f["type"] for f in koru.frames if f["type"] in ("turn_started", "turn_ended")]
        assert kinds == ["turn_started", "turn_ended", "turn_started", "turn_ended"]
        assert koru.of("turn_started")[1]["web_prompt_id"] == str(during.id)
        assert [f["stop_reason"] for f in koru.of("turn_ended")] == ["end_turn", "end_turn"]


async def test_a_cancel_of_the_running_turn_cancels_it_and_its_open_permission():
    async with runner(allow_web=True) as (koru, run):
        await koru.info()
        await koru.send(web_prompt("permission"))
        await koru.permission()
        (started,) = koru.of("turn_started")
        await koru.send(WebCancel(id=uuid.uuid4(), attempt_id=started["attempt_id"], by="ana"))
        (ended,) = await koru.turns_ended(1)
        assert ended["stop_reason"] == "cancelled"
        assert [f["outcome"] for f in koru.of("prompt_outcome")] == [{"outcome": "cancelled"}]
        assert not koru.of("web_refused")


async def test_a_cancel_of_a_turn_that_is_not_running_is_refused_and_the_turn_goes_on():
    async with runner(allow_web=True) as (koru, run):
        await koru.info()
        idle = WebCancel(id=uuid.uuid4(), attempt_id=uuid.uuid4())
        await koru.send(idle)
        assert (await koru.refusal(idle.id))[0]["reason"] == NOT_RUNNING
        await koru.send(web_prompt("permission"))
        request_id = await koru.permission()
        other = WebCancel(id=uuid.uuid4(), attempt_id=uuid.uuid4())
        await koru.send(other)
        assert (await koru.refusal(other.id))[0]["reason"] == NOT_RUNNING
        await koru.send(Answer(request_id=request_id, outcome=ALLOW))
        (ended,) = await koru.turns_ended(1)
        assert ended["stop_reason"] == "end_turn"
        assert [f["outcome"] for f in koru.of("prompt_outcome")] == [ALLOW]


async def test_a_mode_in_web_modes_is_set_and_session_info_reports_it(mode_switches):
    async with runner(allow_web=True, web_modes=["auto"]) as (koru, run):
        assert (await koru.info())["web_modes"] == ["auto"]
        await koru.send(WebMode(id=uuid.uuid4(), mode="auto", by="ana"))
        await koru.info(mode="auto")
        assert mode_switches == ["auto"]
        await koru.send(web_prompt("basic"))
        await koru.turns_ended(1)
        assert koru.of("turn_started")[0]["mode"] == "auto"
        assert not koru.of("web_refused")


async def test_a_mode_not_in_web_modes_is_refused_and_the_agents_mode_is_unchanged(mode_switches):
    async with runner(allow_web=True, web_modes=["default"]) as (koru, run):
        await koru.info()
        asked = WebMode(id=uuid.uuid4(), mode="auto")
        await koru.send(asked)
        (refused,) = await koru.refusal(asked.id)
        assert "--web-modes" in refused["reason"] and "'auto'" in refused["reason"]
        await koru.send(web_prompt("basic"))
        await koru.turns_ended(1)
        assert mode_switches == []
        assert koru.of("session_info")[-1]["mode"] == "default"
        assert koru.of("turn_started")[0]["mode"] == "default"


async def test_a_runner_without_allow_web_refuses_all_three_and_runs_nothing_of_the_webs(
    capsys: pytest.CaptureFixture[str], mode_switches: list[str]
):
    async with runner(prompts=["permission"]) as (koru, run):
        assert (await koru.info())["allow_web"] is False
        request_id = await koru.permission()
        (started,) = koru.of("turn_started")
        asked: list[WebPromptFrame | WebCancel | WebMode] = [
            web_prompt("basic"),
            WebCancel(id=uuid.uuid4(), attempt_id=started["attempt_id"]),
            WebMode(id=uuid.uuid4(), mode="auto"),
        ]
        for frame in asked:
            await koru.send(frame)
            assert (await koru.refusal(frame.id))[0]["reason"] == NOT_ALLOWED
        await koru.send(Answer(request_id=request_id, outcome=ALLOW))
        assert await asyncio.wait_for(run, WITHIN) == 0
    assert len(koru.of("turn_started")) == 1 and koru.of("turn_started")[0]["web_prompt_id"] is None
    assert [f["stop_reason"] for f in koru.of("turn_ended")] == ["end_turn"]
    assert [f["outcome"] for f in koru.of("prompt_outcome")] == [ALLOW] and mode_switches == []
    err = capsys.readouterr().err
    assert err.count(NOT_ALLOWED) == 3 and "refused the web's prompt by ana" in err


async def test_with_prompt_and_no_stay_the_runner_exits_0_after_its_prompts():
    async with runner(allow_web=True, prompts=["basic", "basic"]) as (koru, run):
        assert await asyncio.wait_for(run, WITHIN) == 0
    assert koru.of("session_info")[-1]["stays"] is False
    assert [f["prompt"] for f in koru.of("turn_started")] == ["basic", "basic"]
    assert len(koru.of("turn_ended")) == 2


async def test_with_stay_the_runner_keeps_taking_web_prompts_after_its_own():
    async with runner(allow_web=True, stay=True, prompts=["basic"]) as (koru, run):
        assert (await koru.info())["stays"] is True
        await koru.turns_ended(1)
        prompt = web_prompt("basic")
        await koru.send(prompt)
        await koru.turns_ended(2)
        assert koru.of("turn_started")[1]["web_prompt_id"] == str(prompt.id)
        await still_running(koru, run)


async def test_standard_input_ending_does_not_stop_an_allow_web_runner(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    monkeypatch.setattr(sys, "stdin", io.StringIO("basic\n"))
    async with runner(allow_web=True) as (koru, run):
        await koru.turns_ended(1)
        await still_running(koru, run)
        prompt = web_prompt("basic")
        await koru.send(prompt)
        await koru.turns_ended(2)
        starts = koru.of("turn_started")
        assert [f["web_prompt_id"] for f in starts] == [None, str(prompt.id)]
        assert not run.done()
    assert "standard input ended; still taking prompts from the web" in capsys.readouterr().err


async def test_standard_input_ending_stops_a_runner_without_allow_web_as_before():
    async with runner() as (koru, run):
        assert await asyncio.wait_for(run, WITHIN) == 0
    assert not koru.of("turn_started") and koru.of("session_info")[-1]["stays"] is False


async def test_a_web_mode_the_agent_does_not_have_stops_the_runner_with_exit_code_5(
    capsys: pytest.CaptureFixture[str],
):
    async with runner(allow_web=True, web_modes=["auto", "yolo"]) as (koru, run):
        assert await asyncio.wait_for(run, WITHIN) == 5
    assert not koru.of("turn_started")
    assert (
        "the agent has no mode 'yolo' (--web-modes); its modes: default (Default), auto (Auto)"
        in (capsys.readouterr().err)
    )


def update(kind: str, session: str = "s1", **fields: Any) -> StreamEvent:
    message = {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": session, "update": {"sessionUpdate": kind, **fields}},
    }
    return StreamEvent(StreamDirection.INCOMING, message)


def test_session_info_follows_the_agents_commands_and_modes_within_the_frames_bounds():
    outbox = Outbox()
    web = Web(outbox, TurnTable(outbox), allow_web=True, web_modes=["plan"], stays=False)
    web.observe(update("available_commands_update", availableCommands=[{"name": "early"}]))
    assert outbox.seq == 0  # nothing is told before the session has started
    state = {"currentModeId": "ask", "availableModes": [{"id": "ask"}, {"id": "plan"}]}
    modes = setup.modes({"modes": state})
    web.mode = modes.current
    web.start(None, "s1", modes)  # type: ignore[arg-type]
    huge = "x" * 5000
    listed: list[Any] = [
        {"name": f"c{n}", "description": huge, "input": {"hint": huge}} for n in range(300)
    ]
    listed += [{"name": "y" * 101}, {"name": ""}, {"description": "no name"}, "odd"]
    web.observe(update("available_commands_update", availableCommands=listed))
    web.observe(update("available_commands_update", availableCommands=listed))  # no change
    web.observe(update("current_mode_update", currentModeId="plan"))
    options = [{"value": "plan", "name": "Plan", "description": huge}, {"value": "m" * 101}]
    select = {"id": "mode", "type": "select", "currentValue": "plan", "options": options}
    web.observe(update("config_option_update", configOptions=[select]))
    web.observe(update("config_option_update", configOptions=[{"id": "model", "options": []}]))
    web.observe(update("current_mode_update", currentModeId="ask", session="other"))
    infos = [SessionInfo.model_validate_json(text) for _, text in outbox.frames]
    assert [info.mode for info in infos] == ["ask", "ask", "plan", "plan"]
    assert infos[0].commands[0].name == "early"
    commands = infos[1].commands
    assert len(commands) == 200
    assert len(commands[0].description) == 500 and len(commands[0].hint) == 200
    assert [m.id for m in infos[3].modes] == ["plan"] and len(infos[3].modes[0].description) == 500
    assert all(info.web_modes == ["plan"] and info.stays is False for info in infos)


async def test_a_persons_text_reaches_the_runners_terminal_without_control_characters(
    capsys: pytest.CaptureFixture[str],
):
    async with runner(allow_web=True) as (koru, run):
        await koru.info()
        sneaky = WebPromptFrame(id=uuid.uuid4(), text="\x1b]0;owned\x07basic", by="ana\x1b[2J")
        await koru.send(sneaky)
        await koru.turns_ended(1)
        assert koru.of("turn_started")[0]["prompt"] == sneaky.text  # the agent gets it as sent
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err
    assert "a prompt from the web by ana\ufffd[2J: \ufffd]0;owned\ufffdbasic" in err


async def test_an_agent_that_exits_while_the_runner_waits_for_a_prompt_ends_the_run_with_code_4(
    capsys: pytest.CaptureFixture[str],
):
    async with runner(allow_web=True) as (koru, run):
        await koru.info()
        assert koru.runner is not None and koru.runner.process is not None
        koru.runner.process.kill()
        assert await asyncio.wait_for(run, WITHIN) == 4
    assert "the agent exited with code -9 between turns" in capsys.readouterr().err


def test_a_listed_mode_that_bypasses_permissions_is_said_aloud_when_the_session_starts(
    capsys: pytest.CaptureFixture[str],
):
    outbox = Outbox()
    web = Web(outbox, TurnTable(outbox), allow_web=True, web_modes=["yolo"], stays=True)
    modes = setup.Modes(("default", "yolo"), ("Default", "YOLO"), None)
    web.start(None, "s1", modes)  # type: ignore[arg-type]
    said = capsys.readouterr().err
    assert "the web may switch the agent to yolo: it then acts without asking anyone" in said
    (info,) = [SessionInfo.model_validate_json(text) for _, text in outbox.frames]
    assert info.web_modes == ["yolo"] and info.stays is True


def test_copilots_autopilot_mode_a_url_is_said_aloud_as_a_mode_that_bypasses_permissions(
    capsys: pytest.CaptureFixture[str],
):
    outbox = Outbox()
    autopilot = "https://agentclientprotocol.com/protocol/session-modes#autopilot"
    web = Web(outbox, TurnTable(outbox), allow_web=True, web_modes=[autopilot], stays=True)
    agent = "https://agentclientprotocol.com/protocol/session-modes#agent"
    web.start(None, "s1", setup.Modes((agent, autopilot), ("Agent", "Autopilot"), "mode"))  # type: ignore[arg-type]
    said = capsys.readouterr().err
    assert f"the web may switch the agent to {autopilot}: it then acts without asking" in said
    (info,) = [SessionInfo.model_validate_json(text) for _, text in outbox.frames]
    assert info.web_modes == [autopilot]
    assert [(mode.id, mode.name) for mode in info.modes] == [
        (agent, "Agent"),
        (autopilot, "Autopilot"),
    ]


@pytest.mark.parametrize(
    ("flags", "code", "error"),
    [
        (["--stay"], 1, "--stay needs --allow-web"),
        (["--web-modes", "plan"], 1, "--web-modes needs --allow-web"),
        (
            ["--allow-web", "--web-modes", "x" * 101],
            2,
            "at most 50 modes of at most 100 characters",
        ),
    ],
)
def test_the_web_flags_that_make_no_sense_are_refused_before_anything_starts(
    flags, code, error, capsys
):
    server = ["--server", "ws://127.0.0.1:9", "--token", "t"]
    assert cli.main(["agent", *server, *flags, "--", "x"]) == code
    assert error in capsys.readouterr().err


def test_web_modes_are_a_comma_list_without_blanks_or_repeats():
    assert cli.mode_list(" plan, default,,plan ") == ["plan", "default"]

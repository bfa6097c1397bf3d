"""``koruweb agent`` (or ``manage.py agent``): run an ACP agent and stream its turns to koruweb.

Exit codes: 0 every turn ended and every frame is acknowledged; 1 the server could not be
reached in time; 2 the server refused this runner (bad token, someone else's chat, a server of
another protocol: its reason says which runner to install); 3 the agent command does not exist
or would not start; 4 the agent exited (during a turn or between turns); 5 the agent has no
such mode as ``--mode`` or one of ``--web-modes``; 6 the agent asks to authenticate and no
method's credentials are set; 7 the server refused the same frame on ``link.REFUSALS``
connections in a row; 8 the agent cannot resume the run's session (``--resume``: it offers
neither ``session/resume`` nor ``session/load``, or refused); 130 interrupted. ``--allow-web``:
see ``web.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, cast

from acp import PROTOCOL_VERSION, Client, RequestError, text_block
from acp.client.connection import ClientSideConnection
from acp.schema import (
    ClientCapabilities,
    ElicitationCapabilities,
    ElicitationFormCapabilities,
    Implementation,
)

from activity.runner import saved, sessions, setup
from activity.runner.changes import Tracker
from activity.runner.link import TOKEN_VARIABLE, Fatal, Link, Refused, say
from activity.runner.options import Options, page_url
from activity.runner.outbox import Outbox, cut_text
from activity.runner.spawn import one_line_logs, spawn
from activity.runner.turns import RunnerClient, TurnTable
from activity.runner.web import NoSuchMode, Prompt, Web, set_mode, shown
from activity.wire.frames import TurnEnded, TurnStarted

READ_LIMIT = 64 * 1024 * 1024  # the agent's longest line the runner will read
TITLE_CHARS = 200  # a title made from a prompt's first line
ERROR_CHARS = 2000  # an agent's error, as ``frames.TurnEnded.error`` bounds it
CANCEL_SECONDS = 3.0  # how long a cancelled turn is given to end before its agent is stopped


class Exit(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class Runner:
    def __init__(self, options: Options) -> None:
        self.options = options
        self.chat_id = options.chat_id or uuid.uuid4()
        self.secret = options.resume_secret or secrets.token_urlsafe(32)  # 256 bits: ours alone
        resume = options.resume  # the chat's secret now proves it; ours replaces it
        self.outbox = Outbox()
        self.table = TurnTable(self.outbox, cwd=os.path.abspath(options.cwd))
        self.changes = Tracker(self.outbox, os.path.abspath(options.cwd))
        web = options.allow_web, options.web_modes, options.stays
        self.web = Web(self.outbox, self.table, allow_web=web[0], web_modes=web[1], stays=web[2])
        proof, taking = (resume.secret, self.secret) if resume else (self.secret, None)
        self.link = Link(options.server, options.token, self.chat_id, self.outbox, self.answer)
        self.link.secret, self.link.resume, self.link.on_web = proof, taking, self.web.receive
        self.session_id = ""
        self.conn: ClientSideConnection | None = None
        self.process: asyncio.subprocess.Process | None = None  # the agent's
        self.turn: asyncio.Task[Any] | None = None
        self.interrupts = 0

    def answer(self, request_id: str | int, outcome: dict[str, Any]) -> None:
        self.table.answer(request_id, outcome)

    async def run(self) -> int:
        link = asyncio.create_task(self.link.run())
        work: asyncio.Task[None] | None = None
        try:
            await self.wait_for_server(link)
            if self.options.resume is not None:  # numbers the chat has are not given again
                self.table.ids.start_after(self.outbox.seq)
            # Printed once the server has the chat, so the page is there when it is opened; a
            # host's runner prints it once the agent's session has started too (``work``), so
            # an agent that cannot start (no mode its --web-modes name, exit 5) is a failed
            # start its host reports with the reason (runner/host.py), not a run that ends.
            if not self.options.from_host:
                print(page_url(self.options.server, self.chat_id), flush=True)
            work = asyncio.create_task(self.work(link))
            await asyncio.wait({work, link}, return_when=asyncio.FIRST_COMPLETED)
            if not work.done():  # the server refuses us for good: the agent stops too
                await self.cancel_turn()
                work.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exit):
                    await work
                self.fatal(link)
            work.result()
            return 0
        except Exit as stop:
            say(str(stop))
            if stop.code == 4:
                with contextlib.suppress(Exit, TimeoutError):
                    await asyncio.wait_for(self.flush(link), 10)
            return stop.code
        finally:
            if work is not None and not work.done():  # interrupted
                work.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exit):
                    await work
            link.cancel()
            with contextlib.suppress(asyncio.CancelledError, Fatal, Refused):
                await link

    async def work(self, link: asyncio.Task[None]) -> None:
        """The agent's turns, one prompt after another, then every frame to the server."""
        async with self.agent() as (conn, process):
            self.conn, self.process = conn, process
            await self.start(conn)
            if self.options.from_host:  # before the first snapshot, which may take a while
                print(page_url(self.options.server, self.chat_id), flush=True)
            await self.changes.begin(self.options.resume.base if self.options.resume else None)
            self.keep()
            reader = self.feed()
            try:
                while (prompt := await self.next_prompt(process)) is not None:
                    await self.changes.turn_starts()
                    await self.changes.turn_ended(await self.one_turn(conn, process, prompt))
            finally:
                if reader is not None:
                    reader.cancel()
            if self.web.stopped_by is not None and self.web.closable:
                await sessions.close(conn, self.session_id, CANCEL_SECONDS)
            await self.flush(link)

    async def next_prompt(self, process: asyncio.subprocess.Process) -> Prompt | None:
        """The next prompt to run (None: the runner is done). An agent that exits while the
        runner waits for one ends the run, as one that exits during a turn does (exit 4)."""
        waiting = asyncio.create_task(self.web.prompts.next())
        exited = asyncio.create_task(process.wait())
        try:
            await asyncio.wait({waiting, exited}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            exited.cancel()
            if not waiting.done():
                waiting.cancel()
        if waiting.done() and not waiting.cancelled():
            return waiting.result()
        raise Exit(4, f"the agent exited with code {process.returncode} between turns")

    async def wait_for_server(self, link: asyncio.Task[None]) -> None:
        timeout = self.options.connect_timeout
        waited = asyncio.create_task(self.link.ever_connected.wait())
        done, _ = await asyncio.wait({waited, link}, timeout=min(1.0, timeout))
        if not done:
            say(f"waiting for the server at {self.options.server} (up to {timeout:g} s)…")
            done, _ = await asyncio.wait({waited, link}, timeout=max(timeout - 1.0, 0))
        if link in done:
            waited.cancel()
            self.fatal(link)
        if not done:
            waited.cancel()
            raise Exit(1, f"the server at {self.options.server} is unreachable after {timeout:g} s")

    def fatal(self, link: asyncio.Task[None]) -> None:
        error = link.exception()
        if isinstance(error, Refused):
            raise Exit(7, str(error))
        raise Exit(2, str(error)) if isinstance(error, Fatal) else Exit(1, f"link failed: {error}")

    @contextlib.asynccontextmanager
    async def agent(self) -> AsyncIterator[tuple[ClientSideConnection, asyncio.subprocess.Process]]:
        program = self.options.command[0]
        try:
            async with spawn(
                cast(Client, RunnerClient(self.table)),
                self.options.command,
                # API keys, HOME, PATH: the agent needs them all, but not koruweb's token
                env={k: v for k, v in os.environ.items() if k != TOKEN_VARIABLE},
                cwd=self.options.cwd,
                limit=READ_LIMIT,
                warn=say,
                observers=[self.table.observe, self.web.observe],
                use_unstable_protocol=True,
            ) as (conn, process):
                yield conn, process
        except FileNotFoundError:
            raise Exit(3, f"the agent command {program!r} was not found") from None
        except PermissionError:
            raise Exit(3, f"the agent command {program!r} cannot be run") from None

    async def start(self, conn: ClientSideConnection) -> None:
        capabilities = ClientCapabilities(
            elicitation=ElicitationCapabilities(form=ElicitationFormCapabilities())
        )
        try:
            init = await conn.initialize(
                protocol_version=PROTOCOL_VERSION,
                client_capabilities=capabilities,
                client_info=Implementation(name="koruweb", version="0.1.0"),
            )
            told = init.model_dump(by_alias=True, mode="json")
            if self.options.resume is not None:
                session = await self.resume_session(conn, told)
            else:
                session = await self.new_session(conn, told)
        except ConnectionError:
            raise Exit(3, "the agent exited before it started a session") from None
        except RequestError as error:
            raise Exit(3, f"the agent would not start a session: {error}") from None
        info = init.agent_info
        self.agent_name = info.name if info else self.options.command[0]
        self.agent_version = info.version if info else ""
        can = sessions.capable(told)
        self.web.resumable, self.web.closable = can.resume, can.close
        if self.options.resume is None:
            self.session_id = session.session_id
        modes = setup.modes(session.model_dump(by_alias=True, mode="json"))
        self.web.mode = modes.current
        if self.options.mode:
            await self.set_mode(conn, modes)
            self.web.mode = self.options.mode
        try:
            self.web.start(conn, self.session_id, modes)
        except NoSuchMode as error:
            raise Exit(5, str(error)) from None

    async def new_session(self, conn: ClientSideConnection, init: dict[str, Any]) -> Any:
        """``session/new`` (authenticated first if the agent asks: ``sessions.authenticated``)."""
        cwd = os.path.abspath(self.options.cwd)
        return await self.authenticated(init, lambda: conn.new_session(cwd=cwd, mcp_servers=[]))

    async def resume_session(self, conn: ClientSideConnection, init: dict[str, Any]) -> Any:
        """The run's session taken up again: ``session/resume``, else ``session/load`` (whose
        replay of the conversation the server has already: not forwarded), else exit 8."""
        assert self.options.resume is not None
        self.session_id = self.options.resume.session_id
        cwd, can = os.path.abspath(self.options.cwd), sessions.capable(init)
        if not can.resume:
            raise Exit(8, sessions.CANNOT)
        say(f"resuming the agent's session {shown(self.session_id)[:80]} in {cwd}")
        try:
            return await self.authenticated(
                init, lambda: sessions.take_up(conn, self.table, can, self.session_id, cwd)
            )
        except RequestError as error:
            raise Exit(
                8, f"the agent would not resume the run's session: {sessions.said(error)}"
            ) from None

    async def authenticated(self, init: dict[str, Any], ask: Callable[[], Awaitable[Any]]) -> Any:
        assert self.conn is not None
        try:
            return await sessions.authenticated(init, ask, self.conn)
        except sessions.NoCredentials as missing:
            raise Exit(6, str(missing)) from None

    def keep(self) -> None:
        """Keep what ``--resume`` needs on this machine (``saved.py``)."""
        secret = self.link.resume or self.link.secret
        saved.keep(self.chat_id, self.options, self.session_id, secret, self.changes.base)

    async def set_mode(self, conn: ClientSideConnection, modes: setup.Modes) -> None:
        mode = self.options.mode
        assert mode is not None
        if mode not in modes.ids:
            offered = modes.describe() or "none"
            raise Exit(5, f"the agent has no mode {mode!r}; its modes: {offered}")
        try:
            await set_mode(conn, self.session_id, modes, mode)
        except RequestError as error:
            raise Exit(5, f"the agent refused mode {mode!r}: {error}") from None

    def feed(self) -> asyncio.Task[None] | None:
        """Queue ``--prompt``'s prompts, or else read standard input's lines aside."""
        prompts = self.web.prompts
        if not self.options.prompts:
            return asyncio.create_task(prompts.read(self.options.allow_web))
        for text in self.options.prompts:
            prompts.add(Prompt(text))
        prompts.end()
        return None

    async def one_turn(
        self, conn: ClientSideConnection, process: asyncio.subprocess.Process, prompt: Prompt
    ) -> uuid.UUID:
        """Run ``prompt``: its turn's id, once it has ended (``Exit`` if the agent died)."""
        attempt_id, text, mode = uuid.uuid4(), prompt.text, self.web.mode
        self.table.replaying = False  # a loaded session's replay is over (sessions.take_up)
        first = text.strip().splitlines()[0] if text.strip() else text
        self.outbox.add(
            TurnStarted,
            attempt_id=attempt_id,
            message_id=uuid.uuid4(),
            agent_name=self.agent_name,
            agent_version=self.agent_version,
            prompt=text,
            title=self.options.title or cut_text(first, TITLE_CHARS),
            mode=mode[:100] if mode else None,
            web_prompt_id=prompt.web_prompt_id,
        )
        self.web.attempt_id = attempt_id
        self.interrupts = 0  # a new turn: the first Ctrl-C cancels it, not the runner
        self.turn = asyncio.create_task(
            conn.prompt(session_id=self.session_id, prompt=[text_block(text)])
        )
        exited = asyncio.create_task(process.wait())
        try:
            await asyncio.wait({self.turn, exited}, return_when=asyncio.FIRST_COMPLETED)
            if self.turn.done() and not self.turn.exception():
                result = self.turn.result()
                usage = setup.usage(result.model_dump(by_alias=True, mode="json"))
                self.end_turn(attempt_id, result.stop_reason, usage)
                return attempt_id
            error = self.turn.exception() if self.turn.done() else None
            if isinstance(error, RequestError) and not exited.done():
                # The agent answered the prompt with an error (its model API failed, say):
                # this turn is over, the agent and the run go on.
                say(f"the agent ended the turn with an error: {error}")
                self.table.cancel_all()
                self.end_turn(attempt_id, "agent_error", error=str(error))
                return attempt_id
            self.table.cancel_all()
            self.end_turn(attempt_id, "agent_exited")
            if not exited.done():  # the agent lives but its connection broke: stop it
                say(f"lost the connection to the agent: {error}")
                process.kill()
            code = await process.wait()
            raise Exit(4, f"the agent exited with code {code} during a turn")
        finally:
            exited.cancel()
            if not self.turn.done():  # the run stops mid-turn: the agent is stopped too
                self.turn.cancel()
            self.turn, self.web.attempt_id = None, None

    def end_turn(
        self, attempt_id: uuid.UUID, stop_reason: str, usage: Any = None, error: str | None = None
    ) -> None:
        self.outbox.add(
            TurnEnded,
            attempt_id=attempt_id,
            stop_reason=stop_reason[:64] or "end_turn",
            usage=usage if isinstance(usage, dict) else None,
            error=cut_text(error, ERROR_CHARS) if error else None,
        )

    async def flush(self, link: asyncio.Task[None]) -> None:
        """Wait until the server has every frame."""
        drained = asyncio.create_task(self.outbox.wait_drained())
        done, _ = await asyncio.wait({drained, link}, return_when=asyncio.FIRST_COMPLETED)
        if link in done:
            drained.cancel()
            self.fatal(link)

    async def cancel_turn(self) -> None:
        """Cancel the running turn (its open prompts too) and give the agent a moment to end
        it, so it stops cleanly rather than mid-request."""
        turn, conn = self.turn, self.conn
        if turn is None or conn is None:
            return
        self.table.cancel_all()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(conn.cancel(session_id=self.session_id), CANCEL_SECONDS)
            await asyncio.wait({turn}, timeout=CANCEL_SECONDS)

    def interrupt(self) -> None:
        """Ctrl-C cancels the running turn; a second Ctrl-C, or one with no turn running, exits."""
        self.interrupts += 1
        if self.interrupts > 1 or self.turn is None or self.turn.done() or self.conn is None:
            raise KeyboardInterrupt
        say("cancelling the turn (Ctrl-C again to quit)")
        self.web.cancel_turn()


def run(options: Options) -> int:
    one_line_logs()

    async def main() -> int:
        runner = Runner(options)
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None

        def on_sigint() -> None:
            try:
                runner.interrupt()
            except KeyboardInterrupt:
                task.cancel()

        loop.add_signal_handler(signal.SIGINT, on_sigint)
        loop.add_signal_handler(signal.SIGTERM, task.cancel)  # stop as a second Ctrl-C does
        try:
            return await runner.run()
        except asyncio.CancelledError:
            say("interrupted")
            return 130

    return asyncio.run(main())

"""``koruweb host`` (or ``manage.py agent host``): offer agents to start from the web, here.

    KORUWEB_TOKEN=HOST_TOKEN koruweb host --server ws://HOST:PORT --config host.toml
    KORUWEB_TOKEN=HOST_TOKEN koruweb host --server ws://HOST:PORT \\
        --agent NAME=COMMAND [--agent …] --root DIR [--root …] [--name NAME] [--max-runs N]

The host is declared in a file (``hostconfig``: each agent's label, command and the modes the
web may switch it to) or, for a quick start, with flags (no labels, no web modes); a file and
``--agent``/``--root`` together are refused, and ``--name``/``--max-runs`` win over the file.
The host keeps one socket to ``/ws/host/`` open (reconnecting with backoff, like a runner)
and offers the named agent commands and the directories under its roots. The web asks it to
list a directory (one level, ``hostdirs.listing``) or to start a run: it then starts
``python -m activity.runner.cli agent --from-host --allow-web --stay --cwd DIR [--web-modes
MODES] -- COMMAND`` (the runner it was installed with, on its own interpreter) and writes the
run's token, chat, first prompt and title on the runner's standard input (one ``RunHandoff``
line: neither ``ps`` nor ``/proc/<pid>/environ`` shows them, and the runner's agent never gets
the token), reads the runner's first line (its run's page, printed once the agent's session has
started) and reports ``started``, and ``exited`` when the runner ends. It runs nothing but
the commands it was started with, refuses any directory outside its roots
(``hostdirs.resolve``) and any start past ``--max-runs`` runs at once, and reports at once as
a failed ``started`` any start it cannot carry out — a runner that exits before its page, an
agent without a mode its ``web_modes`` name (the message lists the agent's modes) too. Its
runners die with it.

Exit codes: 1 the server was unreachable for ``--connect-timeout`` seconds; 2 the server
refused the host (not a host token, or revoked; a host of the same name online in the
workspace; or a server of another protocol, whose reason says which runner to install); 3 a
bad command line or ``--config`` file (no token, an agent command that is not there, a root
that is not a directory; in the file also a missing file, no TOML, an unknown key or a wrong
type, each named with the file and the key); 130 interrupted.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
import sys
import uuid
from collections.abc import Coroutine
from typing import Any

from pydantic import ValidationError
from websockets.asyncio.client import ClientConnection

from activity.runner.hostdirs import Outside, listing, real_roots, resolve
from activity.runner.hostoptions import HostOptions, Usage, parse
from activity.runner.link import TOKEN_VARIABLE, RetryLater, say, stay_connected
from activity.runner.spawn import _die_with_runner
from activity.wire.frames import (
    CLOSE_FORBIDDEN,
    CLOSE_RATE,
    CLOSE_UNAUTHORIZED,
    CLOSE_UPGRADE,
    PROTOCOL_VERSION,
    retry_after,
)
from activity.wire.hostframes import (
    Exited,
    HostAgent,
    HostHello,
    ListDir,
    Listing,
    RunHandoff,
    Start,
    Started,
    Welcome,
    to_host,
)

# The runner, on the host's own interpreter; -P: the run's directory (its cwd) shadows no module.
RUNNER = [sys.executable, "-P", "-m", "activity.runner.cli", "agent"]
START_SECONDS = 60.0  # how long a runner may take to print its run's page
STOP_SECONDS = 1.5  # how long a runner is given to stop after each signal
FLUSH_SECONDS = 2.0  # how long a stopping host waits to tell the server its runners exited
TAIL_LINES = 5  # the runner's last lines of standard error kept for a failure's message
NO_SUCH_MODE = 5  # the runner's exit code for a --web-modes entry the agent does not have


class Fatal(Exception):
    """The server refuses this host (exit 2)."""


class Host:
    def __init__(self, options: HostOptions) -> None:
        self.options = options
        self.url = options.server.rstrip("/") + "/ws/host/"
        self.roots = real_roots(options.roots)
        self.outbox: list[str] = []  # reports not yet sent, in order
        self.more = asyncio.Event()
        self.welcomed = asyncio.Event()
        self.runners: dict[uuid.UUID, asyncio.subprocess.Process] = {}
        self.active: set[uuid.UUID] = set()  # starts taken and not yet over (failed or exited)
        self.tasks: set[asyncio.Task[None]] = set()
        self.instance = uuid.uuid4().hex  # this process: its reconnects are no second host

    def hello(self) -> HostHello:
        agents = [
            HostAgent(
                name=agent.name,
                command=shlex.join(agent.command),
                label=agent.label,
                web_modes=agent.web_modes,
            )
            for agent in self.options.agents.values()
        ]
        return HostHello(
            name=self.options.name,
            agents=agents,
            roots=self.options.roots,
            instance=self.instance,
            max_runs=self.options.max_runs,
            runs=sorted(self.active),
        )

    async def run(self) -> int:
        link = asyncio.create_task(self.link())
        waited = asyncio.create_task(self.welcomed.wait())
        try:
            done, _ = await asyncio.wait(
                {link, waited}, timeout=self.options.connect_timeout, return_when="FIRST_COMPLETED"
            )
            if not done:
                say(f"the server at {self.options.server} is unreachable")
                return 1
            # Until interrupted, or the server refuses us. Waited on, not awaited: a Ctrl-C
            # leaves the link up until the runners' ``exited`` are sent.
            await asyncio.wait({link})
            link.result()
            return 0
        except Fatal as refused:
            say(str(refused))
            return 2
        finally:
            waited.cancel()
            await self.stop_runners()  # their ``exited`` goes out while the link is up
            if not link.done():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.flushed(), FLUSH_SECONDS)
            link.cancel()
            with contextlib.suppress(asyncio.CancelledError, Fatal):
                await link

    async def link(self) -> None:
        await stay_connected(
            self.url, self.options.token, self.session, self.closed, self.welcomed, Fatal
        )

    def closed(self, code: int | None, reason: str) -> None:
        """The server closed the socket: a refused token, or a hello of another protocol
        (the reason names the runner to install), stops the host (exit 2); too many of its
        token's sockets open (``CLOSE_RATE``) waits as long as the reason says; anything else
        reconnects."""
        if code == CLOSE_UNAUTHORIZED:
            raise Fatal(f"the server refused the host token: {reason or code}") from None
        if code == CLOSE_FORBIDDEN:
            raise Fatal(f"the server refused the host: {reason or code}") from None
        if code == CLOSE_UPGRADE:
            said = f"the server does not speak this host's protocol {PROTOCOL_VERSION}"
            raise Fatal(f"{said}: {reason}" if reason else said) from None
        if code == CLOSE_RATE:
            wait = retry_after(reason)
            say(f"the server limits this host ({code}: {reason or 'too many'}); trying again")
            raise RetryLater(wait or 0.0)
        if self.welcomed.is_set():
            say(f"lost the server ({code or 'no close code'}); reconnecting")

    async def session(self, ws: ClientConnection) -> None:
        await ws.send(self.hello().model_dump_json())
        first = to_host.validate_json(await ws.recv())
        if not isinstance(first, Welcome):
            raise Fatal(f"the server did not welcome the host: {first!r:.200}")
        if not self.welcomed.is_set():
            base = self.options.server.rstrip("/").replace("ws", "http", 1)
            print(base + first.page, flush=True)  # the workspace's page, where hosts show
            offered = ", ".join(self.options.agents)
            say(f"host {self.options.name} offers {offered} in {', '.join(self.options.roots)}")
        self.welcomed.set()
        sender = asyncio.create_task(self.send_reports(ws))
        try:
            async for text in ws:
                self.receive(text)
        finally:
            sender.cancel()

    async def send_reports(self, ws: ClientConnection) -> None:
        while True:
            self.more.clear()
            while self.outbox:
                await ws.send(self.outbox[0])
                self.outbox.pop(0)
            await self.more.wait()

    def report(self, frame: Listing | Started | Exited) -> None:
        self.outbox.append(frame.model_dump_json())
        self.more.set()

    def receive(self, text: str | bytes) -> None:
        try:
            frame = to_host.validate_json(text)
        except ValidationError as error:
            said = error.errors()[0]  # where and what, never the frame (a token is in a start)
            where = ".".join(str(part) for part in said["loc"])
            say(f"the server sent a frame the host does not take, ignored: {where}: {said['msg']}")
            return
        match frame:
            case ListDir():
                self.spawn_task(self.list_dir(frame))
            case Start():
                self.spawn_task(self.start(frame))

    def spawn_task(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def list_dir(self, frame: ListDir) -> None:
        try:
            entries, more = await asyncio.to_thread(listing, self.roots, frame.root, frame.path)
        except Outside as outside:
            self.report(Listing(id=frame.id, root=frame.root, path=frame.path, error=str(outside)))
            return
        self.report(
            Listing(id=frame.id, root=frame.root, path=frame.path, entries=entries, more=more)
        )

    async def start(self, frame: Start) -> None:
        """Start the runner ``frame`` asks for and watch it until it exits; a start this host
        refuses or cannot carry out is reported at once as a failed ``started``."""
        if frame.id in self.active:
            return  # the same start again: the first one is under way
        if len(self.active) >= self.options.max_runs:
            error = (
                f"this host runs {len(self.active)} runs already, its most (--max-runs "
                f"{self.options.max_runs}); wait for one to end"
            )
            self.report(Started(id=frame.id, error=error))
            return
        self.active.add(frame.id)
        try:
            process = await self.spawn(frame)
            if process is None:
                return
            self.runners[frame.id] = process
            await self.watch(frame, process)
        except Exception as fault:  # whatever it was, the server hears of it now
            running = self.runners.get(frame.id)
            if running is not None and running.returncode is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(running.pid, signal.SIGKILL)
            self.report(Started(id=frame.id, error=f"the host could not start it: {fault}"[:2000]))
        finally:
            self.runners.pop(frame.id, None)
            self.active.discard(frame.id)

    async def spawn(self, frame: Start) -> asyncio.subprocess.Process | None:
        """The runner of ``frame``, started and handed its token, chat, prompt and title (or the
        session it resumes) on its standard input; None (reported) if the host refuses it."""
        agent = self.options.agents.get(frame.agent)
        if agent is None:
            offered = ", ".join(self.options.agents)
            error = f"this host offers no agent “{frame.agent}”; it offers: {offered}"
            self.report(Started(id=frame.id, error=error))
            return None
        try:
            directory = resolve(self.roots, frame.root, frame.path)
        except Outside as outside:
            self.report(Started(id=frame.id, error=str(outside)))
            return None
        doing = "resuming" if frame.resume is not None else "starting"
        say(f"{doing} {frame.agent} in {directory}")
        argv = [*RUNNER, "--server", self.options.server, "--from-host"]
        argv += ["--allow-web", "--stay", "--cwd", directory]
        argv += ["--web-modes", ",".join(agent.web_modes)] if agent.web_modes else []
        argv += ["--", *agent.command]
        handoff = RunHandoff(
            token=frame.token,
            chat_id=frame.chat_id,
            prompt=frame.prompt,
            title=frame.title,
            resume=frame.resume,
        )
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                cwd=directory,
                env={k: v for k, v in os.environ.items() if k != TOKEN_VARIABLE},  # ours
                stdin=asyncio.subprocess.PIPE,  # the handoff, then closed
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,  # a Ctrl-C at the host's terminal is the host's to pass
                preexec_fn=_die_with_runner,  # and it dies with the host however the host dies
            )
        except OSError as error:
            self.report(Started(id=frame.id, error=f"the runner would not start: {error}"))
            return None
        assert process.stdin is not None
        try:
            process.stdin.write(handoff.model_dump_json().encode() + b"\n")
            await process.stdin.drain()
        except (OSError, RuntimeError):
            pass  # the runner died first: its exit code and messages say why (watch)
        finally:
            process.stdin.close()
        return process

    async def watch(self, frame: Start, process: asyncio.subprocess.Process) -> None:
        """Report the runner's page (its first line) or why it has none, then its exit."""
        assert process.stdout is not None and process.stderr is not None
        tail: list[str] = []
        errors = asyncio.create_task(self.relay_errors(process.stderr, frame, tail))
        try:
            line = await asyncio.wait_for(process.stdout.readline(), START_SECONDS)
        except TimeoutError:
            line = b""
        url = line.decode(errors="replace").strip()
        if url.startswith(("http://", "https://")):
            self.report(Started(id=frame.id, chat_url=url[:2000]))
            say(f"{frame.agent} runs at {url}")
        else:
            if process.returncode is None:  # silent for too long, or not a runner's line
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
            code = await process.wait()
            await asyncio.wait({errors}, timeout=1)
            said = " / ".join(tail) or "no message"
            error = f"the runner did not start (exit code {code}): {said}"
            if code == NO_SUCH_MODE:  # the runner's last line lists the agent's own modes
                said = tail[-1] if tail else "the agent has no mode it was declared with"
                error = f"{frame.agent} did not start: {said.replace('--web-modes', 'web_modes')}"
            self.report(Started(id=frame.id, error=error[:2000]))
        while await process.stdout.readline():  # nothing else is expected; keep the pipe open
            pass
        code = await process.wait()
        await asyncio.wait({errors}, timeout=1)
        self.report(Exited(id=frame.id, code=code))

    async def relay_errors(
        self, stream: asyncio.StreamReader, frame: Start, tail: list[str]
    ) -> None:
        """The runner's messages, on the host's standard error (and the last few kept)."""
        while line := await stream.readline():
            text = line.decode(errors="replace").rstrip()
            print(f"[{frame.agent} {str(frame.id)[:8]}] {text}", file=sys.stderr, flush=True)
            tail.append(text.removeprefix("koruweb: ")[:300])
            del tail[:-TAIL_LINES]

    async def flushed(self) -> None:
        while self.outbox:
            await asyncio.sleep(0.05)

    async def stop_runners(self) -> None:
        """Ctrl-C twice (cancel the turn, quit), then SIGKILL whoever is left; each one's
        ``exited`` is reported."""
        running = list(self.runners.values())
        for sent in (signal.SIGINT, signal.SIGINT, signal.SIGKILL):
            running = [p for p in running if p.returncode is None]
            for process in running:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pid, sent)
            if running:
                await asyncio.wait(
                    [asyncio.create_task(p.wait()) for p in running], timeout=STOP_SECONDS
                )
        if self.tasks:
            await asyncio.wait(list(self.tasks), timeout=STOP_SECONDS)
        for task in self.tasks:
            task.cancel()


def main(argv: list[str], prog: str = "koruweb host") -> int:
    """``koruweb host`` (``prog``: ``manage.py agent host`` in a checkout): its exit code."""
    try:
        options = parse(argv, prog)
    except Usage as usage:
        usage_line = (
            f"{prog} --server URL (--config host.toml | --agent NAME=COMMAND… --root DIR…) "
            "[--name NAME] [--max-runs N]"
        )
        say(f"{usage}\nusage: {usage_line} (the host token in ${TOKEN_VARIABLE})")
        return 3

    async def serve() -> int:
        host = Host(options)
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, task.cancel)
        try:
            return await host.run()
        except asyncio.CancelledError:
            say("interrupted: the runs this host started are stopped")
            return 130

    return asyncio.run(serve())

"""koruweb's durable records of a conversation: workspaces, chats (runs), their turns and
replies. The calls a turn makes, their prompts and comments are in activity/models/calls.py.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.functional import cached_property

from activity.models.webprompts import WebPrompt


class Workspace(models.Model):
    """A team's space: its chats, members and agent tokens."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    slug = models.SlugField(max_length=100, unique=True)
    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(default=timezone.now)
    # The least role that may make a run's share link (activity/review/shares.py): "admin" or
    # "approver"; an admin chooses it on the workspace's page.
    share_role = models.CharField(max_length=16, default="admin")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Chat(models.Model):
    """One ACP session between one runner and one agent; its id is minted by the runner."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="chats")
    title = models.CharField(max_length=512, blank=True)
    agent_name = models.CharField(max_length=200, blank=True)
    agent_version = models.CharField(max_length=100, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    # Bumped by every committed change; every push carries the version it brings a page to.
    version = models.PositiveBigIntegerField(default=0)
    # The highest runner frame applied: a resent frame at or below it is dropped.
    last_seq = models.PositiveBigIntegerField(default=0)
    # How many tool rows the chat has: the next row's position.
    tool_count = models.PositiveIntegerField(default=0)
    # The chat version that last changed the header (title, agent, runner, mode, usage).
    meta_version = models.PositiveBigIntegerField(default=0)
    # The chat versions that last changed a turn, a reply, a tool row: a push looks only for
    # the kinds that changed since the version a page shows (activity/review/reads.py).
    turns_version = models.PositiveBigIntegerField(default=0)
    replies_version = models.PositiveBigIntegerField(default=0)
    rows_version = models.PositiveBigIntegerField(default=0)
    # The chat version that last changed what the filter bar counts or points at: a call made,
    # a call's status, kind or approval, a prompt; a push draws the bar only past it.
    facets_version = models.PositiveBigIntegerField(default=0)
    current_attempt = models.ForeignKey(
        "InferenceAttempt", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    mode = models.CharField(max_length=100, blank=True)
    usage: models.JSONField[Any] = models.JSONField(null=True, blank=True)
    # Runner presence: whether its socket is up, and since when it is not.
    runner_connected = models.BooleanField(default=False)
    hooked_at = models.DateTimeField(
        null=True, blank=True
    )  # webhooks told it started (notify/hooks)
    runner_left_at = models.DateTimeField(null=True, blank=True)
    runner_channel = models.CharField(max_length=200, blank=True)  # the latest runner socket
    # sha256 of the secret its runner sent in the hello that made the chat (frames.Hello): only
    # a hello with that secret gets the chat. Empty for a chat made before runners had one.
    runner_secret_hash = models.CharField(max_length=64, blank=True)
    # The runner's socket says it is alive every RUNNER_HEARTBEAT_SECONDS; a server that died cannot
    # say it has gone, so silence past the grace period counts as gone.
    runner_seen_at = models.DateTimeField(null=True, blank=True)
    # What the runner's latest ``session_info`` said (frames.SessionInfo): whether it takes
    # prompts, cancels and mode switches from the web, the modes the web may choose, the
    # agent's modes ({id, name, description}) and slash commands, whether it stays.
    allow_web = models.BooleanField(default=False)
    web_modes: models.JSONField[Any] = models.JSONField(default=list, blank=True)
    modes: models.JSONField[Any] = models.JSONField(default=list, blank=True)
    commands: models.JSONField[Any] = models.JSONField(default=list, blank=True)
    runner_stays = models.BooleanField(default=False)
    # The runner's reason for refusing the web's last cancel or mode switch, for the page.
    web_note = models.CharField(max_length=600, blank=True)
    # The agent's session (frames.SessionInfo): what a resume takes up again, and whether the
    # agent can resume it and close it (docs/protocol.md#resuming-a-run).
    agent_session_id = models.CharField(max_length=200, blank=True)
    agent_resumes = models.BooleanField(default=False)
    agent_closes = models.BooleanField(default=False)
    # Who took the run up again, when and from where (a host's Resume: the person and the
    # host; ``koruweb agent --resume``: the token), and who stopped it from the web.
    resumed_at = models.DateTimeField(null=True, blank=True)
    resumed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    resumed_via = models.CharField(max_length=150, blank=True)
    stopped_at = models.DateTimeField(null=True, blank=True)
    stopped_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    # The whole change so far (the latest ``changes`` frame, activity/live/changes.py): files,
    # lines added and removed; None until a turn of a run in git has ended. ``changes_note``:
    # why the run has none (its directory is not in a git working tree).
    changed: models.JSONField[Any] = models.JSONField(null=True, blank=True)
    changes_note = models.CharField(max_length=500, blank=True)
    changes_base = models.CharField(max_length=64, blank=True)  # the run's first snapshot (tree)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["workspace", "-created_at"]),
            models.Index(  # runs the webhooks are still owed (notify/hooks)
                fields=["hooked_at"],
                condition=models.Q(hooked_at__isnull=True),
                name="chats_hook_owed",
            ),
        ]

    def __str__(self) -> str:
        return self.title or str(self.id)

    @property
    def display_name(self) -> str:
        """What people call the run wherever it is named (its page and tab, the runs list, the
        inbox, search, exports): its title, else its agent's run and when it started. Made of
        the chat's own fields: a list of runs pays no query for it."""
        if self.title:
            return self.title
        when = timezone.localtime(self.created_at).strftime("%-d %b %Y, %H:%M")
        return f"{self.agent_name or 'Agent'} run, {when}"

    @property
    def takes_prompts(self) -> bool:
        """The web may send this run a message now: it allows it, and its runner is
        connected or stays (a message waits for a runner that stays, never for one that left)."""
        return self.allow_web and (self.runner_connected or self.runner_stays)

    @cached_property
    def host_run(self) -> Any:
        """The latest ``HostRun`` a host started for this chat (a start or a resume), with its
        host; None for a run started from a terminal."""
        from activity.models.accounts import HostRun

        runs = HostRun.objects.filter(chat_id=self.pk, host__workspace_id=self.workspace_id)
        runs = runs.select_related("host")
        return runs.order_by("-created_at").first()

    @property
    def cannot_resume(self) -> str:
        """Why the run's page cannot resume it now ("": it can). Only a run a host started is
        resumed from its page, once its runner is gone, if its agent can resume sessions
        (docs/protocol.md#resuming-a-run); a run from a terminal is resumed where it ran."""
        from activity.models.accounts import RUNNING

        run = self.host_run
        if not self.agent_session_id:
            return "koruweb does not know its agent's session (its runner is older than resuming)."
        if not self.agent_resumes:
            agent = self.agent_name or "Its agent"
            return f"{agent} cannot resume its sessions: it offers neither session/resume nor load."
        if run is None:
            return f"Resume it where it ran: koruweb agent --resume {self.pk}"
        if self.runner_connected:
            return "Its runner is still connected: it can be resumed once that runner is gone."
        if run.status == "starting":
            return f"A runner is starting for it on {run.host.name}…"
        if run.status in RUNNING:
            return "Its host has not yet said that its runner ended: it can be resumed once it has."
        if not run.root:
            return "It was started before koruweb kept a run's directory: it cannot be resumed."
        return ""

    @property
    def stoppable(self) -> bool:
        """The web may end this run now: a host started it, its runner is connected and knows
        ``stop`` (it said its session: a runner older than Stop ignores the frame)."""
        run = self.host_run
        runs = run is not None and run.status == "started" and self.runner_connected
        return runs and bool(self.agent_session_id)

    @property
    def web_choices(self) -> list[dict[str, Any]]:
        """The agent's modes the web may switch to (in ``--web-modes``), in the agent's order."""
        return [mode for mode in self.modes if mode.get("id") in self.web_modes]

    @cached_property
    def web_drawn(self) -> tuple[list[WebPrompt], int]:
        """The web's messages the drive region shows, oldest first, and how many older ones
        it leaves out: every one waiting (queued, sent: at most ``DRIVE_QUEUE_PER_RUN``, as
        sending refuses more) and the last ``WebPrompt.HISTORY_SHOWN`` that did not go
        (refused; removed, and by whom). Bounded however many were ever sent: two queries, a
        third to count the older ones when there are; none for a run that takes nothing from
        the web. Those that went are the run's turns."""
        if not self.allow_web:
            return [], 0
        prompts = self.web_prompts.select_related("author", "removed_by")
        waiting = prompts.filter(status__in=WebPrompt.WAITING).order_by("created_at")
        ended = prompts.filter(status__in=WebPrompt.ENDED).order_by("-created_at")
        last = list(ended[: WebPrompt.HISTORY_SHOWN + 1])
        more = len(last) > WebPrompt.HISTORY_SHOWN
        earlier = ended.count() - WebPrompt.HISTORY_SHOWN if more else 0
        shown = list(waiting[: settings.DRIVE_QUEUE_PER_RUN]) + last[: WebPrompt.HISTORY_SHOWN]
        return sorted(shown, key=lambda prompt: prompt.created_at), earlier

    @property
    def web_queue(self) -> list[WebPrompt]:
        return self.web_drawn[0]

    @property
    def web_earlier(self) -> int:
        """How many messages that did not go are older than those ``web_queue`` shows."""
        return self.web_drawn[1]

    @cached_property
    def web_people(self) -> dict[int, str]:
        """The names of whoever sent or cancelled this chat's turns from the web, by user id:
        one query for a whole page of turns."""
        from django.contrib.auth import get_user_model

        user = get_user_model()
        people = user.objects.filter(
            models.Q(sent_turns__chat=self) | models.Q(cancelled_turns__chat=self)
        )
        return dict(people.distinct().values_list("pk", user.USERNAME_FIELD))


class InferenceAttempt(models.Model):
    """A turn: one prompt and everything until its stop reason.

    What an agent does before the first prompt (a session's set-up, say) is kept in a turn of
    its own whose prompt is ``BEFORE_ANY_PROMPT``: no person asked for it."""

    BEFORE_ANY_PROMPT = "(what the agent did before the first prompt)"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    chat = models.ForeignKey(Chat, on_delete=models.CASCADE, related_name="attempts")
    prompt = models.TextField(blank=True)  # the user's prompt, bounded like agent_input
    started_at = models.BigIntegerField()  # epoch ms, the runner's clock
    ended_at = models.BigIntegerField(null=True, blank=True)
    stop_reason = models.CharField(max_length=64, blank=True)
    plan: models.JSONField[Any] = models.JSONField(default=list, blank=True)
    usage: models.JSONField[Any] = models.JSONField(null=True, blank=True)
    # The session's usage_update readings when the turn started ("before") and the latest one
    # during it ("after"): what the turn cost is how far the session's cost grew (usage.py).
    meter: models.JSONField[Any] = models.JSONField(default=dict, blank=True)
    # What koruweb did not understand of what the agent sent in this turn, for the page.
    notes: models.JSONField[Any] = models.JSONField(default=list, blank=True)
    # Who sent its prompt from the web (null: the runner's own prompt), and who asked from
    # the web to cancel it, when.
    sent_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="sent_turns",
    )
    cancelled_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="cancelled_turns",
    )
    cancel_asked_at = models.DateTimeField(null=True, blank=True)
    told_at = models.DateTimeField(null=True, blank=True)  # its followers told it ended (notify/)
    mailed_at = models.DateTimeField(null=True, blank=True)  # … and mailed (notify/mail)
    hooked_at = models.DateTimeField(null=True, blank=True)  # webhooks told it ended (notify/hooks)
    # What the turn changed in the run's git working tree: {"files", "added", "removed"} (its
    # diff: ``TurnDiff``); None for a turn that did not say (a run outside git).
    changed: models.JSONField[Any] = models.JSONField(null=True, blank=True)
    version = models.PositiveBigIntegerField(default=0)
    created_version = models.PositiveBigIntegerField(default=0)

    class Meta:
        ordering = ["started_at", "created_version"]
        indexes = [
            models.Index(  # turns the webhooks are still owed (notify/hooks)
                fields=["hooked_at"],
                condition=models.Q(hooked_at__isnull=True),
                name="turns_hook_owed",
            ),
        ]

    def __str__(self) -> str:
        return f"turn {self.id}"

    @property
    def sent_by_name(self) -> str:
        return self.chat.web_people.get(self.sent_by_id or 0, "a former member")

    @property
    def cancelled_by_name(self) -> str:
        return self.chat.web_people.get(self.cancelled_by_id or 0, "a former member")

    @property
    def before_any_prompt(self) -> bool:
        """The turn of what the agent did before anyone prompted it."""
        return self.prompt == self.BEFORE_ANY_PROMPT


class Message(models.Model):
    """The assistant's reply in one turn: its Markdown, with the thoughts kept apart."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    chat = models.ForeignKey(Chat, on_delete=models.CASCADE, related_name="messages")
    attempt = models.OneToOneField(InferenceAttempt, on_delete=models.CASCADE, related_name="reply")
    markdown = models.TextField(blank=True)
    thoughts = models.TextField(blank=True)
    # The agent's messageId of the last chunk: a new id starts a new paragraph.
    agent_message_id = models.CharField(max_length=200, blank=True)
    version = models.PositiveBigIntegerField(default=0)

    def __str__(self) -> str:
        return f"reply {self.id}"

    @property
    def markdown_bytes(self) -> int:
        return len(self.markdown.encode("utf-8"))


class TurnDiff(models.Model):
    """What the agent changed in the run's git working tree by the end of a turn (the runner's
    ``changes`` frame, bounded and masked like every string an agent sends): the turn's diff
    (since it started) and the whole run's (since the run started), each with every file's
    counts (``[{"path", "added", "removed"}]``, None counts for a binary file). The run's whole
    change is its latest turn's ``run_diff``."""

    attempt = models.OneToOneField(InferenceAttempt, on_delete=models.CASCADE, related_name="diff")
    chat = models.ForeignKey(Chat, on_delete=models.CASCADE, related_name="diffs")
    turn_diff = models.TextField(blank=True)
    turn_files: models.JSONField[Any] = models.JSONField(default=list)
    turn_more_files = models.PositiveIntegerField(default=0)
    turn_cut_bytes = models.PositiveBigIntegerField(default=0)
    run_diff = models.TextField(blank=True)
    run_files: models.JSONField[Any] = models.JSONField(default=list)
    run_more_files = models.PositiveIntegerField(default=0)
    run_cut_bytes = models.PositiveBigIntegerField(default=0)
    skipped = models.PositiveIntegerField(default=0)  # files too big to snapshot
    at = models.BigIntegerField()  # epoch ms, the runner's clock

    class Meta:
        indexes = [models.Index(fields=["chat", "-at"])]

    def __str__(self) -> str:
        return f"diff of {self.attempt_id}"

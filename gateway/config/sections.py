"""The sections of the configuration (``telegram:``, ``sessions:``, ``media:`` ...), one model each."""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_settings import (
    NoDecode,
)

from agent.settings import MAX_TOKEN_COUNT
from gateway.local_time import check_timezone, parse_clock, parse_quiet_hours

DEFAULT_SYSTEM_PROMPT = (
    "You are Hygieia, a helpful assistant in a long-lived chat. Messages from people arrive with a short "
    "header naming the author and time. Earlier parts of a long conversation may have been summarized; "
    "use session_search and recall to look up what was said before when it matters."
)

UserList = Annotated[list[str], NoDecode]


def _time_of_day(value: str) -> str:
    parse_clock(value)
    return value


def split_csv(value: Any) -> Any:
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    return value


class TelegramSettings(BaseModel):
    """Keys under ``telegram:``."""

    model_config = ConfigDict(extra="forbid")

    mode: Literal["polling", "webhook"] = "polling"
    webhook_url: str | None = None
    webhook_listen: str = "127.0.0.1"
    webhook_port: int = Field(8443, ge=1, le=65535)
    webhook_secret: SecretStr | None = None
    ambient: bool = True
    poll_timeout: int = Field(10, ge=0, le=50)
    compaction_notice: Literal["off", "on_failure", "always"] | None = None
    """Telegram chats' ``sessions.compaction_notice`` (unset: that one)."""
    rate_per_second: float = Field(20.0, gt=0, le=1000)
    """Messages per second for the whole bot (Telegram's limit is about 30; the room below it absorbs
    network jitter). With ``cluster.shared_rate_limits`` on PostgreSQL, for every worker together."""
    rate_chat_interval_seconds: float = Field(1.1, gt=0, le=60)
    """Seconds between two messages to one chat (Telegram: about one per second)."""
    rate_group_per_minute: float = Field(19.0, gt=0, le=1000)
    """Messages per minute to one group or channel (Telegram: 20)."""
    drafts: bool = True
    """In private chats, show a streamed reply as a draft (``sendMessageDraft``) and send it once,
    whole, at the end, instead of a message edited while it is written."""
    draft_refresh_seconds: float = Field(20.0, ge=0.1, le=25.0)
    """A draft lapses about 30 s after it was last sent: it is sent again at least this often, even
    when the text has not changed."""


class DiscordSettings(BaseModel):
    """Keys under ``discord:``."""

    model_config = ConfigDict(extra="forbid")

    ambient: bool = True
    compaction_notice: Literal["off", "on_failure", "always"] | None = None
    """Discord chats' ``sessions.compaction_notice`` (unset: that one)."""
    shard_ids: list[int] | Literal["auto"] | None = None
    """Shards this process connects (with ``shard_count``); ``auto``: claim a fair, disjoint share
    through the database (several intake nodes); unset: one connection, or every shard of
    ``shard_count``. Env form: ``HYGIEIA_DISCORD__SHARD_IDS=0,1`` (or ``[0,1]``, or ``auto``)."""
    shard_count: int | None = Field(None, ge=1)
    """Shards of the bot; with ``auto`` and unset, the cluster's count (or Discord's recommendation)."""
    shard_lease_seconds: float = Field(15.0, ge=1.0, le=600.0)
    """``auto``: a node's claim on a shard lasts this long unrenewed (renewed every third of it), so a
    dead node's shards are taken over within about this time."""
    identify_interval_seconds: float = Field(5.0, ge=0.0, le=60.0)
    """``auto``: seconds between the shard connections this process opens (Discord allows a bot one
    session start per 5 s unless its ``max_concurrency`` is higher)."""
    guild_ready_timeout: float = Field(2.0, ge=0.0, le=60.0)
    """Seconds discord.py waits after the last guild arrives before it calls the bot ready (its own
    default, 2): more guilds may still be on their way. A local fake sends them all at once."""
    slash_commands: bool = True
    command_guild_ids: list[int] | None = None
    """Register the slash commands in these guilds only (they appear at once: for development);
    unset registers them globally."""
    interaction_defer_seconds: float = Field(2.0, gt=0, lt=3.0)
    """An interaction not answered by then is acknowledged ("thinking...") and answered later."""
    rate_per_second: float = Field(40.0, gt=0, le=1000)
    """With ``cluster.shared_rate_limits`` on PostgreSQL: messages posted or edited per second by every
    worker together (Discord's global limit is 50 requests/s); discord.py's own buckets stay underneath."""
    rate_channel_interval_seconds: float = Field(1.0, gt=0, le=60)
    """Seconds between two posts or edits in one channel, cluster-wide (Discord: 5 per 5 s)."""

    @field_validator("shard_ids", mode="before")
    @classmethod
    def _shard_list(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            return [value]  # the env form "3" arrives JSON-decoded
        if not isinstance(value, str):
            return value
        if value.strip().lower() == "auto":
            return "auto"
        try:
            return [int(item) for item in value.split(",") if item.strip()]
        except ValueError:
            raise ValueError("a comma-separated list of shard numbers (0,1), or auto") from None

    @property
    def auto_shards(self) -> bool:
        return self.shard_ids == "auto"


class SessionSettings(BaseModel):
    """Keys under ``sessions:``: how chats map to sessions and when (if ever) they reset."""

    model_config = ConfigDict(extra="forbid")

    group_mode: Literal["shared", "per_user"] = "shared"
    idle_reset_minutes: int | None = Field(None, ge=1)
    daily_reset_hour: int | None = Field(None, ge=0, le=23)
    busy_mode: Literal["queue", "interrupt"] = "queue"
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    hygiene_notice: bool = False
    max_inbound_chars: int = Field(32_000, ge=100)
    max_inbound_attachment_chars: int = Field(100_000, ge=100)
    """Characters kept of each text file that comes with a message (every platform)."""
    max_inbound_total_chars: int = Field(200_000, ge=100, le=500_000)
    """Characters kept of a whole message, its text and files together (every platform)."""
    turn_grace_seconds: float = Field(30.0, ge=0)
    # A compaction still running after this long gets the one-line "summarizing" notice.
    summarizing_notice_seconds: float = Field(5.0, ge=0)
    compaction_notice: Literal["off", "on_failure", "always"] = "on_failure"
    """What a chat is told about compactions during its turns (gateway.serving.compaction_notices)."""
    answer_bots: bool = False
    """Answer messages from other bots that address us; off: they are kept as context, unanswered."""
    max_consecutive_bot_replies: int = Field(3, ge=0, le=1000)
    """With ``answer_bots``: bot messages answered in a row in one chat before the rest are only kept
    (cuts bot-to-bot loops); a person's message in the chat starts the count again."""


class ToolGlobs(BaseModel):
    """``tools: {include: [globs], exclude: [globs]}``: which tools are kept (none included = all)."""

    model_config = ConfigDict(extra="forbid")

    include: list[str] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)


_SELECTOR = re.compile(r"\*|(user|chat):[^:\s]+:\S+")


class McpServerSettings(BaseModel):
    """One entry of ``mcp_servers:``: a stdio child (``command``) or Streamable HTTP (``url``).

    Values in ``env`` and ``headers`` may be ``${NAME}`` references, resolved from the service's
    environment at start (a literal secret there is refused by the secret check)."""

    model_config = ConfigDict(extra="forbid")

    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    enabled: bool = True
    timeout_seconds: float = Field(60.0, gt=0, le=3600)
    """Per call: past it the call is a tool error and the turn goes on."""
    connect_timeout_seconds: float = Field(30.0, gt=0, le=600)
    tools: ToolGlobs = Field(default_factory=ToolGlobs)
    allow: list[str] = Field(default_factory=list)
    """Who is offered the tools: ``user:<platform>:<id>``, ``chat:<platform>:<id>``, ``*`` (every
    allowed user); empty: admin users only."""

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerSettings:
        if bool(self.command) == bool(self.url):
            raise ValueError("give either command (a stdio server) or url (Streamable HTTP), not both")
        if self.url and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"url {self.url!r} must start with http:// or https://")
        if self.url and (self.args or self.env or self.cwd):
            raise ValueError("args, env and cwd are for a stdio server (command); this one has a url")
        if self.command and self.headers:
            raise ValueError("headers are for a Streamable HTTP server (url); this one has a command")
        for rule in self.allow:
            if not _SELECTOR.fullmatch(rule):
                raise ValueError(f"allow: {rule!r} is not user:<platform>:<id>, chat:<platform>:<id> or *")
        return self


class ChatOverride(BaseModel):
    """One entry of ``overrides:``: settings for one chat (or one thread of it).

    ``chat`` is the platform's chat id as a string; with ``thread`` the entry is for that thread
    (topic) only and beats an entry for the whole chat. Frozen into a session when it starts.
    """

    model_config = ConfigDict(extra="forbid")

    platform: str = Field(min_length=1)
    chat: str = Field(min_length=1)
    thread: str | None = None
    system_prompt: str | None = None
    model: str | None = None
    summary_model: str | None = None
    budget_tokens: int | None = Field(None, ge=1000, le=MAX_TOKEN_COUNT)
    """The session's window is min(the model's window, this)."""
    compaction_notice: Literal["off", "on_failure", "always"] | None = None
    tools: ToolGlobs | None = None
    """Narrows the MCP tools this chat is offered (globs over ``mcp_<server>_<tool>`` names)."""

    @field_validator("chat", "thread", mode="before")
    @classmethod
    def _id_as_text(cls, value: Any) -> Any:
        # YAML reads an unquoted chat id (-100123) as a number: it names the same chat.
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


class DeliverySettings(BaseModel):
    """Keys under ``delivery:``: how replies are shown and go out, and when a queue item becomes a
    dead letter."""

    model_config = ConfigDict(extra="forbid")

    streaming: bool = True
    """Show replies while they are written (Telegram, Discord, the interactive console); a piped
    console never streams."""
    edit_interval_seconds: float = Field(1.0, ge=0.2, le=10.0)
    """At most one edit of a streamed reply per chat this often (platform rate limits)."""
    max_reply_parts: int = Field(10, ge=1, le=100)
    """A reply that needs more messages is cut after this many, with a note on how to get the rest."""
    outbox_max_attempts: int = Field(6, ge=1, le=100)
    """Sends of one reply before it is marked failed (a dead letter) and the chat is told once."""
    inbox_max_attempts: int = Field(5, ge=2, le=100)
    """Tries at serving one received message before it is marked failed and the sender is told once."""
    retry_base_seconds: float = Field(2.0, gt=0, le=3600)
    retry_max_seconds: float = Field(600.0, gt=0, le=86400)


class TranscriptionSettings(BaseModel):
    """Keys under ``media.transcription:``: how voice notes and audio become text.

    ``url``: an OpenAI-compatible server (``POST {url}/audio/transcriptions``, multipart ``file`` and
    ``model``, key from ``HYGIEIA_TRANSCRIPTION_API_KEY``); else ``command``: a local program given the
    audio file's path (``{file}`` in the command, else appended) that prints the transcript; neither:
    voice notes are off and the sender is told so.
    """

    model_config = ConfigDict(extra="forbid")

    url: str | None = None
    model: str = "whisper-1"
    command: str | None = None
    max_seconds: int = Field(600, ge=1)
    """Longer recordings are not transcribed (the sender is told)."""
    max_bytes: int = Field(25_000_000, ge=1000)
    timeout_seconds: float = Field(120.0, gt=0, le=3600)
    max_chars: int = Field(20_000, ge=100, le=1_000_000)
    """A longer transcript is cut here, with a note saying so."""

    @property
    def enabled(self) -> bool:
        return bool(self.url or self.command)


class MediaSettings(BaseModel):
    """Keys under ``media:``: pictures and PDFs the model is shown, voice notes transcribed."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    max_download_bytes: int = Field(20_000_000, ge=1)
    """Files larger than this are not fetched (Telegram's bots cannot fetch more than 20 MB)."""
    max_images_per_message: int = Field(5, ge=0, le=20)
    max_session_images: int = Field(20, ge=0, le=100)
    """Pictures in a conversation's active part; older ones are summarized away by compaction."""
    max_image_edge: int = Field(1568, ge=200, le=8000)
    max_pdf_pages: int = Field(100, ge=1, le=100)
    max_pdf_text_chars: int = Field(100_000, ge=1000)
    transcription: TranscriptionSettings = Field(default_factory=TranscriptionSettings)


class AdminSettings(BaseModel):
    """Keys under ``admin:``."""

    model_config = ConfigDict(extra="forbid")

    host: str = "127.0.0.1"
    port: int = Field(8765, ge=1, le=65535)
    trusted_proxies: list[str] = Field(default_factory=list)
    """Addresses or networks of reverse proxies whose X-Forwarded-For names the client (default none)."""

    @field_validator("trusted_proxies")
    @classmethod
    def _networks(cls, value: list[str]) -> list[str]:
        for entry in value:
            try:
                ipaddress.ip_network(entry.strip(), strict=False)
            except ValueError:
                raise ValueError(
                    f"admin.trusted_proxies: {entry!r} is not an IP address or network (e.g. 10.0.0.0/8)"
                ) from None
        return [entry.strip() for entry in value]


class SweepSettings(BaseModel):
    """Keys under ``scheduler.sweep:``: compact idle, well-filled sessions during quiet hours."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    quiet_hours: str = "02:00-06:00"
    idle_minutes: int = Field(30, ge=0)
    min_fill: float = Field(0.6, gt=0.0, le=1.0)
    interval_seconds: int = Field(600, ge=1)
    max_sessions: int = Field(20, ge=1)

    @field_validator("quiet_hours")
    @classmethod
    def _window(cls, value: str) -> str:
        parse_quiet_hours(value)
        return value


class TaskSettings(BaseModel):
    """Keys under ``scheduler.tasks:``: reminders and recurring tasks set with the ``schedule`` tool."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    poll_seconds: float = Field(10.0, ge=0.1, le=3600)
    max_per_chat: int = Field(20, ge=1)
    min_interval_seconds: int = Field(300, ge=1)
    max_prompt_chars: int = Field(2000, ge=10)
    chat_timezones: dict[str, str] = Field(default_factory=dict)

    @field_validator("chat_timezones")
    @classmethod
    def _zones(cls, value: dict[str, str]) -> dict[str, str]:
        for zone in value.values():
            check_timezone(zone)
        return value


class ResetJobSettings(BaseModel):
    """Keys under ``scheduler.resets:``: end idle/daily sessions on schedule (needs a reset policy)."""

    model_config = ConfigDict(extra="forbid")

    interval_seconds: int = Field(300, ge=1)
    goodbye: Literal["none", "notice"] = "none"


class UpkeepSettings(BaseModel):
    """Keys under ``scheduler.upkeep:``: daily database care and pruning of finished queue rows."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    at: str = "04:30"
    prune_after_days: int = Field(30, ge=2)

    _check_at = field_validator("at")(_time_of_day)


class RetentionSettings(BaseModel):
    """Keys under ``scheduler.retention:``: delete archived messages after N days (off by default)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = False
    archived_days: int = Field(365, ge=1)
    at: str = "04:45"

    _check_at = field_validator("at")(_time_of_day)


class SchedulerSettings(BaseModel):
    """Keys under ``scheduler:``: the jobs ``hygieia run`` schedules (run once per cluster)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    job_lease_seconds: float = Field(120.0, ge=1.0)
    sweep: SweepSettings = Field(default_factory=SweepSettings)
    tasks: TaskSettings = Field(default_factory=TaskSettings)
    resets: ResetJobSettings = Field(default_factory=ResetJobSettings)
    upkeep: UpkeepSettings = Field(default_factory=UpkeepSettings)
    retention: RetentionSettings = Field(default_factory=RetentionSettings)


class ClusterSettings(BaseModel):
    """Keys under ``cluster:``: several ``hygieia run`` processes on one PostgreSQL database.

    On SQLite (one process) none of these apply. See docs/operations.md, "Scale-out".
    """

    model_config = ConfigDict(extra="forbid")

    intake_lease_seconds: float = Field(9.0, ge=2.0, le=300.0)
    """How long a platform's intake leadership lasts unrenewed: a standby takes over within this
    plus ``intake_lease_seconds / 4`` (its retry interval) plus the adapter's start."""
    session_lease_seconds: float | None = Field(None, ge=2.0, le=3600.0)
    """How long a worker's claim on a session's inbox items lasts unrenewed (renewed every third
    of it while a turn runs, and every write of the turn is fenced by it): a dead worker's chats
    move on within this plus a third of it. Default: 9 s on PostgreSQL (picked up within 12 s),
    30 s on SQLite."""
    outbox_lease_seconds: float | None = Field(None, ge=2.0, le=3600.0)
    """How long a delivery round owns a chat's due replies unrenewed (renewed every third of it
    while the round sends) before another worker may send them. Default: 9 s on PostgreSQL,
    120 s on SQLite."""
    inbox_poll_seconds: float = Field(5.0, ge=0.05, le=60.0)
    """How often a worker looks for inbox items received by another process: the safety net under
    the wake-ups (``notify``), so slow by default."""
    shared_rate_limits: bool = True
    """Pace platform sends through the database, so that every worker together stays inside
    Telegram's limits (``telegram.rate_*``) and a 429 seen by one pauses all; off: each process
    paces only its own sends (PTB's limiter), so N workers may send N times the limit."""
    notify: bool = True
    """Wake workers through PostgreSQL ``LISTEN/NOTIFY`` sent with each inbox and outbox write; off:
    workers only poll (every ``inbox_poll_seconds``)."""
    metrics_port: int | None = Field(None, ge=0, le=65535)
    """Serve this process's own ``/metrics`` (role, leadership, leases) on this port; unset: none."""
    metrics_host: str = "127.0.0.1"


class DelegationSettings(BaseModel):
    """The ``delegate`` tool's sub-agents (keys under ``delegation:``)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    max_turns: int = Field(12, ge=1, le=200)
    """Model calls (tool rounds) a sub-agent may make before it must stop."""
    max_tokens: int = Field(100_000, ge=1000)
    """Tokens (input, cache and output, added over its calls) after which no further call is made."""
    timeout_seconds: float = Field(300.0, gt=0, le=3600)
    model: str | None = None
    """The sub-agents' model; unset: the chat's own."""

"""Config keys, ids and channel versions: what a caller names, checked before any I/O."""

from __future__ import annotations

import binascii
import random
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeGuard

from langchain_core.runnables import RunnableConfig

from ..errors import ChannelVersionError, ConfigError, shown


@dataclass(slots=True)  # made on every put or put_writes: not frozen (see core.plan.Query)
class CheckpointKey:
    """Where a checkpoint lives; `checkpoint_id` None means the thread's latest."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str | None

    def config(self, checkpoint_id: str | None = None) -> RunnableConfig:
        """The config LangGraph passes around for this checkpoint (or `checkpoint_id` of the lane)."""
        return {
            "configurable": {
                "thread_id": self.thread_id,
                "checkpoint_ns": self.checkpoint_ns,
                "checkpoint_id": checkpoint_id or self.checkpoint_id,
            }
        }


def require_text(value: Any, what: str) -> str:
    """A value that must go in a text column: a str PostgreSQL can store (no NUL, no lone
    surrogate, which UTF-8 cannot encode)."""
    if type(value) is not str and not isinstance(value, str):
        raise ConfigError(f"{what} must be a string, got {type(value).__name__} {shown(value)}")
    if "\x00" in value:
        raise ConfigError(f"{what} {shown(value)} contains a NUL character, which PostgreSQL text cannot store")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ConfigError(f"{what} {shown(value)} contains a lone surrogate, which UTF-8 cannot encode") from None
    return value


def id_text(value: Any, what: str) -> str:
    """An id a caller may give as a str, an int or a UUID (LangGraph passes them through);
    any other type is refused rather than turned into its str()."""
    if type(value) is str:
        return require_text(value, what)
    if isinstance(value, uuid.UUID) or (isinstance(value, int) and not isinstance(value, bool)):
        return str(value)
    return require_text(value, what)


def version_text(version: Any, channel: str) -> str:
    """A channel version as stored: LangGraph's are str, int or float (get_next_version's)."""
    if isinstance(version, (int, float)) and not isinstance(version, bool):
        return str(version)
    return require_text(version, f"version of channel {shown(channel)}")


def is_mapping(value: object) -> TypeGuard[Mapping[Any, Any]]:
    """Whether `value` is a Mapping. A dict is answered first, without ABCMeta's
    `__instancecheck__` (a call of its own) and, compiled, without looking up the imported
    `Mapping` (a dict lookup at every use); LangGraph hands dicts, as a rule."""
    return type(value) is dict or isinstance(value, Mapping)


def parse_config(config: Any, *, need_checkpoint_id: bool = False) -> CheckpointKey:
    """The checkpoint a config (a RunnableConfig, as a rule) points at; names any missing
    or unusable key. Any value is taken and checked (a compiled core checks annotations)."""
    configurable: Any = (config or {}).get("configurable") if is_mapping(config) else None
    if not is_mapping(configurable):
        raise ConfigError("config['configurable'] is missing: pass {'configurable': {'thread_id': ...}}")
    thread_id = configurable.get("thread_id")
    if thread_id is None or thread_id == "":
        raise ConfigError("config['configurable']['thread_id'] is missing: every checkpoint belongs to a thread")
    checkpoint_id = configurable.get("checkpoint_id")
    if need_checkpoint_id and not checkpoint_id:
        raise ConfigError("config['configurable']['checkpoint_id'] is missing: pass the config returned by put()")
    checkpoint_ns = configurable.get("checkpoint_ns") or ""
    # Each key as it comes, when it is a str PostgreSQL stores as it is (what `require_text`
    # checks, without its call: two configs a step); anything else through the checks.
    if not (type(thread_id) is str and thread_id.isascii() and "\x00" not in thread_id):
        thread_id = id_text(thread_id, "config['configurable']['thread_id']")
    if not (type(checkpoint_ns) is str and checkpoint_ns.isascii() and "\x00" not in checkpoint_ns):
        checkpoint_ns = require_text(checkpoint_ns, "config['configurable']['checkpoint_ns']")
    if checkpoint_id and not (type(checkpoint_id) is str and checkpoint_id.isascii() and "\x00" not in checkpoint_id):
        checkpoint_id = id_text(checkpoint_id, "config['configurable']['checkpoint_id']")
    return CheckpointKey(thread_id, checkpoint_ns, checkpoint_id or None)


def checkpoint_id_of(config: Any, what: str) -> str | None:
    """The checkpoint id a config names, or None; nothing else of it is required."""
    configurable = config.get("configurable") if isinstance(config, Mapping) else None
    if configurable is None:
        return None
    if not isinstance(configurable, Mapping):
        raise ConfigError(f"{what}['configurable'] must be a mapping, got {type(configurable).__name__}")
    checkpoint_id = configurable.get("checkpoint_id")
    return id_text(checkpoint_id, f"{what}['configurable']['checkpoint_id']") if checkpoint_id else None


def before_checkpoint_id(before: RunnableConfig) -> str:
    """The checkpoint id of `list(before=...)`: under `configurable`, or at the top level
    (the Agent Server's form); a `before` naming none is a ConfigError, not an empty page."""
    checkpoint_id = checkpoint_id_of(before, "before")
    top_level: Any = before.get("checkpoint_id") if isinstance(before, Mapping) else None
    if checkpoint_id is None and top_level:
        checkpoint_id = id_text(top_level, "before['checkpoint_id']")
    if checkpoint_id is None:
        raise ConfigError(
            "before names no checkpoint: pass {'configurable': {'checkpoint_id': ...}} (or a top-level 'checkpoint_id'), "
            f"got {shown(before, 120) if not isinstance(before, Mapping) else sorted(map(str, before))}"
        )
    return checkpoint_id


# LangGraph's config key (in `configurable`) mapping each namespace a subgraph's call runs
# under to the checkpoint id its graph is at.
CHECKPOINT_MAP: Final = "checkpoint_map"
LEGACY_VERSION_DIGITS: Final = 20  # versions before 0.2: 20 decimal digits, a dot, 16 hex digits
VERSION_DIGITS: Final = 8  # hex digits of the version number: 4 billion versions of a channel
_URLSAFE: Final = bytes.maketrans(b"+/", b"-_")  # base64 to base64url


def next_version(current: str | int | float | None) -> str:
    """A version that sorts after `current` as text; the random tail keeps forks apart.

    Two forks of one parent both reach version n+1 of a channel; values are stored
    once per (thread, namespace, channel, version), so equal versions must not name
    different values: the tail is 64 random bits. A thread begun with the longer,
    pre-0.2 versions keeps their width, so its versions still sort.
    """
    if isinstance(current, str):
        head = current.split(".", 1)[0]
        if len(head) == LEGACY_VERSION_DIGITS:
            return f"{int(head) + 1:020d}.{random.getrandbits(64):016x}"
        number = int(head, 16)
    else:
        number = 0 if current is None else int(current)
    if number + 1 >= 16**VERSION_DIGITS:
        raise ChannelVersionError(f"version {shown(current)} is the last one a channel can have")
    # base64url of the 8 bytes without its padding (11 characters), as base64.urlsafe_b64encode
    # would give it less the Python function calls around binascii (~0.5 us of ~1.6 a call).
    tail = binascii.b2a_base64(random.getrandbits(64).to_bytes(8, "big"), newline=False)[:11].translate(_URLSAFE).decode()
    return f"{number + 1:0{VERSION_DIGITS}x}.{tail}"

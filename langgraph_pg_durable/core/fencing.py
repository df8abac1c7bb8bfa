"""One writer per thread: which policy a write goes by, the token it carries, and the error
when it is refused (README, "Exactly once"). Pure; the statements are in sql/fencing.py.

A run (one invoke or stream call, subgraphs and Send tasks included) takes a thread with
its first read of it (its first write, when it did not read), before it reads the state it
builds on, and carries a token, random per run and saver, in every write; a write whose
token is no longer the thread's stores nothing. Policies, a saver option with a per-call
override in `config["configurable"]["lgpd_fencing"]`:

- `takeover` (default): a new run takes the thread, whoever held it. The old run's next
  write is refused (ThreadTakenError): a process presumed dead that is not, or a job
  dispatched twice, cannot fork the history, and a resume after a crash always goes on.
- `reject`: a new run is refused (ThreadBusyError) while another live run holds the thread:
  its row in run_log says `running` and it wrote within the window. A run that crashed is
  live until the window has passed since its last write.
- `wait`: as `reject`, but the new run waits (bounded), before it reads, for the holder to
  finish or go stale.
- `allow`: no token and no check: the behaviour before fencing.

A call made outside any run (`update_state`, a saver called directly) is a run of its own:
it takes the thread, by the policy, for its one write. A write in a run never refuses the
run's own other writes: they all carry its one token.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final

from ..errors import ConfigError, ThreadBusyError, ThreadHeldError, ThreadTakenError, shown
from ..sql.fencing import Holder
from .keys import is_mapping

POLICIES: Final = ("takeover", "reject", "wait", "allow")
DEFAULT_POLICY: Final = "takeover"
CONFIG_KEY: Final = "lgpd_fencing"  # config["configurable"][CONFIG_KEY]: the policy of one call
DEFAULT_WINDOW: Final = timedelta(minutes=2)  # a holder that wrote within it, and is running, is live
DEFAULT_WAIT: Final = timedelta(minutes=5)  # how long `wait` waits for a live holder at most
FIRST_PAUSE: Final = 0.05  # seconds: `wait`'s first pause, doubled up to MAX_PAUSE
MAX_PAUSE: Final = 2.0


def check_policy(policy: Any, where: str = "fencing") -> str:
    """The policy, or a ConfigError naming `where` it came from."""
    if not isinstance(policy, str) or policy not in POLICIES:
        raise ConfigError(f"{where} must be one of {', '.join(map(repr, POLICIES))}, got {shown(policy)}")
    return policy


def check_duration(value: Any, name: str) -> timedelta:
    """A positive timedelta, or a ConfigError naming the option."""
    if not isinstance(value, timedelta) or value <= timedelta(0):
        raise ConfigError(f"{name} must be a positive datetime.timedelta, got {shown(value)}")
    return value


def policy_of(config: Mapping[str, Any], default: str) -> str:
    """The policy of a call: its config's override, else the saver's."""
    configurable = config.get("configurable")
    given = configurable.get(CONFIG_KEY) if is_mapping(configurable) else None
    return default if given is None else check_policy(given, f"config['configurable'][{CONFIG_KEY!r}]")


def new_writer() -> str:
    """A token for one run of one saver: 128 random bits as hex."""
    return os.urandom(16).hex()


@dataclass(slots=True)  # made on every put or put_writes: not frozen (see core.plan.Query)
class Fence:
    """What one read or write carries: the policy, the run's token and run id, and whether
    it takes the thread first (the run's first read or write of it, until one committed)."""

    policy: str
    writer: str
    run_id: str
    taking: bool

    def taken(self) -> Fence:
        """This fence once the run holds the thread (its later writes take it no more)."""
        return Fence(self.policy, self.writer, self.run_id, False)

    def take_params(self, thread_id: str, window: timedelta) -> dict[str, Any]:
        return {"thread_id": thread_id, "holder_run": self.run_id, "fence": self.writer, "window": window}


def refusal(operation: str, thread_id: str, fence: Fence, holder: Holder | None, waited: float | None = None) -> ThreadHeldError | None:
    """The error of a write or take under `fence` that stored nothing, from the thread's
    holder row (None: no row), or None when the run does hold the thread (the write stored
    nothing for another reason). `waited`: seconds `wait` waited."""
    if holder is not None and holder.writer == fence.writer:
        return None
    if holder is None:
        return ThreadTakenError(
            f"{operation}: thread {shown(thread_id)} was deleted while run {shown(fence.run_id)} wrote to it; "
            "nothing was written. Start the run again to write the thread anew.",
            thread_id=thread_id,
            holder_run_id=None,
            held_since=None,
            last_write=None,
        )
    run_id, since, status, last_write = holder.run_id, holder.taken_at, holder.status, holder.last_write
    about = f"run {shown(run_id)} holds it since {since}" + (f" (status {status}, last write {last_write})" if status else "")
    if fence.taking:
        waited_text = f" after waiting {waited:.1f} s" if waited is not None else ""
        return ThreadBusyError(
            f"{operation}: thread {shown(thread_id)} is busy{waited_text}: {about}. Run {shown(fence.run_id)} was refused "
            f"under fencing policy {fence.policy!r}; nothing was written. Try again when that run has finished, or pass "
            f"config['configurable'][{CONFIG_KEY!r}] = 'takeover' to take the thread from it.",
            thread_id=thread_id,
            holder_run_id=run_id,
            held_since=since,
            last_write=last_write,
        )
    return ThreadTakenError(
        f"{operation}: thread {shown(thread_id)} was taken by another run: {about}. Run {shown(fence.run_id)} no longer "
        "holds it, and its write was refused so that the thread's history does not fork; nothing was written.",
        thread_id=thread_id,
        holder_run_id=run_id,
        held_since=since,
        last_write=last_write,
    )


def pauses(limit: timedelta) -> list[float]:
    """`wait`'s pauses between attempts to take a thread: doubling from FIRST_PAUSE up to
    MAX_PAUSE, adding up to `limit`."""
    out: list[float] = []
    left = limit.total_seconds()
    pause = FIRST_PAUSE
    while left > 0:
        out.append(min(pause, left))
        left -= pause
        pause = min(pause * 2, MAX_PAUSE)
    return out

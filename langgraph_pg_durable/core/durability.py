"""What a commit the server acknowledged survives: the settings row of `sql.durability.READ`
turned into a report, with the problems (commits a crash or a failover can lose, commits
that hang) and the notes that `setup()` logs and `lgpd doctor` shows; and the saver's own
`synchronous_commit` option, checked."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from ..errors import ConfigError, shown
from ..sql.durability import SETTINGS
from ..sql.durability import DurabilityColumn as D

# What a saver may ask its commits to wait for: at least the server's own WAL flush.
# ("off" is refused: an option that makes commits less durable has no place here.)
COMMIT_LEVELS: Final = ("local", "remote_write", "on", "remote_apply")
# Levels under which a commit waits for the synchronous standbys (when any are named).
WAITS_FOR_STANDBYS: Final = ("remote_write", "on", "remote_apply")
SYNC_STATES: Final = ("sync", "quorum")

_NUM_SYNC: Final = re.compile(r"^\s*(?:(?:first|any)\s+)?(\d+)\s*\(", re.IGNORECASE)


def check_synchronous_commit(value: Any) -> str | None:
    """The `synchronous_commit` option of a saver, checked: None (the server's) or one of COMMIT_LEVELS."""
    if value is None or (isinstance(value, str) and value in COMMIT_LEVELS):
        return value
    raise ConfigError(f"synchronous_commit must be None (the server's) or one of {', '.join(map(repr, COMMIT_LEVELS))}, got {shown(value)}")


@dataclass(frozen=True)
class Standby:
    """A standby streaming from the server (a row of pg_stat_replication). A role without
    pg_read_all_stats sees only the name: the rest is None."""

    application_name: str | None
    state: str | None  # streaming, catchup, startup, backup, stopping
    sync_state: str | None  # sync, quorum, potential, async
    replay_lag: float | None  # seconds; None when hidden or when the standby is idle


@dataclass(frozen=True)
class Durability:
    """The settings an acknowledged commit depends on (None: the role may not read it),
    whether the server is a standby, its own standbys, and what they mean.

    `problems`: commits the server acknowledges that a crash or a failover can lose, or
    commits that hang; `notes`: what is worth knowing but not a fault.
    """

    fsync: str | None
    full_page_writes: str | None
    synchronous_commit: str | None  # the session's: what a commit gets without the saver's option
    synchronous_standby_names: str | None
    in_recovery: bool | None
    standbys: tuple[Standby, ...]
    saver_synchronous_commit: str | None  # the saver's option, which its own writes commit with
    problems: tuple[str, ...]
    notes: tuple[str, ...]

    @property
    def commit_level(self) -> str | None:
        """The synchronous_commit this saver's writes commit with."""
        return self.saver_synchronous_commit or self.synchronous_commit

    def summary(self) -> str:
        """The settings on one line, for a log."""
        names = self.synchronous_standby_names
        sync = f"synchronous_commit={self.synchronous_commit}"
        if self.saver_synchronous_commit is not None:
            sync += f" (the saver's commits: {self.saver_synchronous_commit})"
        role = {True: "a standby (in recovery)", False: "a primary", None: "primary or standby unknown"}[self.in_recovery]
        count = len(self.standbys)
        return (
            f"fsync={self.fsync}, full_page_writes={self.full_page_writes}, {sync}, "
            f"synchronous_standby_names={names!r}; {role} with {count} standby{'' if count == 1 else 's'} connected"
        )

    def message(self) -> str:
        """The problems, then the notes, then the settings: what setup() logs."""
        said = [*self.problems, *(f"note: {note}" for note in self.notes)]
        return f"{'; '.join(said) or 'no durability problem found'} ({self.summary()})"


def standbys_of(rows: Sequence[Any] | None) -> tuple[Standby, ...]:
    """The `standbys` column of READ (a JSON array of arrays, NULL for none)."""
    out = []
    for name, state, sync_state, lag in rows or ():
        out.append(Standby(name, state, sync_state, float(lag) if lag is not None else None))
    return tuple(out)


def sync_standbys_needed(names: str) -> int:
    """How many synchronous standbys `synchronous_standby_names` waits for (FIRST n / ANY n
    (...), else 1); 0 when it is empty."""
    if not names.strip():
        return 0
    found = _NUM_SYNC.match(names)
    return int(found.group(1)) if found else 1


def durability_report(row: Sequence[Any], saver_synchronous_commit: str | None = None) -> Durability:
    """The report of a READ row, for a saver whose writes commit with
    `saver_synchronous_commit` (None: the session's setting)."""
    fsync, fpw, session_commit, names = (row[D.FSYNC], row[D.FULL_PAGE_WRITES], row[D.SYNCHRONOUS_COMMIT], row[D.SYNCHRONOUS_STANDBY_NAMES])
    in_recovery = row[D.IN_RECOVERY]
    standbys = standbys_of(row[D.STANDBYS])
    level = saver_synchronous_commit or session_commit
    problems: list[str] = []
    notes: list[str] = []
    hidden = [name for name in SETTINGS if row[D.position(name)] is None]
    if hidden:
        notes.append(f"this role cannot read {', '.join(hidden)}")
    crash = "the server acknowledges commits a crash can lose"
    for name, value in (("fsync", fsync), ("full_page_writes", fpw)):
        if value == "off":
            problems.append(f"{name} is off: {crash}")
    if level == "off":
        problems.append(f"synchronous_commit is off: {crash}")
    elif session_commit == "off":
        notes.append(f"synchronous_commit is off for this role, but the saver's commits run with {level}")
    if in_recovery:
        problems.append(
            "the server is a standby (in recovery): it refuses writes; connect to the primary (target_session_attrs=read-write)"
        )
    elif names is not None and in_recovery is not None:
        needed = sync_standbys_needed(names)
        if not needed:
            notes.append(
                "replication is asynchronous (synchronous_standby_names is empty): "
                "a failover to a standby can lose commits the primary acknowledged"
            )
        elif level == "local":
            problems.append(
                f"synchronous_commit is local while synchronous_standby_names is {names!r}: the server acknowledges "
                "commits before a synchronous standby has them, which a failover can lose"
            )
        elif level in WAITS_FOR_STANDBYS:
            connected = sum(s.sync_state in SYNC_STATES for s in standbys)
            unknown = sum(s.sync_state is None for s in standbys)
            if connected + unknown < needed:
                problems.append(
                    f"synchronous_standby_names is {names!r} ({needed} synchronous standby{'' if needed == 1 else 's'} needed) "
                    f"but {connected} {'is' if connected == 1 else 'are'} connected as sync or quorum: commits hang until "
                    f"{'one connects' if needed - connected == 1 else 'enough connect'}"
                )
            else:
                notes.append(f"replication is synchronous: a commit waits for {needed} standby{'' if needed == 1 else 's'} ({level})")
    if any(s.sync_state is None for s in standbys):
        notes.append("pg_stat_replication hides the standbys' state from this role (grant it pg_read_all_stats to see it)")
    return Durability(
        fsync=fsync,
        full_page_writes=fpw,
        synchronous_commit=session_commit,
        synchronous_standby_names=names,
        in_recovery=in_recovery,
        standbys=standbys,
        saver_synchronous_commit=saver_synchronous_commit,
        problems=tuple(problems),
        notes=tuple(notes),
    )

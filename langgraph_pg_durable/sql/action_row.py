"""A task's action row, in either of its two homes (migration 0014): its own row in
action_log, or the five action columns of the task's packed writes row."""

from __future__ import annotations

# A task's packed writes row holds its action (migration 0014): the action_log columns
# but the key, which is the row's own (its `idx` is the packed row's last index; the
# action's is 0, the index of its first write), with run_id '' for no run, as in
# action_log. A row without an action has NULL in all five. The `action_rows` view reads
# both tables as one.
FOLDED = ("run_id", "step", "agent", "action_type", "payload")
FOLDED_COLUMNS = ", ".join(FOLDED)
# Its values as put_writes stores them, in FOLDED order (the step from its `task_step` CTE).
FOLDED_VALUES = "coalesce(%(run_id)s::text, ''), s.step, %(agent)s::text, %(action_type)s, %(payload)s::jsonb"


def folded_columns(alias: str) -> str:
    """FOLDED_COLUMNS of the table under `alias`."""
    return ", ".join(f"{alias}.{column}" for column in FOLDED)

"""Every statement of one schema, rendered once per saver from the families (writes,
reads, deletes) and compacted for the hot paths."""

from __future__ import annotations

import re
from functools import lru_cache

from . import deletes, effects, fencing, logs, reads, routed, steps, threads, writes
from .schema import quote_schema


def compact(sql: str) -> str:
    """The statement without comments and runs of whitespace, for the hot paths: psycopg
    caches its parse of a statement up to 4 KiB long, and get_tuple's is longer with them.
    Spaces next to commas, parentheses and `=` go too. (No statement here has `--`, a run of
    spaces, or one of those characters inside a string literal: a unit test checks.)"""
    # Not str.split(): it takes the \x1f the list statements use as a separator for space.
    spaced = re.sub(r"[ \t\r\n]+", " ", re.sub(r"--[^\n]*", "", sql)).strip()
    return re.sub(r" ?([,()=]) ?", r"\1", spaced)


BOTH = (False, True)
LOG_AND_RUN = ((False, False), (True, False), (True, True))  # a run's row is written only with the action log


class RoutedWrites:
    """The writes of `Statements` as calls of the schema's write functions, keyed alike."""

    def __init__(self, q: str, s: Statements) -> None:
        # A write function stores whatever values it is given: `values` only trims the plain statement.
        self.put = {key: routed.put(q, sql, log=key[1]) for key, sql in s.put.items()}
        # A write function always keeps the run's row with the action row: `run` (a key's last
        # part) only leaves it out of the plain statements.
        self.put_writes = {key: routed.put_writes(q, sql, kind="rows", replace=key[0], log=key[2]) for key, sql in s.put_writes.items()}
        self.put_writes_items = {
            key: routed.put_writes(q, sql, kind="items", replace=False, log=key[0]) for key, sql in s.put_writes_items.items()
        }
        self.put_packed_writes = {
            key: routed.put_writes(q, sql, kind="packed", replace=False, log=key[1]) for key, sql in s.put_packed_writes.items()
        }


class Statements:
    """The SQL text of one schema's statements; built once per saver (the text is fixed)."""

    GC_SHARE = writes.GC_SHARE
    GC_LOCK = writes.GC_LOCK
    GC_UNLOCK = writes.GC_UNLOCK
    CONFIRM_COMMIT = writes.CONFIRM_COMMIT

    def __init__(self, schema: str) -> None:
        self.schema = schema
        q = self.q = quote_schema(schema)  # refuses a bad name before any I/O
        self.lock_threads = writes.lock_threads()
        self.lock_thread = writes.lock_thread()
        # Each write comes with the action log (`log`: the task's action row, the run's row) and without;
        # put_writes with the action log, with its run's row (`run`) and without (see writes._task_log).
        # put: with neither a list in the delta layout nor an offloaded value (`plain`), or with;
        # a plain put storing no channel value (`values` False) leaves channel_values out, one
        # with no carried-over value to check one by one (`bases` False) the check's branch.
        self.put = {
            (plain, log, values, bases): compact(
                writes.put_plain(q, log=log, values=values, bases=bases) if plain else writes.put(q, log=log)
            )
            for plain in BOTH
            for log in BOTH
            for values in (BOTH if plain else (True,))
            for bases in (BOTH if plain else (True,))
        }
        self.parent_status = writes.parent_status(q)
        self.name_sends = compact(writes.name_sends(q))
        self.log_unsaved_run = compact(writes.log_unsaved_run(q))
        self.put_writes = {
            (replace, offloaded, log, run): compact(writes.put_writes(q, replace=replace, offloaded=offloaded, log=log, run=run))
            for replace in BOTH
            for offloaded in BOTH
            for log, run in LOG_AND_RUN
        }
        self.put_writes_items = {(log, run): compact(writes.put_writes_items(q, log=log, run=run)) for log, run in LOG_AND_RUN}
        self.put_packed_writes = {
            (items, log, run): compact(writes.put_packed_writes(q, items=items, log=log, run=run))
            for items in BOTH
            for log, run in LOG_AND_RUN
        }
        # The same writes as calls of the schema's write functions, for distributed tables (routed.py).
        self.routed = RoutedWrites(q, self)
        self.citus_installed = routed.CITUS_INSTALLED
        self.tables_distributed = routed.TABLES_DISTRIBUTED
        self.get_tuple = {
            (by_id, cold): compact(reads.get_tuple(q, by_id=by_id, cold=cold)) for by_id in (False, True) for cold in (False, True)
        }
        # By whether the page is of one thread (then anchored on it).
        self.page_details = {one: compact(reads.page_details(q, one_thread=one)) for one in BOTH}
        self.latest_checkpoints = reads.latest_checkpoints(q)
        self.run_threads = reads.run_threads(q)
        self.run_lanes = reads.run_lanes(q)
        self.referenced_objects = reads.referenced_objects(q)
        self.delete_threads = deletes.delete_threads(q)
        self.delete_for_runs = deletes.delete_for_runs(q)
        self.prune_keep_latest = deletes.prune_keep_latest(q)
        self.copy_thread = deletes.copy_thread(q)
        self.actions_from = logs.actions_from(q)
        self.find_effect = compact(effects.find_effect(q))
        self.record_effect = compact(effects.record_effect(q))
        self.take_over = compact(fencing.take_over(q))
        self.take_if_free = compact(fencing.take_if_free(q))
        self.holder = fencing.holder(q)
        self.step_neighbours = steps.step_neighbours(q)
        self.backfill_threads = logs.backfill_threads(q)
        self.checkpoint_facts = logs.checkpoint_facts(q)
        self.write_facts = logs.write_facts(q)
        self.backfill_store = logs.backfill_store(q)

    @staticmethod
    @lru_cache(maxsize=64)
    def of(schema: str) -> Statements:
        """The statements of `schema`, rendered once per process: a saver built per request
        (a CLI, a web handler) then costs no rendering."""
        return Statements(schema)

    def list_page(self, where: str, *, across_lanes: bool = False) -> str:
        """One page of `list()` under `where` (built by core.history from fixed fragments);
        `across_lanes`: `where` names a thread and no namespace (see `reads.list_page`)."""
        return _list_page(self.q, where, across_lanes)

    def first_page(self, where: str, *, across_lanes: bool = False) -> str:
        """A walk's first page of one thread and its details in one statement, under `where`."""
        return _first_page(self.q, where, across_lanes)

    def runs_page(self, where: str, *, one_thread: bool = False) -> str:
        """One page of `list_runs()` under `where` (built by core.logs from fixed fragments);
        `one_thread`: `where` names the thread."""
        return logs.runs_page(self.q, where, one_thread=one_thread)

    def actions_page(self, where: str, *, one_thread: bool = False) -> str:
        """One page of `list_actions()` under `where` (built by core.logs from fixed
        fragments); `one_thread`: `where` names the thread."""
        return logs.actions_page(self.q, where, one_thread=one_thread)

    def threads_page(self, where: str, having: str) -> str:
        """One page of `list_threads()` (`where` and `having` built by core.threads from fixed fragments)."""
        return threads.threads_page(self.q, where, having)

    def steps_page(self, where: str, *, across_lanes: bool = False) -> str:
        """One page of `list_steps()` under `where` (built by core.steps from fixed fragments);
        `across_lanes`: no namespace in `where` (see `steps.steps_page`)."""
        return steps.steps_page(self.q, where, across_lanes=across_lanes)


@lru_cache(maxsize=256)  # (a handful of wheres a schema: core.history builds them from fixed fragments)
def _first_page(q: str, where: str, across_lanes: bool) -> str:
    return compact(reads.first_page(q, where, across_lanes=across_lanes))


@lru_cache(maxsize=256)
def _list_page(q: str, where: str, across_lanes: bool) -> str:
    return reads.list_page(q, where, across_lanes=across_lanes)

"""Every statement the package sends to the saver's tables, rendered for a schema: each
variant of each write (action log on and off, lists, offloaded values, replaced and packed
writes), each read, each delete, and each page of every listing under every filter the
CLI and the replay page can pass (they read through the saver's listings, never by SQL of
their own). Beside each, the parameters that name its threads (None: a statement over any
threads, such as a listing of every thread).

`catalogue_covers()` lists the `Statements` members the catalogue leaves out, so a new
statement cannot escape the checks that use it (tests/unit/test_citus_statements.py, and
tools/citus_trials.py against a real cluster).
"""

from __future__ import annotations

import datetime
import itertools
from dataclasses import dataclass

from langgraph_pg_durable.core.codec import Codec
from langgraph_pg_durable.core.history import HistoryScan
from langgraph_pg_durable.core.logs import ActionScan, RunScan
from langgraph_pg_durable.core.safe_serde import default_serializer
from langgraph_pg_durable.core.steps import StepScan
from langgraph_pg_durable.core.threads import ThreadScan
from langgraph_pg_durable.sql import doctor
from langgraph_pg_durable.sql.statements import Statements

ONE = frozenset({"thread_id"})
GIVEN = frozenset({"thread_ids"})
ANY_THREAD = None
# Members of Statements that are no statement over the saver's tables.
NOT_STATEMENTS = {"schema", "q"}
# Statements without a table of the schema (locks, a transaction id): Citus runs them on the coordinator.
NO_TABLE = ("lock_threads", "lock_thread", "GC_SHARE", "GC_LOCK", "GC_UNLOCK", "CONFIRM_COMMIT", "citus_installed", "tables_distributed")


@dataclass(frozen=True)
class Entry:
    sql: str
    anchors: frozenset[str] | None  # the parameters naming its threads; None: any threads
    member: str  # the Statements member (or method) it comes from
    call: bool = False  # a call of a write function (sql/routed.py), not a statement


def _subsets(names: list[str]) -> list[tuple[str, ...]]:
    return [combo for n in range(len(names) + 1) for combo in itertools.combinations(names, n)]


def _listing_pages(s: Statements) -> dict[str, Entry]:
    out: dict[str, Entry] = {}
    codec = Codec(default_serializer())
    moment = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
    # list(): of every thread, of a thread, of a lane, of a checkpoint; filters, before, next page.
    configs = {
        "every thread": None,
        "a thread": {"configurable": {"thread_id": "t"}},
        "a lane": {"configurable": {"thread_id": "t", "checkpoint_ns": ""}},
        "a checkpoint": {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "c"}},
    }
    for (name, config), filtered, before in itertools.product(configs.items(), (False, True), (False, True)):
        scan = HistoryScan(
            codec,
            config,
            filter={"k": "v"} if filtered else None,
            before={"configurable": {"checkpoint_id": "b"}} if before else None,
            limit=None,
        )
        anchors = ANY_THREAD if config is None else ONE
        label = f"list of {name}" + (", filtered" if filtered else "") + (", before" if before else "")
        lanes = scan.across_lanes
        out[label] = Entry(s.list_page(scan.page_where(), across_lanes=lanes), anchors, "list_page")
        if scan.one_thread:  # a thread's first page comes with its details
            out[f"{label}, first page with its details"] = Entry(s.first_page(scan.page_where(), across_lanes=lanes), anchors, "first_page")
        scan.cursor = ("c", "t", "")
        out[f"{label}, next page"] = Entry(s.list_page(scan.page_where(), across_lanes=lanes), anchors, "list_page")
    # list_runs() and list_actions(): every filter combination, first and next page.
    run_filters = {"thread_id": "t", "status": "done", "since": moment, "until": moment, "before": (moment, "r")}
    for combo in _subsets(list(run_filters)):
        if "before" in combo and "thread_id" not in combo:
            continue  # a page of one thread's runs only
        scan = RunScan(**{k: run_filters[k] for k in combo})
        anchors = ONE if "thread_id" in combo else ANY_THREAD
        out[f"list_runs {combo}"] = Entry(s.runs_page(scan.page_where(), one_thread=scan.one_thread), anchors, "runs_page")
        scan.cursor = (moment, "t", "r")
        out[f"list_runs {combo}, next page"] = Entry(s.runs_page(scan.page_where(), one_thread=scan.one_thread), anchors, "runs_page")
    action_filters = {
        "thread_id": "t",
        "run_id": "r",
        "agent": "a",
        "action_type": "tool_call",
        "since": moment,
        "until": moment,
        "contains": "x",
    }
    for combo in _subsets(list(action_filters)):
        scan = ActionScan(**{k: action_filters[k] for k in combo})
        anchors = ONE if "thread_id" in combo else ANY_THREAD
        out[f"list_actions {combo}"] = Entry(s.actions_page(scan.page_where(), one_thread=scan.one_thread), anchors, "actions_page")
        scan.cursor = (moment, "t", "", "c", "k", "r", 0)
        next_page = s.actions_page(scan.page_where(), one_thread=scan.one_thread)
        out[f"list_actions {combo}, next page"] = Entry(next_page, anchors, "actions_page")
    # list_threads(): every filter combination (status is checked in Python).
    thread_filters = {"run_id": "r", "metadata": {"k": "v"}, "since": moment, "until": moment}
    for combo in _subsets(list(thread_filters)):
        scan = ThreadScan(**{k: thread_filters[k] for k in combo})
        out[f"list_threads {combo}"] = Entry(s.threads_page(scan.rows_where(s.q), scan.page_having()), ANY_THREAD, "threads_page")
    # list_steps(): one thread, the root namespace, another or all, before a checkpoint or
    # not; the lookups of `lgpd show` and the page: a step, a checkpoint id or its prefix, a
    # run id's prefix.
    step_filters = {"before": "x", "step": 3, "checkpoint_id": "c", "checkpoint_prefix": "c", "run_prefix": "r"}
    for namespace in (None, "", "ns"):
        for combo in _subsets(list(step_filters)):
            step_scan = StepScan("t", checkpoint_ns=namespace, **{k: step_filters[k] for k in combo})
            out[f"list_steps {namespace!r} {combo}"] = Entry(
                s.steps_page(step_scan.page_where(), across_lanes=step_scan.across_lanes), ONE, "steps_page"
            )
    return out


def every_statement(schema: str = "s") -> dict[str, Entry]:
    """Every statement over the schema's tables, by a name that says which variant it is."""
    s = Statements(schema)
    out: dict[str, Entry] = {}
    for member, anchors in (
        ("put", ONE),
        ("put_writes", ONE),
        ("put_writes_items", ONE),
        ("put_packed_writes", ONE),
        ("get_tuple", ONE),
    ):
        for key, sql in getattr(s, member).items():
            out[f"{member} {key}"] = Entry(sql, anchors, member)
    for member in ("put", "put_writes", "put_writes_items", "put_packed_writes"):
        for key, sql in getattr(s.routed, member).items():
            out[f"routed {member} {key}"] = Entry(sql, ONE, "routed", call=True)
    out["page_details of one thread"] = Entry(s.page_details[True], ONE, "page_details")
    out["page_details of several threads"] = Entry(s.page_details[False], ANY_THREAD, "page_details")
    for member, anchors in (
        ("parent_status", ONE),
        ("name_sends", ONE),
        ("log_unsaved_run", ONE),
        ("checkpoint_facts", ONE),
        ("write_facts", ONE),
        ("backfill_store", ONE),
        ("actions_from", ONE),
        ("find_effect", ONE),
        ("record_effect", ONE),
        ("step_neighbours", ONE),
        ("take_over", ONE),
        ("take_if_free", ONE),
        ("holder", ONE),
        ("latest_checkpoints", GIVEN),
        ("delete_threads", GIVEN),
        ("delete_for_runs", GIVEN),
        ("prune_keep_latest", GIVEN),
        ("copy_thread", frozenset({"source", "target"})),
        ("run_threads", ANY_THREAD),  # the threads of some runs: what it is asked to find
        ("run_lanes", GIVEN),
        ("referenced_objects", ANY_THREAD),  # gc: which objects any row still references
        ("backfill_threads", ANY_THREAD),
    ):
        out[member] = Entry(getattr(s, member), anchors, member)
    out.update(_listing_pages(s))
    out["doctor oldest_threads"] = Entry(doctor.oldest_threads(s.q), ANY_THREAD, "doctor")
    out["doctor largest_threads"] = Entry(doctor.largest_threads(s.q), ANY_THREAD, "doctor")
    return out


def catalogue_covers(schema: str = "s") -> list[str]:
    """The members of `Statements` (attributes and page methods) the catalogue leaves out."""
    s = Statements(schema)
    members = {name for name in vars(s)} | {name for name in vars(Statements) if name.endswith("_page")}
    members |= {name for name in vars(Statements) if name.isupper()}
    covered = {entry.member for entry in every_statement(schema).values()} | NOT_STATEMENTS | set(NO_TABLE)
    return sorted(members - covered)

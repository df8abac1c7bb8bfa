"""Statements that read checkpoints, and the rows they return, declared beside them.

Every read anchors on thread_id (see ../shared notes on Citus). `get_tuple` reads a
checkpoint, its values, list rows, list items and pending writes as one UNION ALL of
`Detail` rows; `page_details` reads the same parts for a page of `list()` in the same
format, so one decoder serves both.
"""

from __future__ import annotations

from .columns import Columns, select_list


class CheckpointColumn(Columns):
    """A checkpoint row as every read returns it: list pages, newest rows, get_tuple's 'c' part.
    The jsonb columns come as text: orjson decodes them several times faster than the
    driver's json.loads, whatever JSON loader the caller's connection has."""

    THREAD_ID = 0
    CHECKPOINT_NS = 1
    CHECKPOINT_ID = 2
    PARENT_CHECKPOINT_ID = 3
    CHECKPOINT = 4  # jsonb text: the checkpoint without its id and its stored values
    METADATA = 5  # jsonb text: the projection filters match
    METADATA_EXACT = 6  # bytea: the exact metadata where jsonb is lossy, else NULL
    VALUE_CHANNELS = 7  # text[]: channels whose values live in channel_values rows
    VALUE_VERSIONS = 8  # text[]: their versions, aligned


CHECKPOINT_COLUMNS = (
    "thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint::text AS checkpoint, "
    "metadata::text AS metadata, metadata_exact, value_channels, value_versions"
)


class Part:
    """What a `Detail` row is (its PART column)."""

    CHECKPOINT = "c"  # the checkpoint row (get_tuple only): the CheckpointColumn columns
    VALUE = "v"  # a channel value the checkpoint holds (a list row when TYPE is the list type)
    LINK = "l"  # a list row that a value's delta extends (LIST_CHAIN named it)
    ITEM = "i"  # one list item: CHANNEL, VERSION (or a write key), IDX
    ITEM_RUN = "r"  # items of one version: VALUE their bytes end to end, cut as ITEM_CUTS says
    WRITE = "w"  # a pending write: TASK_ID, TASK_PATH, CHANNEL, IDX, of CHECKPOINT_ID


class Detail(Columns):
    """A row of `get_tuple` or `page_details`. Columns 1-9 are a CheckpointColumn row.

    THREAD_ID and CHECKPOINT_NS name the lane of every page_details row; get_tuple reads
    one lane and fills them only in its checkpoint row. The last three columns reference
    an offloaded VALUE (then NULL): see core/offload.py.
    """

    PART = 0
    THREAD_ID = 1
    CHECKPOINT_NS = 2
    CHECKPOINT_ID = 3
    PARENT_CHECKPOINT_ID = 4
    CHECKPOINT = 5
    METADATA = 6
    METADATA_EXACT = 7
    VALUE_CHANNELS = 8
    VALUE_VERSIONS = 9
    TASK_ID = 10
    TASK_PATH = 11
    CHANNEL = 12
    VERSION = 13
    IDX = 14
    LIST_CHAIN = 15  # text[]: the list rows a delta extends, snapshot first; () for a snapshot
    ITEM_VERSIONS = 16  # text[]: the versions (and write keys) whose items the list uses
    TYPE = 17
    VALUE = 18
    OBJECT_KEY = 19
    OBJECT_SHA256 = 20
    OBJECT_SIZE = 21
    ITEM_CUTS = 22  # bytea: of an item run, each item's idx and length (4 bytes each, big-endian), in order


CHECKPOINT_IN_DETAIL = Detail.THREAD_ID  # a Detail row's CheckpointColumn columns start here

_DETAIL_TYPES = {
    Detail.METADATA_EXACT: "bytea",
    Detail.VALUE_CHANNELS: "text[]",
    Detail.VALUE_VERSIONS: "text[]",
    Detail.IDX: "int",
    Detail.LIST_CHAIN: "text[]",
    Detail.ITEM_VERSIONS: "text[]",
    Detail.VALUE: "bytea",
    Detail.OBJECT_SIZE: "bigint",
    Detail.ITEM_CUTS: "bytea",
}

# Items of a run, at most (a cold read sends a long list's items as runs, not a row each):
# an item kept inline is under 1 MiB, so a run's bytes stay well under the 1 GB a value holds.
RUN_ITEMS = 256
RUN_MIN_ITEMS = 8  # fewer come a row each: a run's row costs the client more than a few items' rows
# A cold get_tuple groups every item of a list into runs in memory: with the default 4 MB
# a 100,000-item list spilled to disk (1.9 s instead of 0.55). The pools the saver builds
# raise work_mem to this on each new connection, unless it is set higher already.
COLD_READ_WORK_MEM = "64MB"
RAISE_WORK_MEM = (
    f"SELECT set_config('work_mem', '{COLD_READ_WORK_MEM}', false) "
    f"WHERE pg_size_bytes(current_setting('work_mem')) < pg_size_bytes('{COLD_READ_WORK_MEM}')"
)


# Every statement of the saver reads its rows by primary-key probes whatever the plan (each
# probe an `OFFSET 0` subquery, its keys parameters), so one plan serves every call: the pools
# the saver builds plan each prepared statement once, generically, on each new connection,
# unless plan_cache_mode is set otherwise already. Left to `auto`, the server planned a cold
# get_tuple again at every call (its custom plans for the warm-up's empty thread looked
# cheaper than the generic one): 1.1-1.8 ms of planning for a 0.5 ms read of W3's thread,
# and each history page 0.6 ms. W3's cold get_state went from 1.36-1.49x the official
# saver's time to 0.91-0.94x.
GENERIC_PLANS = "SELECT set_config('plan_cache_mode', 'force_generic_plan', false) WHERE current_setting('plan_cache_mode') = 'auto'"


def _first_detail(**exprs: str) -> str:
    """A UNION's first Detail branch: names the columns and types the NULLs."""
    return select_list(Detail, _DETAIL_TYPES, **exprs)


def _detail(**exprs: str) -> str:
    """A later Detail branch: positional."""
    return select_list(Detail, _DETAIL_TYPES, False, **exprs)


_REF = {"object_key": "object_key", "object_sha256": "object_sha256", "object_size": "object_size"}
_LIST_ROW = {
    "channel": "channel",
    "version": "version",
    "list_chain": "list_chain",
    "item_versions": "item_versions",
    "type": "type",
    "value": "value",
    **_REF,
}


# A checkpoint's row (part 'c'), from a CTE of CHECKPOINT_COLUMNS.
_CHECKPOINT_ROW = {
    "part": "'c'",
    "thread_id": "thread_id",
    "checkpoint_ns": "checkpoint_ns",
    "checkpoint_id": "checkpoint_id",
    "parent_checkpoint_id": "parent_checkpoint_id",
    "checkpoint": "checkpoint",
    "metadata": "metadata",
    "metadata_exact": "metadata_exact",
    "value_channels": "value_channels",
    "value_versions": "value_versions",
}


# An item's row, from channel_items aliased `i`.
_ITEM_ROW = {
    "part": "'i'",
    "channel": "i.channel",
    "version": "i.version",
    "idx": "i.idx",
    "type": "i.type",
    "value": "i.value",
    "object_key": "i.object_key",
    "object_sha256": "i.object_sha256",
    "object_size": "i.object_size",
}


def _run_of_items(q: str, key: str, run: str) -> str:
    """The items of run `run` (an expression) of the version `key` names (an alias with
    channel and version), aggregated: their type, bytes and cuts (see get_tuple's runs),
    how many there are, and whether the run is whole (one type, all inline, at least
    RUN_MIN_ITEMS). One row, whose `items` is 0 for a run without items."""
    return f"""SELECT min(i.type COLLATE "C") AS type, string_agg(i.value, ''::bytea) AS value,
               string_agg(int4send(i.idx) || int4send(octet_length(i.value)), ''::bytea) AS item_cuts,
               count(*) AS items,
               count(*) >= {RUN_MIN_ITEMS} AND min(i.type COLLATE "C") = max(i.type COLLATE "C")
               AND count(i.value) = count(*) AND count(i.object_key) = 0 AS whole
        FROM {q}.channel_items i
        WHERE i.thread_id = %(thread_id)s AND i.checkpoint_ns = %(checkpoint_ns)s
          AND i.channel = {key}.channel AND i.version = {key}.version
          AND i.idx >= {run} * {RUN_ITEMS} AND i.idx < ({run} + 1) * {RUN_ITEMS}"""


def _value_probe(q: str) -> str:
    """The channel_values row of key `k` (channel, version) of the thread's lane: a subquery
    for a CROSS JOIN LATERAL, one primary-key probe whatever the plan (OFFSET 0 keeps it
    apart, as its own subplan). Every column (`*`): the CTE around it names the ones it
    keeps, and the statement stays within psycopg's 4 KiB parse cache."""
    return f"""SELECT * FROM {q}.channel_values v
        WHERE v.thread_id = %(thread_id)s AND v.checkpoint_ns = %(checkpoint_ns)s
          AND v.channel = k.channel AND v.version = k.version
        OFFSET 0"""


def get_tuple(q: str, *, by_id: bool, cold: bool = False) -> str:
    """The target checkpoint, its channel values, the list rows and items they need, and
    its pending writes, as `Detail` rows.

    Parameters: thread_id, checkpoint_ns, checkpoint_id (with `by_id`), `known` (a JSON
    array of [channel, version] item groups the caller holds: not sent back) and
    `known_lists` ([channel, version] list versions the caller holds whole: neither their
    chains nor their items are sent). `cold`: the caller holds no item of the thread (a
    new process), so every item the lists use comes back; one range scan of the thread's
    channel then beats a primary-key probe per item (a thousand probes: 5 ms of the
    server's 10).
    """
    exact = "AND checkpoint_id = %(checkpoint_id)s" if by_id else ""
    if cold:
        item_keys = """item_keys AS MATERIALIZED (
    SELECT r.channel, x.version
    FROM (SELECT channel, item_versions FROM unknown UNION ALL SELECT channel, item_versions FROM links) AS r,
         unnest(r.item_versions) AS x(version)
    UNION ALL
    SELECT channel, item_version FROM writes WHERE item_version IS NOT NULL
)"""
        item_keys += f""",
-- The first {RUN_MIN_ITEMS} items of every version the read needs, a range of the primary
-- key per version (a subquery each, OFFSET 0: a probe whatever the statistics say, and a
-- generic plan the warm-up leaves in place; one `version = ANY` scan per channel planned
-- above the warm-up's plans, so every cold read was planned again), so no item of a
-- version the read does not need, an older snapshot's, is read. A chat writes a version
-- of an item or two a step: these ranges are all its items. A version's items are numbered
-- from 0 without gaps (core.lists), so one holding item {RUN_MIN_ITEMS - 1} has more, and
-- comes as runs instead (below). (Read by runs, then each run under {RUN_MIN_ITEMS} items
-- again item by item, a 200-message thread cost the server 1.64 ms; this way, 0.93 ms.)
small_items AS MATERIALIZED (
    SELECT i.channel, i.version, i.idx, i.type, i.value, i.object_key, i.object_sha256, i.object_size
    FROM (SELECT DISTINCT channel, version FROM item_keys) AS k
    CROSS JOIN LATERAL (
        SELECT i.channel, i.version, i.idx, i.type, i.value, i.object_key, i.object_sha256, i.object_size
        FROM {q}.channel_items i
        WHERE i.thread_id = %(thread_id)s AND i.checkpoint_ns = %(checkpoint_ns)s
          AND i.channel = k.channel AND i.version = k.version AND i.idx < {RUN_MIN_ITEMS}
        OFFSET 0) AS i
),
-- Runs of {RUN_MIN_ITEMS} to {RUN_ITEMS} items of one version, of one type, all inline: a row
-- per run instead of per item. VALUE is their bytes end to end, ITEM_CUTS each one's idx
-- and length in the same order (aggregates without ORDER BY: the client needs no order,
-- each item says where it goes). Items of any other run come a row each.
-- Each long version is read alone, a range scan of the primary key per run, so nothing is
-- sorted (a sort of every item of the channel by its version's text took 0.1 s of the
-- 0.16 s the server spent on a cold read of 100,000 items). A version's first run is read
-- first; only a version whose first run is full is probed for its highest idx, and its
-- other runs read. Types are compared bytewise (COLLATE "C"): strcoll is slow, and a run's
-- items are of one type or not whatever the database's collation.
first_runs AS MATERIALIZED (
    SELECT k.channel, k.version, 0 AS run, r.*
    FROM (SELECT channel, version FROM small_items WHERE idx = {RUN_MIN_ITEMS - 1}) AS k
    CROSS JOIN LATERAL ({_run_of_items(q, "k", "0")}) AS r
),
runs AS MATERIALIZED (
    SELECT channel, version, run, type COLLATE "default" AS type, value, item_cuts, whole
    FROM first_runs WHERE items > 0
    UNION ALL
    SELECT f.channel, f.version, g.run, r.type COLLATE "default", r.value, r.item_cuts, r.whole
    FROM first_runs f
    CROSS JOIN LATERAL (
        SELECT t.idx FROM {q}.channel_items t
        WHERE t.thread_id = %(thread_id)s AND t.checkpoint_ns = %(checkpoint_ns)s
          AND t.channel = f.channel AND t.version = f.version
        ORDER BY t.idx DESC LIMIT 1) AS top
    -- (generate_series through an array: the planner takes an unnest to make 10 rows, where
    -- it takes a generate_series of unknown bounds to make 1,000, and a statement costed that
    -- high was compiled by JIT at every cold read, 67 ms.)
    CROSS JOIN LATERAL unnest(ARRAY(SELECT generate_series(1, top.idx / {RUN_ITEMS}))) AS g(run)
    CROSS JOIN LATERAL ({_run_of_items(q, "f", "g.run")}) AS r
    WHERE f.items = {RUN_ITEMS} AND r.items > 0
),
broken_runs AS MATERIALIZED (
    SELECT channel, version, run FROM runs WHERE NOT whole
)"""
        items = f"""-- The items of short versions, then those of long versions' broken runs: a range of
-- the primary key per broken run, whatever the statistics say (OFFSET 0 keeps the
-- subquery apart, its keys parameters): as a join, planned with statistics from before a
-- long list was written, each run's items were filtered out of every item of the thread
-- (the benchmark's cold read of 100,000 items: 25 runs, 2.5 million rows, 0.65 s).
FROM small_items i
LEFT JOIN first_runs f ON f.channel = i.channel AND f.version = i.version
WHERE f.version IS NULL
UNION ALL
SELECT {_detail(**_ITEM_ROW)}
FROM broken_runs b
CROSS JOIN LATERAL (
    SELECT i.channel, i.version, i.idx, i.type, i.value, i.object_key, i.object_sha256, i.object_size
    FROM {q}.channel_items i
    WHERE i.thread_id = %(thread_id)s AND i.checkpoint_ns = %(checkpoint_ns)s
      AND i.channel = b.channel AND i.version = b.version
      AND i.idx >= b.run * {RUN_ITEMS} AND i.idx < (b.run + 1) * {RUN_ITEMS}
    OFFSET 0) i
UNION ALL
SELECT {
            _detail(
                part="'r'",
                channel="channel",
                version="version",
                type="type",
                value="value",
                item_cuts="item_cuts",
            )
        }
FROM runs WHERE whole"""
    else:
        item_keys = """-- The items those lists and writes use, minus the groups the caller already holds
-- (items never change once written).
item_keys AS MATERIALIZED (
    SELECT r.channel, x.version
    FROM (SELECT channel, item_versions FROM unknown UNION ALL SELECT channel, item_versions FROM links) AS r,
         unnest(r.item_versions) AS x(version)
    UNION
    SELECT channel, item_version FROM writes WHERE item_version IS NOT NULL
    EXCEPT
    -- A JSON array of [channel, version] pairs: a thousand keys cost the client one
    -- orjson call, where two text[] parameters cost a Python loop over each element.
    SELECT k ->> 0, k ->> 1 FROM json_array_elements(%(known)s::json) AS k
),
-- One aggregate, so the two arrays are aligned.
item_arrays AS MATERIALIZED (
    SELECT array_agg(channel) AS channels, array_agg(version) AS versions FROM item_keys
)"""
        items = f"""-- Primary-key probes, whatever plan the statistics (or a generic plan) would favour
-- (a subquery per group, OFFSET 0): a scan of channel_items would read every thread's items.
FROM unnest((SELECT channels FROM item_arrays)::text[], (SELECT versions FROM item_arrays)::text[])
    AS k(channel, version)
CROSS JOIN LATERAL (
    SELECT * FROM {q}.channel_items i
    WHERE i.thread_id = %(thread_id)s AND i.checkpoint_ns = %(checkpoint_ns)s
      AND i.channel = k.channel AND i.version = k.version
    OFFSET 0) AS i"""
    return f"""
WITH target AS MATERIALIZED (
    SELECT {CHECKPOINT_COLUMNS}
    FROM {q}.checkpoints
    WHERE thread_id = %(thread_id)s AND checkpoint_ns = %(checkpoint_ns)s {exact}
    ORDER BY checkpoint_id DESC
    LIMIT 1
),
-- The keys come from InitPlans over `target`, and each value is one primary-key probe
-- (a subquery each, OFFSET 0) whatever the statistics say: a `channel = ANY(...)` filter
-- let the planner prefer a scan of the thread's values (1.3 ms instead of 0.05 ms on a
-- 1,000-step thread), and a join, on tables of a few hundred rows, a hash join over a
-- scan of every value of every thread (W3's get_tuple: 300 rows read for one).
vals AS MATERIALIZED (
    SELECT v.channel, v.version, v.type, v.value, v.object_key, v.object_sha256, v.object_size,
           v.list_chain, v.item_versions
    FROM unnest((SELECT value_channels FROM target)::text[],
                (SELECT value_versions FROM target)::text[]) AS k(channel, version)
    CROSS JOIN LATERAL ({_value_probe(q)}) AS v
),
-- Lists in the delta layout the caller does not hold already (it holds recent ones).
-- (An anti-join, not a correlated subquery over a set-returning function: Citus refuses those.)
unknown AS MATERIALIZED (
    SELECT v.channel, v.list_chain, v.item_versions
    FROM vals v
    LEFT JOIN (SELECT k ->> 0 AS channel, k ->> 1 AS version
               FROM json_array_elements(%(known_lists)s::json) AS k) AS known
      ON known.channel = v.channel AND known.version = v.version
    WHERE v.list_chain IS NOT NULL AND known.channel IS NULL
),
-- The rows each one extends, then every item they use.
links AS MATERIALIZED (
    SELECT v.channel, v.version, v.type, v.value, v.object_key, v.object_sha256, v.object_size,
           v.list_chain, v.item_versions
    FROM unnest(
        (SELECT array_agg(l.channel ORDER BY l.channel, x.n)
         FROM unknown l, unnest(l.list_chain) WITH ORDINALITY AS x(version, n))::text[],
        (SELECT array_agg(x.version ORDER BY l.channel, x.n)
         FROM unknown l, unnest(l.list_chain) WITH ORDINALITY AS x(version, n))::text[]) AS k(channel, version)
    CROSS JOIN LATERAL ({_value_probe(q)}) AS v
),
writes AS MATERIALIZED (
    SELECT w.task_id, w.channel, w.task_path, w.idx, w.type, w.value,
           w.object_key, w.object_sha256, w.object_size, w.item_version
    FROM {q}.checkpoint_writes w
    WHERE w.thread_id = %(thread_id)s AND w.checkpoint_ns = %(checkpoint_ns)s
      AND w.checkpoint_id = (SELECT checkpoint_id FROM target)
),
{item_keys}
SELECT {_first_detail(**_CHECKPOINT_ROW)}
FROM target
UNION ALL
SELECT {_detail(part="'v'", **_LIST_ROW)}
FROM vals
UNION ALL
SELECT {_detail(part="'l'", **_LIST_ROW)}
FROM links
UNION ALL
SELECT {_detail(**_ITEM_ROW)}
{items}
UNION ALL
SELECT {_detail(part="'w'", task_id="task_id", task_path="task_path", channel="channel", idx="idx", type="type", value="value", **_REF)}
FROM writes"""


# A history page's order: newest first, ties between threads and namespaces broken alike.
_PAGE_ORDER = "checkpoint_id DESC, thread_id DESC, checkpoint_ns DESC"


def list_page(q: str, where: str, *, across_lanes: bool = False) -> str:
    """One page of CheckpointColumn rows, newest first, for keyset pagination.

    `across_lanes`: `where` names one thread and no namespace (see `newest_of_lanes`)."""
    if not across_lanes:
        return f"""
SELECT {CHECKPOINT_COLUMNS}
FROM {q}.checkpoints
{where}
ORDER BY {_PAGE_ORDER}
LIMIT %(page_size)s"""
    lane = f"SELECT {CHECKPOINT_COLUMNS}\n    FROM {q}.checkpoints\n    {where}"
    return newest_of_lanes(
        lane, namespace="checkpoint_ns", order="checkpoint_id DESC, checkpoint_ns DESC", outer_order=_PAGE_ORDER, limit="%(page_size)s"
    )


def newest_of_lanes(lane: str, *, namespace: str, order: str, outer_order: str, limit: str) -> str:
    """The first `limit` rows, in `outer_order`, of `lane`: a SELECT of checkpoints whose
    WHERE names one thread and no namespace. Read as two walks, each down an index in
    `order`, merged: the root graph's lane (the primary key) and the subgraphs' checkpoints
    (`checkpoints_subgraph_recent_idx`, whose predicate `namespace <> ''` is written out so
    every plan can use it). That index holds only the subgraphs': a put of the root graph,
    most of a thread's, updates no fourth index (migration 0015)."""
    return f"""
SELECT *
FROM (
    ({lane} AND {namespace} = ''
    ORDER BY {order}
    LIMIT {limit})
    UNION ALL
    ({lane} AND {namespace} <> ''
    ORDER BY {order}
    LIMIT {limit})
) AS lanes
ORDER BY {outer_order}
LIMIT {limit}"""


def page_details(q: str, *, one_thread: bool = False) -> str:
    """The values (by exact key), the list rows and items they need, and the pending writes
    of one page's checkpoints, as `Detail` rows (no checkpoint row: the page has those).

    `one_thread`: every key is of the thread `thread_id`, and each table is read anchored
    on it, so a distributed Postgres (tables distributed by thread_id) sends the statement
    to that thread's shard alone instead of to every shard."""
    value_keys = """unnest(%(v_threads)b::text[], %(v_namespaces)b::text[], %(v_channels)b::text[],
                %(v_versions)b::text[]) AS k(thread_id, checkpoint_ns, channel, version)"""
    write_keys = """unnest(%(w_threads)b::text[], %(w_namespaces)b::text[], %(w_checkpoints)b::text[])
        AS k(thread_id, checkpoint_ns, checkpoint_id)"""
    return "WITH " + _details(q, value_keys, write_keys, one_thread=one_thread)


def first_page(q: str, where: str, *, across_lanes: bool = False) -> str:
    """A walk's first page of one thread (`where` names it: core.history) and its details in
    one statement: the page's checkpoint rows as `Detail` rows of part 'c' (in no order;
    IDX is each one's place in the page), then what `page_details` returns for them, every
    value and write of the page (nothing is held yet but the item groups in the `known`
    parameters). A `list(limit=10)` of a whole thread is one round trip instead of two."""
    # Each row's place in the page as IDX: the server's order (its collation), not the client's.
    page = f"""page AS MATERIALIZED (
    SELECT *, row_number() OVER (ORDER BY {_PAGE_ORDER})::int AS n
    FROM ({list_page(q, where, across_lanes=across_lanes)}) AS ordered
), """
    value_keys = """(SELECT DISTINCT p.thread_id, p.checkpoint_ns, x.channel, x.version
          FROM page p, unnest(p.value_channels, p.value_versions) AS x(channel, version)) AS k"""
    rows = _first_detail(**_CHECKPOINT_ROW, idx="n")
    return f"WITH {page}" + _details(q, value_keys, "page k", one_thread=True, lead=f"SELECT {rows}\nFROM page\nUNION ALL\n")


def _details(q: str, value_keys: str, write_keys: str, *, one_thread: bool, lead: str = "") -> str:
    """page_details' CTEs and rows: the values read for `value_keys` and the writes for
    `write_keys` (FROM items naming each key's columns `k`), after the `lead` branch of
    the UNION when there is one (the first branch names the columns)."""
    v, w, i = (
        (
            " AND v.thread_id = %(thread_id)s",
            " AND w.thread_id = %(thread_id)s",
            " AND i.thread_id = %(thread_id)s",
        )
        if one_thread
        else ("", "", "")
    )
    return f"""vals AS MATERIALIZED (
    SELECT v.thread_id, v.checkpoint_ns, v.channel, v.version, v.type, v.value,
           v.object_key, v.object_sha256, v.object_size, v.list_chain, v.item_versions
    FROM {value_keys}
    JOIN {q}.channel_values v
      ON v.thread_id = k.thread_id AND v.checkpoint_ns = k.checkpoint_ns
     AND v.channel = k.channel AND v.version = k.version{v}
), links AS MATERIALIZED (
    SELECT v.thread_id, v.checkpoint_ns, v.channel, v.version, v.type, v.value,
           v.object_key, v.object_sha256, v.object_size, v.list_chain, v.item_versions
    FROM (SELECT DISTINCT l.thread_id, l.checkpoint_ns, l.channel, x.version
          FROM vals l, unnest(l.list_chain) AS x(version)) AS k
    JOIN {q}.channel_values v
      ON v.thread_id = k.thread_id AND v.checkpoint_ns = k.checkpoint_ns
     AND v.channel = k.channel AND v.version = k.version{v}
), writes AS MATERIALIZED (
    SELECT w.thread_id, w.checkpoint_ns, w.checkpoint_id, w.task_id, w.channel, w.task_path, w.idx,
           w.type, w.value, w.object_key, w.object_sha256, w.object_size, w.item_version
    FROM {write_keys}
    JOIN {q}.checkpoint_writes w
      ON w.thread_id = k.thread_id AND w.checkpoint_ns = k.checkpoint_ns
     AND w.checkpoint_id = k.checkpoint_id{w}
), item_keys AS MATERIALIZED (
    SELECT r.thread_id, r.checkpoint_ns, r.channel, x.version
    FROM (SELECT thread_id, checkpoint_ns, channel, item_versions FROM vals
          UNION ALL SELECT thread_id, checkpoint_ns, channel, item_versions FROM links) AS r,
         unnest(r.item_versions) AS x(version)
    UNION
    SELECT thread_id, checkpoint_ns, channel, item_version FROM writes WHERE item_version IS NOT NULL
    EXCEPT  -- the item groups earlier pages of the same walk already brought
    SELECT * FROM (
        -- Each key column joined by \x1f behind a leading one (core.history.known_groups):
        -- PostgreSQL's JSON parser took 0.28 ms of a page's 0.75 over W3's 175 held
        -- groups; split arrays cost a tenth of that. Keys holding \x1f come as JSON.
        SELECT * FROM unnest((string_to_array(%(known_threads)s::text, E'\x1f'))[2:],
                             (string_to_array(%(known_namespaces)s::text, E'\x1f'))[2:],
                             (string_to_array(%(known_channels)s::text, E'\x1f'))[2:],
                             (string_to_array(%(known_versions)s::text, E'\x1f'))[2:])
        UNION ALL
        SELECT k ->> 0, k ->> 1, k ->> 2, k ->> 3 FROM json_array_elements(%(known)s::json) AS k
    ) AS known
)
{lead}SELECT {(_detail if lead else _first_detail)(part="'v'", thread_id="thread_id", checkpoint_ns="checkpoint_ns", **_LIST_ROW)}
FROM vals
UNION ALL
SELECT {_detail(part="'l'", thread_id="thread_id", checkpoint_ns="checkpoint_ns", **_LIST_ROW)}
FROM links
UNION ALL
SELECT {_detail(thread_id="i.thread_id", checkpoint_ns="i.checkpoint_ns", **_ITEM_ROW)}
FROM item_keys k
JOIN {q}.channel_items i
  ON i.thread_id = k.thread_id AND i.checkpoint_ns = k.checkpoint_ns
 AND i.channel = k.channel AND i.version = k.version{i}
UNION ALL
SELECT {
        _detail(
            part="'w'",
            thread_id="thread_id",
            checkpoint_ns="checkpoint_ns",
            checkpoint_id="checkpoint_id",
            task_id="task_id",
            task_path="task_path",
            channel="channel",
            idx="idx",
            type="type",
            value="value",
            **_REF,
        )
    }
FROM writes"""


def latest_checkpoints(q: str) -> str:
    """The newest CheckpointColumn row of each (thread, namespace) of the given threads."""
    return f"""
SELECT DISTINCT ON (thread_id, checkpoint_ns) {CHECKPOINT_COLUMNS}
FROM {q}.checkpoints
WHERE thread_id = ANY(%(thread_ids)s)
ORDER BY thread_id, checkpoint_ns, checkpoint_id DESC"""


def run_threads(q: str) -> str:
    """The threads that hold checkpoints or run rows of the runs (through their run_id
    indexes); one column. A run stopped before its first checkpoint has a row only."""
    return (
        f"SELECT thread_id FROM {q}.checkpoints WHERE run_id = ANY(%(run_ids)s) "
        f"UNION SELECT thread_id FROM {q}.run_log WHERE run_id = ANY(%(run_ids)s)"
    )


class RunLane(Columns):
    """A row of `run_lanes`: one checkpoint of a lane a run wrote to, as delete_for_runs walks it."""

    THREAD_ID = 0
    CHECKPOINT_NS = 1
    CHECKPOINT_ID = 2
    PARENT_CHECKPOINT_ID = 3
    DOOMED = 4  # bool: the checkpoint belongs to one of the runs
    VALUE_CHANNELS = 5  # text[]: channels with a channel_values row
    DELTA_COUNTERS = 6  # json text: metadata's counters_since_delta_snapshot, or NULL
    INLINE_VALUES = 7  # json text: the scalars the row keeps (their channels hold a value too)


def run_lanes(q: str) -> str:
    """Every checkpoint of each (thread, namespace) the runs wrote to in `thread_ids` (the
    threads `run_threads` found), doomed or not, as `RunLane` rows; only lanes where some
    checkpoint replays DeltaChannel writes. Each table access names the threads itself."""
    return f"""
WITH lanes AS (
    SELECT DISTINCT r.thread_id, r.checkpoint_ns FROM {q}.checkpoints r
    WHERE r.thread_id = ANY(%(thread_ids)s) AND r.run_id = ANY(%(run_ids)s)
)
SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id,
       coalesce(c.run_id = ANY(%(run_ids)s), false) AS doomed, c.value_channels,
       (c.metadata -> 'counters_since_delta_snapshot')::text AS delta_counters,
       (c.checkpoint -> 'channel_values')::text AS inline_values
FROM {q}.checkpoints c JOIN lanes l ON c.thread_id = l.thread_id AND c.checkpoint_ns = l.checkpoint_ns
WHERE c.thread_id = ANY(%(thread_ids)s) AND EXISTS (
    SELECT 1 FROM {q}.checkpoints d
    WHERE d.thread_id = ANY(%(thread_ids)s) AND d.thread_id = c.thread_id AND d.checkpoint_ns = c.checkpoint_ns
      AND d.metadata ? 'counters_since_delta_snapshot')"""


def referenced_objects(q: str) -> str:
    """Which of the given object keys some row still references (for gc); one column."""
    return f"""
SELECT object_key FROM {q}.channel_values WHERE object_key = ANY(%(keys)b::text[])
UNION
SELECT object_key FROM {q}.checkpoint_writes WHERE object_key = ANY(%(keys)b::text[])
UNION
SELECT object_key FROM {q}.channel_items WHERE object_key = ANY(%(keys)b::text[])"""

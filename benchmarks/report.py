"""The results as a Markdown report, a JSON file of raw figures, and charts of workloads 1 and 6 and the scale run."""

from __future__ import annotations

import json
import re
import shutil
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .env import KINDS, LABELS, OFFICIAL_DELTA, OURS_NO_LOG, OURS_ON_DIR
from .scale import KINDS as SCALE_KINDS
from .stats import percentile

W3_OPS = {
    "get_state": "get_state",
    "full_history": "full get_state_history",
    "first_10_limit": "first 10, limit=10",
    "first_10_break": "first 10, break out of an unlimited iteration",
    "filter_1pct": "metadata filter matching 1 %",
    "list_full": "checkpointer.list, full (no StateSnapshots)",
    "list_first_10_break": "checkpointer.list, first 10 by break",
    "get_state_interleaved": "get_state, each after a page of history",
    "cold_get_state": "get_state, cold",
    "cold_first_10_limit": "first 10, limit=10, cold",
    "cold_filter_1pct": "metadata filter matching 1 %, cold",
}
# W3 operations whose goal is a speed-up over the official saver; the others' is "no slower".
W3_SPEEDUP_GOALS = {"full_history": 5, "first_10_break": 20, "list_first_10_break": 20}
# W1's runs by results key, and what a target's name adds for each.
W1_RUNS = {"w1": "", "w1_random": ", incompressible items"}
# Each chart, and its alt text where the README shows it.
CHARTS = {
    "w1_time_per_step.png": "W1: time per super-step along the thread",
    "w6_bytes_by_length.png": "W6: database bytes against thread length",
    "scale_ms_per_append.png": "Scale: time per append against list length",
}


def write(results: dict[str, Any], out: Path) -> str:
    """Write results.json, results.md and the charts to `out`; return the Markdown."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=1))
    markdown = render(results)
    (out / "results.md").write_text(markdown)
    chart(results["w1"], results.get("w1_random"), out / "w1_time_per_step.png")
    bytes_chart(results["w6"], out / "w6_bytes_by_length.png")
    if "scale" in results:
        scale_chart(results["scale"], out / "scale_ms_per_append.png")
    return markdown


README_START = "<!-- benchmarks:start (written by `python -m benchmarks --publish`) -->"
README_END = "<!-- benchmarks:end -->"


def publish(results: dict[str, Any], out: Path, repo: Path) -> Path:
    """Put the report between README's markers (dated, headings shifted down) and the charts in docs/."""
    docs = repo / "docs" / "benchmarks"
    docs.mkdir(parents=True, exist_ok=True)
    for png in CHARTS:
        if (out / png).exists():
            shutil.copyfile(out / png, docs / png)
    (docs / "results.json").write_text(json.dumps(results, indent=1))
    body = render(results).split("\n", 1)[1]  # the README has its own heading
    body = re.sub(r"^## ", "### ", body, flags=re.M)
    for png, alt in CHARTS.items():
        body = re.sub(rf"^Chart: `{re.escape(png)}`.*$", f"![{alt}](docs/benchmarks/{png})", body, flags=re.M)
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    section = f"{README_START}\nRun of {stamp}; raw figures in `docs/benchmarks/results.json`.\n{body.strip()}\n{README_END}"
    readme = repo / "README.md"
    text = readme.read_text()
    if README_START in text:
        text = text[: text.index(README_START)] + section + text[text.index(README_END) + len(README_END) :]
    else:
        raise ValueError(f"{readme} has no {README_START!r} marker to publish into")
    readme.write_text(text)
    return readme


# -- formatting --------------------------------------------------------------------------


def _num(x: float | None) -> str:
    if x is None:
        return "n/a"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.3g}" if abs(x) >= 1 else f"{x:.2g}"


def _cell(s: dict[str, float]) -> str:
    """median (interquartile range; p99)"""
    return f"{_num(s['median'])} ({_num(s['p25'])}–{_num(s['p75'])}; p99 {_num(s['p99'])})"


def _mb(n: int | None) -> str:
    return "n/a" if n is None else f"{n / 1e6:,.1f} MB"


def _row(*cells: object) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _table(header: list[str], rows: list[list[object]]) -> list[str]:
    return [_row(*header), _row(*["---"] * len(header)), *(_row(*r) for r in rows), ""]


def _verdict(ok: bool) -> str:
    return "**met**" if ok else "**missed**"


# -- the report ----------------------------------------------------------------------------


def render(r: dict[str, Any]) -> str:
    meta = r["meta"]
    lines = [
        "# Benchmarks: langgraph-pg-durable against the official PostgresSaver",
        "",
        f"Mode **{meta['mode']}**, {meta['seconds']:.0f} s. PostgreSQL {meta['server_version']} "
        f"({meta['server_kind']} server, settings as the tests use them), {meta['cpus']} CPUs, "
        f"Python {meta['python']}, " + ", ".join(f"{k} {v}" for k, v in meta["versions"].items()) + ". "
        f"Object store of DurablePostgresSaver: {meta.get('object_store', 'none')}.",
        'Every graph runs with `durability="sync"`. Savers alternate run by run (the order rotates '
        "each repetition). Cells read: median (interquartile range; p99).",
        "",
    ]
    if meta["mode"] == "quick":
        lines += [
            "*Quick mode: workloads are cut down to check that every saver completes them; "
            "the figures are not representative and the targets are not judged.*",
            "",
        ]
    lines += _targets(r, judged=meta["mode"] == "full")
    if "cost" in r:
        lines += _cost(r["cost"])
    lines += _w1(r["w1"], meta["scale"])
    if "w1_random" in r:
        lines += _w1b(r["w1_random"], meta["scale"])
    lines += _w2(r["w2"], meta["scale"]) + _w3(r["w3"], meta["scale"])
    lines += _w4(r["w4"], meta["scale"]) + _w5(r["w5"], meta["scale"]) + _w6(r["w6"], meta["scale"])
    if "scale" in r:
        lines += _scale(r["scale"])
    return "\n".join(lines)


def _targets(r: dict[str, Any], judged: bool) -> list[str]:
    rows = []

    def add(what: str, official: str, ours: str, measure: str, goal: str, ok: bool, ceiling: str = "—") -> None:
        rows.append([what, official, ours, measure, goal, ceiling, _verdict(ok) if judged else "not judged"])

    def at_most(
        what: str, base: float, ours: float, goal: float, goal_text: str = "", versus: str = "official", note: str = "", ceiling: str = "—"
    ) -> None:
        """A row measured as ours / base (the official saver unless `versus` says), met at `goal` or below."""
        ratio = ours / base
        add(what, _num(base), _num(ours), f"ours / {versus} = {ratio:.2f}{note}", goal_text or f"≤ {goal}", ratio <= goal, ceiling)

    def faster(what: str, official: float, ours: float, goal: float, memory: float) -> None:
        """A row measured as official / ours, met at `goal` or above; the ceiling is InMemorySaver's."""
        speedup = official / ours
        add(what, _num(official), _num(ours), f"{speedup:.1f}x faster", f"≥ {goal}x faster", speedup >= goal, f"{official / memory:.1f}x")

    if "cost" in r:
        for workload in r["cost"]["workloads"].values():
            cells = workload["cells"]
            for style, ours in (("plain list", cells["ours"]), ("DeltaChannel", cells["ours_delta"])):
                ratios = _cost_ratios(ours, cells["official_delta"])
                worst = max((v for v in ratios.values() if v is not None), default=float("nan"))
                add(
                    f"cost of a step, {workload['title']}, ours with a {style}",
                    "DeltaChannel",
                    style,
                    "ours / official with DeltaChannel: "
                    + ", ".join(f"{k} {_num(v)}" for k, v in ratios.items())
                    + _added_ratio(ours, cells["official_delta"]),
                    "every one ≤ 1.0",
                    worst <= 1.0,
                )

    w1 = {k: r["w1"][k]["per_step_ms"]["median"] for k in KINDS}
    over = {k: w1[k] - w1["memory"] for k in ("official", "ours")}
    at_most("W1 overhead above InMemorySaver, ms per super-step", over["official"], over["ours"], 0.5)

    w1_bytes = {k: r["w1"][k]["db_bytes"] for k in ("official", "ours")}
    add(
        "W1 database bytes after 200 steps",
        _mb(w1_bytes["official"]),
        _mb(w1_bytes["ours"]),
        f"ours / official = 1/{w1_bytes['official'] / w1_bytes['ours']:.1f}",
        "≤ 1/15",
        w1_bytes["ours"] * 15 <= w1_bytes["official"],
    )
    if OFFICIAL_DELTA in r["w1"]:
        delta_bytes = r["w1"][OFFICIAL_DELTA]["db_bytes"]
        add(
            "W1 database bytes, official saver with the list in a DeltaChannel",
            _mb(delta_bytes),
            _mb(w1_bytes["ours"]),
            f"ours / DeltaChannel = {w1_bytes['ours'] / delta_bytes:.2f}",
            "≤ 1",
            w1_bytes["ours"] <= delta_bytes,
        )
    for key, items in W1_RUNS.items():
        if key not in r:
            continue
        ms = {k: run["per_step_ms"]["median"] for k, run in r[key].items()}
        at_most(f"W1 ms per super-step{items}", ms["official"], ms["ours"], 0.5)
        if OFFICIAL_DELTA in ms:
            at_most(
                f"W1 ms per super-step{items}, official saver with the list in a DeltaChannel",
                ms[OFFICIAL_DELTA],
                ms["ours"],
                1.0,
                "≤ 1.0 (no slower)",
                versus="DeltaChannel",
            )
        if OURS_NO_LOG in ms:
            at_most(
                f"W1 ms per super-step{items}, action log off",
                ms["official"],
                ms[OURS_NO_LOG],
                0.5,
                note=f" (log on: {ms['ours'] / ms['official']:.2f})",
            )
    w6 = r["w6"]
    w6_bytes = {k: w6[k]["db_bytes"] for k in ("official", "ours")}
    add(
        f"W6 database bytes, {r['meta']['scale']['w6_steps']:,}-step chat",
        _mb(w6_bytes["official"]),
        _mb(w6_bytes["ours"]),
        f"ours / official = 1/{w6_bytes['official'] / w6_bytes['ours']:.1f}",
        "≤ 1/10",
        w6_bytes["ours"] * 10 <= w6_bytes["official"],
    )
    if OURS_NO_LOG in w6:
        off_bytes = w6[OURS_NO_LOG]["db_bytes"]
        add(
            f"W6 database bytes, {r['meta']['scale']['w6_steps']:,}-step chat, action log off",
            _mb(w6_bytes["official"]),
            _mb(off_bytes),
            f"ours / official = 1/{w6_bytes['official'] / off_bytes:.1f}",
            "≤ 1/10",
            off_bytes * 10 <= w6_bytes["official"],
        )
    w6_ms = {op: {k: w6[k][op]["ms"]["median"] for k in KINDS} for op in ("get_state", "full_history")}
    at_most("W6 get_state, ms", w6_ms["get_state"]["official"], w6_ms["get_state"]["ours"], 1.2)
    history = w6_ms["full_history"]
    faster("W6 full get_state_history, ms", history["official"], history["ours"], 5, history["memory"])

    w2 = r["w2"]
    pg = {k: w2[k]["db_bytes"] for k in ("official", "ours")}
    total_ours = pg["ours"] + (w2["ours"].get("object_store_bytes") or 0)
    add(
        "W2 PostgreSQL bytes after the run",
        _mb(pg["official"]),
        _mb(pg["ours"]),
        f"ours / official = {pg['ours'] / pg['official']:.3f}",
        "≤ 0.02",
        pg["ours"] / pg["official"] <= 0.02,
    )
    add(
        "W2 PostgreSQL + object-store bytes",
        _mb(pg["official"]),
        _mb(total_ours),
        f"ours / official = {total_ours / pg['official']:.2f}",
        "≤ 0.55",
        total_ours / pg["official"] <= 0.55,
    )
    step = {k: w2[k]["per_step_ms"]["median"] for k in ("official", "ours")}
    put = w2.get("store_put_ms")  # absent from the results of runs before it was measured
    floor = f"{(w2['memory']['per_step_ms']['median'] + put['median']) / step['official']:.2f} (one PUT)" if put else "—"
    at_most("W2 ms per super-step (2 MB value)", step["official"], step["ours"], 1.0, "≤ 1.0 (no slower)", ceiling=floor)
    if OURS_ON_DIR in w2:
        on_dir = w2[OURS_ON_DIR]["per_step_ms"]["median"]
        at_most("W2 ms per super-step, local-directory store", step["official"], on_dir, 1.0, "≤ 1.0 (no slower)")

    for op, label in W3_OPS.items():
        if op not in r["w3"]["ours"]:
            continue  # results of a run before the operation was measured
        w3 = {k: r["w3"][k][op]["ms"]["median"] for k in KINDS if op in r["w3"][k]}
        if op in W3_SPEEDUP_GOALS:
            faster(f"W3 {label}, ms", w3["official"], w3["ours"], W3_SPEEDUP_GOALS[op], w3["memory"])
        else:
            at_most(f"W3 {label}, ms", w3["official"], w3["ours"], 1.0, "≤ 1.0 (no slower)")

    for mode, goal in (("sync", 1.5), ("async", 2)):
        tput = {k: percentile(r["w4"][k][mode], 50) for k in ("official", "ours")}
        gain = tput["ours"] / tput["official"]
        memory = percentile(r["w4"]["memory"][mode], 50)
        add(
            f"W4 steps/s, one shared saver, {mode}",
            _num(tput["official"]),
            _num(tput["ours"]),
            f"{gain:.2f}x",
            f"≥ {goal}x",
            gain >= goal,
            f"{memory / tput['official']:.2f}x",
        )

    for mode in ("sync", "async"):
        cells = {k: " / ".join(_trips(r["w5"][f"{k} {mode}"], c) for c in ("put", "put_writes", "get_tuple")) for k in ("official", "ours")}
        ours = r["w5"][f"ours {mode}"]
        ok = all(ours[c]["round_trips"] == [1] for c in ("put", "put_writes", "get_tuple"))
        add(
            f"W5 round trips per put / put_writes / get_tuple, {mode}",
            cells["official"],
            cells["ours"],
            "every call counted",
            "exactly 1 each",
            ok,
        )

    if "scale" in r:
        sizes = r["scale"]["sizes"]
        largest = {k: r["scale"][k][-1] for k in SCALE_KINDS}
        growth = {k: _own_growth(r["scale"], k) for k in SCALE_KINDS}
        add(
            f"scale: ms per append at {sizes[-1]:,} items, above LangGraph alone",
            _num(_own_ms(r["scale"], "official", -1)),
            _num(_own_ms(r["scale"], "ours", -1)),
            f"ours at {sizes[-1]:,} / at {sizes[0]:,} = {growth['ours']:.2f} (official: {growth['official']:.2f})",
            f"≤ 2x its own cost at {sizes[0]:,} items",
            growth["ours"] <= 2,
            _alone_growth(r["scale"]),
        )
        if "turn_ms" in largest["ours"]:
            turn = {k: largest[k]["turn_ms"]["median"] for k in SCALE_KINDS}
            at_most(f"scale: an append by an invoke of its own on the {sizes[-1]:,}-item list, ms", turn["official"], turn["ours"], 1.0)
        cold = {k: largest[k]["cold_get_tuple_ms"]["median"] for k in SCALE_KINDS}
        at_most(f"scale: cold get_tuple of the {sizes[-1]:,}-item list, ms", cold["official"], cold["ours"], 1.0, "≤ 1.0 (no slower)")
    head = ["target (ours vs official, same run)", "official", "ours", "measure", "goal", "ceiling", "result"]
    return [
        "## Targets",
        "",
        *_table(head, rows),
        "Ceiling: the ratio InMemorySaver reaches against the official saver in the same run, "
        "the best any saver could do, since the graph's own work (LangGraph, serialization, the "
        "GIL) stays. A goal beyond its ceiling cannot be met on this machine by the saver alone. "
        "W2's ceiling adds one PUT of the value to the object store, timed in the same run: a saver "
        "that keeps values past 1 MiB in that store, as ours does, cannot do less.",
        "",
    ]


def _trips(figures: dict[str, Any], call: str) -> str:
    seen = figures.get(call, {}).get("round_trips")
    return _span(seen) if seen else "n/a"


def _per_step_table(w: dict[str, Any], extra: list[str], extra_cells: Any) -> list[str]:
    kinds = [k for k in (*KINDS, OURS_NO_LOG, OFFICIAL_DELTA, OURS_ON_DIR) if k in w]
    med = {k: w[k]["per_step_ms"]["median"] for k in kinds}
    rows = []
    for k in kinds:
        vs = "1" if k == "official" else f"{med[k] / med['official']:.2f}"
        above = "—" if k == "memory" else f"+{_num(med[k] - med['memory'])}"
        rows.append([LABELS[k], _cell(w[k]["per_step_ms"]), vs, above, _mb(w[k]["db_bytes"]), *extra_cells(k)])
    head = ["saver", "ms per super-step", "time vs official", "ms above InMemorySaver", "database bytes", *extra]
    return _table(head, rows)


def _w1(w: dict[str, Any], scale: dict[str, Any]) -> list[str]:
    return _growing(
        w,
        scale,
        "W1 growing state",
        "+1 KB a step",
        "The action-log-off row is our saver with `action_log=False`: what the log costs. "
        "The DeltaChannel row is the official saver on the same graph with its list declared as LangGraph's "
        "`DeltaChannel` (beta, default `snapshot_frequency`): delta storage that the user opts into "
        "by changing the state schema.",
    )


def _w1b(w: dict[str, Any], scale: dict[str, Any]) -> list[str]:
    return _growing(
        w,
        scale,
        "W1b growing state, incompressible items",
        "+1 KB of base64 random bytes a step",
        "W1 with each item the base64 of 768 seeded random bytes instead of words: text that "
        "compression shrinks by a quarter at most (base64's own redundancy; zlib takes W1's words "
        "to a quarter of their size). Its lines in the chart are dashed.",
    )


def _growing(w: dict[str, Any], scale: dict[str, Any], name: str, growth: str, note: str) -> list[str]:
    """A W1 run's section: its table, what its rows are, and the chart they share."""
    return [
        f"## {name}: {scale['w1_steps']} super-steps, one thread, {growth} (runs per saver: {scale['w1_reps']})",
        "",
        *_per_step_table(w, [], lambda k: []),
        note,
        "",
        "Chart: `w1_time_per_step.png` (median of the runs at each step).",
        "",
    ]


def _w2(w: dict[str, Any], scale: dict[str, Any]) -> list[str]:
    return [
        f"## W2 large value: {scale['w2_steps']} super-steps, a new 2 MB random value each step (runs per saver: {scale['w2_reps']})",
        "",
        *_per_step_table(w, ["object-store bytes"], lambda k: [_mb(w[k].get("object_store_bytes"))]),
        "DurablePostgresSaver offloads values past 1 MiB to the object store named above, and "
        "in the last row to a local directory; the others keep every value in PostgreSQL."
        + (
            f" One PUT of such a value to that store, alone, took {_num(w['store_put_ms']['median'])} ms "
            f"(median of {w['store_put_ms']['n']})."
            if "store_put_ms" in w
            else ""
        ),
        "",
    ]


def _w3(w: dict[str, Any], scale: dict[str, Any]) -> list[str]:
    rows = []
    for op, label in W3_OPS.items():
        if op not in w["ours"]:
            continue  # results of a run before the operation was measured
        ms = {k: w[k][op]["ms"] for k in KINDS if op in w[k]}
        speedup = ms["official"]["median"] / ms["ours"]["median"]
        rows.append([label, ms["ours"]["n"], *(_cell(ms[k]) if k in ms else "—" for k in KINDS), f"{speedup:.1f}x"])
    build = " / ".join(f"{LABELS[k]} {w[k]['build_seconds']:.1f} s" for k in KINDS)
    head = ["operation (ms)", "reps", *(LABELS[k] for k in KINDS), "ours faster than official by"]
    return [
        f"## W3 long history: one thread of {w['ours']['checkpoints']:,} checkpoints ({scale['w3_turns']} turns of 10)",
        "",
        *_table(head, rows),
        f"Building the thread took {build}; the tables were then ANALYZEd. LangGraph's `get_state_history` drains "
        "`checkpointer.list()` into a list before yielding its first snapshot, so breaking "
        "out early saves the snapshots, not the reads; the `checkpointer.list` rows show the "
        "saver alone. A get_state after a page of history follows an untimed `checkpointer.list(limit=10)`, "
        "drained, on the same saver, as a UI paging the timeline does. A cold read runs on a new saver "
        "instance each repetition (its construction untimed), so nothing is in the saver's memory; "
        "the server's cache stays warm. InMemorySaver has no cold variant.",
        "",
    ]


def _w4(w: dict[str, Any], scale: dict[str, Any]) -> list[str]:
    rows = []
    for k in KINDS:
        cells = []
        for mode in ("sync", "async"):
            runs = w[k][mode]
            gain = percentile(runs, 50) / percentile(w["official"][mode], 50)
            cells += [f"{_num(percentile(runs, 50))} ({_num(min(runs))}–{_num(max(runs))})", f"{gain:.2f}x"]
        rows.append([LABELS[k], *cells])
    head = ["saver", "sync steps/s (min–max)", "sync vs official", "async steps/s (min–max)", "async vs official"]
    return [
        f"## W4 concurrency: {scale['w4_threads']} threads x {scale['w4_steps']} super-steps, "
        f"{scale['w4_workers']} workers on one saver instance (runs per saver: {scale['w4_reps']})",
        "",
        "Both Postgres savers get a pool of one connection per worker. Sync: ThreadPoolExecutor; async: asyncio.gather under a semaphore.",
        "",
        *_table(head, rows),
    ]


def _w5(w: dict[str, Any], scale: dict[str, Any]) -> list[str]:
    rows = []
    for name, f in w.items():
        calls = []
        for call in ("put", "put_writes", "get_tuple"):
            c = f.get(call)
            calls.append("n/a" if c is None else f"{_span(c['round_trips'])} trip, {_span(c['statements'])} stmt ({c['calls']} calls)")
        rows.append([name, f"{f['round_trips_per_step']:.2f}", f"{f['statements_per_step']:.2f}", *calls])
    head = ["saver", "round trips per super-step", "statements per super-step", "put", "put_writes", "get_tuple"]
    return [
        f"## W5 round trips: {scale['w5_steps']} super-steps on one connection through a counting proxy",
        "",
        "A round trip is a request sent after the server last answered (psycopg's trailing "
        "Sync/Flush messages do not start one; the tests' raw flight count is in results.json). "
        "Statements are the Execute and Query messages the client sends (an executemany of n rows "
        "is n). Per-call columns give the range seen over every call.",
        "",
        *_table(head, rows),
    ]


def _w6(w: dict[str, Any], scale: dict[str, Any]) -> list[str]:
    rows = []
    for k in (k for k in (*KINDS, OURS_NO_LOG) if k in w):
        cells = [_cell(w[k][op]["ms"]) if op in w[k] else "—" for op in ("get_state", "full_history")]
        rows.append([LABELS[k], _mb(w[k]["db_bytes"]), f"{w[k]['build_seconds']:.1f}", *cells])
    head = ["saver", "database bytes", "build, s", "get_state, ms", "full get_state_history, ms"]
    return [
        f"## W6 long chat thread: {scale['w6_steps']:,} super-steps, one `add_messages` message (~300 characters) each",
        "",
        *_table(head, rows),
        "Chart: `w6_bytes_by_length.png`.",
        "",
    ]


def _own_ms(s: dict[str, Any], kind: str, i: int) -> float:
    """A saver's ms per append at the scale run's `i`th length, above LangGraph alone's."""
    alone = s["alone"][i]["append_ms"]["median"] if s.get("alone") else 0.0
    return s[kind][i]["append_ms"]["median"] - alone


def _own_growth(s: dict[str, Any], kind: str) -> float:
    """How a saver's own cost per append grows from the shortest list to the longest."""
    return _own_ms(s, kind, -1) / _own_ms(s, kind, 0)


COST_MEASURES = {
    "client_cpu_ms": "client CPU above InMemorySaver, ms",
    "client_instructions": "client instructions above InMemorySaver, thousands",
    "server_ms": "server, ms",
    "wal_bytes": "WAL, bytes",
    "table_bytes": "table bytes",
}
COST_SAVERS = {
    "official": "official",
    "official_delta": "official, list in a DeltaChannel",
    "ours": "ours",
    "ours_delta": "ours, list in a DeltaChannel",
}


def _cost_ratios(ours: dict[str, Any], base: dict[str, Any]) -> dict[str, float | None]:
    """Ours / the official saver with DeltaChannel, by measure (None where not measured)."""
    short = {
        "client_cpu_ms": "CPU",
        "client_instructions": "instructions",
        "server_ms": "server",
        "wal_bytes": "WAL",
        "table_bytes": "bytes",
    }
    return {short[m]: None if ours[m] is None or not base[m] else ours[m] / base[m] for m in COST_MEASURES}


def _added_ratio(ours: dict[str, Any], base: dict[str, Any]) -> str:
    """The ratio of the bytes each run added to its emptied tables, where measured (not judged)."""
    if not ours.get("table_bytes_added") or not base.get("table_bytes_added"):
        return ""
    return f" (bytes the run added {_num(ours['table_bytes_added'] / base['table_bytes_added'])})"


def _cost(c: dict[str, Any]) -> list[str]:
    rows = []
    for workload in c["workloads"].values():
        for i, (key, label) in enumerate(COST_SAVERS.items()):
            cell = workload["cells"][key]
            rows.append(
                [
                    workload["title"] if i == 0 else "",
                    label,
                    _num(cell["client_cpu_ms"]),
                    f"{cell['client_instructions'] / 1e3:,.0f}" if cell.get("client_instructions") is not None else "—",
                    _num(cell["server_ms"]),
                    _num(cell["first_run_server_ms"]) if cell.get("first_run_server_ms") is not None else "—",
                    f"{cell['wal_bytes']:,.0f}",
                    _mb(cell["table_bytes"]),
                    _mb(cell["table_bytes_added"]) if cell.get("table_bytes_added") is not None else "—",
                ]
            )
    server = (
        "`pg_stat_statements` execution and planning time of the saver's database"
        if c["server_time"]
        else "not measured (the server has no `pg_stat_statements` preloaded)"
    )
    missing = c.get("instructions_missing")
    counted = (
        f"not counted: {missing}"
        if missing
        else "the user-space instructions of one more run of each saver on each workload and style, on a new thread "
        "after a short run, under valgrind's callgrind (every thread of the process, its strings hashed with one fixed "
        "seed for every saver; `benchmarks/instructions.py`), less InMemorySaver's, per step: the client's work, the "
        "same to ~0.2 % from run to run where its CPU time here moves by a fifth and more; it leaves out the kernel's "
        "(the socket I/O) and what an instruction costs"
    )
    return [
        f"## Cost of a step, decomposed: {c['steps']} super-steps, medians of {c['reps']} alternating rounds",
        "",
        *_table(
            [
                "workload, per step",
                "saver",
                COST_MEASURES["client_cpu_ms"],
                COST_MEASURES["client_instructions"],
                COST_MEASURES["server_ms"],
                "server, ms, run on emptied tables",
                COST_MEASURES["wal_bytes"],
                COST_MEASURES["table_bytes"],
                "of which the run added",
            ],
            rows,
        ),
        "Each round runs each saver twice on new threads: first on tables emptied by TRUNCATE (WAL and table bytes "
        "come from that run), then again at once on the same tables and connections (client CPU and server time come "
        "from that one). TRUNCATE drops every plan the server cached of a statement on the tables, which a saver on "
        "steady traffic keeps for its connection's life, so the first run plans each statement again: its server time "
        'is the column "server, ms, run on emptied tables" (not judged). '
        "Client CPU: `time.process_time` over the run (every thread of the process) less InMemorySaver's on the same "
        f"graph, per step. Client instructions: {counted}. Server: {server}, per step. "
        "WAL: `pg_current_wal_lsn()` before and after, per step. "
        "Table bytes: `pg_total_relation_size` of every table of the saver after the run; the next column is what the "
        "run added to the emptied tables (the empty relations' pages, paid once per database: our schema has 9 tables "
        "and 21 indexes, the official saver's 4 and 7). Our saver runs with its "
        "action log on. The DeltaChannel rows declare the list in LangGraph's `DeltaChannel` (beta): the lists with "
        "the default `snapshot_frequency`, the chat's messages as deepagents declares them (its reducer, a snapshot "
        "every 50 steps).",
        "",
    ]


def _alone_growth(s: dict[str, Any]) -> str:
    """How LangGraph's own time per append grows over the scale run's lengths (a saver that keeps nothing)."""
    alone = s.get("alone")
    if not alone:
        return "—"
    first, last = alone[0]["append_ms"]["median"], alone[-1]["append_ms"]["median"]
    return f"LangGraph alone: {_num(first)} → {_num(last)} ms ({last / first:.1f}x)"


def _scale(s: dict[str, Any]) -> list[str]:
    columns = ("ms per append", "ms per invoke's append", "first put, s", "cold get_tuple, ms", "peak RSS, MB")
    rows = []
    for i, items in enumerate(s["sizes"]):
        cells = [_num(s["alone"][i]["append_ms"]["median"])] if s.get("alone") else []
        for k in SCALE_KINDS:
            case = s[k][i]
            cells += [
                _num(case["append_ms"]["median"]),
                _num(case["turn_ms"]["median"]) if "turn_ms" in case else "—",
                _num(case["first_put_seconds"]),
                _num(case["cold_get_tuple_ms"]["median"]),
                _num(case["peak_rss_bytes"] / 1e6),
            ]
        rows.append([f"{items:,}", *cells])
    imported = min(case["imported_rss_bytes"] for k in SCALE_KINDS for case in s[k])
    head = [
        "list items",
        *(["LangGraph alone: ms per append"] if s.get("alone") else []),
        *(f"{k}: {c}" for k in SCALE_KINDS for c in columns),
    ]
    return [
        f"## Scale: one thread's list of {s['sizes'][0]:,} to {s['sizes'][-1]:,} items, then {s['steps']} appends",
        "",
        *_table(head, rows),
        "Each case is one graph input of that many items (~200 bytes each: words and base64 of random "
        f"bytes in turn), then {s['steps']} super-steps that append one item each; ms per append is their "
        f"median. Then {s.get('turns', 0)} appends by an invoke each (a turn: the saver reads the thread, then "
        "stores the input and one step); ms per invoke's append is their median. "
        "LangGraph alone: the same graph on a checkpointer that keeps nothing (LangGraph's reducer "
        "copies the list twice a step, so its own time grows with the list). "
        "First put: the input's invoke, up to the first super-step (its checkpoints hold the whole list). "
        f"Cold get_tuple: median of {s['ours'][0]['cold_get_tuple_ms']['n']} reads, each on a new saver instance. Each case runs "
        "in a spawned process of its own; peak RSS is that process's high-water mark (`VmHWM`) "
        f"(a process that has only imported the benchmark peaks at {_num(imported / 1e6)} MB).",
        "",
        "Chart: `scale_ms_per_append.png`.",
        "",
    ]


def _span(values: list[int]) -> str:
    return str(values[0]) if values[0] == values[-1] else f"{values[0]}–{values[-1]}"


# -- the chart ----------------------------------------------------------------------------


def chart(w1: dict[str, Any], w1_random: dict[str, Any] | None, path: Path) -> None:
    """W1's time per step, each saver in its own colour; W1b's (incompressible items) dashed."""
    lines: dict[str, tuple[Any, Any]] = {}
    styles: dict[str, dict[str, Any]] = {}
    for w, items, dash in ((w1, "", "-"), (w1_random or {}, ", incompressible items", "--")):
        for colour, k in enumerate((*KINDS, OFFICIAL_DELTA)):
            if k not in w:
                continue
            runs = [run["step_seconds"] for run in w[k]["runs"]]
            per_step = [percentile([run[i] for run in runs], 50) * 1e3 for i in range(len(runs[0]))]
            lines[LABELS[k] + items] = (range(1, len(per_step) + 1), per_step)
            styles[LABELS[k] + items] = {"color": f"C{colour}", "linestyle": dash}
    _plot(
        lines,
        path,
        styles=styles,
        title="W1 growing state: time per super-step along one thread",
        xlabel="super-step (the list channel grows ~1 KB a step)",
        ylabel="ms per super-step (median of runs)",
    )


def bytes_chart(w6: dict[str, Any], path: Path) -> None:
    lines = {}
    for k in ("official", "ours"):
        steps, sizes = zip(*w6[k]["bytes_by_step"]) if w6[k]["bytes_by_step"] else ((), ())
        lines[LABELS[k]] = (steps, [b / 1e6 for b in sizes])
    _plot(
        lines,
        path,
        title="W6: database bytes against thread length",
        marker="o",
        xlabel="super-steps (one ~300-character message each)",
        ylabel="database bytes, MB (every table the saver owns)",
    )


def scale_chart(s: dict[str, Any], path: Path) -> None:
    lines = {LABELS[k]: (s["sizes"], [case["append_ms"]["median"] for case in s[k]]) for k in SCALE_KINDS}
    _plot(
        lines,
        path,
        title="Scale: time per append against the list's length",
        marker="o",
        xscale="log",
        xlabel="items in the list (~200 bytes each)",
        ylabel=f"ms per append (median of {s['steps']} super-steps)",
    )


def _plot(
    lines: dict[str, tuple[Any, Any]],
    path: Path,
    *,
    title: str,
    xlabel: str,
    ylabel: str,
    marker: str | None = None,
    xscale: str = "linear",
    styles: dict[str, dict[str, Any]] | None = None,
) -> None:
    """A line per label, with matplotlib keyword arguments from `styles` where it has the label."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5), dpi=120)
    for label, (xs, ys) in lines.items():
        ax.plot(xs, ys, label=label, linewidth=1.2, marker=marker, markersize=3, **(styles or {}).get(label, {}))
    ax.set_xscale(xscale)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)

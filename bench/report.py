"""The benchmark's tables: latency percentiles, overheads over the bare call, ratios to Temporal's own
floor measured in the same run, and the targets."""

from typing import Any

from rich.table import Table
from settled.bench.actions import KINDS as BILLED_KINDS

# Absolute targets: (what, where in the results, the limit in ms).
TARGETS = {
    "status read p99": ("status_read_ms", "p99", 10.0),
    "interrupted → verified p95": ("interrupt_to_verified_ms", "p95", 100.0),
}
# Targets relative to Temporal's own floor measured in the same run: (what, ratio key, limit, at most?).
# A limit of None: reported beside the others, with no target of its own.
FLOOR_TARGETS: list[tuple[str, str, float | None, bool]] = [
    ("overhead p50 / floor's (deduplicating service)", "overhead_p50", 1.3, True),
    ("overhead p95 / floor's (deduplicating service)", "overhead_p95", None, True),
    ("overhead p99 / floor's (deduplicating service)", "overhead_p99", 1.5, True),
    ("overhead p50 / floor's (service without deduplication)", "overhead_not_deduplicated_p50", 1.3, True),
    ("overhead p95 / floor's (service without deduplication)", "overhead_not_deduplicated_p95", None, True),
    ("overhead p99 / floor's (service without deduplication)", "overhead_not_deduplicated_p99", 1.5, True),
    ("throughput / floor's, same callers", "throughput", 0.8, False),
    ("burst from a few callers: last confirmed / floor's", "caller_burst_last_confirmed", 1.25, True),
]
MAX_WORKER_RSS_MB = 300.0
BULKHEAD_P95_RATIO = 1.5
MAX_IDLE_STREAMS_API_PERCENT = 2.0


def latency_rows(results: dict[str, Any]) -> list[list[str]]:
    waiting = results["status_read_ms"]["in_flight"]
    named = [
        ("bare call (sandbox, httpx)", results["bare_call_ms"], "bare_call_ms"),
        ("Temporal's floor (eager start, local activity)", results["floor_ms"], "bare_call_ms"),
        ("settled: durable action (POST ?wait, confirmed)", results["durable_action_ms"], "bare_call_ms"),
        ("bare call, service without deduplication", results["bare_call_not_deduplicated_ms"], None),
        (
            "Temporal's floor, without deduplication (activity)",
            results["floor_not_deduplicated_ms"],
            "bare_call_not_deduplicated_ms",
        ),
        (
            "settled: durable action, without deduplication",
            results["durable_action_not_deduplicated_ms"],
            "bare_call_not_deduplicated_ms",
        ),
        (f"status read ({waiting} waiting, 1 reader)", results["status_read_ms"], None),
        (f"status read ({waiting} waiting, 8 readers)", results["status_read_8_readers_ms"], None),
        ("status read during the throughput run, 1 reader", results["status_read_under_load_ms"], None),
        ("interrupted → verified answer", results["interrupt_to_verified_ms"], None),
        *(
            (f"durable action, {n} at once ({s['confirmed_in_wait']} confirmed in the wait)", s, None)
            for n, s in results["latency_by_concurrency_ms"].items()
        ),
    ]
    rows = []
    for name, s, bare_key in named:
        bare = results[bare_key]["p50"] if bare_key else 0
        overhead = f"{s['p50'] - bare:.1f}" if bare_key else "-"
        rows.append([name, f"{s['p50']:.1f}", f"{s['p95']:.1f}", f"{s['p99']:.1f}", overhead, str(s["n"])])
    return rows


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:g}x"


def verdicts(results: dict[str, Any]) -> list[list[str]]:
    rows = []
    ratios = results["vs_floor"]
    for name, key, limit, at_most in FLOOR_TARGETS:
        if key not in ratios:
            continue
        value = ratios[key]
        if limit is None:
            rows.append([name, _ratio(value), "-", ""])
            continue
        met = value is not None and (value <= limit if at_most else value >= limit)
        rows.append(
            [name, _ratio(value), f"{'≤' if at_most else '≥'} {limit:g}x", "met" if met else "not met"]
        )
    if "caller_burst" in results:
        burst = results["caller_burst"]["settled"]
        n, final = burst["actions"], burst["final_states"]
        clean = burst["accepted"] == n and final.get("confirmed") == n and burst["records"] == n
        rows.append(
            [
                f"burst of {n} from {burst['callers']} callers",
                f"{burst['accepted']} accepted, {final.get('confirmed', 0)} confirmed, {burst['records']} "
                f"written, {burst['duplicates']} twice",
                "all accepted, all confirmed once",
                "met" if clean and burst["duplicates"] == 0 else "not met",
            ]
        )
    for name, (section, q, limit) in TARGETS.items():
        value = results[section][q]
        rows.append([name, f"{value:.1f} ms", f"≤ {limit:g} ms", "met" if value <= limit else "not met"])
    tput, floor = results["throughput"], results["floor_throughput"]
    clean = tput["duplicates"] == 0 and tput["missing"] == 0
    rows.append(
        [
            f"throughput ({tput['seconds']:g} s, {tput['concurrency']} callers)",
            f"{tput['per_second']:g}/s (floor {floor['per_second']:g}/s), {tput['duplicates']} duplicates",
            "0 duplicates, none missing",
            "met" if clean else "not met",
        ]
    )
    idle = results["idle_streams"]
    cost, share = idle["streams_cost_percent"], idle["core_percent"]
    api_share = cost["api"]
    rows.append(
        [
            f"{idle['streams']} idle streams: the API's share of one core",
            f"{api_share:g} % over its baseline (worker {cost['worker']:g} %, dev server "
            f"{cost['temporal']:g} %; with the baseline: API {share['api']:g} %)",
            f"< {MAX_IDLE_STREAMS_API_PERCENT:g} %",
            "met" if api_share < MAX_IDLE_STREAMS_API_PERCENT else "not met",
        ]
    )
    if "bulkhead" in results:
        b = results["bulkhead"]
        rows.append(
            [
                f"healthy kind's p95 beside {b['degraded_requested']} held of a degraded kind / alone",
                _ratio(b["p95_ratio"]),
                f"≤ {BULKHEAD_P95_RATIO:g}x",
                _bulkhead_verdict(b),
            ]
        )
    memory = results["memory"]
    worker = memory["worker"]["peak_rss_mb"]
    rows.append(
        [
            f"worker peak RSS ({memory['waiting_actions']} waiting)",
            f"{worker:g} MB",
            f"≤ {MAX_WORKER_RSS_MB:g} MB",
            "met" if worker <= MAX_WORKER_RSS_MB else "not met",
        ]
    )
    return rows


def bulkhead_rows(results: dict[str, Any]) -> list[list[str]]:
    """The healthy kind's POST ?wait=10 alone and beside the degraded kind's held requests."""
    b = results["bulkhead"]
    beside = (
        f"beside {b['degraded_requested']} requested of a kind answered after {b['answer_after_s']:g} s "
        f"({b['open_at_service_before']}-{b['open_at_service_after']} open at its service)"
    )
    rows = []
    for name, s, confirmed in (
        ("alone", b["alone_ms"], b["alone_confirmed"]),
        (beside, b["beside_ms"], b["beside_confirmed"]),
    ):
        percentiles = [f"{s[q]:.1f}" for q in ("p50", "p95", "p99")]
        rows.append([f"healthy kind, {name}", *percentiles, f"{s['n']} ({confirmed} confirmed in the wait)"])
    ratios = [_ratio(b[f"{q}_ratio"]) for q in ("p50", "p95", "p99")]
    rows.append(["beside / alone", *ratios, f"target p95 ≤ {BULKHEAD_P95_RATIO:g}x: {_bulkhead_verdict(b)}"])
    return rows


def _bulkhead_verdict(b: dict[str, Any]) -> str:
    return "met" if b["p95_ratio"] is not None and b["p95_ratio"] <= BULKHEAD_P95_RATIO else "not met"


def engine_rows(results: dict[str, Any]) -> list[list[str]]:
    """What each confirmed action cost the engine, counted in the histories (bench.engine)."""
    rows = []
    for label, section in (
        ("one at a time", results.get("engine_cost")),
        ("burst from a few callers", results.get("caller_burst", {}).get("engine_cost")),
    ):
        if not section:
            continue
        settled, floor = section["settled"], section["floor"]
        rows += _settled_rows(f"settled, {label}", settled)
        in_call = section.get("settled_in_opened_conversation")
        if in_call:
            rows += _settled_rows("settled, one at a time in a conversation its channel opened", in_call)
        rows.append(_engine_row(f"Temporal's floor, {label}", floor["total"], floor["actions"]))
    degraded = results.get("bulkhead", {}).get("degraded_engine_cost")
    if degraded:
        name = "settled, a held kind's actions (most queued behind its cap): the action"
        rows.append(_engine_row(name, degraded["total"], degraded["actions"]))
    return rows


def _settled_rows(label: str, settled: dict[str, Any]) -> list[list[str]]:
    n = settled["actions"]
    return [
        _engine_row(f"{label}: the action", settled["action"], n),
        _engine_row(f"{label}: its conversation (its share)", settled["conversation"], n),
        _engine_row(f"{label}: in all", settled["total"], n),
    ]


# The flows of the billable Actions (bench.runner._billable_actions), in the order of the table.
BILLED_FLOWS = {
    "in_live_call": "an action in a live call (channel opened first)",
    "in_new_conversation": "an action in a new conversation",
    "waiting_for_go_ahead": "a booking that waits for the go-ahead",
    "presented_call": "`presented`, after speaking (per call)",
    "handoff_read": "a handoff read (per read)",
    "status_read": "a status read (per read)",
    "floor": "Temporal's floor (one workflow, one local activity)",
}
BILLED_HEADER = ["Temporal Cloud Actions", "in all", *BILLED_KINDS]


def billed_rows(results: dict[str, Any]) -> list[list[str]]:
    """Temporal Cloud's billable Actions per flow (bench.actions)."""
    billed = results.get("billable_actions")
    if not billed:
        return []
    return [
        [label, f"{billed[flow]['total']:g}", *(f"{billed[flow].get(kind, 0):g}" for kind in BILLED_KINDS)]
        for flow, label in BILLED_FLOWS.items()
    ]


CALL_HEADER = ["whole call, per confirmed action: door / shape of kind", "Actions", *BILLED_KINDS,
               "history bytes (action + conversation's share)", "GB-hours per 1,000 actions"]  # fmt: skip


def call_rows(results: dict[str, Any]) -> list[list[str]]:
    """A whole call's Actions and active storage per confirmed action, per door and shape (bench.calls)."""
    rows = []
    for name, row in results.get("whole_call", {}).items():
        billed, stored = row["billed"], row["storage"]
        size = f"{stored['action_history_bytes']:,} + {stored['conversation_history_bytes_per_action']:,}"
        rows.append(
            [
                name,
                f"{billed['total']:g}",
                *(f"{billed.get(kind, 0):g}" for kind in BILLED_KINDS),
                size,
                f"{stored['gb_hours_per_1000_actions']:g}",
            ]
        )
    return rows


def _engine_row(name: str, cost: dict[str, float], n: int) -> list[str]:
    return [
        name,
        *(f"{cost[key]:g}" for key in ("executions", "workflow_tasks", "events", "updates")),
        str(n),
    ]


ENGINE_HEADER = ["per confirmed action", "executions", "workflow tasks", "history events", "updates", "n"]
BULKHEAD_HEADER = ["bulkhead", "p50 ms", "p95 ms", "p99 ms", "n"]
LATENCY_HEADER = ["", "p50 ms", "p95 ms", "p99 ms", "p50 over its bare call, ms", "n"]
TARGET_HEADER = ["target", "measured", "target", ""]


def _rich(title: str, header: list[str], rows: list[list[str]]) -> Table:
    table = Table(title=title, title_justify="left")
    for column in header:
        table.add_column(column)
    for row in rows:
        table.add_row(*row)
    return table


def rich_tables(document: dict[str, Any]) -> list[Table]:
    results = document["results"]
    bulkhead = [_rich("bulkhead", BULKHEAD_HEADER, bulkhead_rows(results))] if "bulkhead" in results else []
    whole_call = [_rich("a whole call's Actions and storage", CALL_HEADER, call_rows(results))]
    whole_call = whole_call if call_rows(results) else []
    if "bare_call_ms" not in results:  # --only bulkhead, --only calls
        return [*whole_call, *bulkhead]
    latency = Table(title="latency", title_justify="left")
    for column in LATENCY_HEADER:
        latency.add_column(column, justify="left" if not column else "right")
    for row in latency_rows(results):
        latency.add_row(*row)
    targets = Table(title="targets (docs/performance.md)", title_justify="left")
    for column in TARGET_HEADER:
        targets.add_column(column)
    for row in verdicts(results):
        targets.add_row(*row)
    engine = [_rich("engine cost", ENGINE_HEADER, engine_rows(results))] if engine_rows(results) else []
    billed = [_rich("billable Actions", BILLED_HEADER, billed_rows(results))] if billed_rows(results) else []
    return [latency, targets, *engine, *billed, *whole_call, *bulkhead]


def _markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def markdown(document: dict[str, Any]) -> str:
    """The tables of one run, for docs/performance.md."""
    about = document["machine"]
    results = document["results"]
    machine_line = (
        f"Machine: {about['cpu']}, {about['cores']} cores, Python {about['python']}; "
        f"load average at start {about['load_average_at_start']}."
    )
    bulkhead = [_markdown_table(BULKHEAD_HEADER, bulkhead_rows(results))] if "bulkhead" in results else []
    whole_call = [_markdown_table(CALL_HEADER, call_rows(results))] if call_rows(results) else []
    if "bare_call_ms" not in results:  # --only bulkhead, --only calls
        return "\n\n".join([machine_line, *whole_call, *bulkhead])
    memory = results["memory"]
    cpu = ", ".join(f"{name} {ms:g}" for name, ms in results["cpu_ms_per_action"].items())
    return "\n\n".join(
        [
            machine_line,
            _markdown_table(LATENCY_HEADER, latency_rows(results)),
            _markdown_table(TARGET_HEADER, verdicts(results)),
            *([_markdown_table(ENGINE_HEADER, engine_rows(results))] if engine_rows(results) else []),
            *([_markdown_table(BILLED_HEADER, billed_rows(results))] if billed_rows(results) else []),
            *whole_call,
            f"Resident memory with {memory['waiting_actions']} actions waiting (peak): worker "
            f"{memory['worker']['peak_rss_mb']:g} MB, API {memory['api']['peak_rss_mb']:g} MB, Temporal dev "
            f"server {memory['temporal']['peak_rss_mb']:g} MB. CPU per action during the throughput run "
            f"(ms): {cpu}. Floor, CPU per action (ms): {_floor_cpu(results)}. Sandbox records: "
            f"{results['sandbox_records']['total']}, duplicates {results['sandbox_records']['duplicates']}.",
            *bulkhead,
        ]
    )


def _floor_cpu(results: dict[str, Any]) -> str:
    parts = []
    for name, label in (("floor_throughput", "deduplicating"), ("floor_throughput_not_deduplicated", "not")):
        cpu = results[name]["cpu_ms_per_action"]
        parts.append(f"{label}: " + ", ".join(f"{where} {ms:g}" for where, ms in cpu.items()))
    return "; ".join(parts)

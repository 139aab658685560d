"""The benchmark's table: latency percentiles, ratios to the bare call, and the issue's targets."""

from typing import Any

from rich.table import Table

# (what, where in the results, the target it is judged by)
TARGETS = {
    "overhead p50": ("overhead_ms", "p50", 25.0),
    "overhead p99": ("overhead_ms", "p99", 75.0),
    "status read p99": ("status_read_ms", "p99", 20.0),
    "interrupted → verified p95": ("interrupt_to_verified_ms", "p95", 50.0),
}
MIN_THROUGHPUT = 60.0
MAX_WORKER_RSS_MB = 300.0


def latency_rows(results: dict[str, Any]) -> list[list[str]]:
    bare = results["bare_call_ms"]["p50"]
    waiting = results["status_read_ms"]["in_flight"]
    rows = []
    named = [
        ("bare call (sandbox, httpx)", results["bare_call_ms"]),
        ("durable action (POST ?wait, confirmed)", results["durable_action_ms"]),
        (f"status read ({waiting} waiting, 1 reader)", results["status_read_ms"]),
        (f"status read ({waiting} waiting, 8 readers)", results["status_read_8_readers_ms"]),
        ("status read during the throughput run, 1 reader", results["status_read_under_load_ms"]),
        ("interrupted → verified answer", results["interrupt_to_verified_ms"]),
        *(
            (f"durable action, {n} at once ({s['confirmed_in_wait']} confirmed in the wait)", s)
            for n, s in results["latency_by_concurrency_ms"].items()
        ),
    ]
    for name, s in named:
        ratio = f"{s['p50'] / bare:.1f}x" if bare else "-"
        rows.append([name, f"{s['p50']:.1f}", f"{s['p95']:.1f}", f"{s['p99']:.1f}", ratio, str(s["n"])])
    return rows


def verdicts(results: dict[str, Any]) -> list[list[str]]:
    rows = []
    for name, (section, q, limit) in TARGETS.items():
        value = results[section][q]
        rows.append([name, f"{value:.1f} ms", f"≤ {limit:g} ms", "met" if value <= limit else "not met"])
    tput = results["throughput"]
    ok = tput["per_second"] >= MIN_THROUGHPUT and tput["duplicates"] == 0 and tput["missing"] == 0
    rows.append(
        [
            f"throughput ({tput['seconds']:g} s, {tput['concurrency']} callers)",
            f"{tput['per_second']:g}/s, {tput['duplicates']} duplicates",
            f"≥ {MIN_THROUGHPUT:g}/s, 0 duplicates",
            "met" if ok else "not met",
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


LATENCY_HEADER = ["", "p50 ms", "p95 ms", "p99 ms", "p50 / bare", "n"]
TARGET_HEADER = ["target", "measured", "target", ""]


def rich_tables(document: dict[str, Any]) -> list[Table]:
    results = document["results"]
    latency = Table(title="latency", title_justify="left")
    for column in LATENCY_HEADER:
        latency.add_column(column, justify="left" if not column else "right")
    for row in latency_rows(results):
        latency.add_row(*row)
    targets = Table(title="targets (issue #9)", title_justify="left")
    for column in TARGET_HEADER:
        targets.add_column(column)
    for row in verdicts(results):
        targets.add_row(*row)
    return [latency, targets]


def _markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def markdown(document: dict[str, Any]) -> str:
    """The tables of one run, for docs/performance.md."""
    about = document["machine"]
    results = document["results"]
    memory = results["memory"]
    cpu = ", ".join(f"{name} {ms:g}" for name, ms in results["cpu_ms_per_action"].items())
    return "\n\n".join(
        [
            f"Machine: {about['cpu']}, {about['cores']} cores, Python {about['python']}; "
            f"load average at start {about['load_average_at_start']}.",
            _markdown_table(LATENCY_HEADER, latency_rows(results)),
            _markdown_table(TARGET_HEADER, verdicts(results)),
            f"Resident memory with {memory['waiting_actions']} actions waiting (peak): worker "
            f"{memory['worker']['peak_rss_mb']:g} MB, API {memory['api']['peak_rss_mb']:g} MB, Temporal dev "
            f"server {memory['temporal']['peak_rss_mb']:g} MB. CPU per action during the throughput run "
            f"(ms): {cpu}. Sandbox records: "
            f"{results['sandbox_records']['total']}, duplicates {results['sandbox_records']['duplicates']}.",
        ]
    )

"""The human-readable outputs: rich tables for the terminal, and report.md and chart.png (false
claims and duplicate writes per cut, both arms side by side) beside results.json.
"""

from collections import Counter
from pathlib import Path
from typing import Any

import matplotlib
from rich import box
from rich.table import Table
from settled.drill.plan import CUTS
from settled.drill.results import api_latency, errored, latency, state_failures

matplotlib.use("Agg")  # files only: no display, no GUI toolkit

import matplotlib.pyplot as plt

# (metric, short terminal header): counts, then times; the terminal shows them as two tables.
COUNTS = (
    ("attempts", "writes"),
    ("duplicate_writes", "dup writes"),
    ("false_done", "false done"),
    ("premature_done", "of which early"),
    ("false_not_done", "false not done"),
    ("honest_unknown", "honest unknown"),
    ("unnecessary_prompts", "asked again"),
    ("missed_reauthorization", "no reauth"),
)
TIMES = (
    ("time_to_truth_ms_p50", "truth p50"),
    ("time_to_truth_ms_p95", "truth p95"),
    ("truth_not_reached", "truth never"),
    ("first_words_ms_p50", "first words p50"),
    ("first_words_ms_p95", "first words p95"),
)
COLUMNS = COUNTS + TIMES[:3]
BAD = ("duplicate_writes", "false_done", "false_not_done", "missed_reauthorization", "truth_not_reached")
STYLE = {"transcript": "async", "state": "sync, ≤ 1 s"}

METHOD = """\
- **No language model.** Both agents are deterministic scripts, and so is the customer: the same
  words, the same pacing (with small per-seed jitter) and the same faults for both arms. Seeds vary
  ids, params, the order of the two kinds and the jitter; a seed always produces the same script.
- **transcript** models today's voice frameworks: an asynchronous tool call, with the spoken claim
  taken from the transcript ("I've submitted it" as the tool is invoked); an interrupted assistant
  message is truncated to what was spoken; pending tool calls die with the call; the text channel
  decides from the transcript alone and re-invokes the tool when it holds no confirmation; each
  invocation posts to the business service directly with a fresh Idempotency-Key. A cancel cancels
  the local task and claims "cancelled"; a change is written on the consent already given.
- **state** continues through settled's API only (`/v1/actions`, `/authorize`, `/amend`,
  `/cancel`, conversation events, `/presented`, `/handoff`, `/reconcile?wait=`); everything it says is
  settled's `say`, verbatim, with the action's `claim` ("prompt" while settled waits for a go-ahead).
  A voice turn waits up to 1 s for a verified outcome (a synchronous, bounded tool call), then says
  what is known; it announces a later outcome once settled, and waits out a reversal under way
  rather than announcing it.
- **Ground truth comes from the business system only** (the sandbox's records and request log; for
  `--target-kind`, the kind's lookup URL queried directly, and the fault proxy's log). A claim is
  judged at the moment it started to be said: "done" is true only while an applied, not-cancelled
  record for the task stands (record `committed_at` .. `cancelled_at`), "not done" only while none does.
- **Metrics.** attempts: write requests that reached the service; duplicate_writes: records beyond
  the first; false_done / false_not_done: as above (premature_done: the false "done" said before a
  record that did appear later); honest_unknown: "sent, not confirmed, checking" answers;
  unnecessary_prompts: a go-ahead asked for that the customer had already given, for the same
  params, and that was recorded; missed_reauthorization: a record whose params differ from the
  customer's latest consent before it; time_to_truth: from "did you do it?" in text to the first
  true and definitive answer (truth_not_reached: runs where none came).
- **Cut moments are observed, not timed**: the caller waits for the assistant's words, the held
  request or the handled cancel in the logs, then acts after its scripted pause. Speech is
  compressed to a few ms per character. C1 drops the line right after the customer's "yes", before
  the agent acts on it; C6's change comes in the same turn as the "yes". C5 holds the write at the
  service, cancels while it is held, then releases it without applying (`before_commit`) or
  applying it (`after_commit`).
"""


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)


def tables(results: dict[str, Any]) -> list[Table]:
    """The summary for a terminal: counts, then times (ms); one row per cut, each cell holding every
    arm's value side by side (`transcript/state`)."""
    arms = "/".join(results["arms"])
    return [
        _grid(results, COUNTS, f"settled drill: counted from the business system's records ({arms})"),
        _grid(results, TIMES, f"time to truth and to first words, ms ({arms})"),
    ]


def _grid(results: dict[str, Any], columns: tuple[tuple[str, str], ...], title: str) -> Table:
    arms = results["arms"]
    grid = Table(title=title, box=box.SIMPLE_HEAD)
    grid.add_column("cut")
    for _, header in columns:
        grid.add_column(header, justify="center")
    for cut in results["cuts"]:
        cells = []
        for name, _ in columns:
            values = []
            for arm in arms:
                value = results["summary"][arm][cut][name]
                text = _cell(round(value) if isinstance(value, float) else value)
                values.append(f"[bold red]{text}[/]" if name in BAD and value else text)
            cells.append("/".join(values))
        grid.add_row(cut, *cells)
    return grid


LATENCY_HEADERS = ("arm", "tool call", "write p50", "write p95", "first words p50", "first words p95")
LATENCY_KEYS = ("write_latency_ms_p50", "write_latency_ms_p95", "first_words_ms_p50", "first_words_ms_p95")


def _latency_rows(results: dict[str, Any]) -> list[list[str]]:
    rows = []
    for arm in results["arms"]:
        values = latency(results, arm)
        rows.append([arm, STYLE.get(arm, ""), *(_cell(values[key]) for key in LATENCY_KEYS)])
    return rows


def latency_table(results: dict[str, Any]) -> Table:
    grid = Table(title="latency, ms (cuts without a fault)", box=box.SIMPLE_HEAD)
    for header in LATENCY_HEADERS:
        grid.add_column(header, justify="left" if header in ("arm", "tool call") else "right")
    for row in _latency_rows(results):
        grid.add_row(*row)
    return grid


def _markdown_table(headers: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def _summary_rows(results: dict[str, Any]) -> list[list[str]]:
    rows = []
    for cut in results["cuts"]:
        for arm in results["arms"]:
            metrics = results["summary"][arm][cut]
            rows.append([cut, arm, *(_cell(metrics[name]) for name, _ in COLUMNS)])
    return rows


def _api_rows(results: dict[str, Any]) -> list[list[str]]:
    return [
        [f"`{route}`", str(row["calls"]), _cell(row["p50"]), _cell(row["p95"]), _cell(row["max"])]
        for route, row in api_latency(results).items()
    ]


def _notes(results: dict[str, Any]) -> list[str]:
    counted = Counter((run["cut"], note) for run in results["runs"] for note in run["notes"])
    return [f"- {cut}: {note} (x{count})" for (cut, note), count in sorted(counted.items())]


def markdown(results: dict[str, Any], meta: dict[str, Any]) -> str:
    cuts = ", ".join(f"{cut} ({CUTS[cut].title})" for cut in results["cuts"])
    variants = Counter(run["variant"] for run in results["runs"] if run["variant"])
    lines = [
        "# settled drill",
        "",
        f"{meta['started']} · {results['seeds']} seed(s) · arms: {', '.join(results['arms'])} · "
        f"bench: {meta['bench']} · {len(results['runs'])} runs in {meta['seconds']:.0f} s",
        "",
        f"Cuts: {cuts}.",
        "",
        "## Method",
        "",
        METHOD,
        "## Results",
        "",
        "Counts are summed over seeds and kinds; times (ms) are p50/p95 over runs.",
        "",
        *_markdown_table(["cut", "arm", *(name for name, _ in COLUMNS)], _summary_rows(results)),
        "",
    ]
    if variants:
        lines += ["C5 sweeps: " + ", ".join(f"{name} x{n}" for name, n in sorted(variants.items())) + ".", ""]
    lines += [
        "## Latency",
        "",
        "write: from sending the write to knowing it was confirmed: for transcript a bare call to the "
        "service, for state `/authorize?wait=` through settled (dispatch to confirmed). first words: "
        "from the end of the consent turn to the assistant's first words; asynchronous speaks at once "
        "(and its first claim is the premature one above), synchronous waits for the answer.",
        "",
        *_markdown_table(list(LATENCY_HEADERS), _latency_rows(results)),
        "",
    ]
    api_rows = _api_rows(results)
    if api_rows:
        lines += [
            "settled API calls made by the state arm (ms):",
            "",
            *_markdown_table(["route", "calls", "p50", "p95", "max"], api_rows),
            "",
        ]
    failures = state_failures(results)
    verdict = "; ".join(failures) if failures else "no duplicate write and no false claim"
    lines += ["## Verdict", "", f"State arm: **{verdict}**."]
    errors = errored(results)
    if errors:
        lines += ["", "Runs that failed:", "", *(f"- {error}" for error in errors)]
    notes = _notes(results)
    if notes:
        lines += ["", "What the state arm noticed about settled's answers:", "", *notes]
    return "\n".join(lines) + "\n"


def write(out: Path, results: dict[str, Any], meta: dict[str, Any]) -> Path:
    path = out / "report.md"
    path.write_text(markdown(results, meta))
    return path


# -- chart.png ---------------------------------------------------------------------------------

COLOURS = {"transcript": "#d1495b", "state": "#2e86ab"}


def draw_chart(results: dict[str, Any], out: Path) -> Path:
    """chart.png: false claims and duplicate writes per cut, both arms side by side."""
    cuts, arms = results["cuts"], results["arms"]
    panels = (
        ("false claims (done + not done)", lambda m: m["false_done"] + m["false_not_done"]),
        ("duplicate writes", lambda m: m["duplicate_writes"]),
    )
    figure, axes = plt.subplots(1, len(panels), figsize=(11, 4), sharey=False)
    width = 0.8 / max(len(arms), 1)
    for axis, (title, value) in zip(axes, panels, strict=True):
        for index, arm in enumerate(arms):
            heights = [value(results["summary"][arm][cut]) for cut in cuts]
            positions = [c + (index - (len(arms) - 1) / 2) * width for c in range(len(cuts))]
            bars = axis.bar(positions, heights, width, label=arm, color=COLOURS.get(arm))
            axis.bar_label(bars, fontsize=8)  # a zero is a result too: show it
        axis.set_xticks(range(len(cuts)), cuts)
        axis.set_title(title)
        axis.set_ylabel(f"count over {results['seeds']} seed(s)")
        axis.yaxis.get_major_locator().set_params(integer=True)
    axes[0].legend()
    figure.suptitle("settled drill: counted from the business system's records")
    figure.tight_layout()
    path = out / "chart.png"
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path

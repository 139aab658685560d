"""Draws docs/tracing/interrupted-refund.png from interrupted-refund.json, the spans of one real run of
tests/e2e/test_traces.py (SETTLED_TRACE_EXPORT=docs/tracing/interrupted-refund.json), as a timeline:
one row per span, in start order, coloured by the process that made it.

    .venv/bin/python docs/tracing/draw.py
"""

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

HERE = Path(__file__).parent
COLOURS = {"the agent": "#7b5ea7", "settled-api": "#2a7ab0", "settled-worker": "#d9822b"}
INSTANT_MS = 2.0  # a workflow's spans have no duration (Temporal's interceptor): drawn as a tick


def main() -> None:
    spans = sorted(json.loads((HERE / "interrupted-refund.json").read_text()), key=lambda s: s["start_ns"])
    t0 = spans[0]["start_ns"]
    fig, ax = plt.subplots(figsize=(11, 0.32 * len(spans) + 1.2))
    for row, span in enumerate(spans):
        start = (span["start_ns"] - t0) / 1e6
        length = max((span["end_ns"] - span["start_ns"]) / 1e6, INSTANT_MS)
        ax.barh(row, length, left=start, color=COLOURS.get(span["service"], "grey"), height=0.7)
        outcome = span["attributes"].get("settled.outcome")
        label = span["name"] + (f"  → {outcome}" if outcome else "")
        ax.text(start + length + 4, row, label, va="center", fontsize=8)
    ax.set_yticks([])
    ax.invert_yaxis()
    ax.set_xlabel("ms since the tool call began")
    last = max((s["end_ns"] - t0) / 1e6 for s in spans)
    ax.set_xlim(0, last * 1.6)
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in COLOURS.values()]
    ax.legend(handles, list(COLOURS), loc="lower right", fontsize=8)
    ax.set_title("One interrupted refund: its answer lost, looked up, confirmed, presented (one trace)")
    fig.tight_layout()
    fig.savefig(HERE / "interrupted-refund.png", dpi=110)


if __name__ == "__main__":
    main()

"""chart.png: false claims and duplicate writes per cut, both arms side by side."""

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only: no display, no GUI toolkit

import matplotlib.pyplot as plt

COLOURS = {"transcript": "#d1495b", "state": "#2e86ab"}


def draw(results: dict[str, Any], out: Path) -> Path:
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

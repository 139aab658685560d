"""results.json (docs/reference.md): {"arms", "cuts", "seeds", "summary": {ARM: {CUT: METRICS}}, "runs"}."""

import json
from pathlib import Path
from typing import Any

from settled.drill.cuts import CUTS
from settled.drill.metrics import percentile, summarize
from settled.drill.run import RunResult

FALSE_OR_DUPLICATE = ("duplicate_writes", "false_done", "false_not_done")


def build(arms: list[str], cuts: list[str], seeds: int, runs: list[RunResult]) -> dict[str, Any]:
    summary: dict[str, dict[str, Any]] = {}
    for arm in arms:
        summary[arm] = {}
        for cut in cuts:
            mine = [run for run in runs if run.arm == arm and run.cut == cut]
            summary[arm][cut] = {
                **summarize([run.metrics for run in mine]),
                "errors": sum(run.error is not None for run in mine),
            }
    return {
        "arms": arms,
        "cuts": cuts,
        "seeds": seeds,
        "summary": summary,
        "runs": [run.model_dump(mode="json") for run in runs],
    }


def state_failures(results: dict[str, Any]) -> list[str]:
    """Every cut where the state arm made a duplicate write or a false claim."""
    failures = []
    for cut, metrics in results["summary"].get("state", {}).items():
        found = {name: metrics[name] for name in FALSE_OR_DUPLICATE if metrics[name]}
        if found:
            failures.append(f"{cut}: " + ", ".join(f"{name}={count}" for name, count in found.items()))
    return failures


def errored(results: dict[str, Any]) -> list[str]:
    return [f"{run['task_id']}: {run['error']}" for run in results["runs"] if run["error"]]


def _quantiles(samples: list[float]) -> tuple[float | None, float | None]:
    found = percentile(samples, 0.5), percentile(samples, 0.95)
    return tuple(None if value is None else round(value, 1) for value in found)  # type: ignore[return-value]


def latency(results: dict[str, Any], arm: str) -> dict[str, float | None]:
    """One arm's write latency and time to first words, p50/p95 (ms), over the cuts without a fault
    (a held or failed write measures the fault, not the path)."""
    runs = [run for run in results["runs"] if run["arm"] == arm and CUTS[run["cut"]].fault is None]
    writes = [ms for run in runs for ms in run["metrics"]["write_latency_ms"]]
    firsts = [
        run["metrics"]["first_words_ms"] for run in runs if run["metrics"]["first_words_ms"] is not None
    ]
    values: dict[str, float | None] = {}
    for name, samples in (("write_latency_ms", writes), ("first_words_ms", firsts)):
        values[f"{name}_p50"], values[f"{name}_p95"] = _quantiles(samples)
    return values


def api_latency(results: dict[str, Any]) -> dict[str, dict[str, float | None]]:
    """Per settled API route, over every run of the state arm: calls, p50, p95 and max (ms)."""
    by_route: dict[str, list[float]] = {}
    for run in results["runs"]:
        for sample in run["timeline"]["samples"]:
            if sample["name"] == "api":
                by_route.setdefault(sample["label"], []).append(sample["ms"])
    table = {}
    for route, samples in sorted(by_route.items()):
        p50, p95 = _quantiles(samples)
        table[route] = {"calls": len(samples), "p50": p50, "p95": p95, "max": round(max(samples), 1)}
    return table


def write(out: Path, results: dict[str, Any]) -> Path:
    path = out / "results.json"
    path.write_text(json.dumps(results, indent=2) + "\n")
    return path

"""Structured logs: one JSON object per line, carrying operation and conversation ids.

Ids come from the record's `extra` (or the Temporal SDK's workflow/activity context). Params, keys
and sentences are never logged: they can hold personal data.
"""

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

FIELDS = ("operation_id", "conversation_id", "tenant", "kind", "state", "workflow_id", "activity_type", "ms")


class JsonFormatter(logging.Formatter):
    def __init__(self, component: str) -> None:
        super().__init__()
        self.component = component

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "at": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "component": self.component,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                line[name] = value
        # The SDK puts workflow/activity context in `temporal_workflow` / `temporal_activity`.
        for context in ("temporal_workflow", "temporal_activity"):
            info = getattr(record, context, None)
            if isinstance(info, dict):
                line.setdefault("workflow_id", info.get("workflow_id"))
                if "activity_type" in info:
                    line.setdefault("activity_type", info["activity_type"])
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info).splitlines()[-1]
        return json.dumps(line, default=str)


def configure(component: str, level: int = logging.INFO) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(component))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)

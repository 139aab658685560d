"""Reading the golden histories' JSON as the replay tests compare them."""

import base64
import json
from pathlib import Path
from typing import Any

GOLDEN = Path(__file__).parent


def events(name: str) -> list[dict[str, Any]]:
    """The events of `name`.json, as recorded."""
    return list(json.loads((GOLDEN / f"{name}.json").read_text())["events"])


def states_written(name: str) -> list[str]:
    """The `SettledState` values a history's upserts wrote, in order."""
    written = []
    for event in events(name):
        upsert = event.get("upsertWorkflowSearchAttributesEventAttributes")
        fields = upsert["searchAttributes"]["indexedFields"] if upsert else {}
        if "SettledState" in fields:
            written.append(json.loads(base64.b64decode(fields["SettledState"]["data"])))
    return written

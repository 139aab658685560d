"""The cuts: the moments a call can end badly, each with the fault the business system meets."""

from dataclasses import dataclass
from typing import Literal

FaultMode = Literal["drop_after_apply", "fail_before_apply", "hold", "late_commit"]
# C7: the write reaches the service this long after the client's timeout, and lookups see nothing of
# it until then (a queue, a request still being processed elsewhere): a 404 in between proves nothing.
LATE_COMMIT_AFTER_TIMEOUT_S = 1.0
# C5's two sweeps: released without applying (the cancel won) or applied (the write won).
Variant = Literal["before_commit", "after_commit"]


@dataclass(frozen=True)
class Cut:
    id: str
    title: str
    fault: FaultMode | None = None


CUTS: dict[str, Cut] = {
    cut.id: cut
    for cut in (
        Cut("C0", "normal uninterrupted call"),
        Cut("C1", "cut after consent, before dispatch"),
        Cut("C2", "in transit, applied, response lost", "drop_after_apply"),
        Cut("C3", "in transit, not applied", "fail_before_apply"),
        Cut("C4", "confirmed, sentence cut before it finished"),
        Cut("C5", "explicit cancel while the write is in flight", "hold"),
        Cut("C6", "a parameter changed after consent"),
        Cut("C7", "in transit, the service still committing after the client gave up", "late_commit"),
    )
}


def parse_cuts(text: str) -> list[Cut]:
    names = [part.strip().upper() for part in text.split(",") if part.strip()]
    unknown = [name for name in names if name not in CUTS]
    if unknown or not names:
        raise ValueError(f"unknown cut(s) {unknown or text!r}: choose from {', '.join(CUTS)}")
    return [CUTS[name] for name in dict.fromkeys(names)]

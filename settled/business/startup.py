"""What a part checks before it starts: its kinds' handlers import, and their secrets are set."""

from collections.abc import Collection
from typing import Any

from settled.business.code import with_handlers
from settled.business.secrets import check_secrets
from settled.domain.kinds import Kinds


def prepare(
    kinds: Kinds, sends: bool, serving: Collection[str] | None = None
) -> tuple[Kinds, dict[str, Any]]:
    """The kinds with each code kind's handler imported (its traits filled in), and the handlers of
    the kinds this part serves (`serving`; None: all). A part that sends requests also reads each
    secret of the kinds it serves once, to refuse to start without one (the value is dropped at once).
    Raises HandlerError or SecretError, naming the kind and the handler or variable."""
    kinds, handlers = with_handlers(kinds, serving)
    if sends:
        check_secrets(kind for kind in kinds if serving is None or kind.name in serving)
    return kinds, handlers

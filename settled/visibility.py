"""The custom search attributes an operator finds actions by (Temporal UI, `settled list`).

They hold ids, kinds and states only: never params or anything personal.
"""

from temporalio.common import SearchAttributeKey

CONVERSATION = SearchAttributeKey.for_keyword("SettledConversationId")
KIND = SearchAttributeKey.for_keyword("SettledKind")
STATE = SearchAttributeKey.for_keyword("SettledState")
TENANT = SearchAttributeKey.for_keyword("SettledTenant")
NEEDS_ATTENTION = SearchAttributeKey.for_bool("SettledNeedsAttention")

ALL = (CONVERSATION, KIND, STATE, TENANT, NEEDS_ATTENTION)
NO_TENANT = "-"


def dev_server_flags() -> list[str]:
    """`--search-attribute NAME=Type` for `temporal server start-dev`."""
    flags: list[str] = []
    for key in ALL:
        kind = "Bool" if key is NEEDS_ATTENTION else "Keyword"
        flags += ["--search-attribute", f"{key.name}={kind}"]
    return flags

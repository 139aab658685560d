"""The custom search attributes an operator finds actions by (Temporal UI, `settled list`).

They hold ids, kinds and states only: never params or anything personal.
"""

from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes

CONVERSATION = SearchAttributeKey.for_keyword("SettledConversationId")
KIND = SearchAttributeKey.for_keyword("SettledKind")
STATE = SearchAttributeKey.for_keyword("SettledState")
TENANT = SearchAttributeKey.for_keyword("SettledTenant")
NEEDS_ATTENTION = SearchAttributeKey.for_bool("SettledNeedsAttention")

ALL = (CONVERSATION, KIND, STATE, TENANT, NEEDS_ATTENTION)
NO_TENANT = "-"


def action_attributes(
    conversation_id: str, kind: str, tenant: str | None, state: str, needs_attention: bool = False
) -> TypedSearchAttributes:
    """What an action's run starts with (free at start; an upsert later is billed)."""
    return TypedSearchAttributes(
        [
            SearchAttributePair(CONVERSATION, conversation_id),
            SearchAttributePair(KIND, kind),
            SearchAttributePair(STATE, state),
            SearchAttributePair(TENANT, tenant or NO_TENANT),
            SearchAttributePair(NEEDS_ATTENTION, needs_attention),
        ]
    )


def quoted(value: str) -> str:
    """A value as a string literal of a visibility query."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def declared() -> dict[str, str]:
    """Each attribute's name and type as Temporal's tools spell them (`Keyword`, `Bool`): what the dev
    stack registers, and what deploy/temporal/setup.sh registers on a real cluster."""
    return {key.name: key.indexed_value_type.name.title().replace("_", "") for key in ALL}


def dev_server_flags() -> list[str]:
    """`--search-attribute NAME=Type` for `temporal server start-dev`."""
    flags: list[str] = []
    for name, kind in declared().items():
        flags += ["--search-attribute", f"{name}={kind}"]
    return flags

"""Names derived from ids: the operation key sent to services, and the Temporal workflow ids.

Both carry the tenant when API keys are configured, so two tenants' ids never meet, neither in a
service's deduplication nor in Temporal.
"""

TASK_QUEUE = "settled"


def operation_key(tenant: str | None, operation_id: str) -> str:
    return f"{tenant}:{operation_id}" if tenant else operation_id


def action_workflow_id(tenant: str | None, operation_id: str) -> str:
    return f"settled-action:{operation_key(tenant, operation_id)}"


def conversation_workflow_id(tenant: str | None, conversation_id: str) -> str:
    return f"settled-conversation:{operation_key(tenant, conversation_id)}"

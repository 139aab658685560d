"""The MCP server of one API app: the `mcp` package's lowlevel `Server`, its handlers bound to the app."""

from fastapi import FastAPI
from mcp.server.lowlevel import Server
from settled.api.edges.mcp.resources import Resources
from settled.api.edges.mcp.tools import Tools

INSTRUCTIONS = (
    "settled keeps each consequential action in explicit verified state. Call a kind's tool once per "
    "request: calling again with the same details in the same conversation meets the same action, never "
    "a second one. Only say something is done when the result says CONFIRMED; otherwise say it is being "
    "checked. verify_action checks the business system now; each action is also the resource "
    "settled://actions/{operation_id}."
)


def mcp_server(app: FastAPI) -> Server:
    tools = Tools(app)
    resources = Resources(app)
    return Server(
        "settled",
        version=app.version,
        instructions=INSTRUCTIONS,
        get_tool_input_schema=tools.input_schema,
        on_list_tools=tools.list,
        on_call_tool=tools.call,
        on_list_resources=resources.list,
        on_list_resource_templates=resources.templates,
        on_read_resource=resources.read,
        on_subscribe_resource=resources.subscribe,
        on_unsubscribe_resource=resources.unsubscribe,
        on_subscriptions_listen=resources.listen,
    )

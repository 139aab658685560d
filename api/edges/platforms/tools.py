"""`settled platform-tools vapi|retell|elevenlabs [--url BASE]`: the adapters' tool set for the
configured kinds, as each platform's tool definitions (JSON on stdout, to paste into the platform or
send with its API), pointing at settled's webhook routes, so nobody copies a schema by hand.

Vapi: a list of function tools (`POST /tool` bodies, or `model.tools` of an assistant), each with the
server `BASE/v1/platforms/vapi`. Retell: a list of custom tools (`general_tools` of a Retell LLM),
each with the URL `BASE/v1/platforms/retell/functions`. ElevenLabs: a list of `POST /v1/convai/tools`
bodies, each a webhook (server) tool posting `{conversation_id, tool, params}` to
`BASE/v1/platforms/elevenlabs/tools`, the conversation id from the system dynamic variable, and, with
`--secret-id ID`, the header `Authorization` taken from that ElevenLabs workspace secret (which holds
`Bearer KEY`, the tenant's settled API key): required where settled has API keys, or every tool call
would be refused 401. No credential is printed: the platform's own credential (Vapi's Bearer
credential, Retell's API key, the ElevenLabs workspace secret) is kept in the platform.
"""

import json
import math
import sys
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from settled.adapters.common import ActionKind, ToolSpec, tool_set

from settled.runtime.commandline import Parser
from settled.runtime.config import Settings, SettingsError

VAPI_PATH = "/v1/platforms/vapi"
RETELL_PATH = "/v1/platforms/retell/functions"
ELEVENLABS_PATH = "/v1/platforms/elevenlabs/tools"
DEFAULT_BASE = "http://127.0.0.1:8000"
# The platform's own time for a tool call: past settled's wait, so settled's answer always comes first.
SLACK_S = 5
# Said while a call runs: never that anything is done (the answer says what is).
WHILE_RUNNING = "One moment, I am putting that through."


def vapi_tools(tools: list[ToolSpec], base: str, wait_s: float) -> list[dict[str, Any]]:
    timeout_s = max(20, math.ceil(wait_s) + SLACK_S)  # Vapi's default is 20 s
    return [
        {
            "type": "function",
            "async": False,
            "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters},
            "server": {"url": base + VAPI_PATH, "timeoutSeconds": timeout_s},
            "messages": [{"type": "request-start", "content": WHILE_RUNNING}],
        }
        for tool in tools
    ]


def retell_tools(tools: list[ToolSpec], base: str, wait_s: float) -> list[dict[str, Any]]:
    return [
        {
            "type": "custom",
            "name": tool.name,
            "description": tool.description,
            "url": base + RETELL_PATH,
            "method": "POST",
            # Retell requires `properties`; a kind without params has none.
            "parameters": {"properties": {}, **tool.parameters, "type": "object"},
            "speak_during_execution": True,
            "execution_message_description": WHILE_RUNNING,
            "execution_message_type": "static_text",
            "speak_after_execution": True,
            "timeout_ms": (math.ceil(wait_s) + SLACK_S) * 1000,
        }
        for tool in tools
    ]


# What ElevenLabs' tool schema can hold of a property (a value of one type, or an object or array of
# them); other JSON Schema keywords (bounds, patterns) are said in words: settled checks them anyway.
_LITERAL_TYPES = ("string", "number", "integer", "boolean")
_SAID_IN_WORDS = {
    "minimum": "at least {}",
    "exclusiveMinimum": "more than {}",
    "maximum": "at most {}",
    "exclusiveMaximum": "less than {}",
    "minLength": "at least {} characters",
    "maxLength": "at most {} characters",
    "pattern": "matching {}",
    "format": "in the format {}",
}


def elevenlabs_property(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    """A JSON Schema property as ElevenLabs' tool schema has it, the model providing its value."""
    kind = schema.get("type", "string")
    if kind == "object":
        return {**elevenlabs_object(schema), "description": schema.get("description", f"the {name}")}
    if kind == "array":
        items = schema.get("items", {})
        return {
            "type": "array",
            "description": schema.get("description", f"the {name}"),
            "items": elevenlabs_property(name, items if isinstance(items, dict) else {}),
        }
    limits = [said.format(schema[key]) for key, said in _SAID_IN_WORDS.items() if key in schema]
    description = schema.get("description", f"the {name.replace('_', ' ')}")
    prop: dict[str, Any] = {
        "type": kind if kind in _LITERAL_TYPES else "string",
        "description": description + (f" ({', '.join(limits)})" if limits else ""),
    }
    if isinstance(schema.get("enum"), list):
        prop["enum"] = [str(value) for value in schema["enum"]]
    return prop


def elevenlabs_object(schema: dict[str, Any]) -> dict[str, Any]:
    properties = schema.get("properties", {})
    return {
        "type": "object",
        "required": list(schema.get("required", [])),
        "properties": {name: elevenlabs_property(name, prop) for name, prop in properties.items()},
    }


def elevenlabs_body(tool: ToolSpec) -> dict[str, Any]:
    """What the tool posts: the conversation (ElevenLabs' own id, a system dynamic variable), the tool's
    name (a constant) and the params (the model's)."""
    params = {**elevenlabs_object(tool.parameters), "description": "the details, as the caller agreed them"}
    return {
        "type": "object",
        "description": f"a call of the tool {tool.name}",
        "required": ["conversation_id", "tool", "params"],
        "properties": {
            "conversation_id": {"type": "string", "dynamic_variable": "system__conversation_id"},
            "tool": {"type": "string", "constant_value": tool.name},
            "params": params,
        },
    }


def elevenlabs_tools(
    tools: list[ToolSpec], base: str, wait_s: float, secret_id: str | None = None
) -> list[dict[str, Any]]:
    """`secret_id`: the ElevenLabs workspace secret each tool sends as its `Authorization` header."""
    timeout_s = max(20, math.ceil(wait_s) + SLACK_S)  # ElevenLabs' default is 20 s
    api_schema: dict[str, Any] = {
        "url": base + ELEVENLABS_PATH,
        "method": "POST",
        "content_type": "application/json",
    }
    if secret_id is not None:
        # A header's value may name a workspace secret: ElevenLabs sends the secret's value.
        api_schema["request_headers"] = {"Authorization": {"secret_id": secret_id}}
    return [
        {
            "tool_config": {
                "type": "webhook",
                "name": tool.name,
                "description": tool.description,
                "response_timeout_secs": timeout_s,
                "api_schema": {**api_schema, "request_body_schema": elevenlabs_body(tool)},
            }
        }
        for tool in tools
    ]


PLATFORMS: dict[str, tuple[Callable[..., list[dict[str, Any]]], str]] = {
    "vapi": (vapi_tools, "vapi_wait_s"),
    "retell": (retell_tools, "retell_wait_s"),
    "elevenlabs": (elevenlabs_tools, "elevenlabs_wait_s"),
}


def definitions(
    platform: str, kinds: list[ActionKind], base: str, settings: Settings, secret_id: str | None = None
) -> list[dict[str, Any]]:
    make, wait = PLATFORMS[platform]
    extra = {"secret_id": secret_id} if platform == "elevenlabs" else {}
    return make(tool_set(kinds), base.rstrip("/"), getattr(settings, wait), **extra)


def configured_kinds(settings: Settings) -> list[ActionKind]:
    """The kinds `settled api` serves with these settings, as the adapters' tools."""
    from settled.business.code import with_handlers
    from settled.domain.kinds import load_kinds

    kinds, _ = with_handlers(load_kinds(settings.kinds_file("platform-tools"), settings.sandbox_url))
    return [ActionKind.from_spec(spec) for spec in sorted(kinds, key=lambda spec: spec.name)]


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="settled platform-tools", description=__doc__.split("\n")[0])
    parser.add_argument("platform", choices=sorted(PLATFORMS), help="the platform whose tools to print")
    parser.add_argument("--url", default=DEFAULT_BASE, help="where the platform reaches settled's API")
    parser.add_argument(
        "--secret-id",
        help="elevenlabs: the id of the workspace secret holding 'Bearer KEY' (the tenant's settled API "
        "key), sent as each tool's Authorization header; required where SETTLED_API_KEYS is set",
    )
    args = parser.parse_args(argv)
    parts = urlsplit(args.url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        parser.error(f"--url {args.url!r}: expected http(s)://host[:port]")
    if args.secret_id is not None and (args.platform != "elevenlabs" or not args.secret_id.strip()):
        parser.error("--secret-id names an ElevenLabs workspace secret: only with elevenlabs, and not empty")
    try:
        settings = Settings.from_env()
        kinds = configured_kinds(settings)
    except (SettingsError, ValueError) as error:  # a kinds file or a handler that cannot be used
        print(f"settled: {error}", file=sys.stderr)
        return 2
    if args.platform == "elevenlabs" and settings.api_keys and args.secret_id is None:
        print(
            "settled: with SETTLED_API_KEYS set, every ElevenLabs tool must send 'Authorization: Bearer "
            "KEY' (or it is refused 401): create a workspace secret holding 'Bearer <the tenant's settled "
            "API key>' (POST /v1/convai/secrets, or the workspace's Secrets page) and pass its id with "
            "--secret-id",
            file=sys.stderr,
        )
        return 2
    if parts.hostname in ("127.0.0.1", "localhost", "::1"):
        print("settled: note: a hosted platform cannot reach a loopback address; pass --url", file=sys.stderr)
    print(json.dumps(definitions(args.platform, kinds, args.url, settings, args.secret_id), indent=2))
    return 0

"""`settled platform-tools`: each platform's tool definitions, read back with the platform's own SDK
types, from the configured kinds, pointing at settled's routes; and the settings they rest on."""

import json
import subprocess
import sys
from pathlib import Path

import pydantic
import pytest
from elevenlabs.types import (
    ConvAiSecretLocator,
    LiteralJsonSchemaProperty,
    ObjectJsonSchemaPropertyInput,
    ToolRequestModel,
)
from elevenlabs.types.tool_request_model_tool_config import ToolRequestModelToolConfig_Webhook
from retell.types.llm_create_params import GeneralToolCustomTool
from settled.adapters.common import AUTHORIZE_TOOL, CHECK_TOOL, load_action_kinds, tool_set
from vapi.core.pydantic_utilities import parse_obj_as
from vapi.types import CreateFunctionToolDto

from settled.domain.kinds import sandbox_kinds_text
from settled.runtime.config import Settings, SettingsError, unknown_variables

BASE = "https://settled.example.com"


@pytest.fixture(scope="module")
def kinds_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("platform-tools") / "kinds.toml"
    path.write_text(sandbox_kinds_text("http://127.0.0.1:8100"))
    return path


def platform_tools(
    kinds: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(Path(sys.executable).with_name("settled")), "platform-tools", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "SETTLED_CONFIG": str(kinds), **(env or {})},
    )


def test_vapi_tools_are_vapi_function_tools_pointing_at_the_vapi_route(kinds_file: Path) -> None:
    run = platform_tools(kinds_file, "vapi", "--url", BASE + "/")
    assert run.returncode == 0, run.stderr
    tools = [parse_obj_as(CreateFunctionToolDto, tool) for tool in json.loads(run.stdout)]
    kinds = load_action_kinds(kinds_file)
    expected = tool_set(kinds)
    assert [tool.function.name for tool in tools if tool.function] == [tool.name for tool in expected]
    assert {tool.function.name for tool in tools if tool.function} >= {
        "refund",
        "room_booking",
        CHECK_TOOL,
        AUTHORIZE_TOOL,
    }
    for tool, spec in zip(tools, expected, strict=True):
        assert tool.server is not None and tool.server.url == BASE + "/v1/platforms/vapi"
        assert tool.server.timeout_seconds is not None and tool.server.timeout_seconds >= 8 + 5
        assert tool.function is not None and tool.function.description == spec.description
        assert tool.async_ is False
    refund = next(
        json.loads(run.stdout)[i] for i, t in enumerate(tools) if t.function and t.function.name == "refund"
    )
    assert refund["function"]["parameters"] == kinds[[k.name for k in kinds].index("refund")].params_schema


def test_retell_tools_are_retell_custom_tools_pointing_at_the_functions_route(kinds_file: Path) -> None:
    run = platform_tools(kinds_file, "retell", "--url", BASE, env={"SETTLED_RETELL_WAIT_S": "12"})
    assert run.returncode == 0, run.stderr
    adapter = pydantic.TypeAdapter(GeneralToolCustomTool)
    tools = [adapter.validate_python(tool) for tool in json.loads(run.stdout)]
    assert [tool["name"] for tool in tools] == [spec.name for spec in tool_set(load_action_kinds(kinds_file))]
    for tool in tools:
        assert tool["type"] == "custom" and tool["url"] == BASE + "/v1/platforms/retell/functions"
        assert tool["timeout_ms"] == (12 + 5) * 1000 and not tool.get("args_at_root")
        assert tool["speak_during_execution"] and "done" not in tool["execution_message_description"].lower()


def test_elevenlabs_tools_are_webhook_tools_carrying_the_conversation_id(kinds_file: Path) -> None:
    run = platform_tools(kinds_file, "elevenlabs", "--url", BASE, env={"SETTLED_ELEVENLABS_WAIT_S": "9"})
    assert run.returncode == 0, run.stderr
    tools = [ToolRequestModel.model_validate(tool).tool_config for tool in json.loads(run.stdout)]
    expected = tool_set(load_action_kinds(kinds_file))
    assert [tool.name for tool in tools] == [spec.name for spec in expected]  # type: ignore[union-attr]
    for tool, spec in zip(tools, expected, strict=True):
        assert isinstance(tool, ToolRequestModelToolConfig_Webhook)
        assert tool.description == spec.description and tool.response_timeout_secs == 20
        api = tool.api_schema
        assert api.url == BASE + "/v1/platforms/elevenlabs/tools" and api.method == "POST"
        body = api.request_body_schema
        assert body is not None and body.properties is not None
        conversation, name, params = (body.properties[key] for key in ("conversation_id", "tool", "params"))
        # The conversation is ElevenLabs' own id, never the model's to fill; the tool's name a constant.
        assert isinstance(conversation, LiteralJsonSchemaProperty)
        assert conversation.dynamic_variable == "system__conversation_id" and conversation.description is None
        assert isinstance(name, LiteralJsonSchemaProperty) and name.constant_value == spec.name
        assert isinstance(params, ObjectJsonSchemaPropertyInput) and params.properties is not None
        assert set(params.properties) == set(spec.parameters["properties"])
        assert set(params.required or []) == set(spec.parameters.get("required", []))
    refund = next(tool for tool in tools if tool.name == "refund")  # type: ignore[union-attr]
    amount = refund.api_schema.request_body_schema.properties["params"].properties["amount"]  # type: ignore[union-attr]
    assert amount.type == "number" and "more than 0" in amount.description


def test_with_api_keys_elevenlabs_tools_send_the_authorization_header_from_a_workspace_secret(
    kinds_file: Path,
) -> None:
    """settled's API keys refuse a tool call without `Authorization: Bearer KEY`: each printed tool sends
    the header, its value taken from the named ElevenLabs workspace secret (never the key itself)."""
    keyed = {"SETTLED_API_KEYS": "acme:acme-key-0123456789"}
    run = platform_tools(kinds_file, "elevenlabs", "--url", BASE, "--secret-id", "sec_acme_bearer", env=keyed)
    assert run.returncode == 0, run.stderr
    assert "acme-key-0123456789" not in run.stdout
    tools = [ToolRequestModel.model_validate(tool).tool_config for tool in json.loads(run.stdout)]
    assert len(tools) == len(tool_set(load_action_kinds(kinds_file)))
    for tool in tools:
        assert isinstance(tool, ToolRequestModelToolConfig_Webhook)
        headers = tool.api_schema.request_headers
        assert headers is not None and set(headers) == {"Authorization"}
        assert isinstance(headers["Authorization"], ConvAiSecretLocator)
        assert headers["Authorization"].secret_id == "sec_acme_bearer"

    run = platform_tools(kinds_file, "elevenlabs", "--url", BASE, env=keyed)  # tools that would all be 401
    assert run.returncode == 2 and "--secret-id" in run.stderr and run.stdout == ""
    run = platform_tools(kinds_file, "vapi", "--url", BASE, "--secret-id", "sec_acme_bearer")
    assert run.returncode == 2 and "--secret-id" in run.stderr
    unkeyed = platform_tools(kinds_file, "elevenlabs", "--url", BASE)  # no API keys: no header
    assert unkeyed.returncode == 0 and "request_headers" not in unkeyed.stdout


def test_platform_tools_needs_the_kinds_file_and_a_url(kinds_file: Path) -> None:
    run = platform_tools(kinds_file, "vapi", env={"SETTLED_CONFIG": ""})
    assert run.returncode == 2 and "SETTLED_CONFIG" in run.stderr
    run = platform_tools(kinds_file, "vapi", "--url", "ftp://nowhere")
    assert run.returncode != 0 and "--url" in run.stderr
    run = platform_tools(kinds_file, "vapi")
    assert run.returncode == 0 and "loopback" in run.stderr


@pytest.mark.parametrize(
    ("env", "problem"),
    [
        ({"SETTLED_VAPI_WAIT_S": "0"}, "SETTLED_VAPI_WAIT_S"),
        ({"SETTLED_VAPI_WAIT_S": "31"}, "SETTLED_VAPI_WAIT_S"),
        ({"SETTLED_RETELL_WAIT_S": "soon"}, "SETTLED_RETELL_WAIT_S"),
        ({"SETTLED_ELEVENLABS_WAIT_S": "40"}, "SETTLED_ELEVENLABS_WAIT_S"),
        ({"SETTLED_ELEVENLABS_WEBHOOK_SECRETS": "acme:ACME_EL"}, "SETTLED_API_KEYS"),
        (
            {"SETTLED_API_KEYS": "acme:key-01234567", "SETTLED_ELEVENLABS_WEBHOOK_SECRETS": "nobody:X"},
            "nobody",
        ),
        ({"SETTLED_RETELL_API_KEYS": "acme:ACME_RETELL"}, "SETTLED_API_KEYS"),
        ({"SETTLED_API_KEYS": "acme:key-01234567", "SETTLED_RETELL_API_KEYS": "globex:G_KEY"}, "globex"),
        ({"SETTLED_API_KEYS": "acme:key-01234567", "SETTLED_RETELL_API_KEYS": "acme:not a name"}, "variable"),
        ({"SETTLED_API_KEYS": "acme:key-01234567", "SETTLED_RETELL_API_KEYS": "acme"}, "TENANT:VARIABLE"),
    ],
)
def test_the_platform_settings_are_checked(env: dict[str, str], problem: str) -> None:
    with pytest.raises(SettingsError, match=problem):
        Settings.from_env(env)


def test_the_platform_settings_default_to_eight_seconds() -> None:
    settings = Settings.from_env({})
    assert (settings.vapi_wait_s, settings.retell_wait_s, settings.retell_api_keys) == (8.0, 8.0, {})
    keyed = Settings.from_env(
        {
            "SETTLED_API_KEYS": "acme:key-01234567",
            "SETTLED_RETELL_API_KEYS": "acme:ACME_RETELL",
            "SETTLED_VAPI_WAIT_S": "2.5",
        }
    )
    assert keyed.retell_api_keys == {"acme": "ACME_RETELL"} and keyed.vapi_wait_s == 2.5


def test_the_variables_holding_platform_secrets_are_not_called_unknown() -> None:
    env = {
        "SETTLED_RETELL_API_KEYS": "acme:SETTLED_ACME_RETELL",
        "SETTLED_ACME_RETELL_FILE": "/run/secrets/acme-retell",
        "SETTLED_ELEVENLABS_WEBHOOK_SECRETS": "acme:SETTLED_ACME_ELEVENLABS",
        "SETTLED_ACME_ELEVENLABS": "wsec-value",
        "SETTLED_RETELL_WAIT": "8",
    }
    assert unknown_variables(env) == [
        "SETTLED_RETELL_WAIT is not a setting settled reads (ignored); did you mean SETTLED_RETELL_WAIT_S?"
    ]

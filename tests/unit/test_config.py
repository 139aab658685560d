"""Every refusal of the environment and of a kinds file, without processes (tests/e2e/test_startup.py
runs the parts themselves with one of each)."""

import base64

import pytest

from settled.domain.kinds import KindsFileError, Variant, load_kinds, parse_kinds, sandbox_kinds_text
from settled.runtime.config import RateLimit, Settings, SettingsError, parse_rate_limit, unknown_variables

KEY = "tenant-key-0123456789"
GOOD_KIND = """
[kinds.refund]
description = "refund the order"
params_schema = { type = "object", properties = { amount = { type = "number" } } }
dispatch = { method = "POST", url = "http://127.0.0.1:8100/refunds" }
"""


@pytest.mark.parametrize(
    ("variable", "value", "named"),
    [
        ("SETTLED_TEMPORAL_ADDRESS", "localhost", "HOST:PORT"),
        ("SETTLED_TEMPORAL_ADDRESS", "127.0.0.1:99999", "port 1-65535"),
        ("SETTLED_NAMESPACE", "   ", "is empty"),
        ("SETTLED_NAMESPACE", "my namespace", "A-Z a-z 0-9"),
        ("SETTLED_CONFIG", "/nonexistent/kinds.toml", "no such kinds file"),
        ("SETTLED_API_KEYS", "acme", "TENANT:KEY"),
        ("SETTLED_API_KEYS", "acme:", "TENANT:KEY"),
        ("SETTLED_API_KEYS", "acme:short", "shorter than 8"),
        ("SETTLED_API_KEYS", f"a cme:{KEY}", "tenant 'a cme'"),
        ("SETTLED_API_KEYS", f"acme\n:{KEY}", "tenant 'acme\\n'"),
        ("SETTLED_API_KEYS", f"acme:{KEY},globex:{KEY}", "same key is given twice"),
        ("SETTLED_API_KEYS", ",", "no TENANT:KEY entry"),
        ("SETTLED_SANDBOX_URL", "ftp://127.0.0.1:8100", "http:// or https://"),
        ("SETTLED_SANDBOX_URL", "http://", "no host"),
        ("SETTLED_SANDBOX_URL", "http://127.0.0.1:99999", "invalid port"),
        ("SETTLED_SANDBOX_URL", "http://sand box", "whitespace"),
        ("SETTLED_MAX_BODY_BYTES", "lots", "1024 to 16777216"),
        ("SETTLED_MAX_BODY_BYTES", "100", "1024 to 16777216"),
        ("SETTLED_MAX_BODY_BYTES", "-5", "1024 to 16777216"),
        ("SETTLED_ENCRYPTION_KEYS", "k1:not-base64!", "not valid base64"),
        ("SETTLED_ENCRYPTION_KEYS", "k1:" + base64.b64encode(b"k" * 16).decode(), "must be 32 bytes"),
        ("SETTLED_ENCRYPTION_KEYS", "nokeyid", "KEY_ID:BASE64_KEY"),
        ("SETTLED_ENCRYPTION_KEYS", ",", "no KEY_ID:BASE64_KEY entry"),
        ("SETTLED_CODEC_CORS_ORIGINS", "*", "never *"),
        ("SETTLED_CODEC_CORS_ORIGINS", "http://127.0.0.1:8233/ui", "not an origin"),
        ("SETTLED_CODEC_CORS_ORIGINS", "127.0.0.1:8233", "not an origin"),
        ("SETTLED_MCP_ALLOWED_ORIGINS", "*", "never *"),
        ("SETTLED_MCP_ALLOWED_ORIGINS", "https://assistant.example/app", "not an origin"),
        ("SETTLED_WORKER_METRICS_PORT", "70000", "port number"),
        ("SETTLED_WORKER_METRICS_PORT", "metrics", "port number"),
        ("SETTLED_WORKER_METRICS_HOST", "metrics.example", "IP address"),
        ("TEMPORAL_ADDRESS", "no-port", "HOST:PORT"),
        ("TEMPORAL_NAMESPACE", "a b", "A-Z a-z 0-9"),
        ("TEMPORAL_CONFIG_FILE", "/nonexistent/temporal.toml", "no such file"),
        ("SETTLED_TEMPORAL_API_KEY_FILE", "/nonexistent/key", "cannot read it"),
        ("SETTLED_WORKER_CACHED_WORKFLOWS", "0", "1 to 1000000"),
        ("SETTLED_WORKER_CACHED_WORKFLOWS", "many", "1 to 1000000"),
        ("SETTLED_API_WORKER", "maybe", "expected 1 or 0"),
        ("SETTLED_API_WORKER", "", "expected 1 or 0"),
        ("SETTLED_MCP_WAIT_S", "soon", "0 to 30"),
        ("SETTLED_MCP_WAIT_S", "31", "0 to 30"),
        ("SETTLED_MCP_WAIT_S", "-1", "0 to 30"),
        ("SETTLED_MCP_WAIT_S", "nan", "0 to 30"),
        ("SETTLED_CONVERSATION_IDLE_S", "hourly", "1 to 2592000"),
        ("SETTLED_CONVERSATION_IDLE_S", "0", "1 to 2592000"),
        ("SETTLED_CONVERSATION_IDLE_S", "2592001", "1 to 2592000"),
        ("SETTLED_RATE_LIMIT", "fast", "N/s"),
        ("SETTLED_RATE_LIMIT", "100", "N/s"),
        ("SETTLED_RATE_LIMIT", "0/s", "more than 0"),
        ("SETTLED_RATE_LIMIT", "-5/s", "N/s"),
        ("SETTLED_RATE_LIMIT", "10/day", "N/s"),
        ("SETTLED_RATE_LIMIT", "10/s,burst=0", "burst=M"),
        ("SETTLED_RATE_LIMIT", "10/s,burst=1.5", "burst=M"),
        ("SETTLED_RATE_LIMIT", "10/s,bursts=20", "burst=M"),
    ],
)
def test_a_bad_variable_is_refused_naming_it(variable: str, value: str, named: str) -> None:
    with pytest.raises(SettingsError) as refused:
        Settings.from_env({variable: value})
    assert variable in str(refused.value) and named in str(refused.value)


@pytest.mark.parametrize(("value", "hosted"), [("1", True), ("true", True), ("0", False), ("No", False)])
def test_the_api_worker_switch(value: str, hosted: bool) -> None:
    assert Settings.from_env({"SETTLED_API_WORKER": value}).api_worker is hosted
    assert Settings.from_env({}).api_worker  # on unless turned off


def test_the_mcp_wait() -> None:
    assert Settings.from_env({}).mcp_wait_s == 8.0
    assert Settings.from_env({"SETTLED_MCP_WAIT_S": " 2.5 "}).mcp_wait_s == 2.5
    assert Settings.from_env({"SETTLED_MCP_WAIT_S": "0"}).mcp_wait_s == 0.0


def test_the_conversation_idle_period() -> None:
    assert Settings.from_env({}).conversation_idle_s == 3600.0
    assert Settings.from_env({"SETTLED_CONVERSATION_IDLE_S": "86400"}).conversation_idle_s == 86400.0


def test_two_encryption_keys_with_one_id_are_refused() -> None:
    """Otherwise the second silently replaces the first, which may be the one that encrypts."""
    key = base64.b64encode(b"k" * 32).decode()
    other = base64.b64encode(b"o" * 32).decode()
    with pytest.raises(SettingsError, match="same key id is given twice"):
        Settings.from_env({"SETTLED_ENCRYPTION_KEYS": f"k1:{key},k1:{other}"})


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("off", None),
        (" OFF ", None),
        ("200/s,burst=400", RateLimit(per_s=200.0, burst=400)),
        ("5/s", RateLimit(per_s=5.0, burst=5)),  # burst defaults to the count
        ("120/min", RateLimit(per_s=2.0, burst=120)),
        ("3600 / h, burst = 10", RateLimit(per_s=1.0, burst=10)),
        ("0.5/s", RateLimit(per_s=0.5, burst=1)),
    ],
)
def test_rate_limit_forms(text: str, expected: RateLimit | None) -> None:
    assert parse_rate_limit(text) == expected


def test_the_default_rate_limit_is_generous_and_on() -> None:
    assert Settings.from_env({}).rate_limit == RateLimit(per_s=200.0, burst=400)
    assert Settings.from_env({"SETTLED_RATE_LIMIT": "off"}).rate_limit is None


def test_unknown_variables_are_named_with_the_closest_setting() -> None:
    warnings = unknown_variables(
        {"SETTLED_API_KEY": "x", "SETTLED_KEEP_LOGS": "1", "SETTLED_RATELIMIT": "off", "PATH": "/bin"}
    )
    assert warnings == [
        "SETTLED_API_KEY is not a setting settled reads (ignored); did you mean SETTLED_API_KEYS?",
        "SETTLED_RATELIMIT is not a setting settled reads (ignored); did you mean SETTLED_RATE_LIMIT?",
    ]
    assert unknown_variables({"SETTLED_ZZZ": "1"}) == ["SETTLED_ZZZ is not a setting settled reads (ignored)"]


def _without(line_start: str) -> str:
    return "\n".join(line for line in GOOD_KIND.splitlines() if not line.startswith(line_start))


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("[kinds.refund\n", "not valid TOML"),
        (GOOD_KIND + 'colour = "blue"\n', "kinds.refund.colour: unknown key"),
        (GOOD_KIND + 'name = "other"\n', "kinds.refund.name: unknown key"),
        (GOOD_KIND.replace('"POST"', '"POST", verb = "x"'), "kinds.refund.dispatch.verb: unknown key"),
        (GOOD_KIND.replace('"POST"', '"BREW"'), "kinds.refund.dispatch.method"),
        (GOOD_KIND.replace("http://127.0.0.1:8100", "ftp://h"), "kinds.refund.dispatch.url: must be an http"),
        (GOOD_KIND.replace("http://127.0.0.1:8100", "http://"), "kinds.refund.dispatch.url: has no host"),
        (GOOD_KIND.replace("127.0.0.1:8100", "sand box"), "kinds.refund.dispatch.url: contains whitespace"),
        (GOOD_KIND.replace("8100", "99999"), "kinds.refund.dispatch.url: has an invalid port"),
        (GOOD_KIND.replace('"number"', '"amount"'), "kinds.refund.params_schema: not a valid JSON Schema"),
        (GOOD_KIND.replace('"object"', '"array"'), "kinds.refund.params_schema: must describe a JSON object"),
        (_without("dispatch"), "kinds.refund.dispatch: missing (required)"),
        (_without("description"), "kinds.refund.description: missing (required)"),
        (GOOD_KIND + 'requires_authorization = "yes"\n', "kinds.refund.requires_authorization"),
        (GOOD_KIND + 'lookup = { url = "http://h/{operation_id}", authoritative = 1 }\n',
         "kinds.refund.lookup.authoritative"),
        (GOOD_KIND + "timeout_s = nan\n", "kinds.refund.timeout_s: Input should be a finite number"),
        (GOOD_KIND + "reconcile_max_interval_s = inf\n", "kinds.refund.reconcile_max_interval_s"),
        (GOOD_KIND + "give_up_after_s = 1e30\n", "give_up_after_s: at most"),
        (GOOD_KIND + "timeout_s = -1\n", "kinds.refund.timeout_s"),
        (GOOD_KIND + 'idempotency_header = "Idempotency Key"\n', "kinds.refund.idempotency_header"),
        (GOOD_KIND + 'reference_field = ""\n', "kinds.refund.reference_field"),
        (GOOD_KIND + 'operation_field = "a..b"\n', "kinds.refund.operation_field"),
        (GOOD_KIND + '[kinds.refund.say]\nconfirmd = "done"\n', "kinds.refund.say.confirmd"),
        (GOOD_KIND + '[kinds.refund.say]\nconfirmed = "{params.x}"\n', "unknown placeholder {params.x}"),
        (GOOD_KIND.replace("/refunds", "/refunds/{order}"), "kinds.refund.dispatch.url: unknown"),
        (GOOD_KIND.replace("[kinds.refund]", '[kinds."refund now"]'), "kinds.refund now: a kind's name"),
        (GOOD_KIND.replace("[kinds.refund]", '[kinds."refund\\n"]'), "a kind's name"),
        ('[settings]\nmode = "fast"\n' + GOOD_KIND, "unknown top-level table(s) ['settings']"),
        ("# nothing declared\n", "no kinds"),
        ("kinds = 3\n", "no kinds"),
        ("[kinds]\nrefund = 3\n", "kinds.refund: must be a table"),
    ],
)  # fmt: skip
def test_a_broken_kinds_file_is_refused_naming_the_key(text: str, named: str) -> None:
    with pytest.raises(KindsFileError) as refused:
        parse_kinds(text, "my-kinds.toml")
    message = str(refused.value)
    assert message.startswith("my-kinds.toml: ") and named in message, message
    assert "Value error" not in message and "Extra inputs" not in message  # pydantic's words, not ours


def test_the_kinds_in_the_repository_still_load() -> None:
    """The stricter checks refuse nothing that settled itself ships or tests with: the sandbox kinds,
    and each harness's variant of them."""
    from settled.bench.runner import BENCH_KINDS
    from settled.drill.stack import DRILL_KINDS
    from settled.soak.run import SOAK_KINDS

    from tests.e2e.conftest import LONG_TIMEOUT
    from tests.helpers import TEST_KINDS
    from tests.page.test_links import page_kinds
    from tests.timeskip.support import KINDS as TIMESKIP_KINDS

    assert load_kinds(None).names() == ["refund", "room_booking"]
    variants = {
        "drill": DRILL_KINDS,
        "soak": SOAK_KINDS,
        "bench": BENCH_KINDS,
        "tests": TEST_KINDS,
        "e2e": LONG_TIMEOUT.kinds,
        "page": page_kinds("http://127.0.0.1:8200"),
        "timeskip": TIMESKIP_KINDS,
    }
    for harness, kinds in variants.items():
        text = sandbox_kinds_text("http://127.0.0.1:8100", kinds)
        assert parse_kinds(text, f"{harness} kinds").names() == sorted(kinds), harness


def test_a_variant_changes_only_the_keys_it_names() -> None:
    """A harness states what differs from a sandbox kind; everything else is the sandbox kind's."""
    sandbox = {kind.name: kind for kind in parse_kinds(sandbox_kinds_text("http://sb"), "sandbox")}
    variants = {
        "fast": Variant("refund", {"timeout_s": 0.5, "say": None}),
        "booking": Variant("room_booking").but(compensate=None),
    }
    derived = {kind.name: kind for kind in parse_kinds(sandbox_kinds_text("http://sb", variants), "x")}
    assert derived["fast"] == sandbox["refund"].model_copy(
        update={"name": "fast", "timeout_s": 0.5, "say": {}}
    )
    assert derived["booking"] == sandbox["room_booking"].model_copy(
        update={"name": "booking", "compensate": None}
    )
    assert derived["booking"].dispatch.url == "http://sb/bookings"

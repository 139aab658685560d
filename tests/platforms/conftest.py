"""One stack for the platform tests: two tenants (acme, globex) with API keys, Vapi's HMAC secret in a
file, each tenant's Retell key and ElevenLabs webhook secret in a variable of its own (globex's through
a file), and waits of 3 s."""

from collections.abc import Iterator

import httpx
import pytest

from settled.runtime.stack import Stack
from tests.helpers import TEST_KINDS, Sandbox, api_client, sandbox_of

ACME_KEY = "acme-key-0123456789"
GLOBEX_KEY = "globex-key-0123456789"
VAPI_HMAC_SECRET = "vapi-hmac-3b1f9c0e7d"
ACME_RETELL_KEY = "key_acme_retell_5d2a8f"
GLOBEX_RETELL_KEY = "key_globex_retell_91c4e6"
ACME_ELEVENLABS_SECRET = "wsec_acme_elevenlabs_7e03b9d1"
GLOBEX_ELEVENLABS_SECRET = "wsec_globex_elevenlabs_c8a25f40"
WAIT_S = 3.0
# The answer's way back over real HTTP on a loaded machine, on top of the wait.
RETURN_SLACK_S = 1.0
KIND = "refund_nodedup"  # a service that does not deduplicate: a second send would be a second refund
SECRETS = {
    "the Vapi HMAC secret": VAPI_HMAC_SECRET,
    "acme's Retell key": ACME_RETELL_KEY,
    "globex's Retell key": GLOBEX_RETELL_KEY,
    "acme's ElevenLabs webhook secret": ACME_ELEVENLABS_SECRET,
    "globex's ElevenLabs webhook secret": GLOBEX_ELEVENLABS_SECRET,
}


@pytest.fixture(scope="package")
def platform_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    data_dir = tmp_path_factory.mktemp("platforms")
    secrets = data_dir / "secrets"
    secrets.mkdir()
    (secrets / "vapi-hmac").write_text(VAPI_HMAC_SECRET + "\n")
    (secrets / "globex-retell").write_text(GLOBEX_RETELL_KEY + "\n")
    (secrets / "globex-elevenlabs").write_text(GLOBEX_ELEVENLABS_SECRET + "\n")
    env = {
        "SETTLED_API_KEYS": f"acme:{ACME_KEY},globex:{GLOBEX_KEY}",
        "SETTLED_VAPI_HMAC_SECRET_FILE": str(secrets / "vapi-hmac"),
        "SETTLED_RETELL_API_KEYS": "acme:ACME_RETELL_KEY,globex:GLOBEX_RETELL_KEY",
        "ACME_RETELL_KEY": ACME_RETELL_KEY,
        "GLOBEX_RETELL_KEY_FILE": str(secrets / "globex-retell"),
        "SETTLED_VAPI_WAIT_S": str(WAIT_S),
        "SETTLED_RETELL_WAIT_S": str(WAIT_S),
        "SETTLED_ELEVENLABS_WEBHOOK_SECRETS": "acme:ACME_ELEVENLABS_SECRET,globex:GLOBEX_ELEVENLABS_SECRET",
        "ACME_ELEVENLABS_SECRET": ACME_ELEVENLABS_SECRET,
        "GLOBEX_ELEVENLABS_SECRET_FILE": str(secrets / "globex-elevenlabs"),
        "SETTLED_ELEVENLABS_WAIT_S": str(WAIT_S),
    }
    with Stack.on_free_ports(data_dir, TEST_KINDS, ui=False, extra_env=env).running() as stack:
        yield stack


@pytest.fixture(scope="package")
def platform_sandbox(platform_stack: Stack) -> Iterator[Sandbox]:
    with sandbox_of(platform_stack) as truth:
        yield truth


@pytest.fixture(scope="package")
def webhook(platform_stack: Stack) -> Iterator[httpx.Client]:
    """The platforms' side: no credential of its own (each request brings its own, or none)."""
    with api_client(platform_stack) as client:
        yield client


@pytest.fixture(scope="package")
def acme(platform_stack: Stack) -> Iterator[httpx.Client]:
    with api_client(platform_stack, headers={"Authorization": f"Bearer {ACME_KEY}"}) as client:
        yield client


@pytest.fixture(scope="package")
def globex(platform_stack: Stack) -> Iterator[httpx.Client]:
    with api_client(platform_stack, headers={"Authorization": f"Bearer {GLOBEX_KEY}"}) as client:
        yield client


@pytest.fixture(autouse=True)
def _clear_platform_faults(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if "platform_sandbox" in request.fixturenames:
        request.getfixturevalue("platform_sandbox").clear_faults()

"""The TypeScript package's own suite (`typescript/`, run with `node --test`) against this session's
real stack: its client, its adapters driving the real `@openai/agents-realtime` and `ai` packages,
judged by the sandbox's records; and, against a second API of the stack with API keys, a browser
agent holding only a conversation token that Python minted. Its output is passed through; its exit
code is the verdict."""

import os
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from settled.runtime.stack import Stack
from settled.tokens import mint_conversation_token
from tests.helpers import BOOKING, create, new_id, second_api
from tests.typescript.conftest import npm

KEY = "acme-key-typescript-0123456789"


@pytest.fixture(scope="module")
def keyed_api(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    api = second_api(stack, tmp_path_factory.mktemp("keyed-api"), SETTLED_API_KEYS=f"acme:{KEY}")
    yield api.api_url
    api.stop()


def token_env(keyed_api: str) -> dict[str, str]:
    """What the browser test is handed: its conversation, its tokens, another conversation's action;
    never the key."""
    conversation = new_id("conv")
    with httpx.Client(base_url=keyed_api, timeout=40, headers={"Authorization": f"Bearer {KEY}"}) as api:
        elsewhere = create(api, "room_booking", BOOKING, conversation_id=new_id("conv"))
        assert elsewhere.status_code == 201, elsewhere.text
    an_hour_ago = time.time() - 3600
    return {
        "SETTLED_KEYED_API_URL": keyed_api,
        "SETTLED_TOKEN_CONVERSATION": conversation,
        "SETTLED_CONVERSATION_TOKEN": mint_conversation_token(KEY, "acme", conversation, ttl_s=600),
        "SETTLED_EXPIRED_TOKEN": mint_conversation_token(
            KEY, "acme", conversation, ttl_s=60, now=an_hour_ago
        ),
        "SETTLED_ELSEWHERE_ACTION": elsewhere.json()["operation_id"],
    }


def test_the_typescript_suite_passes_against_a_real_stack(built: Path, stack: Stack, keyed_api: str) -> None:
    env = {
        **os.environ,
        "SETTLED_API_URL": stack.api_url,
        "SETTLED_SANDBOX_URL": stack.sandbox_url,
        **token_env(keyed_api),
    }
    started = time.monotonic()
    run = npm("test", "--ignore-scripts", env=env)  # built already (make typescript): no pretest build
    print(run.stdout, run.stderr, f"the TypeScript suite took {time.monotonic() - started:.1f} s", sep="\n")
    assert run.returncode == 0, run.stdout[-8000:] + run.stderr[-4000:]
    assert "# fail 0" in run.stdout and "# skipped 0" in run.stdout, run.stdout[-2000:]
    assert KEY not in run.stdout + run.stderr

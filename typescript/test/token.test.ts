/**
 * The browser case: an agent that holds a conversation token, never the API key, against a keyed
 * API of the real stack. Python mints the tokens and passes them in the environment (tests/typescript);
 * this caller sees only the token, as a page would, and derives its ids with WebCrypto alone.
 */

import assert from "node:assert/strict";
import { test } from "node:test";
import { SettledAPIError, SettledClient, actionKinds, derivedOperationId } from "@settled/client";
import { newId, refund, sandbox } from "./support.js";

const KEYED_API_URL = process.env.SETTLED_KEYED_API_URL;
const CONVERSATION = process.env.SETTLED_TOKEN_CONVERSATION as string;
const TOKEN = process.env.SETTLED_CONVERSATION_TOKEN as string;
const EXPIRED_TOKEN = process.env.SETTLED_EXPIRED_TOKEN as string;
// An action of the same tenant in another conversation, made with the key by Python.
const ELSEWHERE = process.env.SETTLED_ELSEWHERE_ACTION as string;

/** The page's client: the token and the platform's fetch, each request's credential noted. */
function browser(token: string): { settled: SettledClient; credentials: (string | null)[] } {
  const credentials: (string | null)[] = [];
  const noting: typeof fetch = (input, init) => {
    credentials.push(new Headers(init?.headers).get("authorization"));
    return fetch(input, init);
  };
  return { settled: new SettledClient({ baseUrl: KEYED_API_URL as string, token, fetch: noting, timeoutMs: 20_000 }), credentials };
}

async function refused(call: Promise<unknown>, code: string, status: number): Promise<void> {
  await assert.rejects(call, (error: unknown) => error instanceof SettledAPIError && error.code === code && error.status === status);
}

test("a browser agent with a conversation token works its own conversation, and nothing else", async (t) => {
  if (!KEYED_API_URL) {
    t.skip("no keyed API: run through pytest (tests/typescript), which mints the tokens");
    return;
  }
  const { settled, credentials } = browser(TOKEN);
  const [refundKind] = await actionKinds(settled, ["refund"]);
  assert.equal(refundKind?.kind, "refund");

  const params = refund();
  const operationId = await derivedOperationId(CONVERSATION, "refund", params);
  const created = await settled.createAction(CONVERSATION, "refund", params, { operationId, authorized: true, wait: 20 });
  assert.equal(created.created, true);
  assert.equal(created.state, "confirmed");
  const again = await settled.createAction(CONVERSATION, "refund", params, { operationId, authorized: true });
  assert.equal(again.created, false);
  assert.equal((await sandbox.refundsFor(params.order_id)).length, 1, "one refund in the service's records");

  assert.equal((await settled.get(operationId)).state, "confirmed");
  assert.equal((await settled.reconcile(operationId, 1)).state, "confirmed");
  const shown = await settled.presented(operationId, "text", created.say, true, "confirmed");
  assert.equal(shown.presented?.completed, true);
  const opened = await settled.conversationEvent(CONVERSATION, "channel_opened", "text");
  assert.equal(opened.conversation_id, CONVERSATION);
  const handoff = await settled.handoff(CONVERSATION);
  assert.ok(handoff.actions.some((action) => action.operation_id === operationId));
  for await (const event of settled.stream(CONVERSATION)) {
    assert.equal(event.conversation_id, CONVERSATION);
    break;
  }

  // Another conversation, another conversation's action, amending: refused, and nothing made.
  const other = refund();
  await refused(settled.createAction(newId("conv"), "refund", other, { authorized: true }), "forbidden", 403);
  assert.equal((await sandbox.refundsFor(other.order_id)).length, 0);
  await refused(settled.handoff(newId("conv")), "forbidden", 403);
  await refused(settled.get(ELSEWHERE), "not_found", 404);
  await refused(settled.cancel(ELSEWHERE), "not_found", 404);
  // A create that names it (its very kind and params) is the same 404: nothing of it comes back.
  const booking = { room: "Ada", day: "Thursday" };
  await refused(settled.createAction(CONVERSATION, "room_booking", booking, { operationId: ELSEWHERE }), "not_found", 404);
  await refused(settled.amend(operationId, { ...params, amount: 1 }), "forbidden", 403);

  // An expired token opens nothing.
  await refused(browser(EXPIRED_TOKEN).settled.get(operationId), "unauthorized", 401);

  assert.ok(credentials.length >= 12);
  assert.ok(credentials.every((credential) => credential === `Bearer ${TOKEN}`), "only the token was ever sent");
});

/**
 * The realtime adapter driving the real `RealtimeSession` over the SDK's own scripted transport
 * (`@openai/agents-realtime/testing`): the model's tool calls, audio and barge-ins are scripted, the
 * tools run against a real settled stack, and the sandbox's records judge each write.
 */

import assert from "node:assert/strict";
import { test } from "node:test";
import { RealtimeAgent, RealtimeSession } from "@openai/agents-realtime";
import { ScriptedRealtimeTransport } from "@openai/agents-realtime/testing";
import { actionKinds, derivedOperationId } from "@settled/client";
import { SettledRealtime } from "@settled/client/openai-realtime";
import { client, eventually, needsStack, newId, refund, sandbox } from "./support.js";

const CHUNK = new ArrayBuffer(48 * 100); // 100 ms of pcm16 at 24 kHz

interface Call {
  conversation: string;
  bridge: SettledRealtime;
  transport: ScriptedRealtimeTransport;
  session: RealtimeSession;
}

async function call(): Promise<Call> {
  const settled = client();
  const conversation = newId("conv");
  const bridge = new SettledRealtime(settled, conversation, await actionKinds(settled, ["refund"]), { waitS: 5, authorizeOnCall: true });
  const agent = new RealtimeAgent({ name: "support", instructions: "Help with refunds.", tools: bridge.tools() });
  const transport = new ScriptedRealtimeTransport();
  const session = new RealtimeSession(agent, { transport });
  bridge.attach(session);
  await session.connect({ apiKey: "scripted" });
  return { conversation, bridge, transport, session };
}

let calls = 0;
/** The model calls a tool; resolves with the output the session sent back to the model. */
async function toolCall(c: Call, name: string, args: unknown): Promise<string> {
  const callId = `call-${++calls}`;
  c.transport.emit("function_call", {
    type: "function_call",
    name,
    callId,
    arguments: JSON.stringify(args),
    responseId: `resp-${callId}`,
  });
  const sent = await eventually(
    async () =>
      (c.transport.calls as readonly Record<string, any>[]).find(
        (recorded) => recorded.method === "sendFunctionCallOutput" && recorded.toolCall?.callId === callId,
      ),
    `the output of ${callId}`,
  );
  return (sent as Record<string, any>).output as string;
}

let responses = 0;
/** The model speaks `text` as one response of `chunks` audio chunks; returns its response id. */
function speak(c: Call, text: string, chunks = 4): string {
  const responseId = `resp-spoken-${++responses}`;
  c.transport.emit("audio_transcript_delta", { type: "transcript_delta", itemId: `item-${responseId}`, delta: text, responseId });
  for (let i = 0; i < chunks; i++) c.transport.emit("audio", { type: "audio", data: CHUNK, responseId });
  c.transport.emit("audio_done");
  return responseId;
}

function told(output: string): string {
  return output.slice(output.indexOf("Tell the caller: ") + "Tell the caller: ".length);
}

test("a confirmation heard to its end is recorded heard, and not owed", async (t) => {
  if (!needsStack(t)) return;
  const c = await call();
  const params = refund();
  const output = await toolCall(c, "refund", params);
  assert.match(output, /^CONFIRMED by the business system/);
  const spoken = speak(c, told(output));
  for (let i = 0; i < 4; i++) c.bridge.played(spoken, CHUNK);
  await c.bridge.close("hangup");
  const op = await derivedOperationId(c.conversation, "refund", params);
  const action = await client().get(op);
  assert.equal(action.presented?.completed, true);
  assert.equal((await client().handoff(c.conversation)).say, "");
  assert.equal((await sandbox.refundsFor(params.order_id)).length, 1);
});

test("a caller who hangs up during the confirmation is owed it", async (t) => {
  if (!needsStack(t)) return;
  const c = await call();
  const params = refund();
  const output = await toolCall(c, "refund", params);
  const spoken = speak(c, told(output));
  c.bridge.played(spoken, CHUNK); // one chunk of four played, then the caller hung up
  await c.bridge.close("hangup");
  const op = await derivedOperationId(c.conversation, "refund", params);
  const action = await client().get(op);
  assert.equal(action.state, "confirmed");
  assert.equal(action.presented?.completed, false);
  assert.equal(action.presented?.for_state, "confirmed");
  const handoff = await client().handoff(c.conversation);
  assert.equal(handoff.channels.voice, "closed");
  assert.equal(handoff.say, action.say, "the next channel owes the outcome");
  assert.equal((await sandbox.refundsFor(params.order_id)).length, 1);
});

test("an interrupted refund, and a model that asks again after the interruption: one action, one write", async (t) => {
  if (!needsStack(t)) return;
  const c = await call();
  const params = refund();
  const first = await toolCall(c, "refund", params);
  const spoken = speak(c, told(first));
  c.bridge.played(spoken, CHUNK);
  c.transport.emit("audio_interrupted"); // the caller cut in: the rest never plays
  // The model asks again with the same details, as JSON in another key order.
  const again = await toolCall(c, "refund", { currency: params.currency, amount: params.amount, order_id: params.order_id });
  const op = await derivedOperationId(c.conversation, "refund", params);
  assert.ok(first.includes(op) && again.includes(op), "both calls met the one action");
  const heard = speak(c, told(again));
  for (let i = 0; i < 4; i++) c.bridge.played(heard, CHUNK);
  await c.bridge.close("hangup");
  const action = await client().get(op);
  assert.equal(action.presented?.completed, true, "the repeat was heard to its end");
  assert.equal((await sandbox.refundsFor(params.order_id)).length, 1);
  assert.equal((await client().handoff(c.conversation)).actions.length, 1);
});

test("a lost answer: the model is told it is being checked, never done; verify_action tells the truth", async (t) => {
  if (!needsStack(t)) return;
  const c = await call();
  const params = refund();
  const op = await derivedOperationId(c.conversation, "refund", params);
  await sandbox.fault("refunds", "create", "drop_after_apply", op);
  // The send's own call looks a lost answer up at once: that lookup fails, so the answer stays unknown.
  await sandbox.fault("refunds", "lookup", "fail_before_apply", op, { status: 503 });
  const output = await toolCall(c, "refund", params);
  assert.ok(!output.startsWith("CONFIRMED"), output);
  const checked = await eventually(async () => {
    const answer = await toolCall(c, "verify_action", { operation_id: op });
    return answer.includes("CONFIRMED") ? answer : undefined;
  }, "the lookup's confirmation");
  assert.ok(checked.includes(`refund (operation ${op}`), checked);
  await c.bridge.close("hangup");
  assert.equal((await sandbox.refundsFor(params.order_id)).length, 1);
});

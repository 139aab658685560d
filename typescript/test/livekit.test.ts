/**
 * The LiveKit adapter driving a real `AgentSession` of `@livekit/agents` offline: a scripted model
 * (`llm.LLM`), a scripted voice (`tts.TTS`) and a loudspeaker that plays each frame in real time;
 * LiveKit runs the tools, the speech, the playout, the interruptions and the close. The tools run
 * against a real settled stack; the sandbox's records and what settled recorded as presented judge.
 */

import assert from "node:assert/strict";
import { test } from "node:test";
import { initializeLogger, voice } from "@livekit/agents";
import { type Channel, type EventType, SettledClient, actionKinds, derivedOperationId } from "@settled/client";
import { SettledLiveKit } from "@settled/client/livekit";
import { FILLER, Loudspeaker, RefundScript, ScriptedLLM, ScriptedTTS } from "../examples/livekit-scripted.js";
import { API_URL, client, eventually, needsStack, newId, refund, sandbox, within } from "./support.js";

initializeLogger({ pretty: false, level: "silent" });

// How long the voice speaks per character: a confirmation plays for about a second.
const MS_PER_CHAR = 10;

/** The real client, noting what the adapter sent: channel events, and each presentation heard or cut. */
class SentClient extends SettledClient {
  readonly sent: string[] = [];

  override conversationEvent(conversationId: string, type: EventType, channel: Channel, reason?: string) {
    this.sent.push(reason ? `${type} ${reason}` : type);
    return super.conversationEvent(conversationId, type, channel, reason);
  }

  override presented(operationId: string, channel: Channel, text: string, completed: boolean, forState?: string) {
    this.sent.push(completed ? "presented heard" : "presented cut");
    return super.presented(operationId, channel, text, completed, forState as never);
  }
}

interface Call {
  conversation: string;
  settled: SentClient;
  bridge: SettledLiveKit;
  session: voice.AgentSession;
  speaker: Loudspeaker;
  script: RefundScript;
  closed: Promise<unknown>;
}

/** A call whose audio plays to the caller in real time; the model says a filler with each tool call. */
async function call(params: Record<string, unknown>, options: { again?: string } = {}): Promise<Call> {
  const settled = new SentClient({ baseUrl: API_URL as string, timeoutMs: 20_000 });
  const conversation = newId("conv");
  const script = new RefundScript(params, options.again);
  const voiceOut = new ScriptedTTS({ msPerChar: MS_PER_CHAR, chunkMs: 20 });
  // No "user away" timer: LiveKit leaves it running after the session closed, holding the test process.
  const session = new voice.AgentSession({ llm: new ScriptedLLM(script, { filler: FILLER }), tts: voiceOut, userAwayTimeout: null });
  const speaker = new Loudspeaker(voiceOut.sentences);
  session.output.audio = speaker;
  const kinds = await actionKinds(settled, ["refund"]);
  const bridge = new SettledLiveKit(settled, conversation, kinds, { waitS: 5, authorizeOnCall: true });
  bridge.attach(session);
  const closed = new Promise((resolve) => session.once(voice.AgentSessionEventTypes.Close, resolve));
  await within(session.start({ agent: new voice.Agent({ instructions: "Help with refunds.", tools: bridge.tools() }) }), "the session's start");
  return { conversation, settled, bridge, session, speaker, script, closed };
}

/** The caller hangs up wherever the audio is: the line goes dead, then the room closes the session. */
async function hangUp(c: Call): Promise<void> {
  c.speaker.hangUp();
  c.session.shutdown({ drain: false, reason: voice.CloseReason.PARTICIPANT_DISCONNECTED });
  await within(c.closed, "the session's close");
  await within(c.bridge.flush(), "the channel events sent");
}

/** What the session handed the model from its tools, oldest first (LiveKit sends a string result as JSON text). */
function toolOutputs(c: Call): string[] {
  return c.session.history.items.flatMap((item) => (item.type === "function_call_output" ? [JSON.parse(item.output) as string] : []));
}

function asks(params: Record<string, unknown>): string {
  return `Please refund order ${params.order_id}.`;
}

test("livekit: a confirmation played to its end is recorded heard, and not owed", async (t) => {
  if (!needsStack(t)) return;
  const params = refund();
  const c = await call(params);
  c.session.generateReply({ userInput: asks(params) });
  await c.speaker.until("Your reference");
  const op = await derivedOperationId(c.conversation, "refund", params);
  await eventually(async () => (await client().get(op)).presented?.completed, "the confirmation recorded heard");
  await hangUp(c);
  const action = await client().get(op);
  assert.equal(action.presented?.text, action.say);
  assert.equal((await client().handoff(c.conversation)).say, "");
  assert.deepEqual(c.settled.sent, ["channel_opened", "presented heard", "channel_closed hangup"]);
  assert.equal((await sandbox.refundsFor(params.order_id)).length, 1);
});

test("livekit: a caller who hangs up during the confirmation is owed it; the filler presents nothing", async (t) => {
  if (!needsStack(t)) return;
  const params = refund();
  const c = await call(params);
  c.session.generateReply({ userInput: asks(params) });
  await c.speaker.until(FILLER); // heard in full, but said before the result: it presents nothing
  await c.speaker.until("Your reference", 150);
  await hangUp(c);
  const op = await derivedOperationId(c.conversation, "refund", params);
  const action = await client().get(op);
  assert.equal(action.state, "confirmed");
  assert.equal(action.presented?.completed, false);
  assert.equal(action.presented?.for_state, "confirmed");
  assert.ok(action.business_ref && action.presented?.text.includes(action.business_ref));
  const handoff = await client().handoff(c.conversation);
  assert.equal(handoff.channels.voice, "closed");
  assert.equal(handoff.say, action.say, "the next channel owes the outcome");
  // Closing interrupts the speech (LiveKit reports that as an interruption too), then closes.
  assert.deepEqual(c.settled.sent.filter((line) => line.startsWith("presented")), ["presented cut"]);
  assert.equal(c.settled.sent.at(-1), "channel_closed hangup");
  assert.equal((await sandbox.refundsFor(params.order_id)).length, 1);
});

test("livekit: the caller cuts into the confirmation: interrupted, cut, owed, one write", async (t) => {
  if (!needsStack(t)) return;
  const params = refund();
  const c = await call(params);
  c.session.generateReply({ userInput: asks(params) });
  await c.speaker.until("Your reference", 150);
  await within(c.session.interrupt().await, "the interruption");
  await eventually(async () => c.settled.sent.includes("presented cut"), "the cut recorded");
  await hangUp(c);
  const op = await derivedOperationId(c.conversation, "refund", params);
  const action = await client().get(op);
  assert.equal(action.presented?.completed, false);
  assert.equal((await client().handoff(c.conversation)).say, action.say);
  assert.ok(c.settled.sent.includes("interrupted"));
  assert.equal((await sandbox.refundsFor(params.order_id)).length, 1);
});

test("livekit: asked again after an interruption, with 5.0 for 5 and keys reordered: one action, heard", async (t) => {
  if (!needsStack(t)) return;
  const params = { ...refund(), amount: 5 };
  const again = `{"currency": "${params.currency}", "amount": 5.0, "order_id": "${params.order_id}"}`;
  const c = await call(params, { again });
  c.session.generateReply({ userInput: asks(params) });
  await c.speaker.until("Your reference", 150);
  await within(c.session.interrupt().await, "the interruption"); // the caller cuts in ...
  c.session.generateReply({ userInput: "Please try again." }); // ... and asks again
  await eventually(async () => c.script.said.length >= 2, "the second answer");
  await c.speaker.until("Your reference"); // the first one was cut: this is the repeat, played to its end
  const op = await derivedOperationId(c.conversation, "refund", params);
  await eventually(async () => (await client().get(op)).presented?.completed, "the repeat recorded heard");
  await hangUp(c);
  const action = await client().get(op);
  assert.equal(action.state, "confirmed");
  assert.equal(action.attempts, 1);
  assert.equal(c.script.said[0], c.script.said[1], "both answers told the one action");
  assert.equal((await client().handoff(c.conversation)).actions.length, 1);
  assert.equal((await client().handoff(c.conversation)).say, "");
  assert.equal((await sandbox.refundsFor(params.order_id)).length, 1);
});

test("livekit: a lost answer is never said done; verify_action finds the one refund", async (t) => {
  if (!needsStack(t)) return;
  const params = refund();
  const c = await call(params);
  const op = await derivedOperationId(c.conversation, "refund", params);
  await sandbox.fault("refunds", "create", "drop_after_apply", op);
  // The send's own call looks a lost answer up at once: that lookup fails, so the answer stays unknown.
  await sandbox.fault("refunds", "lookup", "fail_before_apply", op, { status: 503 });
  c.session.generateReply({ userInput: asks(params) });
  const first = await eventually(async () => toolOutputs(c)[0], "the refund tool's answer");
  assert.ok(!first.startsWith("CONFIRMED"), first);
  const answered = await eventually(async () => {
    await within(c.session.run({ userInput: "Did you do it?" }).wait(), "the answer to the check");
    const last = c.script.said.at(-1) ?? "";
    return last.includes("CONFIRMED") ? last : undefined;
  }, "the lookup's confirmation");
  const refunds = await sandbox.refundsFor(params.order_id);
  assert.equal(refunds.length, 1);
  assert.ok(answered.includes(op), answered);
  await hangUp(c);
  assert.equal((await client().get(op)).state, "confirmed");
});

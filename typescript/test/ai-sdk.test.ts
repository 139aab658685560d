/**
 * The AI SDK adapter driving the real `generateText` with the SDK's own mock language model
 * (`ai/test`), scripted step by step, against a real settled stack; the sandbox's records judge.
 */

import assert from "node:assert/strict";
import { test } from "node:test";
import type { LanguageModelV3CallOptions, LanguageModelV3Content } from "@ai-sdk/provider";
import { generateText, stepCountIs } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { actionKinds, derivedOperationId } from "@settled/client";
import { SettledChat } from "@settled/client/ai-sdk";
import { client, needsStack, newId, refund, sandbox } from "./support.js";

type Step = (prompt: LanguageModelV3CallOptions["prompt"]) => LanguageModelV3Content[];

const USAGE = {
  inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 },
};

/** A model that plays `steps` in order, one per call. */
function scripted(steps: Step[]): MockLanguageModelV3 {
  let next = 0;
  return new MockLanguageModelV3({
    doGenerate: async (options) => {
      const step = steps[next++];
      if (step === undefined) throw new Error("the script ran out");
      const content = step(options.prompt);
      const calls = content.some((part) => part.type === "tool-call");
      return { content, finishReason: { unified: calls ? "tool-calls" : "stop", raw: undefined }, usage: USAGE, warnings: [] };
    },
  });
}

let ids = 0;
const callTool = (toolName: string, input: unknown): Step => () => [
  { type: "tool-call", toolCallId: `call-${++ids}`, toolName, input: JSON.stringify(input) },
];

/** The last tool result the model was handed. */
function lastToolResult(prompt: LanguageModelV3CallOptions["prompt"]): string {
  for (const message of [...prompt].reverse()) {
    if (message.role !== "tool") continue;
    for (const part of message.content) {
      if (part.type === "tool-result" && part.output.type === "text") return part.output.value;
    }
  }
  throw new Error("no tool result");
}

/** The reply a truthful model gives: what the tool result says to tell. */
const sayWhatItSaid: Step = (prompt) => {
  const result = lastToolResult(prompt);
  return [{ type: "text", text: `Thanks for waiting. ${result.slice(result.indexOf("Tell the caller: ") + 17)}` }];
};

test("the chat that picks a task up after a call speaks from the handoff, and what it said is recorded", async (t) => {
  if (!needsStack(t)) return;
  const settled = client();
  const conversation = newId("conv");
  // The call: a refund confirmed, its confirmation cut off by the caller hanging up.
  const params = refund();
  const op = await derivedOperationId(conversation, "refund", params);
  const voice = await settled.createAction(conversation, "refund", params, { operationId: op, authorized: true, wait: 5 });
  assert.equal(voice.state, "confirmed");
  await settled.presented(op, "voice", voice.say.slice(0, 10), false, "confirmed");
  await settled.conversationEvent(conversation, "channel_closed", "voice", "hangup");
  assert.equal((await settled.handoff(conversation)).say, voice.say);

  const chat = new SettledChat(settled, conversation, await actionKinds(settled, ["refund"]));
  const system = await chat.pickUp();
  assert.ok(system.includes(voice.say));
  const model = scripted([
    (prompt) => {
      const instructions = prompt.find((message) => message.role === "system")?.content ?? "";
      const owed = instructions.slice(instructions.indexOf("word for word: ") + 15);
      return [{ type: "text", text: `Welcome back. ${owed}` }];
    },
  ]);
  const result = await generateText({ model, system, prompt: "Did my refund go through?", tools: chat.tools(), ...chat.hooks() });
  assert.ok(result.text.includes(voice.say));
  await chat.flush();
  const action = await settled.get(op);
  assert.equal(action.presented?.channel, "text");
  assert.equal(action.presented?.completed, true);
  assert.equal((await settled.handoff(conversation)).say, "", "told once, not owed again");
  assert.equal((await sandbox.refundsFor(params.order_id)).length, 1);
});

test("a lost answer in a chat: not done until verified, then confirmed; a model that asks again meets the same action", async (t) => {
  if (!needsStack(t)) return;
  const settled = client();
  const conversation = newId("conv");
  const params = refund();
  const op = await derivedOperationId(conversation, "refund", params);
  await sandbox.fault("refunds", "create", "drop_after_apply", op);
  // The send's own call looks a lost answer up at once: that lookup fails, so the answer stays unknown.
  await sandbox.fault("refunds", "lookup", "fail_before_apply", op, { status: 503 });
  const chat = new SettledChat(settled, conversation, await actionKinds(settled, ["refund"]), { waitS: 1, authorizeOnCall: true });
  const answers: string[] = [];
  const model = scripted([
    callTool("refund", params),
    (prompt) => {
      answers.push(lastToolResult(prompt));
      // asks again, the amount written as 25.50 and the keys in another order
      return callTool("refund", { currency: "EUR", order_id: params.order_id, amount: 25.5 })(prompt);
    },
    (prompt) => {
      answers.push(lastToolResult(prompt));
      return callTool("verify_action", { operation_id: op })(prompt);
    },
    (prompt) => {
      answers.push(lastToolResult(prompt));
      return sayWhatItSaid(prompt);
    },
  ]);
  const result = await generateText({
    model,
    prompt: "Refund my order.",
    tools: chat.tools(),
    stopWhen: stepCountIs(5),
    ...chat.hooks(),
  });
  await chat.flush();
  assert.ok(answers.slice(0, 2).every((answer) => answer.includes(op) && !answer.startsWith("CONFIRMED")), answers.join("\n"));
  const action = await settled.get(op);
  assert.equal(action.state, "confirmed");
  assert.match(answers[2] ?? "", /: CONFIRMED\./, "verify_action looked it up");
  assert.ok(result.text.includes(action.say));
  assert.equal(action.presented?.completed, true);
  assert.equal((await sandbox.refundsFor(params.order_id)).length, 1);
  assert.equal((await settled.handoff(conversation)).actions.length, 1);
});

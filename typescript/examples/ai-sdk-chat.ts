/**
 * Offline: a text agent on the AI SDK, its model scripted by the SDK's own mock, against `make dev`
 * (http://127.0.0.1:8000). It asks for a refund and says what settled verified.
 *
 *     make dev                      # in another terminal
 *     cd typescript && npm run build && node build/examples/ai-sdk-chat.js
 */

import { generateText, stepCountIs } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { SettledClient, actionKinds } from "@settled/client";
import { SettledChat } from "@settled/client/ai-sdk";

const settled = new SettledClient({ baseUrl: process.env.SETTLED_API_URL ?? "http://127.0.0.1:8000" });
const chat = new SettledChat(settled, `chat-${Date.now()}`, await actionKinds(settled, ["refund"]), { authorizeOnCall: true });
const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } };
const model = new MockLanguageModelV3({
  doGenerate: async ({ prompt }) => {
    const answered = prompt.flatMap((m) => (m.role === "tool" ? m.content : []));
    const last = answered.at(-1);
    if (last === undefined || last.type !== "tool-result" || last.output.type !== "text") {
      const input = JSON.stringify({ order_id: "o-1001", amount: 25.5, currency: "EUR" });
      return { content: [{ type: "tool-call", toolCallId: "1", toolName: "refund", input }], finishReason: { unified: "tool-calls", raw: undefined }, usage, warnings: [] };
    }
    const text = last.output.value.split("Tell the caller: ")[1] ?? "";
    return { content: [{ type: "text", text }], finishReason: { unified: "stop", raw: undefined }, usage, warnings: [] };
  },
});
const system = await chat.pickUp();
const result = await generateText({ model, system, prompt: "Refund order o-1001.", tools: chat.tools(), stopWhen: stepCountIs(3), ...chat.hooks() });
await chat.flush();
console.log(result.text);

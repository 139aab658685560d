/**
 * One request made by a text agent on the AI SDK adapter, for the cross-language test
 * (tests/typescript/test_cross_language.py): the scripted model calls the kind's tool with the
 * arguments exactly as given (JSON text), and the tool's answer is printed.
 *
 *     node build/test/ask-once.js API_URL CONVERSATION KIND 'ARGUMENTS_JSON'
 */

import { generateText } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { SettledClient, actionKinds } from "@settled/client";
import { SettledChat } from "@settled/client/ai-sdk";

const [apiUrl, conversation, kind, argumentsJson] = process.argv.slice(2) as [string, string, string, string];
const settled = new SettledClient({ baseUrl: apiUrl });
const chat = new SettledChat(settled, conversation, await actionKinds(settled, [kind]), { authorizeOnCall: true, waitS: 5 });
const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 },
};
const model = new MockLanguageModelV3({
  doGenerate: [
    {
      content: [{ type: "tool-call", toolCallId: "call-1", toolName: kind, input: argumentsJson }],
      finishReason: { unified: "tool-calls", raw: undefined },
      usage,
      warnings: [],
    },
  ],
});
const result = await generateText({ model, prompt: "Go ahead.", tools: chat.tools(), ...chat.hooks() });
await chat.flush();
const output = result.steps[0]?.toolResults[0]?.output;
process.stdout.write(`${String(output)}\n`);

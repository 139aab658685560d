/**
 * Offline: a realtime voice session (`@openai/agents-realtime`) on the SDK's scripted transport,
 * against `make dev`. The model asks for a refund; the caller hangs up a quarter into the
 * confirmation, so settled records it cut off and the handoff owes it to the next channel.
 *
 *     make dev                      # in another terminal
 *     cd typescript && npm run build && node build/examples/realtime-call.js
 */

import { RealtimeAgent, RealtimeSession } from "@openai/agents-realtime";
import { ScriptedRealtimeTransport } from "@openai/agents-realtime/testing";
import { SettledClient, actionKinds } from "@settled/client";
import { SettledRealtime } from "@settled/client/openai-realtime";

const settled = new SettledClient({ baseUrl: process.env.SETTLED_API_URL ?? "http://127.0.0.1:8000" });
const conversation = `call-${Date.now()}`;
const bridge = new SettledRealtime(settled, conversation, await actionKinds(settled, ["refund"]), { authorizeOnCall: true, waitS: 5 });
const transport = new ScriptedRealtimeTransport();
const session = new RealtimeSession(new RealtimeAgent({ name: "support", tools: bridge.tools() }), { transport });
bridge.attach(session);
await session.connect({ apiKey: "offline" });

const output = new Promise<string>((resolve) => session.on("agent_tool_end", (_c, _a, _t, result) => resolve(result)));
const args = JSON.stringify({ order_id: "o-1001", amount: 25.5, currency: "EUR" });
transport.emit("function_call", { type: "function_call", name: "refund", callId: "c1", arguments: args, responseId: "r1" });
const said = (await output).split("Tell the caller: ")[1] ?? "";
const chunk = new ArrayBuffer(4800); // 100 ms of pcm16 at 24 kHz
transport.emit("audio_transcript_delta", { type: "transcript_delta", itemId: "i2", delta: said, responseId: "r2" });
for (let i = 0; i < 4; i++) transport.emit("audio", { type: "audio", data: chunk, responseId: "r2" });
transport.emit("audio_done");
bridge.played("r2", chunk); // a quarter played, then the caller hung up
await bridge.close("hangup");
console.log("owed to the next channel:", (await settled.handoff(conversation)).say);

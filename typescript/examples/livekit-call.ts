/**
 * Offline: a LiveKit Agents voice session (`@livekit/agents`) against `make dev`, with the scripted
 * model, voice and loudspeaker of `livekit-scripted.ts` in place of the LLM, the TTS and the room.
 * The caller asks for a refund and hangs up a quarter of a second into the confirmation, so settled
 * records it cut off and the handoff owes it to the next channel.
 *
 *     make dev                      # in another terminal
 *     cd typescript && npm run build && node build/examples/livekit-call.js
 *
 * In a real agent keep `bridge.tools()` and `bridge.attach(session)`, and start the session in
 * your room as usual: LiveKit closes it when the caller leaves.
 */

import { initializeLogger, voice } from "@livekit/agents";
import { SettledClient, actionKinds } from "@settled/client";
import { SettledLiveKit } from "@settled/client/livekit";
import { FILLER, Loudspeaker, RefundScript, ScriptedLLM, ScriptedTTS } from "./livekit-scripted.js";

initializeLogger({ pretty: false, level: "error" });
const settled = new SettledClient({ baseUrl: process.env.SETTLED_API_URL ?? "http://127.0.0.1:8000" });
const conversation = `call-${Date.now()}`;
const bridge = new SettledLiveKit(settled, conversation, await actionKinds(settled, ["refund"]), { authorizeOnCall: true, waitS: 5 });

const script = new RefundScript({ order_id: `o-${Date.now()}`, amount: 25.5, currency: "EUR" });
const tts = new ScriptedTTS({ msPerChar: 10, chunkMs: 20 });
// No "user away" timer: LiveKit leaves it running after the session closed, holding Node up for 15 s.
const session = new voice.AgentSession({ llm: new ScriptedLLM(script, { filler: FILLER }), tts, userAwayTimeout: null });
const speaker = new Loudspeaker(tts.sentences);
session.output.audio = speaker;
bridge.attach(session); // before start
await session.start({ agent: new voice.Agent({ instructions: "Help with refunds.", tools: bridge.tools() }) });

session.generateReply({ userInput: `Please refund order ${script.refund.order_id}.` });
await speaker.until("Done:", 250); // a quarter of a second into the confirmation, the caller hangs up
speaker.hangUp();
session.shutdown({ drain: false, reason: voice.CloseReason.PARTICIPANT_DISCONNECTED }); // what the room does
await new Promise((closed) => session.once(voice.AgentSessionEventTypes.Close, closed));
await bridge.flush();
console.log("said:", script.said.join(" | "));
console.log("owed to the next channel:", (await settled.handoff(conversation)).say);

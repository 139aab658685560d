/**
 * settled under LiveKit Agents for Node.js (`@livekit/agents`).
 *
 * LiveKit keeps a running tool alive through an interruption, but the tool lives in the job's
 * process: at hang-up its result has nobody to go to, and a crash loses it. With this bridge each
 * tool call records a durable action (and waits briefly for the business system), so what the
 * model speaks is the verified state, and the action goes on after the call ends.
 *
 *     const bridge = new SettledLiveKit(client, conversationId, await actionKinds(client, ["refund"]));
 *     const session = new voice.AgentSession({ llm, tts, stt, vad });
 *     bridge.attach(session);                                   // before session.start
 *     await session.start({ agent: new voice.Agent({ instructions, tools: bridge.tools() }), room });
 *
 * What the caller heard (the one rule, in `SettledChannel`): LiveKit's own playout tracking.
 * LiveKit adds an assistant message to the conversation once its speech's playout ended (the
 * audio output reported the segment played, not the LLM or the TTS finishing), with the text
 * actually forwarded and `interrupted` set when the speech was cut off: by the caller speaking
 * over it, or by the session closing, which interrupts every speech before it emits `close`. Its
 * `createdAt` is when that reply step began, after any tool result it follows. So a message
 * presents a status only if it was generated after the model was handed that status and carries
 * its sentence, reference or operation id, and it counts as heard only when LiveKit did not mark
 * it interrupted. A filler said with the tool call presents nothing: it began before the result.
 *
 * `attach` forwards an interrupted speech as `interrupted`, each assistant message that spoke a
 * result as `presented` (completed unless interrupted), and the session's `close` as
 * `channel_closed` with LiveKit's reason (participant disconnected: `hangup`; error: `dropped`).
 */

import { llm, voice } from "@livekit/agents";
import { type ChannelOptions, SettledChannel, now } from "../channel.js";
import type { SettledClient } from "../client.js";
import type { ActionKind } from "../text.js";

/** LiveKit's close reasons as settled's channel reasons; any other is passed on as it is. */
export const CLOSE_REASONS: Record<string, string> = {
  [voice.CloseReason.PARTICIPANT_DISCONNECTED]: "hangup",
  [voice.CloseReason.ERROR]: "dropped",
  [voice.CloseReason.JOB_SHUTDOWN]: "job_shutdown",
  [voice.CloseReason.USER_INITIATED]: "ended_by_agent",
};

export class SettledLiveKit {
  readonly settled: SettledChannel;

  constructor(client: SettledClient, conversationId: string, kinds: ActionKind[], options: ChannelOptions = {}) {
    this.settled = new SettledChannel(client, conversationId, kinds, options);
  }

  /** The tool set (`SettledChannel.tools`) as LiveKit function tools: one per kind, `verify_action`, and `authorize_action` when needed. */
  tools(): llm.FunctionTool<any, any, string>[] {
    const settled = this.settled;
    return settled.tools().map((spec) =>
      llm.tool({
        name: spec.name,
        description: spec.description,
        // A kind's JSON Schema as it is: LiveKit hands the parsed arguments over unvalidated, and
        // the channel says in its answer what is wrong with them.
        parameters: spec.parameters,
        execute: (args: unknown) => settled.answerTool(spec.name, args),
      }),
    );
  }

  /** Forward the session's events to settled; call before `session.start`. */
  attach(session: voice.AgentSession<any>): void {
    session.on(voice.AgentSessionEventTypes.SpeechCreated, (event) => {
      event.speechHandle.addDoneCallback((handle) => {
        if (handle.interrupted) this.settled.interrupted();
      });
    });
    session.on(voice.AgentSessionEventTypes.ConversationItemAdded, (event) => {
      const item = event.item;
      if (item.type !== "message" || item.role !== "assistant" || !item.textContent) return;
      this.settled.utterance(item.id, item.textContent, !item.interrupted, generatedAt(item.createdAt));
    });
    session.on(voice.AgentSessionEventTypes.Close, (event) => {
      this.settled.closed(CLOSE_REASONS[event.reason] ?? String(event.reason));
    });
    this.settled.opened();
  }

  /** The channel ended outside the session (it closes itself otherwise): whatever still played is cut off. */
  closed(reason = "hangup"): void {
    this.settled.closed(reason);
  }

  flush(): Promise<void> {
    return this.settled.flush();
  }
}

/**
 * LiveKit's `createdAt` (`Date.now()`, whole milliseconds) on the channel's clock. The step it
 * stamps began after the tool result it follows, somewhere within that millisecond; its end is
 * taken, so a reply begun in the millisecond its result arrived still counts as generated after it.
 */
function generatedAt(createdAt: number): number {
  return createdAt + 1 + (now() - Date.now());
}

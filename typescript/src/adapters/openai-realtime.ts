/**
 * settled under the OpenAI Agents SDK's realtime sessions (`@openai/agents-realtime`).
 *
 * The SDK runs a realtime tool beside the audio: an interruption stops only the audio, and closing
 * the session drops the tool's result. With this bridge each tool call records a durable action
 * (and waits briefly for the business system), so what the model speaks is the verified state, and
 * the action goes on after the call ends.
 *
 *     const bridge = new SettledRealtime(client, conversationId, await actionKinds(client, ["refund"]));
 *     const agent = new RealtimeAgent({ name: "support", instructions, tools: bridge.tools() });
 *     const session = new RealtimeSession(agent);
 *     bridge.attach(session);
 *     session.on("audio", (event) => speaker.play(event.data, () => bridge.played(event.responseId, event.data)));
 *     await session.connect({ apiKey });
 *
 * What the caller heard (the one rule, in `SettledChannel`): a response's audio counts as heard only
 * when your audio output reported, through `bridge.played`, that all of its generated audio played.
 * `audio_stopped` only says the model finished generating it, much faster than real time, so it is
 * not "heard". `audio_interrupted` (a barge-in: the output drops what it has not played) cuts every
 * response not fully played, and so does the end of the session. Without `played` calls there is no
 * such signal: nothing is then recorded as heard to its end, only as cut off (a repeat by the next
 * channel, never a loss).
 *
 * `attach` forwards the session's events: a barge-in on audio still playing as `interrupted`, each
 * response that spoke a result as `presented`, and the end of the session as `channel_closed`
 * (`hangup` when closed by `bridge.close()` or without a transport error, `dropped` after one).
 */

import { type FunctionTool, type RealtimeSession, tool } from "@openai/agents-realtime";
import { type ChannelOptions, SettledChannel } from "../channel.js";
import type { SettledClient } from "../client.js";
import type { ActionKind } from "../text.js";

/** The session's output audio: pcm16 at 24 kHz (the default), or G.711 at 8 kHz. */
export type AudioFormat = "pcm16" | "g711_ulaw" | "g711_alaw";

const BYTES_PER_MS: Record<AudioFormat, number> = { pcm16: 48, g711_ulaw: 8, g711_alaw: 8 };

interface Audio {
  generatedMs: number;
  playedMs: number;
  generated: boolean; // `audio_stopped`: no more audio will come for this response
}

function playedOut(audio: Audio): boolean {
  // Half a millisecond: the two sums of the same chunks may differ by rounding.
  return audio.generated && audio.playedMs >= audio.generatedMs - 0.5;
}

// The SDK's tool takes a JSON Schema as its parameters; a kind's schema is the kinds file's, not
// necessarily strict-mode shaped, so it goes as is (`strict: false`).
type LooseSchema = { type: "object"; properties: Record<string, any>; required: string[]; additionalProperties: true };

export class SettledRealtime {
  readonly settled: SettledChannel;
  readonly #bytesPerMs: number;
  readonly #audio = new Map<string, Audio>();
  #speaking: string | undefined; // the response whose audio is arriving now
  #closing = false;
  #transportFailed = false;

  constructor(
    client: SettledClient,
    conversationId: string,
    kinds: ActionKind[],
    options: ChannelOptions & { audioFormat?: AudioFormat } = {},
  ) {
    this.settled = new SettledChannel(client, conversationId, kinds, options);
    this.#bytesPerMs = BYTES_PER_MS[options.audioFormat ?? "pcm16"];
  }

  /** The tool set (`SettledChannel.tools`): one tool per kind, `verify_action`, and `authorize_action` when needed. */
  tools(): FunctionTool<any, any, string>[] {
    const settled = this.settled;
    return settled.tools().map((spec) =>
      tool({
        name: spec.name,
        description: spec.description,
        parameters: spec.parameters as unknown as LooseSchema,
        strict: false,
        execute: (input: unknown) => settled.answerTool(spec.name, input),
      }),
    );
  }

  /** Forward the session's events to settled; call before `session.connect`. */
  attach(session: RealtimeSession<any>): void {
    const transport = session.transport;
    this.settled.opened();
    session.on("audio", (event) => {
      this.settled.utteranceStarted(event.responseId);
      this.#speaking = event.responseId;
      const audio = this.#audioOf(event.responseId);
      audio.generatedMs += event.data.byteLength / this.#bytesPerMs;
    });
    transport.on("audio_transcript_delta", (event) => {
      this.settled.utteranceStarted(event.responseId);
      this.settled.utteranceText(event.responseId, event.delta);
    });
    transport.on("output_text_delta", (event) => {
      this.settled.utteranceStarted(event.responseId);
      this.settled.utteranceText(event.responseId, event.delta);
    });
    session.on("audio_stopped", () => {
      // Generated to the end, which is not heard: it is heard once the output played it all.
      if (this.#speaking === undefined) return;
      this.#audioOf(this.#speaking).generated = true;
      this.#heardIfPlayedOut(this.#speaking);
      this.#speaking = undefined;
    });
    session.on("audio_interrupted", () => {
      // The output drops all it has not played. An "interruption" after the audio ended cuts nothing.
      const unplayed = [...this.#audio].filter(([, audio]) => !playedOut(audio)).map(([id]) => id);
      for (const id of unplayed) this.#audio.delete(id);
      if (unplayed.length > 0) this.settled.interrupted();
      this.settled.cutOff();
    });
    transport.on("error", () => {
      this.#transportFailed = true;
    });
    transport.on("connection_change", (status) => {
      if (status === "disconnected") this.settled.closed(this.#closing || !this.#transportFailed ? "hangup" : "dropped");
    });
    this.#close = () => session.close();
  }

  #close: () => void = () => undefined;

  /** Your audio output played this chunk of a response's audio to the caller (bytes, or milliseconds). */
  played(responseId: string, audio: ArrayBuffer | number): void {
    const entry = this.#audio.get(responseId);
    if (entry === undefined) return;
    entry.playedMs += typeof audio === "number" ? audio : audio.byteLength / this.#bytesPerMs;
    this.#heardIfPlayedOut(responseId);
  }

  #audioOf(responseId: string): Audio {
    let audio = this.#audio.get(responseId);
    if (audio === undefined) {
      audio = { generatedMs: 0, playedMs: 0, generated: false };
      this.#audio.set(responseId, audio);
    }
    return audio;
  }

  #heardIfPlayedOut(responseId: string): void {
    const audio = this.#audio.get(responseId);
    if (audio !== undefined && playedOut(audio)) {
      this.#audio.delete(responseId);
      this.settled.utteranceEnded(responseId, true);
    }
  }

  /** The caller hung up: close the session; whatever still played is recorded as cut off. */
  close(reason = "hangup"): Promise<void> {
    this.#closing = true;
    this.settled.closed(reason);
    this.#close();
    return this.settled.flush();
  }

  flush(): Promise<void> {
    return this.settled.flush();
  }
}


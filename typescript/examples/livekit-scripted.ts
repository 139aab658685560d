/**
 * The parts that let a LiveKit `AgentSession` run offline, for the LiveKit example and its tests:
 * a scripted model (`llm.LLM`), a scripted voice (`tts.TTS`) and a loudspeaker (`voice.AudioOutput`)
 * whose audio takes its real duration to play. They stand in for the LLM, the TTS and the room's
 * audio output; everything between them (tool calls, speech, playout, interruptions, closing) is
 * LiveKit's own.
 *
 * The model is deliberately simple: it calls a tool when the caller asks for something, and then
 * says what the tool returned (the part after "Tell the caller:"). It believes its tools; whatever
 * it claims comes from them.
 */

import { setTimeout as elapse } from "node:timers/promises";
import { type APIConnectOptions, llm, tts, voice } from "@livekit/agents";
import { AudioFrame } from "@livekit/rtc-node";

export const FILLER = "One moment, I'm taking care of that.";
/** A line a model may say while it waits on a tool, right before the result: it presents nothing. */
export const HOLDING = "I'm still working on that.";
const SAMPLE_RATE = 16_000;

type Args = Record<string, unknown>;

/** What the scripted model does for each thing the caller says. */
export class RefundScript {
  readonly said: string[] = [];

  /** `again`: the refund's arguments as the model writes them when asked to try again (JSON text; unset: as at first). */
  constructor(
    readonly refund: Args,
    readonly again?: string,
  ) {}

  /** The tool call for what the caller said (its arguments as JSON text), or none. */
  decide(userText: string): { name: string; args: string } | undefined {
    const text = userText.toLowerCase();
    if (text.includes("did you")) return { name: "verify_action", args: "{}" };
    if (text.includes("try again") && this.again !== undefined) return { name: "refund", args: this.again };
    if (text.includes("refund") || text.includes("try again")) return { name: "refund", args: JSON.stringify(this.refund) };
    return undefined;
  }

  /** What the model says after a tool returned: the sentence to tell, word for word. */
  reply(output: string): string {
    const [, told] = output.split("Tell the caller:");
    const line = (told ?? output).trim().split("\n")[0] ?? "";
    this.said.push(line);
    return line;
  }
}

/**
 * An LLM that follows a `RefundScript`: it calls a tool when the caller asks for something (saying
 * `filler` with the call, when set) and says each tool output it gets. With `holding` set, it
 * answers anything else the caller says with that line, whatever results it has.
 */
export class ScriptedLLM extends llm.LLM {
  readonly #seen = new Set<string>();
  #calls = 0;

  constructor(
    readonly script: RefundScript,
    readonly options: { filler?: string; holding?: string } = {},
  ) {
    super();
  }

  label(): string {
    return "scripted-llm";
  }

  chat({ chatCtx, toolCtx, connOptions }: { chatCtx: llm.ChatContext; toolCtx?: llm.ToolContextLike; connOptions?: APIConnectOptions }): llm.LLMStream {
    return new ScriptedStream(this, { chatCtx, toolCtx, connOptions: connOptions ?? { maxRetry: 0, retryIntervalMs: 0, timeoutMs: 10_000 } });
  }

  nextChunk(chatCtx: llm.ChatContext): llm.ChatChunk | undefined {
    const fresh = chatCtx.items.filter((item) => !this.#seen.has(item.id));
    for (const item of fresh) this.#seen.add(item.id);
    // LiveKit hands a tool's string result to the model as JSON text.
    const outputs = fresh.flatMap((item) => (item.type === "function_call_output" ? [JSON.parse(item.output) as string] : []));
    const users = fresh.filter((item): item is llm.ChatMessage => item.type === "message" && item.role === "user");
    let line: string;
    const asked = users.at(-1);
    if (asked !== undefined) {
      const call = this.script.decide(asked.textContent ?? "");
      if (call !== undefined) {
        const callId = `call_${++this.#calls}`;
        const toolCall = llm.FunctionCall.create({ callId, name: call.name, args: call.args });
        return { id: callId, delta: { role: "assistant", content: this.options.filler, toolCalls: [toolCall] } };
      }
      const last = outputs.at(-1);
      line = this.options.holding ?? (last !== undefined ? this.script.reply(last) : "Is there anything else I can help with?");
    } else {
      const last = outputs.at(-1);
      if (last === undefined) return undefined;
      line = this.script.reply(last);
    }
    return { id: `say_${++this.#calls}`, delta: { role: "assistant", content: line } };
  }
}

class ScriptedStream extends llm.LLMStream {
  readonly #model: ScriptedLLM;

  constructor(model: ScriptedLLM, params: ConstructorParameters<typeof llm.LLMStream>[1]) {
    super(model, params);
    this.#model = model;
  }

  protected async run(): Promise<void> {
    const chunk = this.#model.nextChunk(this.chatCtx);
    if (chunk !== undefined) this.queue.put(chunk);
  }
}

/**
 * A TTS that speaks each sentence as `msPerChar` of audio per character, in frames of `chunkMs`
 * (or one frame per sentence). Each sentence's samples hold its number in `sentences`, so the
 * loudspeaker can tell what it is playing.
 */
export class ScriptedTTS extends tts.TTS {
  label = "scripted-tts";
  readonly sentences: string[] = [];

  constructor(readonly voiceOptions: { msPerChar?: number; chunkMs?: number | null } = {}) {
    super(SAMPLE_RATE, 1, { streaming: false });
  }

  synthesize(text: string, connOptions?: APIConnectOptions, abortSignal?: AbortSignal): tts.ChunkedStream {
    return new Speech(text, this, connOptions, abortSignal);
  }

  stream(): tts.SynthesizeStream {
    throw new Error("ScriptedTTS synthesizes whole sentences; LiveKit wraps it in its stream adapter");
  }
}

class Speech extends tts.ChunkedStream {
  label = "scripted-tts.speech";
  readonly #voice: ScriptedTTS;
  readonly #text: string;

  constructor(text: string, voice: ScriptedTTS, connOptions?: APIConnectOptions, abortSignal?: AbortSignal) {
    super(text, voice, connOptions, abortSignal);
    this.#voice = voice;
    this.#text = text;
  }

  protected async run(): Promise<void> {
    const number = this.#voice.sentences.push(this.#text);
    const ms = Math.max(1, Math.round(this.#text.length * (this.#voice.voiceOptions.msPerChar ?? 4)));
    const chunkMs = this.#voice.voiceOptions.chunkMs ?? ms;
    for (let at = 0; at < ms; at += chunkMs) {
      const samples = Math.round((SAMPLE_RATE * Math.min(chunkMs, ms - at)) / 1000);
      const frame = new AudioFrame(new Int16Array(samples).fill(number), SAMPLE_RATE, 1, samples);
      this.queue.put({ requestId: `s${number}`, segmentId: `s${number}`, frame, final: at + chunkMs >= ms });
    }
  }
}

/**
 * The room's audio output: each frame takes its real duration to play, and `heard` is what the
 * caller heard, in ms per sentence. `clearBuffer` (an interruption) drops what has not played;
 * after `hangUp()` nothing plays any more.
 */
export class Loudspeaker extends voice.AudioOutput {
  readonly heard = new Map<string, number>();
  /** The sentences whose audio all played. */
  readonly finished = new Set<string>();
  #gone = false;
  #epoch = 0; // one per run of audio between two interruptions
  #position = 0;
  #segmentOpen = false;
  readonly #queue: [number, AudioFrame | null][] = [];
  #wake: (() => void) | undefined;
  readonly #waiters = new Set<() => void>();

  constructor(readonly sentences: string[]) {
    super(SAMPLE_RATE);
    void this.#play();
  }

  override async captureFrame(frame: AudioFrame): Promise<void> {
    await super.captureFrame(frame);
    if (!this.#segmentOpen) {
      this.#segmentOpen = true;
      this.#position = 0;
      this.onPlaybackStarted(Date.now());
    }
    this.#push([this.#epoch, frame]);
  }

  override flush(): void {
    super.flush();
    if (this.#segmentOpen) this.#push([this.#epoch, null]); // the segment ends here
  }

  clearBuffer(): void {
    this.#epoch++; // what is queued, and the frame now playing, is never heard
    this.#endSegment(true);
  }

  hangUp(): void {
    this.#gone = true;
  }

  /** How many ms the caller heard of the sentences that say `part`. */
  heardOf(part: string): number {
    let ms = 0;
    for (const [sentence, heard] of this.heard) if (sentence.includes(part)) ms += heard;
    return ms;
  }

  /** Wait until the caller heard `heardMs` of a sentence saying `part` (unset: all of it). */
  until(part: string, heardMs?: number, timeoutMs = 20_000): Promise<void> {
    const enough = () =>
      heardMs === undefined ? [...this.finished].some((sentence) => sentence.includes(part)) : this.heardOf(part) >= heardMs;
    return new Promise((resolve, reject) => {
      const check = () => {
        if (!enough()) return;
        clearTimeout(timer);
        this.#waiters.delete(check);
        resolve();
      };
      const timer = setTimeout(() => {
        this.#waiters.delete(check);
        const heard = JSON.stringify([...this.heard]);
        reject(new Error(`the caller did not hear ${heardMs ?? "all"} ms of "${part}" in ${timeoutMs} ms; heard ${heard}`));
      }, timeoutMs);
      this.#waiters.add(check);
      check();
    });
  }

  #push(entry: [number, AudioFrame | null]): void {
    this.#queue.push(entry);
    this.#wake?.();
  }

  #sentenceOf(frame: AudioFrame): string {
    return this.sentences[(frame.data[0] ?? 1) - 1] ?? "";
  }

  #endSegment(interrupted: boolean): void {
    if (!this.#segmentOpen) return;
    this.#segmentOpen = false;
    this.onPlaybackFinished({ playbackPosition: this.#position / 1000, interrupted });
  }

  async #play(): Promise<void> {
    let last: string | undefined; // the sentence playing now
    for (;;) {
      const next = this.#queue.shift();
      if (next === undefined) {
        await new Promise<void>((resolve) => {
          this.#wake = resolve;
        });
        continue;
      }
      const [epoch, frame] = next;
      if (epoch !== this.#epoch) {
        last = undefined;
      } else if (frame === null) {
        if (last !== undefined && !this.#gone) this.finished.add(last);
        last = undefined;
        this.#endSegment(false);
      } else if (!this.#gone) {
        await elapse(frameMs(frame), undefined, { ref: false }); // real time
        if (epoch !== this.#epoch || this.#gone) continue;
        const sentence = this.#sentenceOf(frame);
        if (last !== undefined && last !== sentence) this.finished.add(last);
        last = sentence;
        this.heard.set(sentence, (this.heard.get(sentence) ?? 0) + frameMs(frame));
        this.#position += frameMs(frame);
      }
      for (const check of [...this.#waiters]) check();
    }
  }
}

function frameMs(frame: AudioFrame): number {
  return (frame.samplesPerChannel / frame.sampleRate) * 1000;
}

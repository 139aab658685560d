/**
 * One conversation on one channel, seen through settled: what every adapter shares, in no
 * framework's terms (the Python `settled.adapters.common.SettledChannel`, rule for rule).
 *
 * Tools call `request`, `check` and `authorize` and await them (the model needs the answer).
 * Channel events (`opened`, `interrupted`, `closed`, and what the person heard) are queued and sent
 * in order in the background, so a slow or unreachable API never stalls the framework's audio
 * loop; `flush()` waits for them.
 *
 * What was presented and heard — THE rule every TypeScript adapter maps its framework's events to,
 * and only here: heard is ordered evidence. A status counts as presented only by an utterance that
 * carries it (generated after the model was handed that status, and containing its sentence,
 * business reference or operation id), and only as completed on a signal that belongs to that
 * utterance and comes after its own playback: its audio's end on the person's side
 * (`utteranceEnded(id, true)`; in text: the whole reply reached the person), or the platform's report
 * of what was spoken of it before a cut (`utteranceCut`). Generation finishing is not it, nor are the
 * person's words, a transcription or a turn's end that arrive late, out of order or belong to another
 * utterance: an adapter passes only its own utterance's signals, and each utterance's text only as its
 * own (`utteranceText`, which may trail its playback and still joins it, never a later one; text the
 * adapter cannot tell is this utterance's alone is `inDoubt`, and the utterance is then never heard).
 * A barge-in, or the end of the session, while an utterance plays records it as not completed; an
 * utterance that carries nothing records nothing; each status is recorded once per utterance, by the
 * verdict its playback gave. Where the evidence is missing or in doubt, the safe side is "not
 * completed": a repeat is better than a loss.
 */

import { type SettledClient, SettledAPIError, SettledError } from "./client.js";
import { MAX_REQUEST_ROUNDS, type OperationIds, type Params, derivedOperationId } from "./ids.js";
import type { ActionStatus, Channel, EventType } from "./models.js";
import {
  AUTHORIZE_TOOL,
  type ActionKind,
  CHECK_TOOL,
  type ToolSpec,
  checkAnswer,
  errorAnswer,
  toolAnswer,
  toolName,
  toolSet,
} from "./text.js";

export interface ChannelOptions {
  channel?: Channel;
  /** Seconds a tool call waits for the business system's answer before "not confirmed yet" (at most 30). */
  waitS?: number;
  /** True when the tool call itself is the person's go-ahead (the agent asks before calling). */
  authorizeOnCall?: boolean;
  operationIds?: OperationIds;
  /** Where a channel event that could not be recorded is reported (the action is durable either way). */
  onEventError?: (error: unknown) => void;
}

/** Milliseconds since the epoch, finer than `Date.now()`: "generated after it was told" must not tie. */
export function now(): number {
  return performance.timeOrigin + performance.now();
}

function words(text: string): string {
  return text.toLowerCase().split(/\s+/).filter(Boolean).join(" ");
}

/** Whether an utterance's text carries this status: its sentence, its business reference or its operation id. */
export function carries(text: string, status: ActionStatus): boolean {
  const spoken = words(text);
  return [status.say, status.business_ref ?? "", status.operation_id].some(
    (mark) => mark.trim() !== "" && spoken.includes(words(mark)),
  );
}

interface Utterance {
  // The statuses the model had been handed when it generated this utterance: only these can be
  // what it says (a line generated before a result arrived cannot present that result).
  couldCarry: ActionStatus[];
  text: string;
  // Its own playback's verdict, once given: heard to its end (true) or cut (false).
  heard?: boolean;
  // Some of its text may be another utterance's (the adapter could not tell): it is never heard.
  inDoubt: boolean;
  // The operation ids already recorded from it: each is recorded once, by its first verdict.
  recorded: Set<string>;
}

// How many ended utterances are kept for their late text (a transcription that trails the audio).
const KEPT_ENDED = 32;

export class SettledChannel {
  readonly client: SettledClient;
  readonly conversationId: string;
  readonly kinds: ActionKind[];
  readonly channel: Channel;
  readonly waitS: number;
  readonly authorizeOnCall: boolean;
  /** The operation ids this channel requested, oldest first. */
  readonly operations: string[] = [];
  readonly #operationIds: OperationIds;
  readonly #onEventError: (error: unknown) => void;
  readonly #byTool = new Map<string, ActionKind>();
  // (when, status): every status the model was handed, oldest first.
  readonly #told: [number, ActionStatus][] = [];
  readonly #playing = new Map<string, Utterance>();
  // Ended utterances stay ended: a late event of one already heard must not reopen (and cut) it;
  // the last few are kept (oldest first) so that their late text still joins them.
  readonly #ended = new Map<string, Utterance | undefined>();
  #closed = false;
  #queue: Promise<void> = Promise.resolve();

  constructor(client: SettledClient, conversationId: string, kinds: ActionKind[], options: ChannelOptions = {}) {
    this.client = client;
    this.conversationId = conversationId;
    this.kinds = kinds;
    this.channel = options.channel ?? "voice";
    this.waitS = options.waitS ?? 2;
    this.authorizeOnCall = options.authorizeOnCall ?? false;
    this.#operationIds = options.operationIds ?? derivedOperationId;
    this.#onEventError = options.onEventError ?? ((error) => console.warn("settled: channel event not recorded:", error));
    for (const kind of kinds) this.#byTool.set(toolName(kind), kind);
    if (this.#byTool.size !== kinds.length) throw new Error("two kinds share a tool name; give one a toolName");
  }

  // -- tools --------------------------------------------------------------------------------------

  get needsAuthorizeTool(): boolean {
    return !this.authorizeOnCall && this.kinds.some((kind) => kind.requiresAuthorization);
  }

  /** The tool set this channel answers (`answerTool`). */
  tools(): ToolSpec[] {
    return toolSet(this.kinds, this.needsAuthorizeTool);
  }

  kindFor(tool: string): ActionKind | undefined {
    return this.#byTool.get(tool);
  }

  /** Create (or meet again) the durable action for this tool call; wait briefly for its outcome. */
  async request(tool: string, params: Params): Promise<ActionStatus> {
    const kind = this.#byTool.get(tool);
    if (kind === undefined) throw new Error(`no tool ${tool}`);
    const authorized = this.authorizeOnCall || !kind.requiresAuthorization;
    let status: ActionStatus | undefined;
    for (let round = 1; round <= MAX_REQUEST_ROUNDS; round++) {
      const operationId = await this.#operationIds(this.conversationId, kind.kind, params, round);
      const created = await this.client.createAction(this.conversationId, kind.kind, params, {
        operationId,
        authorized,
        ...(authorized ? { authorizedBy: `${this.channel} tool call` } : {}),
        // Nothing is sent before the go-ahead, so there is nothing to wait for.
        ...(authorized ? { wait: this.waitS } : {}),
      });
      status = created;
      // A repeat of a request that definitely did not happen is a new request.
      if (created.created || (created.state !== "failed" && created.state !== "cancelled")) break;
    }
    const answer = status as ActionStatus;
    if (!this.operations.includes(answer.operation_id)) this.operations.push(answer.operation_id);
    return answer;
  }

  async answerRequest(tool: string, params: Params): Promise<string> {
    let status: ActionStatus;
    try {
      status = await this.request(tool, params);
    } catch (error) {
      if (error instanceof SettledError) return errorAnswer(error);
      throw error;
    }
    this.told(status);
    return toolAnswer(status, this.needsAuthorizeTool ? AUTHORIZE_TOOL : null);
  }

  /**
   * The answer to any tool of the set, called by name with its arguments, for an edge that receives
   * tool calls as data: what is wrong with a call is said in the answer, never thrown.
   */
  async answerTool(tool: string, args: unknown): Promise<string> {
    if (typeof args !== "object" || args === null || Array.isArray(args)) {
      return "Not recorded: the arguments are not a JSON object. Nothing was sent.";
    }
    const given = (args as Record<string, unknown>).operation_id;
    const operationId = typeof given === "string" && given !== "" ? given : undefined;
    if (tool === CHECK_TOOL) return this.answerCheck(operationId);
    if (tool === AUTHORIZE_TOOL && this.needsAuthorizeTool) {
      if (operationId === undefined) return "Not authorized: operation_id is required (the op_... of the request).";
      return this.answerAuthorize(operationId);
    }
    if (this.#byTool.has(tool)) return this.answerRequest(tool, args as Params);
    const known = this.tools().map((spec) => spec.name).join(", ");
    return `Not recorded: there is no tool '${tool}' (the tools: ${known}). Nothing was sent.`;
  }

  /**
   * Throws `not_found` unless the action is this conversation's: a model may be handed any id, and
   * another conversation's action is not read on nor acted on here, as the API answers a
   * conversation token (the same error, nothing of that action).
   */
  async #own(operationId: string): Promise<void> {
    const found = await this.client.get(operationId);
    if (found.conversation_id !== this.conversationId) {
      throw new SettledAPIError("not_found", "no such operation or conversation", 404);
    }
  }

  async authorize(operationId: string): Promise<ActionStatus> {
    await this.#own(operationId);
    return this.client.authorize(operationId, `${this.channel} caller`, this.waitS);
  }

  async answerAuthorize(operationId: string): Promise<string> {
    try {
      const status = await this.authorize(operationId);
      this.told(status);
      return toolAnswer(status);
    } catch (error) {
      if (error instanceof SettledAPIError && error.code === "not_found") {
        return `There is no request ${operationId} in this conversation. Nothing was authorized.`;
      }
      if (error instanceof SettledError) return errorAnswer(error);
      throw error;
    }
  }

  /** What a "did you do it?" tells of, after checking the business system now: one request, or all of the conversation's. */
  async check(operationId?: string): Promise<ActionStatus[]> {
    if (operationId) {
      await this.#own(operationId);
      return [await this.client.reconciled(operationId, this.waitS)];
    }
    return (await this.client.reconciledIn(this.conversationId, this.waitS)).actions;
  }

  async answerCheck(operationId?: string): Promise<string> {
    let statuses: ActionStatus[];
    try {
      statuses = await this.check(operationId);
    } catch (error) {
      if (error instanceof SettledAPIError && error.code === "not_found") {
        return `There is no request ${operationId} in this conversation.`;
      }
      if (error instanceof SettledError) return `Could not check right now (${error.code}). Do not say anything is done.`;
      throw error;
    }
    for (const status of statuses) this.told(status);
    return checkAnswer(statuses);
  }

  // -- channel events -----------------------------------------------------------------------------

  opened(): void {
    this.#post(() => this.#event("channel_opened"));
  }

  /** The person cut in: settled checks what may be in flight (nothing is cancelled). */
  interrupted(): void {
    this.#post(() => this.#event("interrupted"));
  }

  /**
   * The channel ended; the actions go on (ending a call never cancels one). Whatever was still
   * playing was not heard to its end, and is recorded so before the close.
   */
  closed(reason = "hangup"): void {
    if (this.#closed) return;
    this.cutOff();
    this.#closed = true;
    this.#post(() => this.#event("channel_closed", reason));
  }

  get isClosed(): boolean {
    return this.#closed;
  }

  async #event(type: EventType, reason?: string): Promise<void> {
    await this.client.conversationEvent(this.conversationId, type, this.channel, reason);
  }

  // -- what the person heard ----------------------------------------------------------------------

  /** The model was handed this status: utterances it generates from now on may carry it. */
  told(status: ActionStatus): void {
    this.#told.push([now(), status]);
  }

  #knownAt(at: number): ActionStatus[] {
    const latest = new Map<string, ActionStatus>();
    for (const [when, status] of this.#told) if (when <= at) latest.set(status.operation_id, status);
    return [...latest.values()];
  }

  /** The model began generating an utterance (`generatedAt`: when, from `now()`, for a framework that reports it afterwards). */
  utteranceStarted(utteranceId: string, generatedAt?: number): void {
    if (this.#closed || this.#playing.has(utteranceId) || this.#ended.has(utteranceId)) return;
    const couldCarry = this.#knownAt(generatedAt ?? now());
    if (couldCarry.length > 0) this.#playing.set(utteranceId, { couldCarry, text: "", inDoubt: false, recorded: new Set() });
  }

  /**
   * Text of this utterance, while it plays or after its playback ended (a transcription that trails
   * the audio): it joins this utterance's verdict, never another's. `inDoubt`: the adapter cannot tell
   * that the text is this utterance's alone; the utterance then never counts as heard.
   */
  utteranceText(utteranceId: string, text: string, options: { inDoubt?: boolean } = {}): void {
    const utterance = this.#playing.get(utteranceId) ?? this.#ended.get(utteranceId);
    if (utterance === undefined) return;
    utterance.text += text;
    utterance.inDoubt ||= options.inDoubt ?? false;
    if (utterance.heard !== undefined) this.#record(utterance, utterance.text.trim(), utterance.heard);
  }

  /** The utterance's own playback says its audio played to its end (`heard`) or was cut off; `text`, when given, is its whole text. */
  utteranceEnded(utteranceId: string, heard: boolean, text?: string): void {
    const utterance = this.#end(utteranceId);
    if (utterance === undefined) return;
    if (text !== undefined) utterance.text = text;
    utterance.heard = heard;
    this.#record(utterance, utterance.text.trim(), heard);
  }

  /**
   * The person cut in after `played`, the platform's report of what had been spoken of this utterance:
   * a status is heard only if its sentence was spoken in full before the cut; the rest it carried is cut.
   */
  utteranceCut(utteranceId: string, played: string): void {
    const utterance = this.#end(utteranceId);
    if (utterance === undefined) return;
    utterance.heard = false;
    const spoken = played.trim();
    for (const status of utterance.couldCarry) {
      if (status.say.trim() !== "" && words(spoken).includes(words(status.say))) {
        utterance.recorded.add(status.operation_id);
        this.#post(() => this.#present(status, spoken, true));
      }
    }
    this.#record(utterance, utterance.text.trim(), false);
  }

  #end(utteranceId: string): Utterance | undefined {
    const utterance = this.#playing.get(utteranceId);
    this.#playing.delete(utteranceId);
    if (this.#ended.has(utteranceId)) return undefined;
    this.#ended.set(utteranceId, utterance);
    while (this.#ended.size > KEPT_ENDED) this.#ended.delete(this.#ended.keys().next().value as string);
    return utterance;
  }

  #record(utterance: Utterance, spoken: string, heard: boolean): void {
    const completed = heard && !utterance.inDoubt;
    for (const status of utterance.couldCarry) {
      if (!utterance.recorded.has(status.operation_id) && carries(spoken, status)) {
        utterance.recorded.add(status.operation_id);
        this.#post(() => this.#present(status, spoken, completed));
      }
    }
  }

  /** A whole utterance at once, for a framework that reports text and playback together. */
  utterance(utteranceId: string, text: string, heard: boolean, generatedAt: number): void {
    this.utteranceStarted(utteranceId, generatedAt);
    this.utteranceEnded(utteranceId, heard, text);
  }

  /** The utterances that may carry a status and have not ended yet, oldest first. */
  get playing(): string[] {
    return [...this.#playing.keys()];
  }

  /** Every utterance still playing ends unheard; whether there was one. */
  cutOff(): boolean {
    const cut = this.playing;
    for (const utteranceId of cut) this.utteranceEnded(utteranceId, false);
    return cut.length > 0;
  }

  async #present(status: ActionStatus, text: string, completed: boolean): Promise<void> {
    // `forState`: this text presented the state the model was told, even if the action has moved
    // on since; settled then still owes the newer outcome to the next channel.
    await this.client.presented(status.operation_id, this.channel, text, completed, status.state);
  }

  // -- the sender ---------------------------------------------------------------------------------

  #post(send: () => Promise<void>): void {
    this.#queue = this.#queue.then(send).catch(this.#onEventError);
  }

  /** Wait until every queued channel event has been sent. */
  flush(): Promise<void> {
    return this.#queue;
  }
}

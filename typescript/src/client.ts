/**
 * A typed client for every route of the settled API, on the platform's `fetch` alone (Node.js 20+
 * and the browser). Every error the API answers throws `SettledAPIError` carrying the API's error
 * `code`. `createAction` always sends an operation id (generating one when the caller gives none),
 * so it retries a lost connection or a 503 with the same id: a repeat can never become a second write.
 *
 *     const settled = new SettledClient({ baseUrl: "http://127.0.0.1:8000", apiKey });
 *     const action = await settled.createAction("c-42", "refund", { order_id: "o-1" }, { authorized: true, wait: 2 });
 */

import type { Params } from "./ids.js";
import {
  type ActionStatus,
  type Channel,
  type CreatedAction,
  type EventAccepted,
  type EventType,
  type Handoff,
  type KindInfo,
  type State,
  MAY_BE_IN_FLIGHT,
  isFinal,
} from "./models.js";

/** The API's longest `wait`, in seconds. */
export const WAIT_MAX_S = 30;
// How long the server gets beyond a `wait` before the client gives up on the answer.
const WAIT_SLACK_MS = 10_000;

export class SettledError extends Error {
  /** The API's error code (`not_found`, `invalid_params`, …), or `unreachable`. */
  readonly code: string;
  readonly status: number | undefined;
  constructor(code: string, message: string, status?: number) {
    super(`${code}: ${message}`);
    this.name = "SettledError";
    this.code = code;
    this.status = status;
  }
}

/** The API answered with an error body (`{"error": {"code", "message"}}`). */
export class SettledAPIError extends SettledError {
  readonly detail: string;
  constructor(code: string, message: string, status: number) {
    super(code, message, status);
    this.name = "SettledAPIError";
    this.detail = message;
  }
}

/** No answer from the API after the retries (connection refused, reset, timed out). */
export class SettledUnreachable extends SettledError {
  constructor(message: string) {
    super("unreachable", message);
    this.name = "SettledUnreachable";
  }
}

export interface ClientOptions {
  /** The settled API, or the team's own server that forwards to it (the browser case). */
  baseUrl: string;
  /** A tenant's API key. Never give one to code that runs in a browser: see the guide. */
  apiKey?: string;
  /** A conversation token (the browser case): its conversation's routes only, until it expires. */
  token?: string;
  /** Extra headers on every request (for example a proxy's own short-lived credential). */
  headers?: Record<string, string>;
  fetch?: typeof fetch;
  timeoutMs?: number;
  /** Retries of an idempotent call after a lost connection or a 503. */
  retries?: number;
  backoffMs?: number;
}

export interface CreateOptions {
  operationId?: string;
  authorized?: boolean;
  authorizedBy?: string;
  /** Seconds to wait for the business system's answer (0–30). */
  wait?: number;
}

interface SendOptions {
  body?: unknown;
  wait?: number | undefined;
  /** A repeat changes nothing: retried after any lost answer and after a 503. */
  idempotent: boolean;
  headers?: Record<string, string>;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

// A connection that was never made: the request cannot have reached the server.
function neverConnected(error: unknown): boolean {
  const cause = (error as { cause?: { code?: string } }).cause;
  return ["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN"].includes(cause?.code ?? "");
}

export function newOperationId(): string {
  return `op_${globalThis.crypto.randomUUID().replaceAll("-", "")}`;
}

export class SettledClient {
  readonly baseUrl: string;
  readonly #headers: Record<string, string>;
  readonly #fetch: typeof fetch;
  readonly #timeoutMs: number;
  readonly #retries: number;
  readonly #backoffMs: number;

  constructor(options: ClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.#headers = { ...options.headers };
    if (options.token && options.apiKey) throw new TypeError("give apiKey or token, not both");
    const credential = options.token ?? options.apiKey;
    if (credential) this.#headers.authorization = `Bearer ${credential}`;
    this.#fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.#timeoutMs = options.timeoutMs ?? 10_000;
    this.#retries = options.retries ?? 3;
    this.#backoffMs = options.backoffMs ?? 200;
  }

  // -- actions ------------------------------------------------------------------------------------

  /** Record the action durably (201, `created`), or answer the known one for a repeated id (200). */
  async createAction(
    conversationId: string,
    kind: string,
    params: Params,
    options: CreateOptions = {},
  ): Promise<CreatedAction> {
    const body: Record<string, unknown> = {
      conversation_id: conversationId,
      kind,
      params,
      operation_id: options.operationId ?? newOperationId(),
      authorized: options.authorized ?? false,
    };
    if (options.authorizedBy !== undefined) body.authorized_by = options.authorizedBy;
    const response = await this.#send("POST", "/v1/actions", { body, wait: options.wait, idempotent: true });
    return { ...((await response.json()) as ActionStatus), created: response.status === 201 };
  }

  get(operationId: string): Promise<ActionStatus> {
    return this.#status("GET", `/v1/actions/${enc(operationId)}`, { idempotent: true });
  }

  /** A repeated authorize is a 200 no-op, so it is safe to retry. */
  authorize(operationId: string, by?: string, wait?: number): Promise<ActionStatus> {
    const body = { by: by ?? null };
    return this.#status("POST", `/v1/actions/${enc(operationId)}/authorize`, { body, wait, idempotent: true });
  }

  amend(operationId: string, params: Params): Promise<ActionStatus> {
    return this.#status("POST", `/v1/actions/${enc(operationId)}/amend`, { body: { params }, idempotent: false });
  }

  cancel(operationId: string, options: { by?: string; reason?: string; wait?: number } = {}): Promise<ActionStatus> {
    const body = { by: options.by ?? null, reason: options.reason ?? null };
    const path = `/v1/actions/${enc(operationId)}/cancel`;
    return this.#status("POST", path, { body, wait: options.wait, idempotent: false });
  }

  /** Look the operation up in the business system now; answers the verified status. */
  reconcile(operationId: string, wait?: number): Promise<ActionStatus> {
    return this.#status("POST", `/v1/actions/${enc(operationId)}/reconcile`, { wait, idempotent: true });
  }

  /**
   * Record what a channel presented, and whether the person received all of it. `forState`: the
   * state of the status the text came from (a sentence about `running` finished after the action
   * confirmed did not present the outcome).
   */
  presented(
    operationId: string,
    channel: Channel,
    text: string,
    completed: boolean,
    forState?: State,
  ): Promise<ActionStatus> {
    const body: Record<string, unknown> = { channel, text: text.slice(0, 4000), completed };
    if (forState !== undefined) body.for_state = forState;
    return this.#status("POST", `/v1/actions/${enc(operationId)}/presented`, { body, idempotent: true });
  }

  // -- conversations ------------------------------------------------------------------------------

  async conversationEvent(
    conversationId: string,
    type: EventType,
    channel: Channel,
    reason?: string,
  ): Promise<EventAccepted> {
    const body = { type, channel, reason: reason ?? null };
    const path = `/v1/conversations/${enc(conversationId)}/events`;
    return (await (await this.#send("POST", path, { body, idempotent: true })).json()) as EventAccepted;
  }

  async handoff(conversationId: string): Promise<Handoff> {
    const path = `/v1/conversations/${enc(conversationId)}/handoff`;
    return (await (await this.#send("GET", path, { idempotent: true })).json()) as Handoff;
  }

  /** The kinds the API offers: what a channel needs to offer them as tools. */
  async kinds(): Promise<KindInfo[]> {
    const answer = (await (await this.#send("GET", "/v1/kinds", { idempotent: true })).json()) as {
      kinds: KindInfo[];
    };
    return answer.kinds;
  }

  /**
   * Every action of the conversation as it is now, then every change, in order (Server-Sent
   * Events). A lost connection is resumed with `Last-Event-ID`, so nothing is missed and nothing
   * comes twice; `lastEventId` resumes after an event an earlier stream delivered. Stops when the
   * loop breaks or `signal` aborts.
   */
  async *stream(
    conversationId: string,
    options: { lastEventId?: string; signal?: AbortSignal } = {},
  ): AsyncGenerator<ActionStatus & { eventId: string }, void, undefined> {
    const path = `/v1/conversations/${enc(conversationId)}/stream`;
    let lastEventId = options.lastEventId;
    let failures = 0;
    while (!options.signal?.aborted) {
      const abort = new AbortController();
      const onAbort = () => abort.abort();
      options.signal?.addEventListener("abort", onAbort);
      try {
        const headers: Record<string, string> = { ...this.#headers, accept: "text/event-stream" };
        if (lastEventId !== undefined) headers["last-event-id"] = lastEventId;
        let response: Response;
        try {
          response = await this.#fetch(this.baseUrl + path, { headers, signal: abort.signal });
        } catch (error) {
          if (options.signal?.aborted) return;
          if (++failures > this.#retries) throw new SettledUnreachable(`stream: ${String(error)}`);
          await sleep(this.#backoff(failures));
          continue;
        }
        if (response.status === 503 && ++failures <= this.#retries) {
          await sleep(this.#backoff(failures));
          continue;
        }
        if (!response.ok || response.body === null) throw await apiError(response);
        try {
          for await (const event of sseEvents(response.body)) {
            failures = 0;
            if (event.event !== "action" || !event.data) continue;
            if (event.id !== undefined) lastEventId = event.id;
            yield { ...(JSON.parse(event.data) as ActionStatus), eventId: event.id ?? "" };
          }
        } catch (error) {
          if (options.signal?.aborted) return;
          if (++failures > this.#retries) throw new SettledUnreachable(`stream: ${String(error)}`);
        }
        // The server never ends a stream: an end is a lost connection, resumed from the last id.
      } finally {
        options.signal?.removeEventListener("abort", onAbort);
        abort.abort();
      }
    }
  }

  /** The action once final (confirmed and not being reversed, failed or cancelled), or as it is when `timeoutMs` ends. */
  async awaitSettled(operationId: string, timeoutMs: number): Promise<ActionStatus> {
    const current = await this.get(operationId);
    if (isFinal(current)) return current;
    const signal = AbortSignal.timeout(Math.max(timeoutMs, 0));
    try {
      for await (const status of this.stream(current.conversation_id, { signal })) {
        if (status.operation_id === operationId && isFinal(status)) {
          const { eventId: _, ...action } = status;
          return action;
        }
      }
    } catch (error) {
      if (!signal.aborted) throw error;
    }
    return this.get(operationId);
  }

  // -- what may I say -----------------------------------------------------------------------------

  /** Check the business system now (a reconcile, then watching for the rest of `wait`), then the verified status. */
  async reconciled(operationId: string, wait = 2): Promise<ActionStatus> {
    const waitS = Math.min(Math.max(wait, 0), WAIT_MAX_S);
    const deadline = Date.now() + waitS * 1000;
    let status = await this.reconcile(operationId, waitS);
    // A reconcile that finds a lookup already due answers at once: keep watching for the rest of
    // the wait rather than report a state that is about to change.
    const remaining = deadline - Date.now();
    if (MAY_BE_IN_FLIGHT.has(status.state) && remaining > 0) status = await this.awaitSettled(operationId, remaining);
    return status;
  }

  /** Every action of a conversation, oldest first, after checking what may be in flight. */
  async reconciledIn(conversationId: string, wait = 2): Promise<Handoff> {
    let handoff = await this.handoff(conversationId);
    const pending = handoff.actions.filter((action) => MAY_BE_IN_FLIGHT.has(action.state));
    if (pending.length > 0) {
      await Promise.all(pending.map((action) => this.reconciled(action.operation_id, wait)));
      handoff = await this.handoff(conversationId);
    }
    return handoff;
  }

  // -- transport ----------------------------------------------------------------------------------

  async #status(method: string, path: string, options: SendOptions): Promise<ActionStatus> {
    return (await (await this.#send(method, path, options)).json()) as ActionStatus;
  }

  #backoff(attempt: number): number {
    return Math.min(this.#backoffMs * 2 ** (attempt - 1), 2000);
  }

  async #send(method: string, path: string, options: SendOptions): Promise<Response> {
    const query = options.wait !== undefined ? `?wait=${options.wait}` : "";
    const timeoutMs = this.#timeoutMs + (options.wait ? options.wait * 1000 + WAIT_SLACK_MS : 0);
    const headers: Record<string, string> = { ...this.#headers, ...options.headers };
    let body: string | undefined;
    if (options.body !== undefined) {
      headers["content-type"] = "application/json";
      body = JSON.stringify(options.body);
    }
    let last: unknown;
    for (let attempt = 0; attempt <= this.#retries; attempt++) {
      if (attempt > 0) await sleep(this.#backoff(attempt));
      let response: Response;
      try {
        response = await this.#fetch(this.baseUrl + path + query, {
          method,
          headers,
          body,
          signal: AbortSignal.timeout(timeoutMs),
        });
      } catch (error) {
        last = error;
        // A request whose answer was lost may have been applied: repeat only what is safe to repeat.
        if (options.idempotent || neverConnected(error)) continue;
        throw new SettledUnreachable(`${method} ${path}: ${String(error)}`);
      }
      if (response.status === 503 && options.idempotent && attempt < this.#retries) {
        await response.body?.cancel();
        continue;
      }
      if (response.status >= 400) throw await apiError(response);
      return response;
    }
    throw new SettledUnreachable(`${method} ${path}: no answer after ${this.#retries + 1} attempts: ${String(last)}`);
  }
}

function enc(id: string): string {
  return encodeURIComponent(id);
}

async function apiError(response: Response): Promise<SettledAPIError> {
  const text = await response.text();
  try {
    const error = (JSON.parse(text) as { error: { code: unknown; message: unknown } }).error;
    if (typeof error.code === "string") return new SettledAPIError(error.code, String(error.message), response.status);
  } catch {
    // not the API's error body: said below
  }
  return new SettledAPIError("invalid_response", `HTTP ${response.status}: ${text.slice(0, 200)}`, response.status);
}

interface SseEvent {
  event: string;
  data: string;
  id: string | undefined;
}

/** The events of a Server-Sent Events body (the WHATWG rules, for the fields settled sends). */
async function* sseEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<SseEvent> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let event = "message";
  let data: string[] = [];
  let id: string | undefined;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      let newline: number;
      while ((newline = buffer.search(/\r\n|\r|\n/)) >= 0) {
        const line = buffer.slice(0, newline);
        buffer = buffer.slice(newline + (buffer.startsWith("\r\n", newline) ? 2 : 1));
        if (line === "") {
          if (data.length > 0) yield { event, data: data.join("\n"), id };
          event = "message";
          data = [];
          id = undefined;
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? "" : line.slice(colon + 1);
        if (value.startsWith(" ")) value = value.slice(1);
        if (field === "event") event = value;
        else if (field === "data") data.push(value);
        else if (field === "id") id = value;
      }
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}

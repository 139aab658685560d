/** The API's wire shapes (the Python `settled.domain.models` and `settled.domain.handoff`). */

import type { Params } from "./ids.js";

export type State = "requested" | "running" | "unknown" | "confirmed" | "failed" | "cancelled";
export type Claim = "done" | "not_done" | "in_progress" | "unknown";
export type Channel = "voice" | "text";
export type EventType = "channel_opened" | "channel_closed" | "interrupted";
export type Work = "idle" | "continuing" | "waiting_for_user" | "stopped";
export type ChannelState = "unused" | "open" | "closed";

/** Settled: the business system has answered for good. */
export const SETTLED: ReadonlySet<State> = new Set(["confirmed", "failed", "cancelled"]);
/** A request may be at the business system right now, or may have been applied unseen. */
export const MAY_BE_IN_FLIGHT: ReadonlySet<State> = new Set(["running", "unknown"]);

export interface HistoryEntry {
  state: State;
  at: string;
  note: string;
}

export interface Presented {
  channel: Channel;
  text: string;
  completed: boolean;
  /** The action's state when the presentation was recorded. */
  state: State;
  at: string;
  /** The state whose sentence was presented, when the channel said so. */
  for_state: State | null;
}

/** One action's durable record, as every route answers it. Clients ignore fields they do not know. */
export interface ActionStatus {
  operation_id: string;
  conversation_id: string;
  kind: string;
  params: Params;
  state: State;
  authorized: boolean;
  dispatched: boolean;
  attempts: number;
  business_ref: string | null;
  reason: string | null;
  cancel_requested: boolean;
  compensated: boolean;
  needs_attention: boolean;
  claim: Claim;
  say: string;
  compensating: boolean;
  presented: Presented | null;
  history: HistoryEntry[];
  updated_at: string;
}

/** The status answered by a create; `created` is false for a repeat of a known operation id. */
export interface CreatedAction extends ActionStatus {
  created: boolean;
}

export interface Handoff {
  conversation_id: string;
  work: Work;
  channels: { voice: ChannelState; text: ChannelState };
  actions: ActionStatus[];
  say: string;
}

export interface KindInfo {
  name: string;
  description: string;
  requires_authorization: boolean;
  compensable: boolean;
  params_schema: Record<string, unknown>;
}

export interface EventAccepted {
  conversation_id: string;
  accepted: boolean;
  reconciling: string[];
}

/** Nothing more will happen on its own: confirmed (and not being reversed), failed or cancelled. */
export function isFinal(status: ActionStatus): boolean {
  return SETTLED.has(status.state) && !status.compensating;
}

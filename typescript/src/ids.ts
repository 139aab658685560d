/**
 * The operation id of a request: one (conversation, kind, params), one id, in every language.
 * A model that asks again with the same details, or the same request made from a Python agent in
 * the same conversation, meets the same durable action.
 *
 * canonical(params): every string (keys and values, at any depth) in Unicode NFC, every number the
 * IEEE-754 double it denotes (JavaScript numbers already are), then RFC 8785 (JSON Canonicalization
 * Scheme): keys sorted by UTF-16 code units, numbers in ECMAScript form, which is what
 * `JSON.stringify` writes for a number and a string. The Python side is
 * `settled.domain.canonical.canonical_params`; shared test vectors prove the two equal.
 */

export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };
export type Params = { [key: string]: JsonValue };

// Derived ids of one request that met a definite "not done" (failed, cancelled) move on to the next
// suffix, so asking again sends it again; this bounds how often.
export const MAX_REQUEST_ROUNDS = 20;

function jcs(value: unknown): string {
  if (value === null) return "null";
  switch (typeof value) {
    case "boolean":
      return value ? "true" : "false";
    case "number":
      if (!Number.isFinite(value)) throw new TypeError(`params cannot hold ${value}: not a JSON number`);
      return JSON.stringify(value);
    case "string":
      return JSON.stringify(value.normalize("NFC"));
    case "object": {
      if (Array.isArray(value)) return `[${value.map(jcs).join(",")}]`;
      // NFC first, then sort: the order is that of the normalized keys. The default sort compares
      // UTF-16 code units, as RFC 8785 asks.
      const entries = Object.entries(value as Record<string, unknown>)
        .filter(([, item]) => item !== undefined)
        .map(([key, item]) => [key.normalize("NFC"), item] as const)
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
      return `{${entries.map(([key, item]) => `${JSON.stringify(key)}:${jcs(item)}`).join(",")}}`;
    }
    default:
      throw new TypeError(`params cannot hold a ${typeof value}: not a JSON value`);
  }
}

/** The canonical form of a request's params (RFC 8785 after NFC). */
export function canonicalParams(params: Params): string {
  return jcs(params);
}

async function sha256Hex(text: string): Promise<string> {
  const digest = await globalThis.crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return Array.from(new Uint8Array(digest), (byte) => byte.toString(16).padStart(2, "0")).join("");
}

/**
 * `op_` and the first 32 hex digits of sha256(conversation, kind, canonical params); round n > 1
 * (a repeat of a request that definitely did not happen) is `{id}-{n}`.
 */
export async function derivedOperationId(
  conversationId: string,
  kind: string,
  params: Params,
  round = 1,
): Promise<string> {
  const digest = await sha256Hex(`${conversationId}\n${kind}\n${canonicalParams(params)}`);
  const base = `op_${digest.slice(0, 32)}`;
  return round === 1 ? base : `${base}-${round}`;
}

export type OperationIds = (conversationId: string, kind: string, params: Params, round: number) => Promise<string>;

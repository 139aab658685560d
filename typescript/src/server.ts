/**
 * For the team's own Node.js server only (it uses `node:crypto` and the tenant's API key): mint a
 * conversation token, the short-lived bearer credential a browser agent uses in place of the API
 * key. The API accepts it only on its conversation's routes and until it expires (at most 24 hours);
 * rotating the key ends it. Python mints the same token (`settled.tokens.mint_conversation_token`).
 *
 *     import { mintConversationToken } from "@settled/client/server";
 *     const token = mintConversationToken(process.env.SETTLED_KEY!, "tenant_a", "c-42", { ttlS: 3600 });
 *     // hand `token` to the person's browser, whose client is new SettledClient({ baseUrl, token })
 */

import { createHmac } from "node:crypto";

/** A conversation token lives at most this long. */
export const CONVERSATION_TOKEN_MAX_TTL_S = 86_400;
const PREFIX = "sc1.";
// Domain separation: the same key signs page links under another tag, so neither passes as the other.
const TAG = "settled-conversation-token/1\n";
const TENANT = /^[A-Za-z0-9_-]{1,64}$/;
const CONVERSATION = /^[A-Za-z0-9._:-]{1,128}$/;

export interface MintOptions {
  /** Seconds until the token expires (default 3600, at most 86400). */
  ttlS?: number;
  /** The time of minting, in Unix seconds (default: now). */
  now?: number;
}

/** A bearer token for `conversationId` of `tenant`, signed with `apiKey` (one of the tenant's keys). */
export function mintConversationToken(apiKey: string, tenant: string, conversationId: string, options: MintOptions = {}): string {
  const ttlS = options.ttlS ?? 3600;
  if (!(ttlS > 0 && ttlS <= CONVERSATION_TOKEN_MAX_TTL_S)) {
    throw new RangeError(`ttlS must be more than 0 and at most ${CONVERSATION_TOKEN_MAX_TTL_S} s`);
  }
  if (!TENANT.test(tenant)) throw new RangeError(`tenant ${JSON.stringify(tenant)} must be 1-64 of A-Z a-z 0-9 _ -`);
  if (!CONVERSATION.test(conversationId)) {
    throw new RangeError(`conversation id ${JSON.stringify(conversationId)} must be 1-128 of A-Z a-z 0-9 . _ : -`);
  }
  const expiresAt = Math.floor((options.now ?? Date.now() / 1000) + ttlS);
  const payload = Buffer.from(`${tenant}\n${conversationId}\n${expiresAt}`, "utf8");
  const signature = createHmac("sha256", apiKey).update(TAG).update(payload).digest();
  return `${PREFIX}${payload.toString("base64url")}.${signature.toString("base64url")}`;
}

/**
 * What the TypeScript tests share: the real settled stack pytest started (its URLs in the
 * environment), the sandbox's records as the judge, and waiting on a condition with a deadline.
 */

import { randomUUID } from "node:crypto";
import type { TestContext } from "node:test";
import { SettledClient } from "@settled/client";

export const API_URL = process.env.SETTLED_API_URL;
export const SANDBOX_URL = process.env.SETTLED_SANDBOX_URL;

/** Skips a test that needs the stack when the suite runs alone (`npm test` without pytest). */
export function needsStack(t: TestContext): boolean {
  if (API_URL && SANDBOX_URL) return true;
  t.skip(
    "no settled stack: `settled dev` (pip install 'settled[server]') starts one; set SETTLED_API_URL and " +
      "SETTLED_SANDBOX_URL to the URLs it prints, or run through pytest (tests/typescript), which starts its own",
  );
  return false;
}

export function client(options: { baseUrl?: string; retries?: number } = {}): SettledClient {
  return new SettledClient({ baseUrl: options.baseUrl ?? (API_URL as string), timeoutMs: 20_000, ...options });
}

export function newId(prefix: string): string {
  return `${prefix}-${randomUUID().replaceAll("-", "").slice(0, 12)}`;
}

export function refund(orderId = newId("order")): { order_id: string; amount: number; currency: string } {
  return { order_id: orderId, amount: 25.5, currency: "EUR" };
}

/** Poll `probe` until it returns something truthy; fail with the last value at the deadline. */
export async function eventually<T>(
  probe: () => Promise<T | undefined | null | false>,
  what: string,
  timeoutMs = 20_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: T | undefined | null | false;
  while (Date.now() < deadline) {
    last = await probe();
    if (last) return last;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; last: ${JSON.stringify(last)}`);
}

/** Wait for `promise`, failing with `what` at the deadline. */
export async function within<T>(promise: Promise<T>, what: string, timeoutMs = 20_000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)), timeoutMs);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

interface SandboxRecord {
  key?: string;
  client_reference?: string;
  payload: Record<string, unknown>;
}

/** The sandbox business services' own records and fault controls, over real HTTP. */
export const sandbox = {
  async refundsFor(orderId: string): Promise<SandboxRecord[]> {
    const answer = (await (await fetch(`${SANDBOX_URL}/_sandbox/records?service=refunds`)).json()) as {
      records: SandboxRecord[];
    };
    return answer.records.filter((row) => row.payload.order_id === orderId);
  },
  async fault(service: string, op: string, mode: string, key: string, extra: Record<string, unknown> = {}): Promise<void> {
    const response = await fetch(`${SANDBOX_URL}/_sandbox/faults`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ service, op, mode, match_key: key, ...extra }),
    });
    if (response.status !== 201) throw new Error(`fault not set: ${await response.text()}`);
  },
};

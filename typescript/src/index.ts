/**
 * settled for TypeScript agents: the typed client, the operation id rule, the truthful tool text
 * and the channel every adapter maps its framework's events to. The adapters are subpath exports:
 * `@settled/client/openai-realtime`, `@settled/client/livekit`, `@settled/client/ai-sdk`.
 */

export * from "./channel.js";
export * from "./client.js";
export * from "./ids.js";
export * from "./models.js";
export * from "./text.js";

import type { SettledClient } from "./client.js";
import { type ActionKind, actionKind } from "./text.js";

/** The kinds the settled API offers (`GET /v1/kinds`), as tools; `names` picks some of them, in that order. */
export async function actionKinds(client: SettledClient, names?: string[]): Promise<ActionKind[]> {
  const offered = new Map((await client.kinds()).map((info) => [info.name, info]));
  const wanted = names ?? [...offered.keys()].sort();
  return wanted.map((name) => {
    const info = offered.get(name);
    if (info === undefined) throw new Error(`no kind '${name}' in the settled API; known: ${[...offered.keys()].sort().join(", ")}`);
    return actionKind(info);
  });
}

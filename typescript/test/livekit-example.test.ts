/** The offline LiveKit example (examples/livekit-call.ts), run as a user runs it, against the real stack. */

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { API_URL, needsStack } from "./support.js";

test("livekit: the offline example runs against the stack and leaves the cut confirmation owed", async (t) => {
  if (!needsStack(t)) return;
  const example = fileURLToPath(new URL("../examples/livekit-call.js", import.meta.url));
  const run = await promisify(execFile)(process.execPath, [example], { env: { ...process.env, SETTLED_API_URL: API_URL }, timeout: 60_000 });
  const said = /^said: (.+)$/m.exec(run.stdout)?.[1];
  assert.ok(said?.startsWith("Done:"), run.stdout);
  assert.ok(run.stdout.includes(`owed to the next channel: ${said}`), run.stdout);
});

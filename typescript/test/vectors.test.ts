/**
 * The id rule and the tool text, held to Python's by the vectors Python generates
 * (`tests/typescript/vectors.py` writes test/vectors.json): every vector is checked here.
 */

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import canonicalize from "canonicalize";
import {
  type ActionKind,
  type ActionStatus,
  SettledAPIError,
  SettledUnreachable,
  canonicalParams,
  checkAnswer,
  derivedOperationId,
  errorAnswer,
  toolAnswer,
  toolSet,
} from "@settled/client";
import { mintConversationToken } from "@settled/client/server";

interface Vectors {
  ids: { conversation_id: string; kind: string; params_json: string; round: number; canonical: string; operation_id: string }[];
  text: {
    tool_answer: { status: ActionStatus; authorize_tool: string | null; text: string }[];
    check_answer: { statuses: ActionStatus[]; text: string }[];
    error_answer: { code: string; message: string; status: number | null; text: string }[];
    tool_set: { kinds: ActionKind[]; tools: unknown[] };
  };
  conversation_tokens: { key: string; tenant: string; conversation_id: string; now: number; ttl_s: number; token: string }[];
}

const vectors = JSON.parse(readFileSync(new URL("../../test/vectors.json", import.meta.url), "utf8")) as Vectors;

test("the operation id of every vector is Python's", async () => {
  assert.ok(vectors.ids.length >= 14);
  for (const vector of vectors.ids) {
    const params = JSON.parse(vector.params_json);
    assert.equal(canonicalParams(params), vector.canonical, vector.params_json);
    assert.equal(await derivedOperationId(vector.conversation_id, vector.kind, params, vector.round), vector.operation_id);
  }
});

test("one request however the model writes it: 1 and 1.0, key order, NFC", async () => {
  const id = async (text: string) => derivedOperationId("c", "refund", JSON.parse(text));
  assert.equal(await id('{"n": 1}'), await id('{"n": 1.0}'));
  assert.equal(await id('{"a": 1, "b": 2}'), await id('{"b": 2, "a": 1}'));
  assert.equal(await id('{"name": "Ren\\u00e9e"}'), await id('{"name": "Rene\\u0301e"}'));
  assert.notEqual(await id('{"n": 5}'), await id('{"n": "5"}'));
});

function nfc(value: unknown): unknown {
  if (typeof value === "string") return value.normalize("NFC");
  if (Array.isArray(value)) return value.map(nfc);
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key.normalize("NFC"), nfc(item)]));
  }
  return value;
}

test("the canonical form is RFC 8785's, as its author's package writes it after NFC", () => {
  for (const vector of vectors.ids) {
    const params = JSON.parse(vector.params_json);
    assert.equal(canonicalParams(params), (canonicalize as unknown as (value: unknown) => string)(nfc(params)));
  }
});

test("the tool text of every vector is Python's, word for word", () => {
  for (const vector of vectors.text.tool_answer) {
    assert.equal(toolAnswer(vector.status, vector.authorize_tool), vector.text);
  }
  for (const vector of vectors.text.check_answer) assert.equal(checkAnswer(vector.statuses), vector.text);
  for (const vector of vectors.text.error_answer) {
    const error =
      vector.code === "unreachable"
        ? new SettledUnreachable(vector.message)
        : new SettledAPIError(vector.code, vector.message, vector.status ?? 0);
    assert.equal(errorAnswer(error), vector.text);
  }
  assert.deepEqual(toolSet(vectors.text.tool_set.kinds), vectors.text.tool_set.tools);
});

test("every conversation token minted here is the one Python mints", () => {
  assert.ok(vectors.conversation_tokens.length >= 5);
  for (const vector of vectors.conversation_tokens) {
    const options = { ttlS: vector.ttl_s, now: vector.now };
    assert.equal(mintConversationToken(vector.key, vector.tenant, vector.conversation_id, options), vector.token);
  }
  assert.throws(() => mintConversationToken("k", "t", "c", { ttlS: 86_401 }), RangeError);
  assert.throws(() => mintConversationToken("k", "t", "c", { ttlS: 0 }), RangeError);
  assert.throws(() => mintConversationToken("k", "t", "c 1"), RangeError);
});

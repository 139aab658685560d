/** The client against a real settled stack: every route, errors with the API's code, a lost answer, the stream. */

import assert from "node:assert/strict";
import { type Server, createServer, request as httpRequest } from "node:http";
import { test } from "node:test";
import { type ActionStatus, SettledAPIError, derivedOperationId } from "@settled/client";
import { API_URL, client, eventually, needsStack, newId, refund, sandbox } from "./support.js";

test("every route of the API, typed", async (t) => {
  if (!needsStack(t)) return;
  const settled = client();
  const conversation = newId("conv");
  const kinds = await settled.kinds();
  assert.ok(kinds.some((kind) => kind.name === "refund" && kind.params_schema.type === "object"));

  const booking = await settled.createAction(conversation, "room_booking", { room: "Ada", day: "Thursday" });
  assert.equal(booking.created, true);
  assert.equal(booking.state, "requested");
  assert.equal((await settled.handoff(conversation)).work, "waiting_for_user");
  const amended = await settled.amend(booking.operation_id, { room: "Ada", day: "Friday" });
  assert.equal(amended.params.day, "Friday");
  const authorized = await settled.authorize(booking.operation_id, "caller", 5);
  assert.equal(authorized.state, "confirmed");
  assert.equal((await settled.reconcile(booking.operation_id, 1)).state, "confirmed");
  const shown = await settled.presented(booking.operation_id, "text", authorized.say, true, "confirmed");
  assert.equal(shown.presented?.completed, true);
  const accepted = await settled.conversationEvent(conversation, "channel_closed", "voice", "hangup");
  assert.equal(accepted.conversation_id, conversation);
  const handoff = await settled.handoff(conversation);
  assert.equal(handoff.channels.voice, "closed");
  assert.equal(handoff.say, "");

  const later = await settled.createAction(conversation, "room_booking", { room: "Ada", day: "Monday" });
  const cancelled = await settled.cancel(later.operation_id, { by: "caller", reason: "changed my mind" });
  assert.equal(cancelled.state, "cancelled");
  assert.equal((await settled.get(later.operation_id)).claim, "not_done");
});

test("errors carry the API's code", async (t) => {
  if (!needsStack(t)) return;
  const settled = client();
  await assert.rejects(settled.get("op_nothing_here"), (error: unknown) => {
    return error instanceof SettledAPIError && error.code === "not_found" && error.status === 404;
  });
  await assert.rejects(settled.createAction(newId("conv"), "refund", { order_id: "o" }), (error: unknown) => {
    return error instanceof SettledAPIError && error.code === "invalid_params";
  });
  await assert.rejects(settled.createAction(newId("conv"), "no_such_kind", {}), { code: "unknown_kind" });
});

/** A proxy in front of the API that lets the first request through and loses its answer. */
async function losingProxy(target: URL): Promise<{ server: Server; url: string; lost: () => number }> {
  let lost = 0;
  const server = createServer((incoming, outgoing) => {
    const forward = httpRequest(
      { host: target.hostname, port: target.port, path: incoming.url, method: incoming.method, headers: incoming.headers },
      (answer) => {
        if (lost === 0) {
          lost += 1;
          answer.resume();
          answer.on("end", () => outgoing.destroy()); // the API acted; its answer never arrives
          return;
        }
        outgoing.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(outgoing);
      },
    );
    incoming.pipe(forward);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address() as { port: number };
  return { server, url: `http://127.0.0.1:${address.port}`, lost: () => lost };
}

test("a create whose answer was lost is repeated with the same operation id: one write", async (t) => {
  if (!needsStack(t)) return;
  const proxy = await losingProxy(new URL(API_URL as string));
  t.after(() => proxy.server.close());
  const settled = client({ baseUrl: proxy.url, retries: 3 });
  const params = refund();
  const conversation = newId("conv");
  const operationId = await derivedOperationId(conversation, "refund", params);
  const action = await settled.createAction(conversation, "refund", params, { operationId, authorized: true, wait: 5 });
  assert.equal(proxy.lost(), 1);
  assert.equal(action.created, false, "the repeat met the action the lost request created");
  assert.equal(action.state, "confirmed");
  assert.equal((await sandbox.refundsFor(params.order_id)).length, 1);
});

test("the stream resumes with Last-Event-ID and delivers nothing twice", async (t) => {
  if (!needsStack(t)) return;
  const settled = client();
  const conversation = newId("conv");
  const first = await settled.createAction(conversation, "room_booking", { room: "Ada", day: "Tuesday" });
  const seen: (ActionStatus & { eventId: string })[] = [];
  for await (const event of settled.stream(conversation)) {
    seen.push(event);
    break;
  }
  assert.equal(seen[0]?.operation_id, first.operation_id);
  const second = await settled.createAction(conversation, "room_booking", { room: "Bo", day: "Tuesday" });
  await settled.authorize(second.operation_id, "caller", 5);
  const resumed: (ActionStatus & { eventId: string })[] = [];
  for await (const event of settled.stream(conversation, { lastEventId: seen[0]?.eventId as string })) {
    resumed.push(event);
    if (event.operation_id === second.operation_id && event.state === "confirmed") break;
  }
  const ids = resumed.map((event) => event.eventId);
  assert.equal(new Set(ids).size, ids.length, "no event twice");
  assert.ok(!ids.includes(seen[0]?.eventId as string), "nothing before the resume point");
  assert.ok(resumed.every((event) => event.operation_id === second.operation_id));
  const final = await eventually(async () => (await settled.awaitSettled(second.operation_id, 2000)).state === "confirmed", "confirmed");
  assert.ok(final);
});

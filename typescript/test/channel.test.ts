/**
 * The one rule for what the person heard (`SettledChannel`), fed as an adapter feeds it, against a
 * real settled stack: heard is ordered evidence. Judged by the action's `presented` and the handoff.
 */

import assert from "node:assert/strict";
import { test } from "node:test";
import { SettledChannel, actionKinds } from "@settled/client";
import { client, needsStack, newId, refund } from "./support.js";

async function confirmedRefund(channel: SettledChannel) {
  const done = await channel.request("refund", refund());
  assert.equal(done.state, "confirmed");
  channel.told(done);
  return done;
}

test("text that trails its utterance's playback joins that utterance's verdict, never a later one's", async (t) => {
  if (!needsStack(t)) return;
  const settled = client();
  const conversation = newId("conv");
  const channel = new SettledChannel(settled, conversation, await actionKinds(settled, ["refund"]), { waitS: 5, authorizeOnCall: true });
  const done = await confirmedRefund(channel);
  channel.utteranceStarted("confirmation");
  channel.utteranceStarted("next");
  channel.utteranceEnded("confirmation", false); // cut before its words arrived
  channel.utteranceText("next", "Is there anything else?");
  channel.utteranceEnded("next", true); // the next line played to its end
  channel.utteranceText("confirmation", done.say); // the cut line's words, late
  await channel.flush();
  const action = await settled.get(done.operation_id);
  assert.equal(action.presented?.completed, false);
  assert.equal(action.presented?.text, done.say);
  assert.equal((await settled.handoff(conversation)).say, done.say, "owed to the next channel");
});

test("a confirmation heard to its end is heard when its words come after its playback, never through text in doubt", async (t) => {
  if (!needsStack(t)) return;
  const settled = client();
  const kinds = await actionKinds(settled, ["refund"]);
  const heard = new SettledChannel(settled, newId("conv"), kinds, { waitS: 5, authorizeOnCall: true });
  const first = await confirmedRefund(heard);
  heard.utteranceStarted("confirmation");
  heard.utteranceEnded("confirmation", true);
  heard.utteranceText("confirmation", first.say);
  await heard.flush();
  assert.equal((await settled.get(first.operation_id)).presented?.completed, true);
  assert.equal((await settled.handoff(heard.conversationId)).say, "");

  const doubted = new SettledChannel(settled, newId("conv"), kinds, { waitS: 5, authorizeOnCall: true });
  const second = await confirmedRefund(doubted);
  doubted.utteranceStarted("line");
  doubted.utteranceEnded("line", true);
  doubted.utteranceText("line", second.say, { inDoubt: true }); // may be another line's words
  await doubted.flush();
  assert.equal((await settled.get(second.operation_id)).presented?.completed, false);
  assert.equal((await settled.handoff(doubted.conversationId)).say, second.say);
});

test("a platform's report of what was spoken before a cut: heard only if it holds the whole sentence", async (t) => {
  if (!needsStack(t)) return;
  const settled = client();
  const kinds = await actionKinds(settled, ["refund"]);
  for (const [played, completed] of [
    [(say: string) => say, true],
    [(say: string) => say.slice(0, say.length / 2), false],
  ] as const) {
    const channel = new SettledChannel(settled, newId("conv"), kinds, { waitS: 5, authorizeOnCall: true });
    const done = await confirmedRefund(channel);
    channel.utteranceStarted("turn");
    channel.utteranceText("turn", done.say);
    channel.utteranceCut("turn", played(done.say));
    await channel.flush();
    assert.equal((await settled.get(done.operation_id)).presented?.completed, completed);
  }
});

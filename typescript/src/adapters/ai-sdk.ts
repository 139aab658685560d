/**
 * settled under the AI SDK (`ai`): the kinds as tools for a text agent, and the chat that picks a
 * task up after a call speaking from the handoff and the verified state.
 *
 *     const chat = new SettledChat(client, conversationId, await actionKinds(client, ["refund"]));
 *     const result = await generateText({
 *       model, tools: chat.tools(), stopWhen: stepCountIs(4),
 *       system: `${instructions}\n\n${await chat.pickUp()}`,
 *       messages, ...chat.hooks(),
 *     });
 *
 * What was presented (the one rule, in `SettledChannel`): a reply presents a status only if its
 * step began after the model was handed that status and the reply carries its sentence, business
 * reference or operation id. In text, "heard" is the whole reply reaching the person: the
 * generation finished (`onFinish`); a stream aborted part-way (`onAbort`) presented it cut off.
 */

import { type ToolSet, jsonSchema, tool } from "ai";
import { type ChannelOptions, SettledChannel, now } from "../channel.js";
import type { SettledClient } from "../client.js";
import type { ActionKind } from "../text.js";

interface StepLike {
  stepNumber: number;
  text: string;
}

export class SettledChat {
  readonly settled: SettledChannel;
  // When each step of the generation running now began: its text was generated from what the
  // model had been handed by then.
  #stepStarted = new Map<number, number>();
  #generation = 0;

  constructor(client: SettledClient, conversationId: string, kinds: ActionKind[], options: ChannelOptions = {}) {
    this.settled = new SettledChannel(client, conversationId, kinds, { channel: "text", ...options });
  }

  /** The tool set (`SettledChannel.tools`) as AI SDK tools: one per kind, `verify_action`, and `authorize_action` when needed. */
  tools(): ToolSet {
    const settled = this.settled;
    const entries = settled.tools().map((spec) => [
      spec.name,
      tool({
        description: spec.description,
        inputSchema: jsonSchema<Record<string, unknown>>(spec.parameters),
        execute: (input: Record<string, unknown>) => settled.answerTool(spec.name, input),
      }),
    ]);
    return Object.fromEntries(entries) as ToolSet;
  }

  /**
   * Open the text channel and read the verified state of the conversation (`channel_opened` checks
   * whatever may be in flight first), as instructions for the model: what each request's state is
   * and what the person is still owed. The model is handed each status, so a reply that says it
   * counts as presenting it.
   */
  async pickUp(): Promise<string> {
    this.settled.opened();
    await this.settled.flush();
    const handoff = await this.settled.client.reconciledIn(this.settled.conversationId, this.settled.waitS);
    for (const action of handoff.actions) this.settled.told(action);
    const lines = [
      "Verified state of this conversation's requests (from the business systems; the only source " +
        "for what is done). Never say a request is done unless it is CONFIRMED here or in a tool result.",
    ];
    lines.push(handoff.actions.length === 0 ? "Nothing has been requested yet." : handoff.actions.map((a) => `- ${a.kind} (operation ${a.operation_id}): ${a.state}. ${a.say}`).join("\n"));
    if (handoff.say) lines.push(`The person has not yet been told, so say it first, word for word: ${handoff.say}`);
    return lines.join("\n");
  }

  /** The callbacks for `generateText` / `streamText` that record what each reply presented. */
  hooks() {
    const generation = ++this.#generation;
    const key = (step: number) => `${this.settled.conversationId}:${generation}:${step}`;
    // This generation's own replies: its end is evidence for them alone, never for another's.
    const mine: string[] = [];
    return {
      experimental_onStepStart: (event: { stepNumber: number }) => {
        this.#stepStarted.set(event.stepNumber, now());
      },
      onStepFinish: (step: StepLike) => {
        if (!step.text.trim()) return;
        mine.push(key(step.stepNumber));
        this.settled.utteranceStarted(key(step.stepNumber), this.#stepStarted.get(step.stepNumber));
        this.settled.utteranceText(key(step.stepNumber), step.text);
      },
      // The whole reply was generated and handed on: presented in full.
      onFinish: () => {
        for (const utterance of mine) this.settled.utteranceEnded(utterance, true);
      },
      // A stream stopped part-way: whatever it had said was cut off.
      onAbort: (event: { steps: readonly StepLike[] }) => {
        for (const step of event.steps) {
          if (step.text.trim()) {
            mine.push(key(step.stepNumber));
            this.settled.utteranceStarted(key(step.stepNumber), this.#stepStarted.get(step.stepNumber));
            this.settled.utteranceText(key(step.stepNumber), step.text);
          }
        }
        for (const utterance of mine) this.settled.utteranceEnded(utterance, false);
      },
    };
  }

  /** The chat ended (the person left); the actions go on. */
  closed(reason = "hangup"): void {
    this.settled.closed(reason);
  }

  flush(): Promise<void> {
    return this.settled.flush();
  }
}

// The text channel page: shows what the records say about each action of one conversation, keeps it
// live from the SSE stream, and offers only the controls the contract allows. No framework, no build.
"use strict";

(function () {
  const body = document.body;
  const conversationId = body.dataset.conversation;
  const kinds = JSON.parse(body.dataset.kinds || "{}");
  const token = new URLSearchParams(window.location.search).get("t");
  const conversationPath = "/v1/conversations/" + encodeURIComponent(conversationId);
  const BY = "customer on the text page";

  const $ = (id) => document.getElementById(id);
  const ui = {
    banner: $("banner"),
    bannerIcon: $("banner-icon"),
    bannerTitle: $("banner-title"),
    bannerDetail: $("banner-detail"),
    connection: $("connection"),
    connectionText: $("connection-text"),
    call: $("call"),
    callText: $("call-text"),
    endCall: $("end-call"),
    callNote: $("call-note"),
    cards: $("cards"),
    empty: $("empty"),
    announcer: $("announcer"),
  };

  const statuses = new Map(); // operation_id -> the newest ActionStatus seen
  const cards = new Map(); // operation_id -> the card's elements
  const presentedAs = new Map(); // operation_id -> the (state, say) last recorded as presented
  let handoff = null;

  // -- the API ---------------------------------------------------------------------------------

  class ApiError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  async function api(method, path, payload) {
    const headers = { accept: "application/json" };
    if (payload !== undefined) headers["content-type"] = "application/json";
    if (token) headers.authorization = "Bearer " + token;
    let response;
    try {
      response = await fetch(path, {
        method,
        headers,
        body: payload === undefined ? undefined : JSON.stringify(payload),
        cache: "no-store",
      });
    } catch (error) {
      throw new ApiError(0, "network", "I can't reach our records right now.");
    }
    const data = await response.json().catch(() => null);
    if (!response.ok) {
      const detail = data && data.error ? data.error : {};
      const message = detail.message || "HTTP " + response.status;
      throw new ApiError(response.status, detail.code || "error", message);
    }
    return data;
  }

  const actionPath = (op, verb) => "/v1/actions/" + encodeURIComponent(op) + (verb ? "/" + verb : "");

  // -- words -----------------------------------------------------------------------------------

  function stateView(s) {
    switch (s.state) {
      case "requested":
        return s.authorized
          ? { key: "queued", label: "Queued", icon: "clock" }
          : { key: "waiting", label: "Waiting for your go-ahead", icon: "pause" };
      case "running":
        return { key: "sending", label: "Sending", icon: "arrow" };
      case "unknown":
        return { key: "checking", label: "Checking the result", icon: "search" };
      case "confirmed":
        return { key: "confirmed", label: "Confirmed", icon: "check" };
      case "failed":
        return { key: "failed", label: "Didn't go through", icon: "cross" };
      case "cancelled":
        return s.compensated
          ? { key: "reversed", label: "Cancelled (reversed)", icon: "undo" }
          : { key: "cancelled", label: "Cancelled", icon: "slash" };
      default:
        return { key: "checking", label: "Checking the result", icon: "search" };
    }
  }

  const BANNERS = {
    idle: ["Nothing yet", "Nothing has been asked for in this conversation yet.", "circle"],
    continuing: [
      "Work is continuing",
      "Nothing is needed from you right now. This page updates by itself.",
      "arrow",
    ],
    waiting_for_user: [
      "Waiting for you",
      "Something below needs your go-ahead before anything is sent.",
      "pause",
    ],
    stopped: ["Stopped", "Nothing more is happening: everything below has its final answer.", "square"],
    unreachable: [
      "Can't load your requests",
      "I can't reach our records right now. I'll keep trying.",
      "cross",
    ],
  };

  function kindOf(s) {
    return kinds[s.kind] || { description: s.kind, requires_authorization: false, compensable: false };
  }

  // A confirmed action whose reversal is under way: the handoff's `work` says "stopped" for it, but
  // work is going on, and the page must not tell the person otherwise.
  function reversing(s) {
    return s.state === "confirmed" && s.cancel_requested && !s.reason && kindOf(s).compensable;
  }

  function allowed(s) {
    const inFlight = s.state === "running" || s.state === "unknown";
    return {
      goAhead: s.state === "requested" && !s.authorized,
      check: s.state === "unknown",
      cancel:
        ((s.state === "requested" || inFlight) && !s.cancel_requested) ||
        (s.state === "confirmed" && kindOf(s).compensable && (!s.cancel_requested || Boolean(s.reason))),
    };
  }

  function cancelHint(s) {
    if (s.state === "requested") return "Nothing has been sent yet, so cancelling stops it completely.";
    if (s.state === "confirmed") return "It went through; cancelling asks for it to be reversed.";
    return kindOf(s).compensable
      ? "It may already have gone through. I'll check first, and reverse it if it did."
      : "It may already have gone through. I'll check first; if it did, it can't be undone.";
  }

  function capitalized(text) {
    return text.charAt(0).toUpperCase() + text.slice(1);
  }

  function humanKey(key) {
    return capitalized(key.replace(/_/g, " "));
  }

  function humanValue(value) {
    if (value === null || value === undefined) return "—";
    if (typeof value === "boolean") return value ? "yes" : "no";
    if (typeof value === "object") return JSON.stringify(value);
    return String(value);
  }

  function when(text) {
    const at = new Date(text);
    if (Number.isNaN(at.getTime())) return text;
    const time = at.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
    if (at.toDateString() === new Date().toDateString()) return "today at " + time;
    return at.toLocaleDateString([], { year: "numeric", month: "short", day: "numeric" }) + " at " + time;
  }

  // RFC 3339 to a comparable [milliseconds, microseconds]: Date drops the microseconds, and two
  // changes of one action can fall in the same millisecond.
  function stamp(text) {
    const match = /^(.*T\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)?$/.exec(text || "");
    if (!match) return [Date.parse(text) || 0, 0];
    return [Date.parse(match[1] + (match[3] || "Z")), Number((match[2] || "").padEnd(6, "0").slice(0, 6))];
  }

  function later(a, b) {
    return a[0] > b[0] || (a[0] === b[0] && a[1] > b[1]);
  }

  // Changes made in one workflow task share its time: among those, the one with more transitions is
  // the later (a "running" read late must not undo the "confirmed" recorded in the same task).
  function notOlder(next, current) {
    const [a, b] = [stamp(current.updated_at), stamp(next.updated_at)];
    if (later(a, b)) return false;
    if (later(b, a)) return true;
    return (next.history || []).length >= (current.history || []).length;
  }

  // -- icons: inline SVG shapes, so a state never rests on colour alone -------------------------

  const SVG = "http://www.w3.org/2000/svg";
  const SHAPES = {
    pause: [["circle", { cx: 12, cy: 12, r: 9 }], ["path", { d: "M10 8.5v7M14 8.5v7" }]],
    clock: [["circle", { cx: 12, cy: 12, r: 9 }], ["path", { d: "M12 7v5l3.5 2" }]],
    arrow: [["path", { d: "M4 12h14M13 6.5l5.5 5.5-5.5 5.5" }]],
    search: [["circle", { cx: 10.5, cy: 10.5, r: 6 }], ["path", { d: "M15 15l5 5" }]],
    check: [["path", { d: "M4.5 12.5l5 5L19.5 7" }]],
    cross: [["path", { d: "M6.5 6.5l11 11M17.5 6.5l-11 11" }]],
    slash: [["circle", { cx: 12, cy: 12, r: 9 }], ["path", { d: "M5.8 18.2L18.2 5.8" }]],
    undo: [["path", { d: "M9 5L4.5 9.5 9 14" }], ["path", { d: "M4.5 9.5H14a5.5 5.5 0 010 11h-4" }]],
    square: [["rect", { x: 6, y: 6, width: 12, height: 12, rx: 1 }]],
    circle: [["circle", { cx: 12, cy: 12, r: 8 }]],
    hangup: [
      [
        "path",
        {
          class: "filled",
          d: "M2.5 13.5C7.5 8.5 16.5 8.5 21.5 13.5l-2.3 3.2-3.9-1.3V12.5a10.5 10.5 0 00-6.6 0v2.9l-3.9 1.3z",
        },
      ],
    ],
    go: [["path", { d: "M7 5.5l11 6.5-11 6.5z" }]],
    refresh: [["path", { d: "M19 12a7 7 0 11-2.05-4.95" }], ["path", { d: "M19.5 4.5v4h-4" }]],
  };

  function icon(name) {
    const svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("viewBox", "0 0 24 24");
    svg.setAttribute("aria-hidden", "true");
    svg.setAttribute("focusable", "false");
    svg.classList.add("icon");
    for (const [tag, attributes] of SHAPES[name] || []) {
      const shape = document.createElementNS(SVG, tag);
      for (const [name, value] of Object.entries(attributes)) shape.setAttribute(name, String(value));
      svg.appendChild(shape);
    }
    return svg;
  }

  function setIcon(holder, name) {
    if (holder.dataset.shape === name) return;
    holder.dataset.shape = name;
    holder.replaceChildren(icon(name));
  }

  function element(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  // -- the cards -------------------------------------------------------------------------------

  function button(className, iconName, label) {
    const node = element("button", "button " + className);
    node.type = "button";
    const holder = element("span", "button-icon");
    holder.setAttribute("aria-hidden", "true");
    setIcon(holder, iconName);
    node.append(holder, element("span", "button-label", label));
    return node;
  }

  function createCard(s) {
    const id = "action-" + s.operation_id.replace(/[^A-Za-z0-9_-]/g, "_");
    const root = element("li", "card");
    root.id = id;
    root.dataset.operation = s.operation_id;
    const title = element("h3", "card-title", capitalized(kindOf(s).description));
    title.id = id + "-title";
    root.setAttribute("aria-labelledby", title.id);
    const params = element("dl", "params");
    const state = element("p", "state");
    state.tabIndex = -1; // where focus goes when the control that had it is no longer offered
    const stateIcon = element("span", "state-icon");
    stateIcon.setAttribute("aria-hidden", "true");
    const stateLabel = element("strong", "state-label");
    state.append(stateIcon, stateLabel);
    const flag = element("p", "flag");
    const ref = element("p", "ref");
    const reason = element("p", "reason");
    const say = element("p", "say");
    const changed = element("p", "changed");
    const controls = element("div", "controls");
    const goAhead = button("button-go", "go", "Go ahead");
    const check = button("button-check", "refresh", "Check now");
    const cancel = button("button-cancel", "cross", "Cancel this");
    const cancelHintNode = element("p", "hint");
    cancelHintNode.id = id + "-cancel-hint";
    goAhead.setAttribute("aria-describedby", title.id);
    check.setAttribute("aria-describedby", title.id);
    cancel.setAttribute("aria-describedby", title.id + " " + cancelHintNode.id);
    controls.append(goAhead, check, cancel);
    const note = element("p", "note");
    note.setAttribute("role", "status");
    const details = element("details", "history");
    details.append(element("summary", "", "What happened"), element("ol"));
    root.append(title, params, state, flag, ref, reason, say, changed);
    root.append(controls, cancelHintNode, note, details);
    const card = { root, title, params, state, stateIcon, stateLabel, flag, ref, reason, say, changed };
    Object.assign(card, { controls, goAhead, check, cancel, cancelHint: cancelHintNode, note, details });
    goAhead.addEventListener("click", () => goAheadPressed(s.operation_id));
    check.addEventListener("click", () => checkPressed(s.operation_id));
    cancel.addEventListener("click", () => cancelPressed(s.operation_id));
    return card;
  }

  function placeCard(card, s) {
    // Oldest first, as the handoff lists them: by when each was first recorded.
    const created = stamp(s.history.length ? s.history[0].at : s.updated_at);
    card.created = created;
    for (const other of ui.cards.children) {
      const theirs = cards.get(other.dataset.operation);
      if (theirs && later(theirs.created, created)) {
        ui.cards.insertBefore(card.root, other);
        return;
      }
    }
    ui.cards.appendChild(card.root);
  }

  function show(node, visible) {
    node.hidden = !visible;
  }

  function renderParams(card, params) {
    const rows = Object.entries(params || {}).map(([key, value]) => {
      const row = element("div", "param");
      row.append(element("dt", "", humanKey(key)), element("dd", "", humanValue(value)));
      return row;
    });
    card.params.replaceChildren(...rows);
    show(card.params, rows.length > 0);
  }

  const HISTORY_WORDS = {
    requested: "Recorded",
    running: "Sending",
    unknown: "Checking the result",
    confirmed: "Confirmed",
    failed: "Didn't go through",
    cancelled: "Cancelled",
  };

  function renderHistory(card, s) {
    const items = s.history.map((entry) => {
      const item = element("li");
      const time = element("time", "", when(entry.at));
      time.dateTime = entry.at;
      const words = element("strong", "", HISTORY_WORDS[entry.state] || entry.state);
      item.append(words, ": ", entry.note, " (", time, ")");
      return item;
    });
    card.details.querySelector("ol").replaceChildren(...items);
  }

  function renderCard(s, previous) {
    let card = cards.get(s.operation_id);
    const fresh = !card;
    if (fresh) {
      card = createCard(s);
      cards.set(s.operation_id, card);
      placeCard(card, s);
    }
    const view = stateView(s);
    const hadFocus = card.root.contains(document.activeElement) ? document.activeElement : null;
    card.root.dataset.state = view.key;
    setIcon(card.stateIcon, view.icon);
    card.stateLabel.textContent = view.label;
    renderParams(card, s.params);

    let flag = "";
    const inFlight = s.state === "running" || s.state === "unknown";
    if (s.cancel_requested && inFlight) flag = "Cancel requested: checking first";
    else if (reversing(s)) flag = "Cancel requested: reversing it";
    else if (s.cancel_requested && s.state === "confirmed") flag = "Cancel requested: it still stands";
    else if (s.needs_attention) flag = "This is taking longer than usual; our team has been alerted";
    card.flag.textContent = flag;
    show(card.flag, Boolean(flag));

    card.ref.textContent = s.business_ref ? "Reference: " + s.business_ref : "";
    show(card.ref, Boolean(s.business_ref));
    // Why it failed, or why a reversal was refused; an in-flight reason is for operators, and the
    // sentence already says what it means for the person.
    const refused = s.state === "confirmed" && s.cancel_requested;
    const showReason = Boolean(s.reason) && (s.state === "failed" || refused);
    card.reason.textContent = showReason ? "Reason: " + s.reason : "";
    show(card.reason, showReason);
    card.say.textContent = s.say;

    const last = s.history.length ? s.history[s.history.length - 1].at : s.updated_at;
    const time = element("time", "", when(last));
    time.dateTime = last;
    card.changed.replaceChildren("Last changed ", time);

    const can = allowed(s);
    show(card.goAhead, can.goAhead);
    show(card.check, can.check);
    show(card.cancel, can.cancel);
    show(card.cancelHint, can.cancel);
    card.cancelHint.textContent = can.cancel ? cancelHint(s) : "";
    show(card.controls, can.goAhead || can.check || can.cancel);
    renderHistory(card, s);

    const changedState = previous && (stateView(previous).key !== view.key || previous.say !== s.say);
    if (changedState) {
      if (stateView(previous).key !== view.key) setNote(card, "");
      announce(card.title.textContent + ": " + view.label + ". " + s.say);
    }
    // A control that has just gone (it did its job) must not drop keyboard focus to the page's top.
    if (hadFocus && hadFocus.closest("[hidden]")) card.state.focus();
    ui.empty.hidden = true;
  }

  function setNote(card, text, isError) {
    card.note.textContent = text;
    card.note.classList.toggle("note-error", Boolean(isError));
  }

  function announce(text) {
    ui.announcer.textContent = text;
  }

  function upsert(s) {
    if (!s || s.conversation_id !== conversationId) return;
    const previous = statuses.get(s.operation_id);
    if (previous && !notOlder(s, previous)) return; // a late answer must not undo a newer one
    statuses.set(s.operation_id, s);
    renderCard(s, previous);
    recordPresented(s);
    renderBanner();
  }

  // -- what the page showed, recorded for the text channel --------------------------------------

  const presenting = new Map(); // operation_id -> { busy, next }: one record in flight per action

  function recordPresented(s) {
    if (document.visibilityState !== "visible") return; // nobody is looking: nothing was presented
    const shown = s.state + "\n" + s.say;
    if (presentedAs.get(s.operation_id) === shown) return;
    presentedAs.set(s.operation_id, shown);
    const p = s.presented;
    if (p && p.channel === "text" && p.completed && p.state === s.state && p.text === s.say) return;
    const slot = presenting.get(s.operation_id) || { busy: false, next: null };
    presenting.set(s.operation_id, slot);
    slot.next = s.say;
    if (!slot.busy) sendPresented(s.operation_id, slot);
  }

  // One at a time, newest last: two records racing to the server could land in the wrong order and
  // leave an older sentence as what the page presented.
  async function sendPresented(op, slot) {
    slot.busy = true;
    try {
      while (slot.next !== null) {
        const text = slot.next;
        slot.next = null;
        try {
          upsert(await api("POST", actionPath(op, "presented"), { channel: "text", text, completed: true }));
        } catch (error) {
          // Refused for good (a closed record): let it be. Not reached: try again on the next render.
          if (error.status === 0 || error.status >= 500) presentedAs.delete(op);
        }
      }
    } finally {
      slot.busy = false;
    }
  }

  document.addEventListener("visibilitychange", () => {
    for (const s of statuses.values()) recordPresented(s);
  });

  // -- banner and call --------------------------------------------------------------------------

  function renderBanner() {
    if (!handoff) return;
    let work = handoff.work;
    const all = Array.from(statuses.values());
    if (work === "stopped" && all.some(reversing)) work = "continuing";
    const [title, detail, shape] = BANNERS[work] || BANNERS.idle;
    const reversal = work === "continuing" && handoff.work === "stopped";
    ui.banner.dataset.work = work;
    setIcon(ui.bannerIcon, shape);
    if (ui.bannerTitle.textContent !== title) ui.bannerTitle.textContent = title;
    const words = reversal ? "A confirmed request is being reversed. This page updates by itself." : detail;
    if (ui.bannerDetail.textContent !== words) ui.bannerDetail.textContent = words;
    document.title = title + " — your requests";
    ui.empty.hidden = all.length > 0;
  }

  const CALL_ENDINGS = {
    ended_by_user: "You ended the call.",
    hangup: "The call has ended.",
    dropped: "The call dropped.",
    ended_by_agent: "We ended the call.",
  };

  function callEnded(reason) {
    const ending = CALL_ENDINGS[reason] || "The call has ended.";
    return ending + " Nothing was cancelled: your requests carry on here.";
  }

  function renderCall() {
    const voice = handoff ? handoff.channels.voice : "unused";
    show(ui.call, voice !== "unused");
    const open = voice === "open";
    const hadFocus = document.activeElement === ui.endCall;
    show(ui.endCall, open);
    show($("call-hint"), open);
    if (open) {
      ui.callText.textContent = "You're on a call with us.";
    } else if (voice === "closed") {
      ui.callText.textContent = callEnded((handoff.channel_reasons || {}).voice);
    }
    if (hadFocus && !open) ui.callText.focus();
  }

  // -- refreshing -------------------------------------------------------------------------------

  let handoffBusy = false;
  let handoffAgain = false;

  async function refreshHandoff() {
    if (handoffBusy) {
      handoffAgain = true; // a burst of events is one more fetch, not one each
      return;
    }
    handoffBusy = true;
    try {
      do {
        handoffAgain = false;
        try {
          const next = await api("GET", conversationPath + "/handoff");
          handoff = next;
          for (const s of next.actions) upsert(s);
          renderBanner();
          renderCall();
        } catch (error) {
          if (!handoff) showUnreachable(error);
        }
      } while (handoffAgain);
    } finally {
      handoffBusy = false;
    }
  }

  function showUnreachable(error) {
    const [title, detail, shape] = BANNERS.unreachable;
    ui.banner.dataset.work = "unreachable";
    setIcon(ui.bannerIcon, shape);
    ui.bannerTitle.textContent = title;
    const refused = error.status === 401;
    ui.bannerDetail.textContent = refused ? "This link can't be used: " + error.message + "." : detail;
  }

  // -- the live stream --------------------------------------------------------------------------

  let source = null;
  let retryMs = 500;
  let retryTimer = null;

  function setConnection(state) {
    const words = {
      connecting: "Connecting for live updates…",
      live: "Live: changes appear here by themselves.",
      lost: "Connection lost. Reconnecting… What you see may be out of date.",
    };
    ui.connection.dataset.connection = state;
    ui.connectionText.textContent = words[state];
  }

  function connect() {
    clearTimeout(retryTimer);
    retryTimer = null;
    if (source) source.close();
    const url = conversationPath + "/stream" + (token ? "?t=" + encodeURIComponent(token) : "");
    const stream = new EventSource(url);
    source = stream;
    if (ui.connection.dataset.connection !== "lost") setConnection("connecting");
    stream.addEventListener("open", () => {
      if (source !== stream) return;
      retryMs = 500;
      setConnection("live");
      refreshHandoff(); // anything that changed while we were away
    });
    stream.addEventListener("action", (event) => {
      if (source !== stream) return;
      try {
        upsert(JSON.parse(event.data));
      } catch (error) {
        return;
      }
      refreshHandoff();
    });
    stream.addEventListener("error", () => {
      if (source !== stream) return;
      // Reconnect on our own schedule (the browser's own retry gives up on an HTTP error status);
      // the server sends the current state first, so nothing missed stays missed.
      stream.close();
      source = null;
      setConnection("lost");
      retryTimer = setTimeout(connect, retryMs + Math.random() * 250);
      retryMs = Math.min(retryMs * 2, 5000);
    });
  }

  window.addEventListener("online", () => {
    if (ui.connection.dataset.connection !== "live") connect();
  });

  // -- controls ---------------------------------------------------------------------------------

  async function press(control, busyLabel, run) {
    if (control.getAttribute("aria-disabled") === "true") return null;
    const label = control.querySelector(".button-label");
    const idle = label.textContent;
    // aria-disabled, not disabled: a disabled button would drop the keyboard focus.
    control.setAttribute("aria-disabled", "true");
    label.textContent = busyLabel;
    try {
      return await run();
    } finally {
      control.removeAttribute("aria-disabled");
      label.textContent = idle;
    }
  }

  async function goAheadPressed(op) {
    const card = cards.get(op);
    setNote(card, "");
    await press(card.goAhead, "Sending…", async () => {
      try {
        upsert(await api("POST", actionPath(op, "authorize"), { by: BY }));
        setNote(card, "Thanks: it's on its way. This page will show the answer.");
      } catch (error) {
        setNote(card, "That didn't work: " + error.message + ".", true);
      }
    });
  }

  async function cancelPressed(op) {
    const card = cards.get(op);
    setNote(card, "");
    await press(card.cancel, "Cancelling…", async () => {
      try {
        const request = { by: BY, reason: "cancelled on the text page" };
        const s = await api("POST", actionPath(op, "cancel"), request);
        // The returned status, and its sentence, is the truth about an in-flight cancel: the card
        // now says (and flags) that it is checked before it can be cancelled.
        upsert(s);
      } catch (error) {
        setNote(card, "I couldn't cancel it: " + error.message + ".", true);
      }
    });
  }

  async function checkPressed(op) {
    const card = cards.get(op);
    setNote(card, "");
    await press(card.check, "Checking…", async () => {
      try {
        const s = await api("POST", actionPath(op, "reconcile") + "?wait=5");
        upsert(s);
        if (s.state === "unknown") {
          const words = "Checked just now: still no answer I can rely on.";
          setNote(card, words + " I'll keep checking and update this page.");
        }
      } catch (error) {
        setNote(card, "I couldn't check just now: " + error.message + ".", true);
      }
    });
  }

  setIcon(ui.endCall.querySelector(".button-icon"), "hangup");
  ui.endCall.addEventListener("click", () =>
    press(ui.endCall, "Ending…", async () => {
      ui.callNote.textContent = "";
      try {
        await api("POST", conversationPath + "/events", {
          type: "channel_closed",
          channel: "voice",
          reason: "ended_by_user",
        });
        // Said at once, where the focus goes: ending the call is not cancelling anything.
        ui.callText.textContent = callEnded("ended_by_user");
        show(ui.endCall, false);
        show($("call-hint"), false);
        ui.callText.focus();
        await refreshHandoff();
      } catch (error) {
        ui.callNote.textContent = "I couldn't end the call: " + error.message + ".";
      }
    }),
  );

  // -- start ------------------------------------------------------------------------------------

  async function start() {
    try {
      // The text channel is open: recorded, and anything that may be in flight is looked up now.
      await api("POST", conversationPath + "/events", { type: "channel_opened", channel: "text" });
    } catch (error) {
      // Still show what the records say; the stream and the handoff report their own trouble.
    }
    await refreshHandoff();
    connect();
    body.dataset.ready = "true";
  }

  start();
})();

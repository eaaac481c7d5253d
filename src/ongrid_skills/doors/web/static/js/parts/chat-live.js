// Live part: a chat's conversation (data-part="chat-live"), drawn from the run's typed events.
//
// The server rendered the stored transcript (the page without JavaScript); here it is drawn
// again from the run's event stream (data-events, from its first event), then kept current:
// the user's messages, the model's text as it streams (text_delta), each tool call with its
// args, stderr lines, progress, then its status, duration and result or error envelope. JSON
// is indented, a long text folds (details/summary), and everything a model or a skill wrote
// goes into the page as text (textContent), its control characters made visible: never as
// markup. A call waiting for an approval shows its card, rendered by the server for this
// session (GET /chat/<run>/approvals/<id>, autoescaped) and fetched again whenever the
// approvals stream says its request changed (signed in the inbox, the CLI, a webhook link)
// and when the call ends. At "end" the status and the controls (Stop, the form to continue)
// are fetched again from the page. A run's delegated runs ("child" events) are drawn the same
// way inside the delegate call that started them, their persona named, with a link to their
// own page; their approval cards are theirs (GET /chat/<child run>/approvals/<id>).

import { mountParts } from "../app.js";
import { follow } from "../live.js";

const ID = /^[0-9a-f]{1,64}$/;
const STATUS = /^[a-z_]+$/;
const CONTROL = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]/g;
const FOLD_LINES = 12;
const FOLD_CHARS = 1500;
const CHANGES = ["requested", "signed", "approved", "rejected", "expired", "cancelled", "void", "reviewed", "previewed"];

export function visible(text) {
  return String(text ?? "").replace(CONTROL, (c) => {
    const code = c.codePointAt(0);
    return code < 0x100
      ? `\\x${code.toString(16).padStart(2, "0")}`
      : `\\u${code.toString(16).padStart(4, "0")}`;
  });
}

function readable(value) {
  if (typeof value !== "string") return { text: JSON.stringify(value, null, 2) ?? "", json: true };
  try {
    return { text: JSON.stringify(JSON.parse(value), null, 2), json: true };
  } catch {
    return { text: value, json: false };
  }
}

function el(tag, className, text) {
  const element = document.createElement(tag);
  if (className) element.className = className;
  if (text !== undefined) element.textContent = text;
  return element;
}

// A text block: <pre>, inside a closed <details> when long.
function block(label, value) {
  const { text, json } = readable(value);
  const shown = visible(text);
  const pre = el("pre", "code", shown);
  pre.tabIndex = 0;
  const lines = shown.split("\n").length;
  if (lines <= FOLD_LINES && shown.length <= FOLD_CHARS) {
    pre.setAttribute("aria-label", label);
    return pre;
  }
  const fold = el("details", "fold");
  fold.append(el("summary", "", `${label} (${lines} lines${json ? ", JSON" : ""})`), pre);
  return fold;
}

function seconds(ms) {
  const value = Number(ms) / 1000;
  return Number.isFinite(value) ? `${value < 10 ? value.toFixed(2) : value.toFixed(1)} s` : "";
}

export function mount(element) {
  const log = element.querySelector("ol.chat-log");
  const state = element.querySelector(".live-state");
  const runId = element.dataset.run;
  const user = element.dataset.user || "User";
  if (!log || !ID.test(runId || "")) return;
  const calls = new Map(); // call id (a delegated run's: scoped) -> its parts
  const cards = new Map(); // approval id shown -> the run that asked (its card's URL)
  const children = new Map(); // delegated run id -> its view
  let approvals = null; // the approvals stream, once a card is shown

  const say = (text) => {
    if (state) state.textContent = text;
  };

  // The run's status badge at the top of the page, kept current in words.
  const showStatus = (status) => {
    const badge = document.querySelector(".run-status .status");
    if (!badge || !STATUS.test(status) || element.dataset.status === status) return;
    element.dataset.status = status;
    badge.textContent = status.replaceAll("_", " ");
    badge.className = `status status-${status}`;
  };

  const loadCard = async (id) => {
    const asker = cards.get(id) || runId;
    const response = await fetch(`/chat/${asker}/approvals/${id}`, {
      headers: { accept: "text/html" },
    });
    if (!response.ok) throw new Error(`the card answered ${response.status}`);
    const parsed = new DOMParser().parseFromString(await response.text(), "text/html");
    const card = parsed.body.firstElementChild;
    if (!card || !card.matches("div.chat-card") || card.dataset.approval !== id) return;
    const shown = document.getElementById(`approval-${id}`);
    if (!shown) return;
    const typed = shown.querySelector("textarea");
    const fresh = document.importNode(card, true);
    shown.replaceWith(fresh);
    const box = fresh.querySelector("textarea");
    if (typed && box) box.value = typed.value;
    fresh.classList.add("changed");
  };

  const refresh = (id) => {
    loadCard(id).catch((error) => say(`The approval card could not be updated (${error}).`));
  };

  const watchApprovals = () => {
    if (approvals) return;
    const handlers = {
      ended: () => say("Your session has ended: log in again."),
      lost: () => say("Live approval updates stopped: reload the page."),
    };
    for (const kind of CHANGES) {
      handlers[kind] = (data) => {
        const id = data && data.approval && data.approval.id;
        if (cards.has(id)) refresh(id);
      };
    }
    approvals = follow("/approvals/events", handlers);
  };

  // The events of one run drawn into one list: the page's run (top), or a run it delegated
  // to (drawn inside the delegate call that started it, its persona named).
  const view = (list, asker, speaker, top) => {
    let reply = null; // the model's turn being written
    let streaming = null; // its text, as the deltas come
    let lastReply = null; // the turn the next tool calls belong to

    const turn = (role, who) => {
      const item = el("li", `turn turn-${role}`);
      item.append(el("p", "speaker", who));
      list.append(item);
      return item;
    };

    const prose = (text) => el("div", "prose", visible(text));

    const callOf = (data) => {
      const known = calls.get(data.call_id);
      if (known) return known;
      const box = el("div", "tool-call");
      const status = el("span", "call-status", "running");
      const head = el("p", "call-head");
      head.append(el("span", "call-mark", "Tool"), " ", el("code", "", String(data.tool ?? "")), " ", status);
      const stderr = el("ol", "stderr");
      stderr.hidden = true;
      const progress = el("p", "progress");
      progress.hidden = true;
      box.append(head, block("Arguments", data.args ?? {}), stderr, progress);
      const holder = lastReply || reply || turn("assistant", speaker);
      holder.append(box);
      const parts = { box, status, stderr, progress, card: null, ended: false };
      calls.set(data.call_id, parts);
      return parts;
    };

    return {
      message: (data) => {
        if (data.role === "user") {
          reply = streaming = lastReply = null;
          turn("user", top ? user : "Task").append(prose(data.text));
          if (top) {
            showStatus("running");
            say("The agent is working…");
          }
        } else if (data.role === "assistant") {
          const target = reply || turn("assistant", speaker);
          if (streaming) streaming.textContent = visible(data.text);
          else if (data.text) target.insertBefore(prose(data.text), target.children[1] || null);
          lastReply = target;
          reply = streaming = null;
        } else {
          turn("system", "Note").append(prose(data.text));
        }
      },
      text_delta: (data) => {
        if (!reply) reply = turn("assistant", speaker);
        if (!streaming) {
          streaming = el("div", "prose", "");
          reply.append(streaming);
        }
        streaming.textContent += visible(data.text);
      },
      tool_start: (data) => {
        callOf(data);
        say(`${speaker} runs ${data.tool}…`);
      },
      stderr: (data) => {
        const call = callOf(data);
        call.stderr.hidden = false;
        call.stderr.append(el("li", "", visible(data.line) + (data.truncated ? " [line cut]" : "")));
      },
      stderr_truncated: (data) => {
        const call = callOf(data);
        call.stderr.hidden = false;
        call.stderr.append(el("li", "", `stderr over its budget after ${data.after_bytes} bytes: the rest is not kept`));
      },
      progress: (data) => {
        const call = callOf(data);
        call.progress.hidden = false;
        const total = data.total != null ? ` of ${data.total}` : "";
        call.progress.textContent = visible(`Progress ${data.progress}${total}${data.message ? `: ${data.message}` : ""}`);
      },
      approval_pending: (data) => {
        const call = callOf(data);
        const id = String(data.approval_id ?? "");
        const n = Number(data.signatures_required) || 1;
        call.status.textContent = "waiting for approval";
        if (top) showStatus("waiting_approval");
        say(n === 1 ? `${speaker} waits for a confirmation: see its card.` : `${speaker} waits for ${n} signatures: see its card.`);
        if (!ID.test(id)) return;
        const card = el("div", "chat-card status-card-pending", n === 1 ? "Waiting for a confirmation…" : `Waiting for ${n} signatures…`);
        card.id = `approval-${id}`;
        card.dataset.approval = id;
        call.box.append(card);
        call.card = id;
        cards.set(id, asker);
        refresh(id);
        watchApprovals();
      },
      tool_end: (data) => {
        const call = callOf(data);
        call.ended = true;
        const ok = data.status === "succeeded";
        call.status.textContent = `${String(data.status ?? "").replaceAll("_", " ")} in ${seconds(data.duration_ms)}`;
        call.box.classList.toggle("is-error", !ok);
        const result = el("div", `call-result${ok ? "" : " is-error"}`);
        const label = el("p", "result-label", ok ? "Result" : "Error");
        if (ID.test(String(data.execution_id ?? ""))) {
          const link = el("a", "", `execution ${data.execution_id.slice(0, 8)}`);
          link.href = `/executions/${data.execution_id}`;
          label.append(" · ", link);
        }
        result.append(label, block(ok ? "Result" : "Error", data.content ?? ""));
        if (data.content_truncated) result.append(el("p", "hint", "Cut at 64 KiB here: the execution's page has all of it."));
        call.box.append(result);
        if (call.card) refresh(call.card);
        if (top && ![...calls.values()].some((c) => c.card && !c.ended)) showStatus("running");
        say("The agent is working…");
      },
      done: (data) => {
        reply = streaming = lastReply = null;
        const status = String(data.status ?? "").replaceAll("_", " ");
        const error = data.error ? `: ${data.error.code} ${data.error.message}` : "";
        if (!top) {
          list.append(el("li", "turn turn-system child-end", `${speaker} ended: ${status}${error}.`));
          return;
        }
        showStatus(String(data.status ?? ""));
        for (const call of calls.values()) {
          if (!call.ended) call.status.textContent = `no result: the run ended ${status}`;
          call.ended = true;
        }
        say(`The run ended: ${status}${error}.`);
      },
    };
  };

  const main = view(log, runId, "Agent", true);

  // A delegated run's events: drawn inside the delegate call that started it.
  const childView = (data) => {
    const known = children.get(data.run_id);
    if (known) return known;
    if (!ID.test(String(data.run_id ?? ""))) return null;
    const call = calls.get(data.parent_call_id);
    const persona = visible(String(data.persona ?? ""));
    const box = el("section", "child-run");
    box.dataset.run = data.run_id;
    box.dataset.depth = String(Number(data.depth) || 1);
    const head = el("p", "child-head", `Delegated to ${persona} · `);
    const link = el("a", "", `run ${data.run_id.slice(0, 8)}`);
    link.href = `/chat/${data.run_id}`;
    head.append(link);
    const list = el("ol", "chat-log child-log");
    box.append(head, list);
    if (call) call.box.append(box);
    else log.append(box);
    const made = view(list, data.run_id, persona, false);
    children.set(data.run_id, made);
    return made;
  };

  const handlers = {
    ...main,
    child: (data) => {
      const child = childView(data || {});
      const handle = child && child[String(data.event ?? "")];
      if (handle) handle(data.data || {});
    },
    end: () => {
      if (approvals) approvals.close();
      swap().catch((error) => say(`The run has ended; reload the page (${error}).`));
    },
    ended: () => say("Your session has ended: log in again to follow the run."),
    lost: () => say("Live updates stopped: reload the page."),
  };

  // What the user typed in a part that is replaced (the compose box, when the run's end
  // brings the page's new controls) goes into the new part: nothing typed is lost.
  const keepTyped = (old, fresh) => {
    for (const box of old.querySelectorAll("textarea[name]")) {
      const twin = fresh.querySelector(`textarea[name="${box.name}"]`);
      if (twin && box.value && !twin.value) twin.value = box.value;
    }
  };

  const swap = async () => {
    const response = await fetch(window.location.pathname, { headers: { accept: "text/html" } });
    if (!response.ok) throw new Error(`the page answered ${response.status}`);
    const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
    for (const part of document.querySelectorAll("[data-swap]")) {
      const replacement = fresh.querySelector(`[data-swap="${part.dataset.swap}"]`);
      if (!replacement) continue;
      const imported = document.importNode(replacement, true);
      const focused = part.contains(document.activeElement) ? document.activeElement : null;
      keepTyped(part, imported);
      part.replaceWith(imported);
      mountParts(imported);
      const again = focused && focused.name ? imported.querySelector(`textarea[name="${focused.name}"]`) : null;
      if (again) again.focus();
    }
    element.dataset.ended = "true";
  };

  log.replaceChildren();
  follow(element.dataset.events, handlers);
  element.dataset.live = "ready";
}

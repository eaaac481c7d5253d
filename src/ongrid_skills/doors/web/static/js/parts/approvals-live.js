// Live part: the approvals inbox (or one request's page), kept current without a reload.
//
// On an element with data-part="approvals-live" and data-events="<the inbox stream>" (and, on
// a request's page, data-only="<its id>"), holding lists <ol class="cards" data-holds="...">
// of cards <li class="card" data-id data-status>. Each event of the stream carries the request
// and its card as the server rendered it for this session (its buttons, its CSRF token): the
// new card replaces the one shown, or moves into the list that holds its status (data-holds
// names statuses; "decided" holds every status but pending), first or last as data-new says.
// A comment being typed in a card survives its update. Every stream (re)opens with the pending
// requests, then "ready": a card still shown as pending that was not among them changed while
// the stream was down, so it is asked again (GET /approvals/<id>/card).

import { mountParts } from "../app.js";
import { follow } from "../live.js";

const KINDS = ["requested", "signed", "approved", "rejected", "expired", "cancelled", "void", "reviewed", "previewed"];
const ID = /^[0-9a-f]{1,64}$/;
const KEEP_DECIDED = 50;

export function mount(element) {
  const only = element.dataset.only || null;
  const back = only ? "page" : "inbox";
  const status = element.querySelector(".live-state");
  let openedWith = new Set();
  let opening = true; // between a stream's start and its "ready": the pending requests again

  const say = (text) => {
    if (status) status.textContent = text;
  };

  const holds = (list, state) => {
    const held = (list.dataset.holds || "").split(" ");
    return held.includes(state) || (state !== "pending" && held.includes("decided"));
  };

  const cardFrom = (html) => {
    if (typeof html !== "string") return null;
    const template = document.createElement("template");
    template.innerHTML = html.trim();
    const card = template.content.firstElementChild;
    if (!card || !card.matches("li.card[data-id]") || !ID.test(card.dataset.id)) return null;
    return card;
  };

  const shown = (id) => element.querySelector(`li.card[data-id="${id}"]`);

  // What was typed into a card's comment, put back once its new version is in the page
  // (set after the insertion: a node moved in from the template's inert document may not
  // keep a value given before).
  const typedIn = (old) => {
    const typed = old && old.querySelector("textarea");
    if (!typed) return () => {};
    const value = typed.value;
    const focused = document.activeElement === typed;
    const [start, end] = [typed.selectionStart, typed.selectionEnd];
    return (card) => {
      const fresh = card.querySelector("textarea");
      if (!fresh || !card.isConnected) return;
      fresh.value = value;
      if (focused) {
        fresh.focus();
        fresh.setSelectionRange(start, end);
      }
    };
  };

  const recount = () => {
    for (const list of element.querySelectorAll("ol.cards")) {
      const key = list.dataset.holds;
      if (key === "decided") {
        while (list.children.length > KEEP_DECIDED) list.lastElementChild.remove();
      }
      for (const count of element.querySelectorAll(`[data-count-for="${key}"]`)) {
        count.textContent = String(list.children.length);
      }
      for (const empty of element.querySelectorAll(`[data-empty-for="${key}"]`)) {
        empty.hidden = list.children.length > 0;
      }
    }
  };

  const place = (card) => {
    const id = card.dataset.id;
    if (only && id !== only) return;
    const old = shown(id);
    const lists = [...element.querySelectorAll("ol.cards")];
    const list = lists.find((candidate) => holds(candidate, card.dataset.status));
    const restore = typedIn(old);
    if (old && old.parentElement === list) {
      old.replaceWith(card);
    } else {
      if (old) old.remove();
      if (!list) {
        recount();
        return;
      }
      if (list.dataset.new === "first") list.prepend(card);
      else list.append(card);
    }
    restore(card);
    if (!opening) card.classList.add("changed");
    mountParts(card);
    recount();
  };

  const refetch = (id) => {
    fetch(`/approvals/${id}/card?back=${back}`, { headers: { accept: "text/html" } })
      .then((response) => (response.ok ? response.text() : null))
      .then((html) => {
        const card = html && cardFrom(html);
        if (card) place(card);
      })
      .catch(() => say("Live updates stopped: reload the page."));
  };

  const handlers = {
    ready: (data) => {
      for (const card of element.querySelectorAll('li.card[data-status="pending"]')) {
        if (!openedWith.has(card.dataset.id)) refetch(card.dataset.id);
      }
      openedWith = new Set();
      opening = false;
      element.dataset.live = "ready";
      say(`Live: ${Number(data.pending) || 0} pending, updates appear here as they happen.`);
    },
    end: () => {
      element.dataset.live = "ended";
      say("Your session has ended: log in again to follow the inbox.");
    },
    ended: () => handlers.end(),
    lost: () => {
      element.dataset.live = "lost";
      say("Live updates stopped: reload the page.");
    },
  };
  for (const kind of KINDS) {
    handlers[kind] = (data) => {
      const card = cardFrom(data.html);
      if (!card) return;
      if (kind === "requested") openedWith.add(card.dataset.id);
      place(card);
      const asked = data.approval || {};
      if (!opening) say(`${kind}: ${asked.skill} (asked by ${asked.requested_by})`);
    };
  }
  const source = follow(element.dataset.events, handlers);
  source.addEventListener("open", () => {
    openedWith = new Set();
    opening = true;
  });
}

// Live part: the hosts table, kept current without a reload.
//
// On an element with data-part="hosts-live", data-events="<the hosts stream>" and data-now (the
// server's clock when it rendered the page), holding <div data-holds="hosts"> with the table.
// Each "hosts" event carries the table as the server rendered it, the server's clock then, and
// each host's state: the table is replaced, a host whose state changed is highlighted and said
// in words in the live-state line (for screen readers too). Every second the "… ago" of each
// last heartbeat is counted again, on the server's clock (a browser whose clock is wrong still
// counts right).

import { follow } from "../live.js";

export function mount(element) {
  const holder = element.querySelector("[data-holds='hosts']");
  const status = element.querySelector(".live-state");
  if (!holder) return;
  let skew = clockSkew(Number(element.dataset.now));
  let known = statesIn(holder);

  const say = (text) => {
    if (status) status.textContent = text;
  };

  const tick = () => {
    const now = Date.now() / 1000 + skew;
    for (const time of holder.querySelectorAll("time[data-at]")) {
      const at = Number(time.dataset.at);
      if (Number.isFinite(at)) time.textContent = ago(now - at);
    }
  };

  follow(element.dataset.events, {
    hosts: (data) => {
      if (typeof data.html !== "string") return;
      const template = document.createElement("template");
      template.innerHTML = data.html.trim();
      holder.replaceChildren(template.content);
      skew = clockSkew(Number(data.now));
      const fresh = statesIn(holder);
      const news = [];
      for (const [host, online] of fresh) {
        if (known.get(host) === online) continue;
        news.push(`${host} is ${online ? "online" : "offline"}`);
        const row = holder.querySelector(`tr[data-host="${CSS.escape(host)}"]`);
        if (row) row.classList.add("changed");
      }
      known = fresh;
      if (news.length) say(`${news.join("; ")} (${new Date().toLocaleTimeString()}).`);
      tick();
    },
    end: () => say("Your session has ended: log in again to follow the hosts."),
    ended: () => say("Your session has ended: log in again to follow the hosts."),
    lost: () => say("Live updates stopped: reload the page to see the hosts as they are."),
  });
  const timer = setInterval(() => {
    if (!element.isConnected) clearInterval(timer);
    else tick();
  }, 1000);
}

function clockSkew(serverNow) {
  return Number.isFinite(serverNow) ? serverNow - Date.now() / 1000 : 0;
}

function statesIn(root) {
  const states = new Map();
  for (const row of root.querySelectorAll("tr[data-host]")) {
    states.set(row.dataset.host, row.dataset.online === "yes");
  }
  return states;
}

// As the server's "ago" filter says it (templates.py).
function ago(seconds) {
  const s = Math.floor(seconds);
  if (s <= 0) return "just now";
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min ago`;
  return `${Math.floor(s / 86400)} d ago`;
}

// Live part: an execution's status badge, kept current while it runs.
//
// On an element with data-part="execution-status" and data-events="<the execution's event
// stream>", holding a .status badge: each "status" event and the final "end" update the
// badge's text and class.

import { follow } from "../live.js";

export function mount(element) {
  const badge = element.querySelector(".status");
  if (!badge) return;
  const show = (status) => {
    if (typeof status !== "string" || !/^[a-z_]+$/.test(status)) return;
    badge.textContent = status.replaceAll("_", " ");
    badge.className = `status status-${status}`;
    element.dataset.status = status;
  };
  follow(element.dataset.events, {
    status: (data) => show(data.status),
    end: (execution) => show(execution.status),
    ended: () => badge.setAttribute("title", "your session has ended: log in again"),
    lost: () => badge.setAttribute("title", "live updates stopped: reload the page"),
  });
}

// Live part: an execution's page while the call runs (data-part="execution-live").
//
// The server rendered the timeline so far and put the stream's URL, starting after the last
// event it listed, in data-events. Here each event is appended as it comes (stderr lines with
// their time, progress moving the bar, status changes updating the badge); when the browser
// reconnects it resumes after the last id it saw. At "end" the page is fetched again and its
// parts marked data-swap (facts, cancel button, the result or the error) replace the old ones.

import { follow } from "../live.js";
import { mount as mountCopy } from "./copy.js";

const STATUS = /^[a-z_]+$/;

function words(type, data) {
  switch (type) {
    case "stderr":
      return String(data.line ?? "") + (data.truncated ? " [line cut]" : "");
    case "progress": {
      const done = `${data.progress}${data.total != null ? ` / ${data.total}` : ""}`;
      return data.message ? `${done} ${data.message}` : done;
    }
    case "status":
      return String(data.status ?? "").replaceAll("_", " ") + (data.reason ? `: ${data.reason}` : "");
    case "stderr_truncated":
      return `stderr over its budget after ${data.after_bytes} bytes: the rest is not kept`;
    case "approval_pending":
      return `waiting for ${data.signatures_required} signature(s)`;
    default: {
      const { type: _type, ts: _ts, ...rest } = data;
      return JSON.stringify(rest);
    }
  }
}

export function mount(element) {
  const list = element.querySelector("ol.timeline");
  const empty = element.querySelector(".timeline-empty");
  const badge = element.querySelector(".live-status .status");
  const bar = element.querySelector("#progress");
  const barLine = element.querySelector(".progress-line");
  const barText = element.querySelector(".progress-text");
  const note = element.querySelector(".live-note");

  const showStatus = (status) => {
    if (!badge || typeof status !== "string" || !STATUS.test(status)) return;
    badge.textContent = status.replaceAll("_", " ");
    badge.className = `status status-${status}`;
    element.dataset.status = status;
  };

  const append = (type, data, event) => {
    const item = document.createElement("li");
    item.className = `event event-${type}`;
    if (event && event.lastEventId) item.dataset.seq = event.lastEventId;
    const time = document.createElement("time");
    const ts = typeof data.ts === "string" ? data.ts : "";
    time.dateTime = ts;
    time.textContent = ts.slice(11, 23);
    const kind = document.createElement("span");
    kind.className = "event-type";
    kind.textContent = type.replaceAll("_", " ");
    const text = document.createElement("span");
    text.className = "event-text";
    text.textContent = words(type, data);
    item.append(time, " ", kind, " ", text);
    list.append(item);
    if (empty) empty.hidden = true;
  };

  const progress = (data) => {
    if (!bar) return;
    barLine.hidden = false;
    if (typeof data.total === "number" && data.total > 0) {
      bar.max = data.total;
      bar.value = Math.min(Number(data.progress) || 0, data.total);
    } else {
      bar.removeAttribute("value"); // an indeterminate bar: no total to measure against
    }
    const text = words("progress", data);
    bar.textContent = text;
    barText.textContent = text;
  };

  const outcome = async () => {
    const response = await fetch(window.location.href, { headers: { accept: "text/html" } });
    if (!response.ok) throw new Error(`the page answered ${response.status}`);
    const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
    for (const part of element.querySelectorAll("[data-swap]")) {
      const replacement = fresh.querySelector(`[data-swap="${part.dataset.swap}"]`);
      if (replacement) part.replaceWith(document.importNode(replacement, true));
    }
    for (const button of element.querySelectorAll('[data-part="copy"]')) mountCopy(button);
  };

  const handlers = {
    status: (data, event) => {
      showStatus(data.status);
      append("status", data, event);
    },
    progress: (data, event) => {
      progress(data);
      append("progress", data, event);
    },
    end: (execution) => {
      showStatus(execution.status);
      element.dataset.ended = "true";
      outcome().catch((error) => {
        note.hidden = false;
        note.textContent = `The call has ended; reload the page for its outcome (${error}).`;
      });
    },
    ended: () => {
      note.hidden = false;
      note.textContent = "Your session has ended: log in again to follow the call.";
    },
    lost: () => {
      note.hidden = false;
      note.textContent = "Live updates stopped: reload the page.";
    },
  };
  for (const type of ["stderr", "stderr_truncated", "approval_pending", "done"]) {
    handlers[type] = (data, event) => append(type, data, event);
  }
  follow(element.dataset.events, handlers);
}

// Following a server's event stream (Server-Sent Events) from a live part.
//
// follow(url, handlers) opens an EventSource on a same-origin URL (the session cookie goes
// with it) and calls handlers[type](data, event) for each event of that type, data parsed from
// JSON. The stream ends with an "end" event: its handler runs, then the stream is closed (else
// the browser would reconnect). When the connection drops, the browser reconnects by itself
// and the server goes on after the last event id it saw; handlers.lost() runs if the stream
// is refused for good (a 401 once the session has ended, a 404). A stream whose session ends
// while it is open (logout, expiry, a revoked token) gets a last "error" event with data
// ({"error": {"code": "unauthorized", …}}): the stream is closed and handlers.ended(data) runs
// (handlers.lost() when there is none).

export function follow(url, handlers) {
  const source = new EventSource(url);
  for (const [type, handler] of Object.entries(handlers)) {
    if (type === "end" || type === "lost" || type === "ended") continue;
    source.addEventListener(type, (event) => handler(JSON.parse(event.data), event));
  }
  source.addEventListener("end", (event) => {
    source.close();
    if (handlers.end) handlers.end(JSON.parse(event.data), event);
  });
  source.addEventListener("error", (event) => {
    if (event.data) {
      source.close();
      if (handlers.ended) handlers.ended(JSON.parse(event.data), event);
      else if (handlers.lost) handlers.lost();
      return;
    }
    if (source.readyState === EventSource.CLOSED && handlers.lost) handlers.lost();
  });
  return source;
}

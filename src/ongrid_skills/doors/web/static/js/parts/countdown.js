// Live part: the time left before a request expires, counted down every second.
//
// On an element with data-expires (UNIX seconds, the server's expiry) and data-now (the server's
// clock when it rendered the element): the difference between the two clocks is kept, so a
// browser whose clock is wrong still counts the server's time. At zero it says "expiring": the
// server decides, and the inbox replaces the card when the server says the request expired.

export function mount(element) {
  const expires = Number(element.dataset.expires);
  const serverNow = Number(element.dataset.now);
  if (!Number.isFinite(expires) || !Number.isFinite(serverNow)) return;
  const skew = serverNow - Date.now() / 1000;
  element.title = element.textContent.trim();
  let timer = null;
  const tick = () => {
    if (!element.isConnected) {
      clearInterval(timer);
      return;
    }
    const left = Math.floor(expires - (Date.now() / 1000 + skew));
    element.textContent = left > 0 ? `${duration(left)} left` : "expiring…";
    element.classList.toggle("soon", left < 300);
  };
  tick();
  timer = setInterval(tick, 1000);
}

function duration(seconds) {
  const h = Math.floor(seconds / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  const s = seconds % 60;
  if (h) return `${h} h ${m} min`;
  if (m) return `${m} min ${s} s`;
  return `${s} s`;
}

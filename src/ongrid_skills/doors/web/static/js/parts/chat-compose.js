// Live part: a chat's message form (data-part="chat-compose"): Ctrl+Enter (or Cmd+Enter) in
// its text box sends it, as the Send button does; the button is disabled once sent, so a
// second press does not start a second run.

export function mount(form) {
  const box = form.querySelector("textarea");
  const button = form.querySelector('button[type="submit"]');
  if (box) {
    box.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        form.requestSubmit();
      }
    });
  }
  form.addEventListener("submit", () => {
    if (button) window.setTimeout(() => { button.disabled = true; }, 0);
  });
}

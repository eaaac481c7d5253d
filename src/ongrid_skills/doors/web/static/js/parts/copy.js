// Live part: a button that copies the text of another element (data-part="copy",
// data-copy="<the element's id>"). Hidden without JavaScript; says what happened in the
// nearest .copy-status (a live region).

export function mount(button) {
  const source = document.getElementById(button.dataset.copy || "");
  if (!source) return;
  const status = button.parentElement?.querySelector(".copy-status");
  const say = (text) => {
    if (status) status.textContent = text;
  };
  button.hidden = false;
  button.addEventListener("click", async () => {
    const text = source.textContent;
    try {
      await navigator.clipboard.writeText(text);
      say("Copied.");
    } catch {
      // No clipboard API here (an insecure origin): select the text for Ctrl+C instead.
      const range = document.createRange();
      range.selectNodeContents(source);
      const selection = window.getSelection();
      selection.removeAllRanges();
      selection.addRange(range);
      say("Selected: press Ctrl+C to copy.");
    }
  });
}

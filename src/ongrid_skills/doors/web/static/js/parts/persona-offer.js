// Live part: what the chosen persona is offered, beside the run form's persona picker.
//
// The server lists every persona with its mode and what it is offered (the gate's rule) inside
// a <details data-part="persona-offer">, each as a section with data-persona="<name>". Here only
// the chosen one is shown, opened, and kept in step with the #persona select.

export function mount(element) {
  const select = document.getElementById("persona");
  if (!select) return;
  const sections = [...element.querySelectorAll("section[data-persona]")];
  const summary = element.querySelector("summary");
  const allLabel = summary ? summary.textContent : "";
  const show = () => {
    const chosen = select.value;
    for (const section of sections) section.hidden = chosen !== "" && section.dataset.persona !== chosen;
    if (summary) summary.textContent = chosen ? `What ${chosen} is offered` : allLabel;
    if (chosen) element.open = true;
  };
  select.addEventListener("change", show);
  show();
}

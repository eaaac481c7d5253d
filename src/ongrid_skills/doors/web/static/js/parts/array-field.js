// Live part: the rows of an array field of the run form (data-part="array-field").
//
// Without JavaScript the form shows the values and one empty row, and "Add a row" posts the
// form back for one more. Here "Add a row" adds it in place (a copy of the last row, emptied)
// and each row gets a "Remove" button; the last row left is emptied rather than removed. Rows
// share one field name: the server reads them in order and skips the empty ones.

export function mount(element) {
  const list = element.querySelector("ol.rows");
  const add = element.querySelector("button.add-row");
  if (!list || !add) return;
  const legend = element.querySelector(".arg-name");
  const name = legend ? legend.textContent : "item";

  const renumber = () => {
    list.querySelectorAll("li.row").forEach((row, index) => {
      const control = row.querySelector("input, select, textarea");
      if (control) control.setAttribute("aria-label", `${name}, item ${index + 1}`);
      const remove = row.querySelector("button.remove-row");
      if (remove) remove.setAttribute("aria-label", `Remove ${name}, item ${index + 1}`);
    });
  };

  const wire = (row) => {
    const remove = row.querySelector("button.remove-row");
    if (!remove) return;
    remove.hidden = false;
    remove.addEventListener("click", () => {
      const rows = list.querySelectorAll("li.row");
      if (rows.length > 1) {
        const next = row.nextElementSibling || row.previousElementSibling;
        row.remove();
        renumber();
        next.querySelector("input, select, textarea")?.focus();
      } else {
        const control = row.querySelector("input, select, textarea");
        if (control) control.value = "";
      }
    });
  };

  list.querySelectorAll("li.row").forEach(wire);
  add.addEventListener("click", (event) => {
    event.preventDefault();
    const rows = list.querySelectorAll("li.row");
    const row = rows[rows.length - 1].cloneNode(true);
    const control = row.querySelector("input, select, textarea");
    if (control) {
      control.value = "";
      control.id = `${control.id.replace(/-\d+$/, "")}-${Date.now()}`;
      control.removeAttribute("aria-invalid");
    }
    list.append(row);
    wire(row);
    renumber();
    control?.focus();
  });
}

// The console's one entry script, loaded by every page (as a module).
//
// Pages are complete without JavaScript: scripts only make parts of them live. A live part is
// an element with data-part="<name>"; this file imports ./parts/<name>.js and calls its
// mount(element); a part that inserts new HTML mounts the parts in it with mountParts(root).
// A part reads what it needs from the element's data-* attributes (never from
// inline script, which the Content-Security-Policy refuses) and never sees the API token: its
// requests carry the session cookie only, and a form post carries the page's CSRF token.

const PART_NAME = /^[a-z][a-z0-9-]{0,40}$/;

export function mountParts(root) {
  for (const element of root.querySelectorAll("[data-part]")) {
    const name = element.dataset.part;
    if (!PART_NAME.test(name)) {
      console.error(`ignoring a live part with a bad name: ${name}`);
      continue;
    }
    import(`./parts/${name}.js`)
      .then((part) => part.mount(element))
      .catch((error) => console.error(`live part ${name} failed: ${error}`));
  }
}

mountParts(document);

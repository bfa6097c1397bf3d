// Copy-link buttons (templates/activity/parts.html, invites.html): a click copies a link — a
// call's permalink (an <a data-copy-url>, made absolute) or the text of a field (data-copy-from, an id)
// — and the button says "Copied" for a moment; a screen reader hears it. One listener for the
// whole page, so rows pushed later work without setup.
(() => {
  "use strict";

  const SHOWN_MS = 2000;

  async function write(text) {
    if (navigator.clipboard && window.isSecureContext) {
      await navigator.clipboard.writeText(text);
      return;
    }
    // Plain HTTP on another host: the old way, through a selected text area.
    const area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.className = "visually-hidden";
    document.body.append(area);
    area.select();
    const done = document.execCommand("copy");
    area.remove();
    if (!done) throw new Error("copy refused");
  }

  function announcer() {
    let region = document.getElementById("link-copied");
    if (!region) {
      region = document.createElement("p");
      region.id = "link-copied";
      region.className = "visually-hidden";
      region.setAttribute("role", "status");
      document.body.append(region);
    }
    return region;
  }

  function say(button, state, words) {
    const label = button.querySelector(".copy-words") || button;
    button._words = button._words || label.textContent;
    clearTimeout(button._copyTimer);
    button.dataset.copied = state;
    label.textContent = words;
    announcer().textContent = words;
    button._copyTimer = setTimeout(() => {
      delete button.dataset.copied;
      label.textContent = button._words;
      announcer().textContent = "";
    }, SHOWN_MS);
  }

  function linkOf(button) {
    if (button.dataset.copyUrl) return new URL(button.dataset.copyUrl, location.href).href;
    const field = document.getElementById(button.dataset.copyFrom);
    return field ? field.value || field.textContent : "";
  }

  document.addEventListener("click", async (event) => {
    const button = event.target.closest("[data-copy-url], button[data-copy-from]");
    if (!button) return;
    // A call's link (an <a>) copies on a plain click; with a modifier it opens as a link does.
    if (button.tagName === "A") {
      if (event.button !== 0 || event.ctrlKey || event.metaKey || event.shiftKey || event.altKey) return;
      event.preventDefault();
    }
    try {
      await write(linkOf(button));
      say(button, "yes", "Copied");
    } catch {
      say(button, "failed", "Copy failed");
    }
  });
})();

// Copying for the copy buttons of output.js (a block's text) and people.js (a link), on every
// page (base.html loads it first). koruweb.copy(button, textOf, region) writes textOf() to the
// clipboard; the button says "Copied" or "Copy failed" for a moment (in its .copy-words, if it
// has one) and so does the status region `region` (an id), so a screen reader hears it.
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

  function announcer(id) {
    let region = document.getElementById(id);
    if (!region) {
      region = document.createElement("p");
      region.id = id;
      region.className = "visually-hidden";
      region.setAttribute("role", "status");
      document.body.append(region);
    }
    return region;
  }

  function say(button, region, state, words) {
    const label = button.querySelector(".copy-words") || button;
    button._words = button._words || label.textContent;
    clearTimeout(button._copyTimer);
    button.dataset.copied = state;
    label.textContent = words;
    announcer(region).textContent = words;
    button._copyTimer = setTimeout(() => {
      delete button.dataset.copied;
      label.textContent = button._words;
      announcer(region).textContent = "";
    }, SHOWN_MS);
  }

  window.koruweb = window.koruweb || {};
  window.koruweb.copy = async (button, textOf, region) => {
    try {
      await write(textOf());
      say(button, region, "yes", "Copied");
    } catch {
      say(button, region, "failed", "Copy failed");
    }
  };
})();

// Copy buttons on output and diff blocks (activity/templatetags/output.py): a click (or Enter or
// Space, it is a button) copies the block's plain text, a diff as a unified diff again; the button
// says "Copied" for a moment and a screen reader hears it. One listener for the whole page, so
// blocks pushed later (live rows) work without setup.
(() => {
  "use strict";

  const SHOWN_MS = 2000;
  const MARKS = { add: "+", del: "-", ctx: " " };

  function diffText(block) {
    const lines = [`--- ${block.dataset.from}`, `+++ ${block.dataset.to}`];
    for (const row of block.querySelectorAll("table.diff tr")) {
      const code = row.querySelector("td.code")?.textContent ?? "";
      const kind = row.className;
      lines.push(kind in MARKS ? MARKS[kind] + code : code);
    }
    return lines.join("\n");
  }

  function blockText(block) {
    if (block.classList.contains("diff-file")) return diffText(block);
    return block.querySelector("pre")?.textContent ?? "";
  }

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
    let region = document.getElementById("output-copied");
    if (!region) {
      region = document.createElement("p");
      region.id = "output-copied";
      region.className = "visually-hidden";
      region.setAttribute("role", "status");
      document.body.append(region);
    }
    return region;
  }

  function say(button, state, words) {
    clearTimeout(button._copyTimer);
    button.dataset.copied = state;
    button.textContent = words;
    announcer().textContent = words;
    button._copyTimer = setTimeout(() => {
      delete button.dataset.copied;
      button.textContent = "Copy";
      announcer().textContent = "";
    }, SHOWN_MS);
  }

  document.addEventListener("click", async (event) => {
    const button = event.target.closest(".output-block button.copy");
    if (!button) return;
    const block = button.closest(".output-block");
    try {
      await write(blockText(block));
      say(button, "yes", "Copied");
    } catch {
      say(button, "failed", "Copy failed");
    }
  });
})();

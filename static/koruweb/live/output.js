// Copy buttons on output and diff blocks (activity/templatetags/output.py): a click (or Enter or
// Space, it is a button) copies the block's plain text, a diff as a unified diff again; the button
// says "Copied" for a moment and a screen reader hears it (clipboard.js). One listener for the
// whole page, so blocks pushed later (live rows) work without setup.
(() => {
  "use strict";

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

  document.addEventListener("click", (event) => {
    const button = event.target.closest(".output-block button.copy");
    if (!button) return;
    const block = button.closest(".output-block");
    window.koruweb.copy(button, () => blockText(block), "output-copied");
  });
})();

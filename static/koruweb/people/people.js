// Copy-link buttons (templates/activity/pushed/parts.html, invites.html): a click copies a link — a
// call's permalink (an <a data-copy-url>, made absolute) or the text of a field (data-copy-from, an id)
// — and the button says "Copied" for a moment; a screen reader hears it (clipboard.js). One
// listener for the whole page, so rows pushed later work without setup.
(() => {
  "use strict";

  function linkOf(button) {
    if (button.dataset.copyUrl) return new URL(button.dataset.copyUrl, location.href).href;
    const field = document.getElementById(button.dataset.copyFrom);
    return field ? field.value || field.textContent : "";
  }

  document.addEventListener("click", (event) => {
    const button = event.target.closest("[data-copy-url], button[data-copy-from]");
    if (!button) return;
    // A call's link (an <a>) copies on a plain click; with a modifier it opens as a link does.
    if (button.tagName === "A") {
      if (event.button !== 0 || event.ctrlKey || event.metaKey || event.shiftKey || event.altKey) return;
      event.preventDefault();
    }
    window.koruweb.copy(button, () => linkOf(button), "link-copied");
  });
})();

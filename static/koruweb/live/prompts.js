// Answering prompts without misclicks. Buttons of a prompt that just appeared ignore clicks
// for a moment (CSS: .prompt-box.awaiting button), an "always" option asks to be confirmed,
// and the number keys choose an option only in the prompt that has the focus.
(() => {
  const CONFIRM_MS = 5000;

  document.addEventListener(
    "click",
    (event) => {
      const button = event.target.closest("button[data-confirm]");
      if (!button || button.dataset.confirming === "yes") return;
      event.preventDefault();
      event.stopImmediatePropagation();
      button.dataset.confirming = "yes";
      button.dataset.label = button.textContent;
      button.textContent = `Click again: ${button.dataset.label}`;
      setTimeout(() => {
        if (!button.isConnected) return;
        button.dataset.confirming = "";
        button.textContent = button.dataset.label;
      }, CONFIRM_MS);
    },
    true,
  );

  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey || !/^[1-9]$/.test(event.key)) return;
    if (event.target.closest("input, textarea, select")) return;
    const prompt = event.target.closest("[data-prompt]");
    if (!prompt) return; // shortcuts act only on the focused prompt
    const button = prompt.querySelector(`button[data-key="${event.key}"]`);
    if (button) {
      event.preventDefault();
      button.click();
    }
  });

  // Clicking anywhere in a prompt gives it the focus, so its shortcuts apply.
  document.addEventListener("click", (event) => {
    const prompt = event.target.closest("[data-prompt]");
    if (prompt && !event.target.closest("button, input, label, a")) prompt.focus();
  });
})();

// A comment sent is a comment gone from its box: the push brings it back as part of the row. A
// refused one (its reason in the form's status) stays in the box, to send again.
document.addEventListener("htmx:after:request", (event) => {
  const form = event.target.closest?.("form.comment-form");
  if (!form || (event.detail?.ctx?.response?.status ?? 500) >= 400) return;
  form.reset();
  form.querySelector(".comment-said")?.replaceChildren();
});

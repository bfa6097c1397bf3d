// Accessibility on every page: a keyboard path to a waiting prompt in two keys (Tab, Enter: the
// link first in tab order; or Alt+Shift+W), and, on a page with a live region (#prompt-announcer,
// the chat page), a spoken line for each new prompt. Prompts are pushed and answered live, so both follow the DOM.
(() => {
  // Only where this person may answer: a viewer's page hides the answer forms.
  const WAITING = '.answering[data-can-answer="true"] .prompt-box.awaiting[data-prompt]';

  const waiting = () => document.querySelector(WAITING);

  // The link stays first in tab order; it shows only while a prompt waits on this page.
  const syncJump = () => {
    const jump = document.getElementById("jump-waiting");
    if (!jump) return;
    const prompt = waiting();
    jump.hidden = !prompt;
    if (prompt) jump.setAttribute("href", `#${prompt.id}`);
  };

  // What a prompt asks, in one line for a screen reader.
  const asked = (prompt) => {
    const words = prompt.querySelector(".asked");
    const text = (words ? words.textContent : "The agent asks for an answer").replace(/\s+/g, " ").trim();
    return text.length > 200 ? `${text.slice(0, 200)}…` : text;
  };

  const announced = new Set();
  const announce = (prompts) => {
    const region = document.getElementById("prompt-announcer");
    if (!region || !prompts.length) return;
    const first = asked(prompts[0]);
    const more = prompts.length > 1 ? ` ${prompts.length - 1} more prompt${prompts.length > 2 ? "s" : ""} wait too.` : "";
    // Emptied first, so the same words said twice are read twice.
    region.textContent = "";
    setTimeout(() => {
      region.textContent = `New prompt: ${first}.${more} Alt+Shift+W jumps to it.`;
    }, 50);
  };

  const scan = (initial) => {
    syncJump();
    const fresh = [];
    document.querySelectorAll(WAITING).forEach((prompt) => {
      if (announced.has(prompt.id)) return;
      announced.add(prompt.id);
      if (!initial) fresh.push(prompt);
    });
    announce(fresh);
  };

  // Focused, a prompt takes its number keys: 1 for its first option, 2 for the next…
  const jumpToPrompt = (event) => {
    const prompt = waiting();
    if (!prompt) return;
    event.preventDefault();
    prompt.scrollIntoView({ block: "center" });
    prompt.focus({ preventScroll: true });
  };

  document.addEventListener("click", (event) => {
    if (event.target.closest("#jump-waiting")) jumpToPrompt(event);
  });

  // Alt+Shift+W from anywhere, also in a text box: the link's access key as Firefox spells it,
  // for every browser (Chrome's own Alt+W reaches the link's access key as well).
  document.addEventListener("keydown", (event) => {
    if (event.altKey && event.shiftKey && !event.ctrlKey && !event.metaKey && event.code === "KeyW") {
      jumpToPrompt(event);
    }
  });

  const start = () => {
    scan(true); // what was there when the page loaded is no news
    let queued = false;
    new MutationObserver(() => {
      if (queued) return;
      queued = true;
      setTimeout(() => {
        queued = false;
        scan(false);
      }, 0);
    }).observe(document.body, { childList: true, subtree: true, attributes: true, attributeFilter: ["class"] });
  };

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();

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

  // What a prompt asks, in one sentence for a screen reader: its title, the command or the files
  // it would change — never the diff or the buttons run together.
  const said = (root, selector) => root.querySelector(selector)?.textContent.replace(/\s+/g, " ").trim() || "";
  const asked = (prompt) => {
    let what = said(prompt, ".asked-title").replace(/^The agent asks:\s*/, "") || "an answer";
    const command = said(prompt, ".asked-command pre.command");
    if (command && command !== what) what += `: ${command}`;
    const files = [...prompt.querySelectorAll(".asked-diff .diff-path")].map((path) => path.textContent.trim());
    if (files.length && !files.some((file) => what.includes(file.split("/").pop()))) what += ` (${files.join(", ")})`;
    return what.length > 200 ? `${what.slice(0, 200)}…` : what;
  };
  const where = () => {
    const run = said(document, "#chat-head h1");
    return run ? ` on “${run}”` : "";
  };
  const firstChoice = (prompt) => {
    const label = said(prompt, 'button[data-key="1"]');
    return label ? `, then 1 answers “${label}”` : "";
  };

  const announced = new Set();
  const announce = (prompts) => {
    const region = document.getElementById("prompt-announcer");
    if (!region || !prompts.length) return;
    const more = prompts.length > 1 ? ` ${prompts.length - 1} more prompt${prompts.length > 2 ? "s" : ""} wait too.` : "";
    const line = `New prompt${where()}: the agent asks: ${asked(prompts[0])}. Alt+Shift+W goes to it${firstChoice(prompts[0])}.${more}`;
    // Emptied first, so the same words said twice are read twice.
    region.textContent = "";
    setTimeout(() => {
      region.textContent = line;
    }, 50);
  };

  // Who watches, read out when it changes: never for the page's own load, never oneself.
  const me = said(document, "form.logout span");
  let watchers = null;
  const watching = () => {
    const region = document.getElementById("watching-said");
    const list = document.getElementById("watching");
    if (!region || !list) return;
    const now = new Set([...list.querySelectorAll(".watcher")].map((person) => person.dataset.name));
    const before = watchers;
    watchers = now;
    if (before === null) return;
    const came = [...now].filter((name) => !before.has(name) && name !== me);
    const left = [...before].filter((name) => !now.has(name) && name !== me);
    const lines = [...came.map((name) => `${name} started watching`), ...left.map((name) => `${name} stopped watching`)];
    if (lines.length) region.textContent = `${lines.join("; ")}.`;
  };

  const scan = (initial) => {
    syncJump();
    watching();
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

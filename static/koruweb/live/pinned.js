// The waiting prompt in reach (docs/architecture.md#the-waiting-prompt-in-reach). While a prompt
// waits for the person looking (a page that may answer), one of them is pinned to the bottom of
// the window: the prompt box itself, with its own buttons, form and number keys (prompts.js), so
// answering it is answering it in its row. Above it a bar says "1 of 3", goes to the others, opens
// the change (a diff stays folded while pinned), and quotes the agent's words that led to it. A
// push that answers the prompt morphs its row: the box is no longer .awaiting and leaves the pin.
(() => {
  const WAITING = '.answering[data-can-answer="true"] .prompt-box.awaiting[data-prompt]';
  let heights = null; // the sheet that says how tall the pin is
  let pinnedId = null;
  let bar = null;
  let sizes = null;

  const waitingNow = () => [...document.querySelectorAll(WAITING)];

  // The agent's last words before the call: the reply's text part just above its calls' table.
  const ledTo = (box) => {
    let part = box.closest("table.tools")?.previousElementSibling;
    while (part && !(part.matches(".reply-part") && part.textContent.trim())) {
      part = part.previousElementSibling;
    }
    const last = part && [...part.children].reverse().find((el) => el.textContent.trim());
    const text = (last || part)?.textContent.replace(/\s+/g, " ").trim() || "";
    return text.length > 180 ? `…${text.slice(-180)}` : text;
  };

  const button = (label, name) => {
    const made = Object.assign(document.createElement("button"), { type: "button", textContent: label });
    made.dataset.pin = name;
    return made;
  };

  const makeBar = () => {
    const made = document.createElement("section");
    made.id = "pinned-bar";
    made.className = "pinned-bar";
    made.setAttribute("aria-label", "Waiting for your answer");
    const line = document.createElement("div");
    line.className = "pinned-line";
    const count = Object.assign(document.createElement("span"), { className: "pinned-count" });
    const previous = button("‹", "previous");
    previous.setAttribute("aria-label", "The previous waiting prompt");
    const next = button("›", "next");
    next.setAttribute("aria-label", "The next waiting prompt");
    const more = button("Show the change", "more");
    more.className = "pinned-more";
    more.setAttribute("aria-expanded", "false");
    const where = Object.assign(document.createElement("a"), { className: "pinned-where", textContent: "In the run" });
    line.append(count, previous, next, more, where);
    const said = Object.assign(document.createElement("p"), { className: "pinned-said" });
    made.append(line, said);
    document.body.append(made);
    return made;
  };

  const measure = () => {
    const box = pinnedId && document.getElementById(pinnedId);
    const boxHeight = box ? box.getBoundingClientRect().height : 0;
    const barHeight = bar && !bar.hidden ? bar.getBoundingClientRect().height : 0;
    // A sheet of the page's own, never a style attribute (the page's markup stays the server's).
    if (!heights) {
      heights = new CSSStyleSheet();
      document.adoptedStyleSheets = [...document.adoptedStyleSheets, heights];
    }
    heights.replaceSync(`:root { --pinned-box: ${Math.ceil(boxHeight)}px; --pinned-all: ${Math.ceil(boxHeight + barHeight)}px; }`);
  };

  const unpin = () => {
    document.querySelectorAll(".prompt-box[data-pinned]").forEach((box) => {
      if (box.id !== pinnedId || !box.matches(WAITING)) {
        delete box.dataset.pinned;
        delete box.dataset.expanded;
      }
    });
  };

  const sync = () => {
    const all = waitingNow();
    if (!all.some((box) => box.id === pinnedId)) pinnedId = all[0]?.id ?? null;
    unpin();
    if (!pinnedId) {
      if (bar) bar.hidden = true;
      document.body.removeAttribute("data-pinned");
      measure();
      return;
    }
    const box = document.getElementById(pinnedId);
    const expanded = bar?.dataset.expanded === pinnedId;
    if (box.dataset.pinned !== "") box.dataset.pinned = "";
    if (expanded && box.dataset.expanded !== "") box.dataset.expanded = "";
    bar ||= makeBar();
    bar.hidden = false;
    document.body.dataset.pinned = "";
    const at = all.findIndex((one) => one.id === pinnedId) + 1;
    bar.querySelector(".pinned-count").textContent = all.length > 1 ? `Waiting for you · ${at} of ${all.length}` : "Waiting for you";
    for (const name of ["previous", "next"]) bar.querySelector(`[data-pin="${name}"]`).hidden = all.length < 2;
    const folded = box.querySelector(".asked-diff") ? "change" : box.querySelector(".asked pre.input") && "input";
    const more = bar.querySelector('[data-pin="more"]');
    more.hidden = !folded;
    more.textContent = `${expanded ? "Hide" : "Show"} the ${folded || "change"}`;
    more.setAttribute("aria-expanded", String(expanded));
    const row = box.closest("tr.tool");
    bar.querySelector(".pinned-where").href = row ? `#${row.id}` : `#${box.id}`;
    const said = ledTo(box);
    const line = bar.querySelector(".pinned-said");
    line.hidden = !said;
    line.textContent = said ? `The agent: “${said}”` : "";
    sizes?.disconnect();
    sizes = new ResizeObserver(measure);
    sizes.observe(box);
    sizes.observe(bar);
    measure();
  };

  document.addEventListener("click", (event) => {
    const control = event.target.closest("#pinned-bar [data-pin]");
    if (!control) return;
    const all = waitingNow();
    const at = all.findIndex((one) => one.id === pinnedId);
    if (control.dataset.pin === "more") {
      bar.dataset.expanded = bar.dataset.expanded === pinnedId ? "" : pinnedId;
    } else if (all.length > 1) {
      const step = control.dataset.pin === "next" ? 1 : -1;
      pinnedId = all[(at + step + all.length) % all.length].id;
      bar.dataset.expanded = "";
    }
    sync();
    document.getElementById(pinnedId)?.focus({ preventScroll: true }); // its number keys answer it
  });

  const start = () => {
    sync();
    let queued = false;
    // Pushes morph rows (and with them a pinned box's attributes): pin again before the next paint.
    new MutationObserver((changes) => {
      if (queued || changes.every((change) => bar?.contains(change.target))) return;
      queued = true;
      queueMicrotask(() => {
        queued = false;
        sync();
      });
    }).observe(document.querySelector("main") || document.body, {
      childList: true,
      subtree: true,
      attributes: true,
      attributeFilter: ["class", "data-pinned", "data-expanded"],
    });
  };

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();

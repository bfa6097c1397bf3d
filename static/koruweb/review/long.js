// Long runs on the chat page (activity/review/filters.py): the filter form applies as soon as a select
// changes; "Jump to the next failure" (key F, Shift+F goes back) and "Jump to the waiting
// prompt" (key W) move the focus to it; and a filtered page stays filtered while live.
(() => {
  const bar = () => document.getElementById("run-filter");
  const filtered = () => bar()?.dataset.filtered === "true";

  // Pushes are rendered once for every viewer, unfiltered. On a filtered page (or one whose
  // filter cannot apply) a push that brings or changes calls, a turn or the filter bar's counts
  // becomes "fetch your regions over HTTP" (live.js), which fetches this page with its query:
  // the server's filter decides what shows, new calls that match appear, a new turn says when
  // none does, and the counts and jumps are this filter's. Captured on the document, before
  // live.js sees the push.
  const ROW = /id="(?:tool-[0-9a-f-]{36}|turn-[0-9a-f-]{36}|run-filter)"/;
  document.addEventListener(
    "htmx:ws:before:message:incoming",
    (event) => {
      if (!filtered()) return;
      const message = event.detail.message;
      if (typeof message.data !== "string") return;
      let push;
      try {
        push = JSON.parse(message.data);
      } catch {
        return;
      }
      if (typeof push.content !== "string" || !ROW.test(push.content)) return;
      delete push.content;
      if (push.parts > 1 && push.part > 1) push.part = -1; // live.js: broken parts → reload
      else push.reload = true;
      message.data = JSON.stringify(push);
    },
    true,
  );

  const typing = (el) => el && (el.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(el.tagName));

  const land = (target, focus) => {
    target.scrollIntoView({ block: "center" });
    document.querySelectorAll(".jumped").forEach((el) => el.classList.remove("jumped"));
    target.classList.add("jumped");
    (focus || target).focus({ preventScroll: true });
  };

  // The failure after (or before) the one the person stands on: the focused row, else the
  // last one jumped to, else the top of the page.
  const nextFailure = (back) => {
    const failures = [...document.querySelectorAll("tr.tool.status-failed")];
    if (!failures.length) return false;
    const here = document.activeElement?.closest?.("tr.tool") || document.querySelector("tr.tool.jumped");
    let index;
    if (here) {
      const after = failures.findIndex((row) => here.compareDocumentPosition(row) & Node.DOCUMENT_POSITION_FOLLOWING);
      const at = failures.indexOf(here);
      if (back) index = (at >= 0 ? at : after >= 0 ? after : failures.length) - 1;
      else index = at >= 0 ? at + 1 : after;
      if (index < 0 || index >= failures.length) index = back ? failures.length - 1 : 0; // wraps
    } else index = back ? failures.length - 1 : 0;
    const row = failures[index];
    land(row, row.querySelector("summary"));
    return true;
  };

  const waitingPrompt = () => {
    const prompt = document.querySelector(".prompt-box.awaiting[data-prompt]");
    if (!prompt) return false;
    land(prompt);
    return true;
  };

  // A jump whose target is not on this page follows its link: the filtered view that shows it.
  const follow = (id) => {
    const link = document.getElementById(id);
    if (!link || link.getAttribute("href").startsWith("#")) return false;
    location.assign(link.href);
    return true;
  };

  document.addEventListener("click", (event) => {
    const link = event.target.closest?.("#jump-failure, #jump-prompt");
    if (!link) return;
    const done = link.id === "jump-failure" ? nextFailure(false) : waitingPrompt();
    if (done) event.preventDefault();
  });

  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) return;
    let done = false;
    if (event.key === "f" || event.key === "F") done = nextFailure(event.shiftKey) || follow("jump-failure");
    else if (event.key === "w" || event.key === "W") done = waitingPrompt() || follow("jump-prompt");
    if (done) event.preventDefault();
  });

  // The form applies a chosen status or kind at once (a plain GET form without JavaScript),
  // and its link leaves out what is not chosen: ?status=failed, not ?q=&status=failed&kind=.
  document.addEventListener("change", (event) => {
    const form = event.target.closest?.("#run-filter form");
    if (form && event.target.tagName === "SELECT") form.requestSubmit();
  });
  document.addEventListener("submit", (event) => {
    const form = event.target.closest?.("#run-filter form");
    if (!form) return;
    event.preventDefault();
    const query = new URLSearchParams();
    for (const [name, value] of new FormData(form)) if (String(value).trim()) query.set(name, value);
    location.assign(`${location.pathname}${query.size ? `?${query}` : ""}`);
  });
})();

// The message box of a run that takes prompts from the web (activity/live/drive.py). Enter sends,
// Shift+Enter is a new line; "/" at the start offers the agent's commands (pushed in #drive as
// .drive-commands) in a listbox: arrows move, Enter or Tab takes one, Escape closes it (the keys
// are listbox.js's). A message sent leaves the box; a queued message saved closes its editor.
// The queue is pushed once for every viewer: each message says its author (data-author), and
// this marks those of the person viewing (data-yours) so only they see Edit (koruweb.css).
(() => {
  const page = document.querySelector(".answering[data-me]");
  const markYours = () => {
    for (const item of document.querySelectorAll("#drive .web-prompt[data-author]")) {
      const yours = String(item.dataset.author !== "" && item.dataset.author === page.dataset.me);
      if (item.dataset.yours !== yours) item.dataset.yours = yours; // unchanged: no new mutation
    }
  };
  if (page) {
    markYours();
    // A push morphs #drive (dropping data-yours) or adds messages: mark them again.
    new MutationObserver(markYours).observe(page, {
      childList: true,
      subtree: true,
      attributes: true,
      attributeFilter: ["data-yours"],
    });
  }

  const box = document.getElementById("compose-text");
  const list = document.getElementById("command-list");
  let shown = []; // the commands the list offers now
  let active = -1;

  const commands = () =>
    [...document.querySelectorAll("#drive .drive-commands li")].map((item) => ({
      name: item.dataset.name,
      hint: item.dataset.hint || "",
      description: item.textContent,
    }));

  const close = () => {
    if (!list) return;
    list.hidden = true;
    list.replaceChildren();
    shown = [];
    active = -1;
    box.removeAttribute("aria-activedescendant");
  };

  const mark = (index) => {
    active = index;
    [...list.children].forEach((item, n) => item.setAttribute("aria-selected", String(n === index)));
    if (index < 0) return box.removeAttribute("aria-activedescendant");
    box.setAttribute("aria-activedescendant", list.children[index].id);
    list.children[index].scrollIntoView({ block: "nearest" });
  };

  const take = (index) => {
    const command = shown[index];
    if (!command) return;
    box.value = `/${command.name} `;
    box.setSelectionRange(box.value.length, box.value.length);
    close();
    box.focus();
  };

  // The word being typed, while it is a "/" at the very start and nothing after it yet.
  const offer = () => {
    const typed = /^\/(\S*)$/.exec(box.value);
    if (!list || !typed) return close();
    const word = typed[1].toLowerCase();
    shown = commands().filter((c) => c.name.toLowerCase().startsWith(word));
    if (!shown.length) return close();
    list.replaceChildren(
      ...shown.map((command, n) => {
        const item = document.createElement("li");
        item.id = `command-${n}`;
        item.setAttribute("role", "option");
        const name = document.createElement("span");
        name.className = "command-name";
        name.textContent = `/${command.name}`;
        const hint = document.createElement("span");
        hint.className = "command-hint";
        hint.textContent = command.hint ? ` ‹${command.hint}›` : "";
        const about = document.createElement("span");
        about.className = "command-about";
        about.textContent = command.description;
        item.append(name, hint, " ", about);
        item.addEventListener("mousedown", (event) => {
          event.preventDefault(); // the box keeps the focus
          take(n);
        });
        return item;
      }),
    );
    list.hidden = false;
    mark(0);
  };

  if (box) {
    box.addEventListener("input", offer);
    box.addEventListener("blur", close);
    box.addEventListener("keydown", (event) => {
      const open = list && !list.hidden && shown.length;
      if (open && window.koruweb.listboxKey(event, shown.length, active, { mark, take, close })) return;
      if (event.key !== "Enter" || event.shiftKey || event.isComposing) return;
      event.preventDefault();
      if (box.value.trim()) box.form.requestSubmit();
    });
  }

  // What the message box held when it was sent: its answer clears the box only if that is
  // still what it holds. The push that shows the message often comes before the answer, and a
  // person may have started the next message by then.
  let sent = null;
  document.addEventListener(
    "submit",
    (event) => {
      if (event.target.id === "compose") sent = event.target.elements.text?.value ?? null;
    },
    true,
  );

  document.addEventListener("htmx:after:request", (event) => {
    const ok = (event.detail?.ctx?.response?.status ?? 500) < 400;
    const form = event.target.closest?.("form");
    if (!form || !ok) return;
    if (form.id === "compose") {
      const text = form.elements.text;
      if (text && sent !== null && text.value !== sent) return; // the next message, being typed
      form.reset();
      close();
    } else if (form.classList.contains("edit-form")) {
      form.closest("details")?.removeAttribute("open");
    }
  });
})();

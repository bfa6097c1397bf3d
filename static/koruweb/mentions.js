// @name completion in a comment box (templates/activity/parts.html#comment-form): "@" and the
// start of a name offer the workspace's members (#member-names, rendered with the page) in a
// listbox under the box: arrows move, Enter or Tab takes one, Escape closes. One listener for
// the whole page, so the boxes of rows pushed later work without setup.
(() => {
  const source = document.getElementById("member-names");
  if (!source) return;
  const names = [...source.querySelectorAll("li")].map((item) => item.textContent);
  const SHOWN = 8;
  const list = document.createElement("ul");
  list.id = "mention-list";
  list.className = "command-list mention-list";
  list.setAttribute("role", "listbox");
  list.setAttribute("aria-label", "Members to mention");
  list.hidden = true;
  let box = null; // the comment box the list is for
  let shown = [];
  let active = -1;
  let at = -1; // where the "@" being completed is in the box

  const isBox = (el) => el instanceof HTMLTextAreaElement && el.closest("form.comment-form");

  const close = () => {
    list.hidden = true;
    list.replaceChildren();
    shown = [];
    active = -1;
    if (box) box.removeAttribute("aria-activedescendant");
  };

  const mark = (index) => {
    active = index;
    [...list.children].forEach((item, n) => item.setAttribute("aria-selected", String(n === index)));
    box.setAttribute("aria-activedescendant", list.children[index].id);
  };

  const take = (index) => {
    const name = shown[index];
    if (!name || !box) return;
    const caret = box.selectionStart;
    box.value = `${box.value.slice(0, at)}@${name} ${box.value.slice(caret)}`;
    const after = at + name.length + 2;
    box.setSelectionRange(after, after);
    close();
    box.focus();
  };

  // The name being typed: an "@" at the start or after a space, and the word up to the caret.
  const offer = (area) => {
    const before = area.value.slice(0, area.selectionStart);
    const typed = /(^|[\s(])@([\w.+-]*)$/.exec(before);
    if (!typed) return close();
    const word = typed[2].toLowerCase();
    const found = names.filter((name) => name.toLowerCase().startsWith(word)).slice(0, SHOWN);
    if (!found.length) return close();
    box = area;
    at = before.length - typed[2].length - 1;
    shown = found;
    area.setAttribute("aria-controls", list.id);
    area.after(list);
    list.replaceChildren(
      ...shown.map((name, n) => {
        const item = document.createElement("li");
        item.id = `mention-${n}`;
        item.setAttribute("role", "option");
        item.textContent = `@${name}`;
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

  document.addEventListener("input", (event) => {
    if (isBox(event.target)) offer(event.target);
  });
  document.addEventListener("focusout", (event) => {
    if (event.target === box) close();
  });
  document.addEventListener("keydown", (event) => {
    if (event.target !== box || list.hidden || !shown.length) return;
    if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      event.preventDefault();
      mark((active + (event.key === "ArrowDown" ? 1 : -1) + shown.length) % shown.length);
    } else if (event.key === "Escape") {
      event.preventDefault();
      close();
    } else if (event.key === "Tab" || (event.key === "Enter" && !event.shiftKey)) {
      event.preventDefault();
      take(Math.max(active, 0));
    }
  });
})();

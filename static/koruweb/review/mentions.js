// @name completion in a comment box (templates/activity/pushed/parts.html#comment-form): "@" and the
// start of a name offer the workspace's members (#member-names, rendered with the page) in a
// listbox under the box: arrows move, Enter or Tab takes one, Escape closes (the keys are
// listbox.js's). One listener for the whole page, so the boxes of rows pushed later work without
// setup.
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
  const told = document.createElement("p"); // what a screen reader hears when the list opens
  told.className = "visually-hidden";
  told.setAttribute("role", "status");
  document.body.append(told);
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
    told.textContent = "";
    if (box) {
      box.removeAttribute("aria-activedescendant");
      box.removeAttribute("aria-controls");
    }
  };

  // The name being typed before the caret: an "@" at the start or after a space, and the word
  // up to the caret (a username's letters, digits and _ . @ + -, in any script).
  const typedIn = (area) => {
    const before = area.value.slice(0, area.selectionStart);
    const typed = /(^|[\s(])@([\p{L}\p{N}_.@+-]*)$/u.exec(before);
    return typed ? { at: before.length - typed[2].length - 1, word: typed[2] } : null;
  };

  const mark = (index) => {
    active = index;
    [...list.children].forEach((item, n) => item.setAttribute("aria-selected", String(n === index)));
    box.setAttribute("aria-activedescendant", list.children[index].id);
  };

  const take = (index) => {
    const name = shown[index];
    const typed = box && typedIn(box);
    if (!name || !typed) return close(); // the caret moved away from the name
    at = typed.at;
    const caret = box.selectionStart;
    box.value = `${box.value.slice(0, at)}@${name} ${box.value.slice(caret)}`;
    const after = at + name.length + 2;
    box.setSelectionRange(after, after);
    close();
    box.focus();
  };

  const offer = (area) => {
    const typed = typedIn(area);
    if (!typed) return close();
    const word = typed.word.toLowerCase();
    const found = names.filter((name) => name.toLowerCase().startsWith(word)).slice(0, SHOWN);
    if (!found.length) return close();
    const news = list.hidden || box !== area || found.length !== shown.length; // worth saying
    box = area;
    at = typed.at;
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
    if (news) {
      const some = found.length === 1 ? "1 member" : `${found.length} members`;
      told.textContent = `${some} to mention: arrows to choose, Enter to take, Escape to close`;
    }
  };

  document.addEventListener("input", (event) => {
    if (isBox(event.target)) offer(event.target);
  });
  document.addEventListener("focusout", (event) => {
    if (event.target === box) close();
  });
  // The caret moved without typing (a click, arrows sideways, Home, End): offer again, or close.
  document.addEventListener("click", (event) => {
    if (isBox(event.target)) offer(event.target);
  });
  document.addEventListener("keyup", (event) => {
    if (isBox(event.target) && ["ArrowLeft", "ArrowRight", "Home", "End"].includes(event.key)) offer(event.target);
  });
  document.addEventListener("keydown", (event) => {
    if (event.target !== box || list.hidden || !shown.length) return;
    if (!list.isConnected) return close(); // a push morphed the row: the list went with it
    window.koruweb.listboxKey(event, shown.length, active, { mark, take, close });
  });
})();

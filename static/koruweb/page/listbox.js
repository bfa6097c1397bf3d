// The keys of a listbox of completions under a text box, alike in drive.js ("/" commands) and
// mentions.js (@names): arrows move round the list, Enter or Tab takes the marked one (the
// first if none is), Escape closes it; Shift+Enter and every other key stay the box's.
// koruweb.listboxKey(event, size, active, { mark, take, close }) does what the key asks of an
// open list of `size` items, `active` marked, and says whether the key was the list's.
(() => {
  "use strict";

  window.koruweb = window.koruweb || {};
  window.koruweb.listboxKey = (event, size, active, { mark, take, close }) => {
    if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      event.preventDefault();
      mark((active + (event.key === "ArrowDown" ? 1 : -1) + size) % size);
    } else if (event.key === "Escape") {
      event.preventDefault();
      close();
    } else if (event.key === "Tab" || (event.key === "Enter" && !event.shiftKey)) {
      event.preventDefault();
      take(Math.max(active, 0));
    } else {
      return false;
    }
    return true;
  };
})();

// Keeps a chat page equal to the database. Every push says which version it starts from
// ("from") and brings the page to ("to"); the page applies only a push that starts where it
// stands, and otherwise asks the server for exactly what changed since the version it shows.
(() => {
  const live = document.getElementById("live");
  if (!live) return;
  let shown = Number(live.dataset.version);
  let next = shown;
  let asked = false;

  const ask = (connection) => {
    asked = true;
    connection.socket?.send(JSON.stringify({ since: shown }));
  };
  const skip = (event) => {
    event.detail.cancelled = true;
    event.preventDefault();
  };

  live.addEventListener("htmx:ws:after:connection", (event) => ask(event.detail.connection));

  live.addEventListener("htmx:ws:before:message:incoming", (event) => {
    let push;
    try {
      push = JSON.parse(event.detail.message.data);
    } catch {
      return skip(event);
    }
    if (push.to <= shown) {
      asked = false; // what we asked about has come (or nothing had changed)
      return skip(event); // nothing new for this page
    }
    if (push.from !== shown) {
      skip(event); // a gap: a push was missed, or the page is ahead of this one
      if (!asked) ask(event.detail.connection);
      return;
    }
    next = push.to;
  });

  live.addEventListener("htmx:ws:after:message:incoming", () => {
    shown = next;
    asked = false;
    live.dataset.version = String(shown);
  });
})();

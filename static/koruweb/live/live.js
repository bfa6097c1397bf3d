// Keeps a chat page equal to the database, and says whether it is. Every push says which
// version it starts from ("from") and brings the page to ("to"); the page applies only a push
// that starts where it stands, and otherwise asks the server for exactly what changed since the
// version it shows. A change too big for one message comes in parts ("part" k of "parts"),
// applied in order; a page whose parts were broken off, or told to ("reload"), fetches its
// regions over HTTP instead and asks for what changed since the version it got. The list of
// who is watching ({"watching": html}) comes beside the chain, with no version. A socket the
// server closes because this person may no longer watch (activity/sockets/revoke.py: signed out, no
// longer a member, the run deleted) ends the page's live life: the pill says why, and it stops.
(() => {
  const live = document.getElementById("live");
  if (!live) return;
  const status = document.getElementById("connection");
  // What a reload fetches: every region drawn at the page's version (activity/show/dom.py, REGIONS).
  const REGIONS = ["chat-head", "run-filter", "turns", "drive"];
  const QUIET = Number(live.dataset.quietMs) || 0; // ms with no push before the page asks again
  const WORDS = {
    connecting: "Connecting…",
    live: "Live",
    updating: "Updating…",
    reconnecting: "Connection lost, reconnecting…",
    offline: "Not live: reload the page",
  };
  let shown = Number(live.dataset.version);
  let applying = null; // the push being swapped in now
  let parts = null; // {to, part}: the parts of one change applied so far
  let asked = false;
  let reloading = false;
  let connection = null;
  let ended = false; // the server closed the socket for good: nothing changes the pill again
  let quiet = null; // the timer of a page that has heard no push for QUIET ms

  // One state, on the page and for scripts and styles: live, updating, reconnecting, ….
  const show = (state, detail = "") => {
    if (ended) return;
    document.body.dataset.connection = state;
    if (!status) return;
    status.dataset.state = state;
    const text = WORDS[state] + (detail ? ` ${detail}` : "");
    const words = status.querySelector(".words");
    if (words.textContent !== text) words.textContent = text;
  };
  const settled = () => show(asked || parts || reloading ? "updating" : "live");

  const ask = () => {
    if (ended) return;
    if (connection?.socket?.readyState !== WebSocket.OPEN) return show("reconnecting"); // asks once back
    if (parts) return reload(); // parts of a change are on the page, the rest never came
    asked = true;
    show("updating");
    connection.socket.send(JSON.stringify({ since: shown }));
  };
  // A page that hears nothing for QUIET ms — no push, not even a heartbeat's version
  // (activity/push/broadcast.py) — confirms the version it shows: the server answers with what it
  // missed, or with nothing ({"from": V, "to": V}). Quietly: the pill stays as it is.
  const confirm = () => {
    hear();
    if (ended || reloading || connection?.socket?.readyState !== WebSocket.OPEN) return;
    if (parts) return reload(); // the rest of a change never came
    connection.socket.send(JSON.stringify({ since: shown }));
  };
  const hear = () => {
    clearTimeout(quiet);
    if (QUIET > 0 && !ended) quiet = setTimeout(confirm, QUIET);
  };
  const skip = (event) => {
    event.detail.cancelled = true;
    event.preventDefault();
  };

  // The regions as the server renders them now, over HTTP (no message limit there), morphed in
  // place like a push: what a person opened stays open.
  const reload = async () => {
    if (reloading || ended) return;
    reloading = true;
    parts = null;
    show("updating", "loading a large change");
    try {
      // With its query: a filtered page (activity/review/filters.py) gets its filtered regions back.
      const answer = await fetch(location.pathname + location.search, { headers: { Accept: "text/html" } });
      if (!answer.ok) throw new Error(`HTTP ${answer.status}`);
      const page = new DOMParser().parseFromString(await answer.text(), "text/html");
      const version = Number(page.getElementById("live")?.dataset.version);
      const regions = REGIONS.map((id) => page.getElementById(id));
      if (Number.isNaN(version) || regions.includes(null)) throw new Error("not a chat page");
      for (const region of regions) region.setAttribute("hx-swap-oob", "outerMorph");
      const text = regions.map((region) => region.outerHTML).join("");
      await htmx.swap({ sourceElement: live, target: live, swap: "none", text, transition: false });
      shown = version;
      live.dataset.version = String(shown);
      reloading = false;
      ask(); // what changed while it was on its way
    } catch {
      reloading = false; // the server is away: its socket reconnects and asks again
      parts = { to: shown, part: 0 }; // … and, asking, reloads again
      show(connection?.socket?.readyState === WebSocket.OPEN ? "updating" : "reconnecting");
    }
  };

  // Why the server closed the socket for good (the close codes of activity/wire/frames.py), said in
  // the pill (a live region), with what to do about it.
  const isolated = (text) => Object.assign(document.createElement("bdi"), { textContent: text });
  const signIn = () => {
    const link = document.createElement("a");
    link.href = `/accounts/login/?next=${encodeURIComponent(location.pathname + location.search)}`;
    link.textContent = "sign in again";
    return ["Signed out — ", link, " to keep watching"];
  };
  const workspace = () => document.querySelector("#chat-head .workspace")?.textContent.trim() || "this workspace";
  const WHY = {
    4401: signIn,
    4403: () => ["No longer a member of ", isolated(workspace())],
    4410: () => [live.dataset.gone || "This run was deleted"], // a share link's page says more
    4429: () => ["Too many pages open — close some, then reload this one"],
  };
  const end = (code, ending) => {
    // Without this, htmx would wait for a hidden tab to be shown and then connect again.
    if (ending?.config) ending.config.pauseOnBackground = false;
    ended = true;
    clearTimeout(quiet);
    document.body.dataset.connection = "ended";
    if (!status) return;
    status.dataset.state = "ended";
    status.dataset.why = String(code);
    status.querySelector(".words").replaceChildren(...WHY[code]());
  };

  live.addEventListener("htmx:ws:before:connection", (event) => {
    if (ended) {
      event.detail.connection.cancelled = true; // never again on this page
      return;
    }
    if (document.body.dataset.connection !== "connecting") show("reconnecting");
  });
  // Whether this page is visible and focused, told to the server: a person looking at the run
  // is not sent a notification about it (docs/protocol.md#notifications).
  let looked = null;
  const looking = () => {
    const now = document.visibilityState === "visible" && document.hasFocus();
    if (now === looked || connection?.socket?.readyState !== WebSocket.OPEN) return;
    looked = now;
    connection.socket.send(JSON.stringify({ looking: now }));
  };
  for (const [target, name] of [[document, "visibilitychange"], [window, "focus"], [window, "blur"]]) {
    target.addEventListener(name, looking);
  }
  live.addEventListener("htmx:ws:after:connection", (event) => {
    connection = event.detail.connection;
    looked = null; // a new socket: say it again
    ask();
    looking();
    hear();
  });
  live.addEventListener("htmx:ws:close", (event) => {
    asked = false;
    if (ended) return;
    if (WHY[event.detail.code]) return end(event.detail.code, event.detail.connection);
    const codes = htmx.config.ws?.reconnectCodes || [];
    const retried = event.detail.code === null || codes.includes(event.detail.code);
    show(retried || document.hidden ? "reconnecting" : "offline");
  });

  live.addEventListener("htmx:ws:before:message:incoming", (event) => {
    let push;
    try {
      push = JSON.parse(event.detail.message.data);
    } catch {
      return skip(event);
    }
    if (typeof push.watching === "string") {
      // Who is watching (activity/push/watching.py): not in the database, so it carries no version
      // and leaves the chain alone; its region is morphed in place.
      skip(event);
      htmx.swap({ sourceElement: live, target: live, swap: "none", text: push.watching, transition: false });
      return;
    }
    hear();
    applying = null;
    if (reloading) return skip(event); // the reload brings all of it
    if (parts) {
      if (push.from === shown && push.to === parts.to && push.part === parts.part + 1) {
        applying = push; // the next part of the change under way
        return;
      }
      skip(event);
      if (push.to <= shown) return; // an old push: nothing in it is new
      return reload(); // its parts were broken off: some are on the page, some never will be
    }
    if (push.reload && push.from === shown && push.to < shown) {
      skip(event); // the page is ahead of the server's database (a version it never had)
      return reload();
    }
    if (push.to <= shown) {
      asked = false; // what we asked about has come (or nothing had changed)
      settled();
      return skip(event); // nothing new for this page
    }
    if (push.from !== shown) {
      skip(event); // a gap: a push was missed, or the page is ahead of this one
      if (!asked) ask();
      return;
    }
    if (push.reload) {
      skip(event);
      return reload(); // a change no push can carry
    }
    if (push.parts > 1) {
      if (push.part !== 1) {
        skip(event); // its first parts went before this page listened
        return ask();
      }
      parts = { to: push.to, part: 0 };
      show("updating");
    }
    applying = push;
  });

  live.addEventListener("htmx:ws:after:message:incoming", () => {
    const push = applying;
    applying = null;
    if (!push) return;
    if (parts) {
      parts.part = push.part;
      if (push.part < push.parts) return; // more to come; the page is not at "to" before
      parts = null;
    }
    shown = push.to;
    asked = false;
    live.dataset.version = String(shown);
    settled();
    retitle();
  });

  // The tab names the run as its head does, once a push renamed it (a run's title comes with its
  // first turn); needs.js keeps the "(n) " of what waits for this person in front of it.
  const retitle = () => {
    const name = document.querySelector("#chat-head h1")?.textContent.trim();
    if (!name) return;
    const [, waiting = ""] = document.title.match(/^(\(\d+\) )?/) || [];
    const title = `${waiting}${name} · koruweb`;
    if (document.title !== title) document.title = title;
  };

  show("connecting");
})();

// Needs you, on every page (activity/push/inbox.py): the count on Inbox and in the tab title (the
// prompts this person may answer, the comments that mention them and the runs they are asked to
// review), a line read out when a new prompt or mention arrives, and on the runs list each run's
// line in place.
// The server says each workspace's count, once for everyone; this page adds up the
// workspaces where its person may answer (the socket only hears of those). When this person's
// access ends (activity/sockets/revoke.py) a line at the top of the page says so, and is read out:
// signed out (the socket closed with 4401; the inbox's socket says the same, through the
// "koruweb:ended" event), or no longer a member of a workspace ({"left": …}).
(() => {
  const link = document.getElementById("inbox-link");
  if (!link) return;
  const badge = document.getElementById("needs-count");
  const words = document.getElementById("needs-words");
  const announcer = document.getElementById("needs-announcer");
  const table = document.getElementById("runs");
  let counts = JSON.parse(link.dataset.counts || "{}");
  let everywhere = link.dataset.all === "true";
  let mentions = Number(link.dataset.mentions || 0); // comments that mention this person, unseen
  let reviews = Number(link.dataset.reviews || 0); // runs they are asked to review, not opened yet
  const heard = new Set(); // prompts already read out

  // --- the count ---------------------------------------------------------------------------
  const total = () => Object.values(counts).reduce((sum, n) => sum + n, mentions + reviews);
  const show = () => {
    const n = total();
    badge.textContent = String(n);
    badge.hidden = n === 0;
    words.textContent = n ? `, ${n} waiting for you` : "";
    link.dataset.waiting = String(n);
    const bare = document.title.replace(/^\(\d+\) /, "");
    const title = n ? `(${n}) ${bare}` : bare;
    if (document.title !== title) document.title = title;
    markYours();
  };

  // --- what a new prompt says --------------------------------------------------------------
  const here = (chat) => location.pathname.startsWith(`/chats/${chat}/`); // read out there already (a11y.js)
  const say = (line) => {
    announcer.textContent = ""; // emptied first, so the same words twice are read twice
    setTimeout(() => { announcer.textContent = line; }, 50);
  };
  const announce = (asks) => {
    const fresh = asks.filter((ask) => !heard.has(ask.prompt) && !here(ask.chat));
    asks.forEach((ask) => heard.add(ask.prompt));
    if (!fresh.length || !announcer) return;
    say(fresh.map((ask) => `Agent in ${ask.run} asks: ${ask.text}`).join(" "));
  };

  // --- access that ended --------------------------------------------------------------------
  // A chat page says it in its own pill (live.js): for its own workspace, and for a sign-out.
  const chatPage = document.getElementById("live");
  const notice = (...parts) => {
    let line = document.getElementById("access-notice");
    const text = parts.map((part) => (typeof part === "string" ? part : part.textContent)).join("");
    if (line?.textContent === text) return; // said once, however many sockets say it
    if (!line) {
      line = Object.assign(document.createElement("p"), { id: "access-notice", className: "notice error access-notice" });
      document.getElementById("main")?.prepend(line);
    }
    line.replaceChildren(...parts);
    if (announcer) say(text);
  };
  const signedOut = () => {
    if (document.getElementById("connection")) return;
    const link = document.createElement("a");
    link.href = `/accounts/login/?next=${encodeURIComponent(location.pathname + location.search)}`;
    link.textContent = "sign in again";
    notice("Signed out — ", link, " to keep watching");
  };
  const left = (workspace) => {
    if (chatPage?.dataset.workspace === workspace.workspace) return;
    notice("No longer a member of ", Object.assign(document.createElement("bdi"), { textContent: workspace.name }));
  };
  document.addEventListener("koruweb:ended", (event) => {
    if (event.detail?.code === 4401) signedOut();
  });

  // --- the runs list -----------------------------------------------------------------------
  const mayAnswer = (workspace) => everywhere || Object.hasOwn(counts, workspace);
  const markYours = (rows) => {
    if (!table) return;
    for (const row of rows || table.querySelectorAll("tr.run")) {
      row.toggleAttribute("data-yours", mayAnswer(row.dataset.workspace));
    }
  };
  const shown = () => (table ? [...table.querySelectorAll("tr.run")].map((row) => row.id.slice(5)) : []);
  const parse = (html) => {
    const template = document.createElement("template");
    template.innerHTML = `<table><tbody>${html}</tbody></table>`;
    return template.content.querySelector("tr");
  };
  const placeRun = (push) => {
    const old = document.getElementById(`chat-${push.run}`);
    if (push.gone) return old?.remove();
    const row = parse(push.html);
    if (!row) return;
    markYours([row]);
    if (old) {
      // What had the focus keeps it: the same link in the new line.
      const focused = old.contains(document.activeElement) ? document.activeElement : null;
      old.replaceWith(row);
      if (focused) {
        const same = (a) => a.className === focused.className && a.getAttribute("href") === focused.getAttribute("href");
        [...row.querySelectorAll("a")].find(same)?.focus();
      }
      return;
    }
    if (table?.dataset.insert === "true") {
      document.getElementById("runs-body").prepend(row); // a new run, on top of the newest
    } else if (document.getElementById("runs-empty")?.dataset.insert === "true") {
      location.reload(); // the first run: the page grows its table
    }
  };

  // --- the socket --------------------------------------------------------------------------
  let tries = 0;
  const connect = () => {
    const socket = new WebSocket(`${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/ws/needs/`);
    socket.addEventListener("open", () => {
      tries = 0;
      if (table || document.getElementById("runs-empty")) socket.send(JSON.stringify({ runs: shown() }));
    });
    socket.addEventListener("message", (event) => {
      let said;
      try {
        said = JSON.parse(event.data);
      } catch {
        return;
      }
      if (said.left) {
        left(said.left); // its counts and lines came just before
      } else if (said.counts) {
        counts = said.counts; // this person's workspaces and counts, as they are now
        everywhere = said.all === true;
        const before = [mentions, reviews].join();
        mentions = Number(said.mentions || 0);
        reviews = Number(said.reviews || 0);
        show();
        if ([mentions, reviews].join() !== before) document.dispatchEvent(new CustomEvent("koruweb:mentions")); // the inbox looks again
      } else if (typeof said.mentions === "number") {
        mentions = said.mentions; // a comment mentioned this person, or they saw a mention
        reviews = Number(said.reviews || 0); // … or a run's review was assigned, opened, given
        show();
        if (said.said && announcer) say(said.said);
        document.dispatchEvent(new CustomEvent("koruweb:mentions"));
      } else if (said.run) {
        placeRun(said); // a run's line: it names its workspace too, so it is told apart first
      } else if (said.workspace) {
        counts[said.workspace] = said.waiting;
        show();
        announce(said.asks || []);
      }
    });
    socket.addEventListener("close", (event) => {
      if (event.code === 4401) return signedOut(); // signed out: nothing to wait for
      if (event.code === 4403) return;
      tries += 1;
      const delay = Math.min(500 * 2 ** (tries - 1), 30_000) * (0.7 + Math.random() * 0.6);
      setTimeout(connect, delay);
    });
  };
  show();
  connect();
})();

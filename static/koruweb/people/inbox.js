// The inbox: the page title counts waiting prompts, mentions and runs to review, and with the user's permission each new
// prompt is announced by a notification, also while the tab is in the background.
(() => {
  const list = () => document.getElementById("inbox-list");
  const ids = () => new Set([...document.querySelectorAll("[data-prompt-id]")].map((e) => e.dataset.promptId));
  let known = ids();

  const retitle = () => {
    const count = Number(list()?.dataset.count || 0) + document.querySelectorAll("[data-mention-id]").length
      + Number(document.getElementById("assigned")?.dataset.total || 0);
    document.title = `${count ? `(${count}) ` : ""}Inbox · koruweb`;
  };

  const button = document.getElementById("notify");
  if ("Notification" in window && Notification.permission === "default" && button) {
    button.hidden = false;
    button.addEventListener("click", async () => {
      await Notification.requestPermission();
      button.hidden = true;
    });
  }

  const live = document.getElementById("inbox-live");
  const changed = () => {
    const now = ids();
    for (const id of now) {
      if (known.has(id)) continue;
      const item = document.getElementById(`inbox-${id}`);
      const text = item?.querySelector(".asked-title")?.textContent?.trim() || "An agent is waiting for an answer";
      if ("Notification" in window && Notification.permission === "granted") {
        const note = new Notification("koruweb: an agent asks", { body: text, tag: id });
        note.onclick = () => { window.focus(); item?.scrollIntoView(); };
      }
    }
    known = now;
    retitle();
  };
  live?.addEventListener("htmx:ws:after:message:incoming", changed);
  // Signed out (activity/sockets/revoke.py closes the socket with 4401; htmx does not reconnect): the
  // line at the top of the page says so (needs.js), and the list is marked as no longer live.
  live?.addEventListener("htmx:ws:close", (event) => {
    if (event.detail.code !== 4401) return;
    list()?.setAttribute("data-ended", "");
    document.dispatchEvent(new CustomEvent("koruweb:ended", { detail: { code: 4401 } }));
  });
  // A list too big for one push comes as {"reload": true}: fetch it over HTTP, morph it in.
  live?.addEventListener("htmx:ws:before:message:incoming", async (event) => {
    let push;
    try {
      push = JSON.parse(event.detail.message.data);
    } catch {
      return;
    }
    if (!push.reload) return;
    event.detail.cancelled = true;
    event.preventDefault();
    const answer = await fetch(location.pathname, { headers: { Accept: "text/html" } });
    if (!answer.ok) return;
    const page = new DOMParser().parseFromString(await answer.text(), "text/html");
    const fresh = page.getElementById("inbox-list");
    if (!fresh) return;
    fresh.setAttribute("hx-swap-oob", "outerMorph");
    await htmx.swap({ sourceElement: live, target: live, swap: "none", text: fresh.outerHTML, transition: false });
    changed();
  });
  // Mentions and runs to review: needs.js says when this person's changed; both lists are
  // fetched again and morphed in.
  let fetching = null;
  const refetchMentions = async () => {
    const answer = await fetch(location.pathname, { headers: { Accept: "text/html" } });
    if (!answer.ok) return;
    const page = new DOMParser().parseFromString(await answer.text(), "text/html");
    for (const id of ["mentions", "assigned"]) {
      const fresh = page.getElementById(id);
      const shown = document.getElementById(id);
      if (!fresh || !shown) continue;
      fresh.setAttribute("hx-swap-oob", "outerMorph");
      await htmx.swap({ sourceElement: shown, target: shown, swap: "none", text: fresh.outerHTML, transition: false });
    }
    retitle();
  };
  document.addEventListener("koruweb:mentions", () => {
    fetching = (fetching || Promise.resolve()).then(refetchMentions, refetchMentions); // one at a time, in order
  });
  document.addEventListener("htmx:after:swap", retitle); // a dismissed mention leaves the list
  retitle();
})();

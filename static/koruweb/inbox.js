// The inbox: the page title counts waiting prompts, and with the user's permission each new
// prompt is announced by a notification, also while the tab is in the background.
(() => {
  const list = () => document.getElementById("inbox-list");
  const ids = () => new Set([...document.querySelectorAll("[data-prompt-id]")].map((e) => e.dataset.promptId));
  let known = ids();

  const retitle = () => {
    const count = Number(list()?.dataset.count || 0);
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

  document.getElementById("inbox-live")?.addEventListener("htmx:ws:after:message:incoming", () => {
    const now = ids();
    for (const id of now) {
      if (known.has(id)) continue;
      const item = document.getElementById(`inbox-${id}`);
      const text = item?.querySelector(".asked")?.textContent?.trim() || "An agent is waiting for an answer";
      if ("Notification" in window && Notification.permission === "granted") {
        const note = new Notification("koruweb: an agent asks", { body: text, tag: id });
        note.onclick = () => { window.focus(); item?.scrollIntoView(); };
      }
    }
    known = now;
    retitle();
  });
  retitle();
})();

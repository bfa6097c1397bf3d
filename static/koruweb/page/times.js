// Times as a person reads them: every <time datetime> says how long ago ("3 min ago") and
// shows the moment in the viewer's own time zone in its tooltip. The server renders times in
// UTC, once for every viewer (pushes too), so this runs on every page, again whenever a push
// inserts or morphs something (a morph puts the server's UTC text back), and every 30 seconds.
(() => {
  // dateStyle/timeStyle cannot be combined with timeZoneName (a RangeError): the fields one by one.
  const absolute = new Intl.DateTimeFormat(undefined, {
    year: "numeric", month: "short", day: "numeric",
    hour: "2-digit", minute: "2-digit", second: "2-digit",
    timeZoneName: "short",
  });
  const shortDate = new Intl.DateTimeFormat(undefined, { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" });

  const ago = (moment, now) => {
    const seconds = Math.round((now - moment) / 1000);
    if (seconds < 10) return seconds > -60 ? "just now" : shortDate.format(moment); // a clock ahead
    if (seconds < 60) return `${seconds} s ago`;
    const minutes = Math.floor(seconds / 60);
    if (minutes < 60) return `${minutes} min ago`;
    const hours = Math.floor(minutes / 60);
    if (hours < 24) return `${hours} h ago`;
    const days = Math.floor(hours / 24);
    if (days === 1) return "yesterday";
    if (days < 7) return `${days} days ago`;
    return shortDate.format(moment);
  };

  const localise = () => {
    const now = Date.now();
    for (const el of document.querySelectorAll("time[datetime]")) {
      const moment = Date.parse(el.getAttribute("datetime"));
      if (Number.isNaN(moment)) continue;
      const title = absolute.format(moment);
      const text = ago(moment, now);
      if (el.getAttribute("title") !== title) el.setAttribute("title", title);
      if (el.textContent !== text) el.textContent = text;
      if (el.dataset.local !== "true") el.dataset.local = "true";
    }
  };

  const start = () => {
    localise();
    let queued = false;
    new MutationObserver(() => {
      if (queued) return;
      queued = true;
      queueMicrotask(() => {
        queued = false;
        localise();
      });
    }).observe(document.body, { childList: true, subtree: true, characterData: true, attributes: true, attributeFilter: ["datetime", "data-local"] });
    setInterval(localise, 30_000);
  };

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();

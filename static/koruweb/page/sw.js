// koruweb's service worker, served at /sw.js so that it may control every page
// (docs/protocol.md#notifications).
//
// - Offline: it keeps one page, /offline/ (no one's data on it), and shows it when a page
//   cannot be reached. Nothing else is cached: a logged-in page is always the server's own,
//   live, never a stale copy.
// - Push: every push shows a notification (a push that shows nothing is penalised by browsers).
//   One about a prompt carries the prompt's allow-once and reject choices as buttons; a later
//   one with the same tag (the prompt answered, or closed) replaces it quietly.
// - A button answers as the web page does: a POST with the person's session cookie and the
//   token the notification carries (it stands in for the CSRF token a page would send).
//   Tapping the notification itself opens the prompt.
"use strict";

const OFFLINE = "/offline/";
const CACHE = "koruweb-offline-1";
const ICON = "/static/koruweb/page/icons/icon-192.png";

self.addEventListener("install", (event) => {
  event.waitUntil(
    caches.open(CACHE)
      .then((cache) => cache.add(new Request(OFFLINE, { credentials: "omit" })))
      .then(() => self.skipWaiting()),
  );
});

self.addEventListener("activate", (event) => {
  event.waitUntil(
    caches.keys()
      .then((names) => Promise.all(names.filter((n) => n !== CACHE).map((n) => caches.delete(n))))
      .then(() => self.clients.claim()),
  );
});

self.addEventListener("fetch", (event) => {
  if (event.request.mode !== "navigate") return; // everything else goes to the network as is
  event.respondWith(fetch(event.request).catch(() => caches.match(OFFLINE)));
});

function show(said) {
  return self.registration.showNotification(said.title || "koruweb", {
    body: said.body || "",
    tag: said.tag,
    icon: ICON,
    badge: ICON,
    data: said,
    actions: said.settled ? [] : (said.actions || []),
    renotify: false,
    silent: Boolean(said.settled),
    requireInteraction: Boolean(said.actions && said.actions.length && !said.settled),
  });
}

self.addEventListener("push", (event) => {
  let said;
  try {
    said = event.data ? event.data.json() : {};
  } catch (_) {
    said = { title: "koruweb", body: "Something needs you." };
  }
  event.waitUntil(show(said));
});

async function openPage(url) {
  const target = new URL(url || "/inbox/", self.location.origin).href;
  const open = await self.clients.matchAll({ type: "window", includeUncontrolled: true });
  const same = open.find((client) => client.url === target);
  if (same) return same.focus();
  return self.clients.openWindow(target);
}

// Answer the notification's prompt with the button ``action`` (an option's id); what came of
// it replaces the notification. Exposed on ``self`` for the browser tests.
self.answerFrom = async (notification, action) => {
  const said = notification.data || {};
  const body = new FormData();
  body.set("choice", action);
  body.set("token", (said.answer && said.answer.token) || "");
  let reply = {};
  let ok = false;
  try {
    const response = await fetch(said.answer.url, { method: "POST", body, credentials: "same-origin" });
    ok = response.ok;
    reply = await response.json();
  } catch (_) {
    reply = { error: "koruweb could not be reached." };
  }
  const line = ok ? `${reply.decision}: sent.` : `${reply.error || "Not sent."} Tap to open the prompt.`;
  await show({ title: said.title, body: line, tag: said.tag, url: said.url, settled: true });
  return ok;
};

self.addEventListener("notificationclick", (event) => {
  const said = event.notification.data || {};
  if (event.action && said.answer && !said.settled) {
    event.waitUntil(self.answerFrom(event.notification, event.action));
    return;
  }
  event.notification.close();
  event.waitUntil(openPage(said.url));
});

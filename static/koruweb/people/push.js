// Turns notifications on in this browser: the button of /settings/notifications/
// (docs/protocol.md#notifications). Asks the browser for permission only when the button is
// pressed, subscribes with the server's public key, and sends the subscription to the server,
// which keeps it for this person. Knows when this browser is on already.
"use strict";

(() => {
  const section = document.getElementById("push-here");
  if (!section) return;
  const button = document.getElementById("push-on");
  const status = document.getElementById("push-status");
  const say = (text) => { status.textContent = text; };

  function key(base64url) {
    const text = atob(base64url.replace(/-/g, "+").replace(/_/g, "/") + "=".repeat((4 - base64url.length % 4) % 4));
    return Uint8Array.from(text, (c) => c.charCodeAt(0));
  }

  function deviceName() {
    const agent = navigator.userAgent;
    const browser = /Edg\//.test(agent) ? "Edge" : /Firefox\//.test(agent) ? "Firefox"
      : /Chrom(e|ium)\//.test(agent) ? "Chrome" : /Safari\//.test(agent) ? "Safari" : "A browser";
    const system = /Android/.test(agent) ? "Android" : /iPhone|iPad/.test(agent) ? "iOS"
      : /Mac OS X/.test(agent) ? "macOS" : /Windows/.test(agent) ? "Windows" : /Linux/.test(agent) ? "Linux" : "";
    return system ? `${browser} on ${system}` : browser;
  }

  function shown(endpoint) {
    return [...document.querySelectorAll(".push-devices [data-endpoint]")]
      .some((item) => item.dataset.endpoint === endpoint);
  }

  async function current() {
    if (!("serviceWorker" in navigator) || !("PushManager" in window)) return null;
    const registration = await navigator.serviceWorker.register("/sw.js");
    await navigator.serviceWorker.ready;
    return registration;
  }

  async function turnOn() {
    button.disabled = true;
    try {
      const registration = await current();
      if (!registration) {
        say("This browser cannot receive notifications (no Push API). On an iPhone, add koruweb to the home screen first.");
        return;
      }
      const permission = await Notification.requestPermission();
      if (permission !== "granted") {
        say("Notifications are blocked for this site: allow them in the browser's site settings, then try again.");
        return;
      }
      const subscription = await registration.pushManager.getSubscription()
        || await registration.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: key(section.dataset.key) });
      const response = await fetch(section.dataset.devices, {
        method: "POST",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json", "X-CSRFToken": section.dataset.csrf },
        body: JSON.stringify({ subscription: subscription.toJSON(), name: deviceName() }),
      });
      if (!response.ok) {
        const reply = await response.json().catch(() => ({}));
        say(reply.error || "The server did not keep this browser: try again.");
        return;
      }
      location.reload(); // the list shows this browser
    } catch (error) {
      say(`Notifications could not be turned on: ${error.message || error}`);
    } finally {
      button.disabled = false;
    }
  }

  // Quiet hours are in the person's time zone: offer this browser's.
  const zone = document.getElementById("push-zone");
  const zoneField = document.querySelector(".push-prefs input[name=time_zone]");
  const here = Intl.DateTimeFormat().resolvedOptions().timeZone;
  if (zone && zoneField && here && zoneField.value !== here) {
    zone.hidden = false;
    zone.textContent = `Use this browser's: ${here}`;
    zone.addEventListener("click", () => { zoneField.value = here; zone.hidden = true; });
  }

  button.addEventListener("click", turnOn);
  current().then(async (registration) => {
    const subscription = registration && await registration.pushManager.getSubscription();
    if (subscription && shown(subscription.endpoint)) {
      say("Notifications are on in this browser.");
      button.textContent = "Turn on again in this browser";
    }
  }).catch(() => {});
})();

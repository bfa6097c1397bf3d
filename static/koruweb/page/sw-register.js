// Every page registers koruweb's service worker (/sw.js): it shows the offline page when the
// server cannot be reached and the notifications a person turned on. It caches no page.
"use strict";
if ("serviceWorker" in navigator) navigator.serviceWorker.register("/sw.js").catch(() => {});

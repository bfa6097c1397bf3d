// Permalinks to a row (#tool-<uuid>): scroll to it and highlight it. A row that is not on this
// page (a very long turn shows its latest calls live) is found through /tools/<uuid>/.
// The prefix comes from the script tag (data-prefix), which takes it from activity/show/dom.py.
(() => {
  const prefix = document.currentScript.dataset.prefix;
  const show = () => {
    const id = decodeURIComponent(location.hash.slice(1));
    if (!id.startsWith(prefix)) return;
    const row = document.getElementById(id);
    if (!row) {
      if (!sessionStorage.getItem(`sought-${id}`)) {
        sessionStorage.setItem(`sought-${id}`, "1");
        location.replace(`/tools/${id.slice(prefix.length)}/`);
      }
      return;
    }
    document.querySelectorAll(".highlight").forEach((el) => el.classList.remove("highlight"));
    row.classList.add("highlight");
    row.scrollIntoView({ block: "center" });
  };
  window.addEventListener("hashchange", show);
  show();
})();

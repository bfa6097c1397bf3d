// Permalinks to a row (#tool-<uuid>): scroll to it and highlight it. A row that is not on this
// page (a very long turn shows its latest calls live) is found through /tools/<uuid>/.
(() => {
  const show = () => {
    const id = decodeURIComponent(location.hash.slice(1));
    if (!id.startsWith("tool-")) return;
    const row = document.getElementById(id);
    if (!row) {
      if (!sessionStorage.getItem(`sought-${id}`)) {
        sessionStorage.setItem(`sought-${id}`, "1");
        location.replace(`/tools/${id.slice(5)}/`);
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

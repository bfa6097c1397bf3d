// The turn's timeline (activity/show/timeline.py): drag across a lane to zoom into that stretch of
// time. The zoom is the page's own link (?from=&to=, ms from the turn's start), so Back goes
// back out, and the preset links above the plot work without this script.
(() => {
  const figure = document.getElementById("timeline");
  if (!figure) return;
  const begin = Number(figure.dataset.begin);
  const end = Number(figure.dataset.end);
  const turnStart = Number(figure.dataset.turnStart);
  const MIN_DRAG = 6; // px: less is a click on a mark

  let drag = null;
  const band = document.createElement("div");
  band.className = "tl-band";
  band.hidden = true;
  figure.querySelector(".tl-body")?.append(band);

  const at = (plot, clientX) => {
    const box = plot.getBoundingClientRect();
    return Math.min(Math.max((clientX - box.left) / box.width, 0), 1);
  };

  const showBand = () => {
    const body = figure.querySelector(".tl-body").getBoundingClientRect();
    const box = drag.plot.getBoundingClientRect();
    const [a, b] = [drag.from, drag.to].sort((x, y) => x - y);
    band.hidden = false;
    band.style.left = `${box.left - body.left + a * box.width}px`;
    band.style.width = `${Math.max((b - a) * box.width, 1)}px`;
  };

  figure.addEventListener("pointerdown", (event) => {
    const plot = event.target.closest(".tl-plot");
    if (!plot || event.button !== 0) return;
    drag = { plot, x: event.clientX, from: at(plot, event.clientX), to: at(plot, event.clientX), moved: false };
  });

  document.addEventListener("pointermove", (event) => {
    if (!drag) return;
    drag.to = at(drag.plot, event.clientX);
    if (Math.abs(event.clientX - drag.x) >= MIN_DRAG) {
      drag.moved = true;
      showBand();
      event.preventDefault();
    }
  });

  document.addEventListener("pointerup", () => {
    if (!drag) return;
    const { from, to, moved } = drag;
    drag = null;
    band.hidden = true;
    figure.dataset.dragged = String(moved);
    if (!moved) return; // a click: the mark's own link
    const [a, b] = [from, to].sort((x, y) => x - y);
    const span = end - begin;
    const query = new URLSearchParams(location.search);
    query.delete("page");
    query.set("from", String(Math.max(Math.floor(begin - turnStart + a * span), 0)));
    query.set("to", String(Math.ceil(begin - turnStart + b * span)));
    location.assign(`?${query}#timeline`);
  });

  // A drag that ends on a mark is not a click on its link.
  figure.addEventListener("click", (event) => {
    if (figure.dataset.dragged !== "true") return;
    figure.dataset.dragged = "false";
    event.preventDefault();
  });
})();

// netc preview: clicking a node shows its source and what each target emitted; a toggle switches
// between the RETURNN and the torch drawing; in --watch mode the page reloads when the model changes.
// Every text from the model goes into the page through textContent, never as HTML.
(function () {
  "use strict";
  const live = document.getElementById("netc-live");
  if (live) {
    const version = JSON.parse(live.textContent).version;
    const status = document.getElementById("live-status");
    const events = new EventSource("/events");
    events.onopen = () => { status.hidden = false; status.textContent = "live"; };
    events.onerror = () => { status.textContent = "reconnecting…"; };
    events.onmessage = (e) => { if (e.data !== version) window.location.reload(); };
  }
  const dataEl = document.getElementById("netc_data");
  if (!dataEl) return; // the error page
  const data = JSON.parse(dataEl.textContent);
  // the view, zoom and selection survive a reload (--watch), per model file
  const key = "netc-preview:" + data.source_file + ":";
  const store = {
    getItem: (name) => window.sessionStorage.getItem(key + name),
    setItem: (name, value) => window.sessionStorage.setItem(key + name, value),
  };
  const items = new Map();
  for (const n of data.nodes) items.set(n.id, n);
  for (const c of data.clusters) items.set(c.id, Object.assign({ kind: "loop" }, c));

  function text(id, value) {
    const el = document.getElementById(id);
    el.textContent = value || "—";
    return el;
  }

  function select(id) {
    const item = items.get(id);
    if (!item) return;
    store.setItem("selected", id);
    document.querySelectorAll("#graph g.selected").forEach((g) => g.classList.remove("selected"));
    document.querySelectorAll("#r-" + id + ", #t-" + id).forEach((g) => g.classList.add("selected"));
    document.getElementById("hint").hidden = true;
    document.getElementById("detail").hidden = false;
    const what = item.kind === "op" ? item.op : item.kind;
    text("detail-title", item.label + "  (" + what + ")");
    const badges = document.getElementById("detail-badges");
    badges.replaceChildren();
    const marks = [];
    if (item.dims && item.dims.length) marks.push(item.dims.map((d) => "[" + d.join(", ") + "]").join(" "));
    if (item.hoisted_from) marks.push("hoisted out of the loop at line " + items.get(item.hoisted_from).source.span.line);
    if (item.cluster) marks.push("in the loop at line " + items.get(item.cluster).source.span.line);
    for (const m of marks) {
      const b = document.createElement("span");
      b.className = "badge";
      b.textContent = m;
      badges.appendChild(b);
    }
    const src = item.source;
    text("detail-where", src ? src.span.file + ":" + src.span.line + ":" + src.span.col : "");
    text("detail-source", src ? src.text : "");
    text("detail-returnn-name", item.returnn ? item.returnn.name + " (" + item.returnn.kind + ")" : "");
    text("detail-returnn", item.returnn ? item.returnn.code : "");
    text("detail-torch-name", item.torch ? item.torch.name + " (" + item.torch.kind + ")" : "");
    text("detail-torch", item.torch ? item.torch.code : "");
  }

  function show(view) {
    store.setItem("view", view);
    document.querySelectorAll(".view").forEach((v) => { v.hidden = v.dataset.view !== view; });
    document.querySelectorAll(".toggle button").forEach((b) => {
      b.setAttribute("aria-pressed", String(b.dataset.view === view));
    });
  }

  // zoom: each drawing keeps Graphviz's size (its scale 1) until a button changes it
  let scale = Number(store.getItem("zoom")) || 1;
  function zoom(how) {
    const svgs = document.querySelectorAll("#graph svg");
    if (how === "fit") {
      const visible = [...svgs].find((svg) => !svg.closest(".view").hidden);
      scale = (document.getElementById("graph").clientWidth - 32) / visible.width.baseVal.value;
    } else {
      scale *= how;
    }
    store.setItem("zoom", String(scale));
    svgs.forEach((svg) => {
      svg.style.width = svg.width.baseVal.value * scale + "px";
      svg.style.height = svg.height.baseVal.value * scale + "px";
    });
  }
  document.querySelectorAll(".zoom button").forEach((b) => {
    b.addEventListener("click", () => zoom(b.dataset.zoom === "fit" ? "fit" : Number(b.dataset.zoom)));
  });
  if (scale !== 1) zoom(1);
  document.querySelectorAll(".toggle button").forEach((b) => b.addEventListener("click", () => show(b.dataset.view)));
  document.querySelectorAll("#graph g.netc-node, #graph g.netc-cluster").forEach((g) => {
    g.addEventListener("click", (e) => { e.stopPropagation(); select(g.id.slice(2)); });
  });
  show(store.getItem("view") || "returnn");
  const selected = store.getItem("selected");
  if (selected && items.has(selected)) select(selected);
})();

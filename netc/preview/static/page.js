// netc preview: clicking a node shows its source and what each target emitted; a toggle switches
// between the RETURNN and the torch drawing; the canvas zooms (wheel, at the cursor) and pans
// (drag); a search box and the URL fragment (#at=line:col, #find=text) find nodes; loops and
// modules collapse; in --watch mode the page reloads when the model changes, keeping its view.
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
  const graph = document.getElementById("graph");

  // the view survives a reload (--watch), per model file: which drawing, each drawing's camera,
  // the selection, the collapsed boxes and the last URL fragment acted on
  const key = "netc-preview:" + data.source_file;
  let state = {};
  try { state = JSON.parse(window.sessionStorage.getItem(key)) || {}; } catch (e) { state = {}; }
  state.cams = state.cams || {};
  state.collapsed = state.collapsed || [];
  function save() { window.sessionStorage.setItem(key, JSON.stringify(state)); }

  const items = new Map(); // nodes, loops and modules, by id (the same ids in both drawings)
  for (const n of data.nodes) items.set(n.id, n);
  for (const c of data.clusters) items.set(c.id, Object.assign({ kind: "loop" }, c));
  for (const m of data.modules) {
    items.set(m.id, { id: m.id, kind: "module", label: "module " + m.path, cluster: m.cluster, nodes: m.nodes });
  }
  // the RETURNN view draws ops folded into one layer as that layer's one box
  const boxOf = (id, view) => (view === "returnn" && data.boxes[id]) || id;

  // --- geometry: each drawing's boxes in graph units (Graphviz points), read once it is shown ---
  const MIN_FIT = 0.7; // px per point: 10-point labels at 7 px; a graph that would be smaller opens at this
  const MAX_FIT = 1.5;
  const MIN_SCALE = 0.05, MAX_SCALE = 8;
  const PAD = 16;
  const views = {};
  for (const el of document.querySelectorAll("#graph .view")) {
    const svg = el.querySelector("svg");
    const vb = svg.viewBox.baseVal;
    views[el.dataset.view] = { el, svg, root: svg.querySelector("g.graph"), box: { x: vb.x, y: vb.y, w: vb.width, h: vb.height } };
    // one graph unit one px at scale 1; the camera is a CSS transform (no SVG re-layout per step)
    svg.setAttribute("width", String(vb.width));
    svg.setAttribute("height", String(vb.height));
  }
  function geometry(v) {
    if (v.geo) return v.geo;
    const m = v.root.transform.baseVal.consolidate();
    const dx = m ? m.matrix.e : 0, dy = m ? m.matrix.f : 0;
    const local = (g) => { const b = g.getBBox(); return { x: b.x, y: b.y, w: b.width, h: b.height }; };
    const geo = { dx, dy, nodes: new Map(), clusters: new Map(), edges: [] };
    for (const g of v.svg.querySelectorAll("g.netc-node")) geo.nodes.set(g.id.slice(2), { g, b: local(g) });
    for (const g of v.svg.querySelectorAll("g.netc-cluster")) {
      const shape = g.querySelector("path, polygon");
      geo.clusters.set(g.id.slice(2), { g, b: local(shape || g) });
    }
    for (const g of v.svg.querySelectorAll("g.netc-edge")) {
      const [src, dst] = g.querySelector("title").textContent.split("->");
      geo.edges.push({ g, src, dst });
    }
    const inside = (a, b) => a.x >= b.x - 0.5 && a.y >= b.y - 0.5 && a.x + a.w <= b.x + b.w + 0.5 && a.y + a.h <= b.y + b.h + 0.5;
    for (const [, c] of geo.clusters) {
      c.nodes = [...geo.nodes.keys()].filter((id) => inside(geo.nodes.get(id).b, c.b));
      c.inner = [...geo.clusters.keys()].filter((id) => geo.clusters.get(id) !== c && inside(geo.clusters.get(id).b, c.b));
    }
    v.geo = geo;
    return geo;
  }
  // a box in graph units (the SVG's viewBox), centre included
  function graphBox(v, b) {
    const g = geometry(v);
    return { x: b.x + g.dx, y: b.y + g.dy, w: b.w, h: b.h, cx: b.x + g.dx + b.w / 2, cy: b.y + g.dy + b.h / 2 };
  }

  // --- the camera: the graph point at the canvas' centre and the scale (px per point) ---
  let current = null;
  const cam = () => state.cams[current];
  function apply() {
    const v = views[current], c = cam();
    const W = graph.clientWidth, H = graph.clientHeight;
    const tx = W / 2 - c.s * (c.cx - v.box.x), ty = H / 2 - c.s * (c.cy - v.box.y);
    v.svg.style.transform = "translate(" + tx + "px, " + ty + "px) scale(" + c.s + ")";
    graph.dataset.scale = String(c.s);
    minimap();
    save();
  }
  function fit() {
    const v = views[current], b = v.box;
    const W = graph.clientWidth, H = graph.clientHeight;
    const s = Math.min(MAX_FIT, (W - 2 * PAD) / b.w, (H - 2 * PAD) / b.h);
    if (s >= MIN_FIT) {
      state.cams[current] = { cx: b.x + b.w / 2, cy: b.y + b.h / 2, s };
    } else {
      // too large to read whole: readable, the inputs centred across, the graph's top at the top
      const geo = geometry(v);
      const inputs = data.nodes.filter((n) => n.kind === "input" && geo.nodes.has(n.id)).map((n) => graphBox(v, geo.nodes.get(n.id).b));
      let cx = b.x + b.w / 2;
      if (inputs.length) {
        const x0 = Math.min(...inputs.map((i) => i.x)), x1 = Math.max(...inputs.map((i) => i.x + i.w));
        cx = x1 - x0 <= W / MIN_FIT - 2 * PAD ? (x0 + x1) / 2 : inputs[0].cx;
      }
      state.cams[current] = { cx, cy: b.y + H / 2 / MIN_FIT - PAD / MIN_FIT, s: MIN_FIT };
    }
    apply();
  }
  function zoomAt(factor, mx, my) { // mx, my: canvas px of the point that stays put
    const c = cam(), W = graph.clientWidth, H = graph.clientHeight;
    if (mx === undefined) { mx = W / 2; my = H / 2; }
    const s = Math.max(MIN_SCALE, Math.min(MAX_SCALE, c.s * factor));
    const gx = c.cx + (mx - W / 2) / c.s, gy = c.cy + (my - H / 2) / c.s;
    state.cams[current] = { cx: gx - (mx - W / 2) / s, cy: gy - (my - H / 2) / s, s };
    apply();
  }
  function centreOn(b, minScale) {
    const c = cam();
    state.cams[current] = { cx: b.cx, cy: b.cy, s: Math.max(c.s, minScale || 0) };
    apply();
  }
  graph.addEventListener("wheel", (e) => {
    e.preventDefault();
    const r = graph.getBoundingClientRect();
    const dy = e.deltaMode === 1 ? e.deltaY * 16 : e.deltaMode === 2 ? e.deltaY * 400 : e.deltaY;
    zoomAt(Math.exp(-dy * 0.002), e.clientX - r.left, e.clientY - r.top);
  }, { passive: false });
  let drag = null, dragged = false;
  graph.addEventListener("pointerdown", (e) => {
    if (e.button !== 0) return;
    drag = { x: e.clientX, y: e.clientY, cx: cam().cx, cy: cam().cy, id: e.pointerId };
    dragged = false;
  });
  graph.addEventListener("pointermove", (e) => {
    if (!drag) return;
    const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
    if (!dragged && Math.abs(dx) + Math.abs(dy) < 4) return;
    if (!dragged) { dragged = true; graph.setPointerCapture(drag.id); graph.classList.add("panning"); }
    const s = cam().s;
    state.cams[current] = { cx: drag.cx - dx / s, cy: drag.cy - dy / s, s };
    apply();
  });
  const endDrag = () => { drag = null; graph.classList.remove("panning"); };
  graph.addEventListener("pointerup", endDrag);
  graph.addEventListener("pointercancel", endDrag);
  // the click that ends a drag selects nothing
  graph.addEventListener("click", (e) => { if (dragged) { e.stopPropagation(); dragged = false; } }, true);
  window.addEventListener("resize", () => apply());

  // --- the minimap: the whole drawing, small, with the visible part framed; a click goes there ---
  const mini = document.getElementById("minimap");
  function minimap() {
    if (!mini) return;
    const v = views[current], b = v.box, c = cam();
    const W = graph.clientWidth, H = graph.clientHeight;
    const visible = W / c.s < b.w || H / c.s < b.h;
    mini.hidden = !visible;
    if (!visible) return;
    const k = Math.min(160 / b.w, 160 / b.h);
    mini.style.width = b.w * k + "px";
    mini.style.height = b.h * k + "px";
    if (mini.dataset.view !== current) {
      mini.dataset.view = current;
      const copy = v.svg.cloneNode(true);
      copy.querySelectorAll("[id], [class]").forEach((el) => { el.removeAttribute("id"); el.removeAttribute("class"); });
      copy.querySelectorAll("text").forEach((el) => el.remove());
      copy.removeAttribute("id");
      copy.removeAttribute("style");
      copy.setAttribute("width", "100%");
      copy.setAttribute("height", "100%");
      copy.setAttribute("class", "mini-graph");
      mini.replaceChildren(copy);
      const frame = document.createElement("div");
      frame.className = "mini-frame";
      mini.appendChild(frame);
    }
    const frame = mini.querySelector(".mini-frame");
    frame.style.left = (c.cx - W / 2 / c.s - b.x) * k + "px";
    frame.style.top = (c.cy - H / 2 / c.s - b.y) * k + "px";
    frame.style.width = (W / c.s) * k + "px";
    frame.style.height = (H / c.s) * k + "px";
  }
  if (mini) {
    mini.addEventListener("pointerdown", (e) => e.stopPropagation());
    mini.addEventListener("click", (e) => {
      e.stopPropagation();
      const b = views[current].box, r = mini.getBoundingClientRect();
      const k = Math.min(160 / b.w, 160 / b.h);
      centreOn({ cx: b.x + (e.clientX - r.left) / k, cy: b.y + (e.clientY - r.top) / k });
    });
  }

  // --- collapsing a loop or a module: the drawing laid out again by Graphviz (in the page, as
  // WebAssembly) with the box as one node, so it takes one node's space; with nothing collapsed,
  // the drawing netc made. Ids stay those of the data: a collapsed box is a node of its id ---
  const nesting = {}; // view -> node or box id -> the boxes around it in the dot text, outermost first
  function boxesAround(view, id) {
    if (!nesting[view]) {
      const around = new Map(), open = [];
      for (const line of data.dots[view].split("\n")) {
        const c = /^\s*subgraph "cluster_([^"]+)" \{$/.exec(line);
        if (c) { around.set(c[1], open.slice()); open.push(c[1]); continue; }
        if (line.trim() === "}") { open.pop(); continue; }
        const n = /^\s*"([^"]+)" \[id=/.exec(line);
        if (n) around.set(n[1], open.slice());
      }
      nesting[view] = around;
    }
    return nesting[view].get(id) || [];
  }
  const dotString = (s) => '"' + String(s).replace(/\\/g, "\\\\").replace(/"/g, '\\"') + '"';
  function collapsedDot(view, collapsed) { // the view's dot text, each collapsed box one node
    const out = [], into = new Map(), seen = new Set();
    let box = null, depth = 0, count = 0, indent = "";
    for (const line of data.dots[view].split("\n")) {
      if (box !== null) { // inside a collapsed box: its nodes and boxes are left out
        if (/^\s*subgraph "cluster_/.test(line)) depth++;
        else if (line.trim() === "}") depth--;
        const n = /^\s*"([^"]+)" \[id=/.exec(line);
        if (n) { into.set(n[1], box); count++; }
        if (depth === 0) {
          const item = items.get(box);
          const label = "▸ " + item.label + "\n" + count + " nodes collapsed (double-click to expand)";
          out.push(indent + dotString(box) + ' [id="' + view[0] + "-" + box + '", class="netc-node netc-collapsed", ' +
            'shape=box, style="rounded,filled,bold", fillcolor="#e3e5f3", color="#3c4190", fontcolor="#3c4190", ' +
            "label=" + dotString(label).replace(/\n/g, "\\n") + "];");
          box = null;
        }
        continue;
      }
      const c = /^(\s*)subgraph "cluster_([^"]+)" \{$/.exec(line);
      if (c && collapsed.includes(c[2])) { box = c[2]; indent = c[1]; depth = 1; count = 0; continue; }
      const e = /^(\s*)"([^"]+)" -> "([^"]+)"(.*)$/.exec(line);
      if (e) { // an edge into or out of a collapsed box ends at it; one inside it is left out
        const a = into.get(e[2]) || e[2], b = into.get(e[3]) || e[3];
        const edge = e[1] + dotString(a) + " -> " + dotString(b) + e[4];
        if (a !== b && !seen.has(edge)) { seen.add(edge); out.push(edge); }
        continue;
      }
      out.push(line);
    }
    return out.join("\n");
  }
  let viz = null; // Graphviz, made on the first collapse
  function bind(svg) {
    if (svg.dataset.bound) return;
    svg.dataset.bound = "1";
    svg.querySelectorAll("g.netc-node, g.netc-cluster").forEach((g) => {
      g.addEventListener("click", (e) => { e.stopPropagation(); select(g.id.slice(2)); });
    });
    svg.querySelectorAll("g.netc-cluster, g.netc-collapsed").forEach((g) => {
      g.addEventListener("dblclick", (e) => { e.stopPropagation(); toggleCollapse(g.id.slice(2)); });
    });
  }
  function install(view, svg) {
    const v = views[view];
    if (svg !== v.svg) v.svg.replaceWith(svg);
    const vb = svg.viewBox.baseVal;
    Object.assign(v, { svg, root: svg.querySelector("g.graph"), box: { x: vb.x, y: vb.y, w: vb.width, h: vb.height }, geo: null });
    svg.setAttribute("width", String(vb.width));
    svg.setAttribute("height", String(vb.height));
    bind(svg);
    svg.querySelectorAll("g.selected").forEach((g) => g.classList.remove("selected"));
    if (state.selected) svg.querySelectorAll("#" + view[0] + "-" + boxOf(state.selected, view)).forEach((g) => g.classList.add("selected"));
    if (mini) mini.dataset.view = "";
  }
  // the current collapsed boxes drawn in `view` (a promise: Graphviz lays them out asynchronously)
  function render(view) {
    const v = views[view];
    const collapsed = state.collapsed.filter((id) => boxesAround(view, id).every((c) => !state.collapsed.includes(c)) &&
      data.dots[view].includes('subgraph "cluster_' + id + '" {'));
    const key = collapsed.slice().sort().join(",");
    if (v.key === key) return Promise.resolve();
    v.key = key;
    const svg = key === "" ? Promise.resolve(v.original)
      : (viz || (viz = Viz.instance())).then((g) => g.renderSVGElement(collapsedDot(view, collapsed)));
    return svg.then((el) => {
      if (v.key !== key) return;
      install(view, el);
      document.getElementById("graph").dataset.layout = view + ":" + key; // for tests: drawn
      if (view === current && state.cams[view]) apply();
    });
  }
  function toggleCollapse(id, collapse) {
    const on = state.collapsed.includes(id);
    if (collapse === undefined) collapse = !on;
    if (collapse && !on) state.collapsed.push(id);
    if (!collapse) state.collapsed = state.collapsed.filter((c) => c !== id);
    save();
    const sel = state.selected && items.get(state.selected);
    if (sel && sel.id === id) select(id);
    return render(current).then(() => centreOnItem(id, false));
  }

  // --- selection and its detail panel ---
  function text(id, value) {
    const el = document.getElementById(id);
    el.textContent = value || "—";
    return el;
  }
  function select(id) {
    const item = items.get(id);
    if (!item) return;
    state.selected = id;
    save();
    document.querySelectorAll("#graph g.selected").forEach((g) => g.classList.remove("selected"));
    document.querySelectorAll("#r-" + boxOf(id, "returnn") + ", #t-" + id).forEach((g) => g.classList.add("selected"));
    document.getElementById("hint").hidden = true;
    document.getElementById("detail").hidden = false;
    const what = item.kind === "op" ? item.op : item.kind;
    text("detail-title", item.label + "  (" + what + ")");
    const badges = document.getElementById("detail-badges");
    badges.replaceChildren();
    const marks = [];
    if (item.dims && item.dims.length) marks.push(item.dims.map((d) => "[" + d.join(", ") + "]").join(" "));
    if (item.hoisted_from) marks.push("hoisted out of the loop at line " + items.get(item.hoisted_from).source.span.line);
    if (item.cluster && items.get(item.cluster).source) marks.push("in the loop at line " + items.get(item.cluster).source.span.line);
    if (data.boxes[id]) marks.push("folded into the RETURNN layer " + items.get(data.boxes[id]).returnn.name);
    if (item.kind === "module") marks.push(item.nodes.length + " ops");
    for (const m of marks) {
      const b = document.createElement("span");
      b.className = "badge";
      b.textContent = m;
      badges.appendChild(b);
    }
    const button = document.getElementById("collapse");
    button.hidden = !(item.kind === "loop" || item.kind === "module");
    button.textContent = state.collapsed.includes(id) ? "expand" : "collapse";
    const src = item.source;
    text("detail-where", src ? src.span.file + ":" + src.span.line + ":" + src.span.col : "");
    text("detail-source", src ? src.text : "");
    text("detail-returnn-name", item.returnn ? item.returnn.name + " (" + item.returnn.kind + ")" : "");
    text("detail-returnn", item.returnn ? item.returnn.code : "");
    text("detail-torch-name", item.torch ? item.torch.name + " (" + item.torch.kind + ")" : "");
    text("detail-torch", item.torch ? item.torch.code : "");
  }
  document.getElementById("collapse").addEventListener("click", () => { if (state.selected) toggleCollapse(state.selected); });
  // selects a node, loop or module, shows it (expanding the collapsed boxes that hide it) and
  // centres it, readable
  function goTo(id) {
    if (!items.has(id)) return false;
    const hiding = boxesAround(current, boxOf(id, current)).filter((c) => state.collapsed.includes(c));
    if (hiding.length) { state.collapsed = state.collapsed.filter((c) => !hiding.includes(c)); save(); }
    select(id);
    render(current).then(() => centreOnItem(id, true));
    return true;
  }
  function centreOnItem(id, readable) { // `readable`: at least scale 1 (a loop or module: all of it, or its top)
    const v = views[current], geo = geometry(v), box = boxOf(id, current);
    if (geo.nodes.has(box)) centreOn(graphBox(v, geo.nodes.get(box).b), readable ? 1 : 0);
    else if (geo.clusters.has(box)) {
      const b = graphBox(v, geo.clusters.get(box).b);
      if (!readable) return centreOn(b);
      const W = graph.clientWidth, H = graph.clientHeight;
      const s = Math.max(MIN_FIT, Math.min(1.5, (W - 2 * PAD) / b.w, (H - 2 * PAD) / b.h));
      state.cams[current] = { cx: b.cx, cy: Math.max(b.cy, b.y + (H / 2 - PAD) / s), s };
      if (b.h * s > H - 2 * PAD) state.cams[current].cy = b.y + (H / 2 - PAD) / s;
      apply();
    }
  }

  // --- search: layer names, torch variables, the user's names, ops; Enter goes to the next ---
  const search = { query: null, hits: [], at: -1 };
  function find(query) {
    const q = query.trim().toLowerCase();
    if (!q) return [];
    const scored = [];
    let order = 0;
    for (const item of items.values()) {
      // the label, and the variables the source assigns it to (`scores`, whose value is stacked as `logits`)
      const names = [item.label, ...(item.names || []), item.op, item.returnn && item.returnn.name, item.torch && item.torch.name, item.path];
      if (item.returnn) names.push(item.returnn.name.split("/").pop());
      let best = 3;
      for (const name of names) {
        if (!name) continue;
        const n = String(name).toLowerCase();
        best = Math.min(best, n === q ? 0 : n.startsWith(q) ? 1 : n.includes(q) ? 2 : 3);
      }
      if (best < 3) scored.push([best, order, item.id]);
      order++;
    }
    // one hit per box drawn (a RETURNN layer's folded ops are its box): the box's own node first
    const own = (id) => (boxOf(id, current) === id ? 0 : 1);
    scored.sort((a, b) => a[0] - b[0] || own(a[2]) - own(b[2]) || a[1] - b[1]);
    const boxes = new Set();
    return scored.map((s) => s[2]).filter((id) => !boxes.has(boxOf(id, current)) && boxes.add(boxOf(id, current)));
  }
  function searchNext(query, step) {
    if (query + "\n" + current !== search.query) {
      search.query = query + "\n" + current;
      search.hits = find(query);
      search.at = -1;
    }
    const count = document.getElementById("search-count");
    if (!search.hits.length) { count.textContent = query.trim() ? "no match" : ""; return false; }
    const n = search.hits.length, back = step === -1;
    search.at = search.at < 0 ? (back ? n - 1 : 0) : (search.at + (back ? n - 1 : 1)) % n;
    count.textContent = search.at + 1 + "/" + search.hits.length;
    return goTo(search.hits[search.at]);
  }
  const input = document.getElementById("search-input");
  document.getElementById("search").addEventListener("submit", (e) => { e.preventDefault(); searchNext(input.value); });
  input.addEventListener("input", () => { document.getElementById("search-count").textContent = ""; });
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && e.shiftKey) { e.preventDefault(); searchNext(input.value, -1); } // the previous match
    else if (e.key === "Escape") input.blur();
  });

  // --- the URL fragment, for editors: #at=<line>:<col> (1-based) and #find=<text> ---
  function atPosition(line, col) { // the innermost node (or loop) whose source span holds the position
    let best = null, size = Infinity;
    for (const item of items.values()) {
      const s = item.source && item.source.span;
      if (!s) continue;
      const after = line > s.line || (line === s.line && col >= s.col);
      const before = line < s.end_line || (line === s.end_line && col < s.end_col);
      const n = (s.end_line - s.line) * 1e6 + (s.end_col - s.col);
      if (after && before && n < size) { best = item.id; size = n; }
    }
    return best;
  }
  function applyHash(force) {
    const h = decodeURIComponent(window.location.hash.slice(1));
    if (!h || (!force && state.hash === h)) return;
    state.hash = h;
    save();
    const at = /^at=(\d+):(\d+)$/.exec(h);
    if (at) {
      const id = atPosition(Number(at[1]), Number(at[2]));
      if (id) goTo(id);
    } else if (h.startsWith("find=")) {
      input.value = h.slice(5);
      searchNext(input.value);
    }
  }

  // --- the two drawings ---
  function show(view) {
    current = view;
    state.view = view;
    document.querySelectorAll(".view").forEach((v) => { v.hidden = v.dataset.view !== view; });
    document.querySelectorAll(".toggle button").forEach((b) => {
      b.setAttribute("aria-pressed", String(b.dataset.view === view));
    });
    if (state.cams[view]) apply(); else fit();
    render(view);
  }
  document.querySelectorAll(".zoom button").forEach((b) => {
    b.addEventListener("click", () => (b.dataset.zoom === "fit" ? fit() : zoomAt(Number(b.dataset.zoom))));
  });
  document.addEventListener("keydown", (e) => {
    if (e.target.closest && e.target.closest("input, textarea") || e.ctrlKey || e.metaKey || e.altKey) return;
    if (e.key === "f") fit();
    else if (e.key === "+" || e.key === "=") zoomAt(1.25);
    else if (e.key === "-") zoomAt(0.8);
    else if (e.key === "/") { e.preventDefault(); input.focus(); }
    else return;
  });
  document.querySelectorAll(".toggle button").forEach((b) => b.addEventListener("click", () => show(b.dataset.view)));
  for (const v of Object.values(views)) { v.original = v.svg; v.key = ""; bind(v.svg); }
  window.addEventListener("hashchange", () => applyHash(true));
  show(views[state.view] ? state.view : "returnn");
  if (state.selected && items.has(state.selected)) select(state.selected);
  applyHash(false);
  window.netcPreview = { fit, zoomAt, goTo, toggleCollapse, cam: () => Object.assign({ view: current }, cam()) }; // for tests
})();

// The page side of PlotView (plot_view.py): draw one plotly figure, fill the width it is
// given, follow resizes, and tell the kernel what the user zoomed to and clicked.
//
// plotly.js is not bundled here: the first view on a page asks the kernel for the copy
// that ships with the plotly package (one message, once per page), and every later view
// reuses it. Errors while drawing are sent back so the explorer can say them in its
// status line instead of leaving them in the browser console.

const KEY = "__explorerPlotly";

function loadPlotly(model) {
  if (window[KEY]) return window[KEY];
  // JupyterLab's plotly extension may have loaded the very same plotly.js for a static figure
  // (it sets window.Plotly): reuse it rather than parse a second copy.
  const present = window.Plotly;
  if (present && typeof present.react === "function" && present.version === model.get("plotly_version")) {
    window[KEY] = Promise.resolve(present);
    return window[KEY];
  }
  window[KEY] = new Promise((resolve, reject) => {
    const onMessage = (msg, buffers) => {
      if (!msg || msg.type !== "plotly") return;
      model.off("msg:custom", onMessage);
      // A <script> from a blob URL, not eval: the browser compiles a large script off the
      // main thread, so the page does not freeze while 4.8 MB of plotly.js is parsed.
      const url = URL.createObjectURL(new Blob([buffers[0]], { type: "text/javascript" }));
      const before = { Plotly: window.Plotly, define: window.define };
      window.define = undefined;  // a loader's AMD define would swallow the global
      const script = document.createElement("script");
      script.async = true;
      script.src = url;
      const done = (err) => {
        const ours = window.Plotly;
        window.Plotly = before.Plotly;  // leave the page's globals as they were
        window.define = before.define;
        if (before.Plotly === undefined) delete window.Plotly;
        URL.revokeObjectURL(url);
        script.remove();
        if (err || !ours) {
          window[KEY] = undefined;
          reject(err || new Error("plotly.js did not define Plotly"));
        } else {
          resolve(ours);
        }
      };
      script.onload = () => done(null);
      script.onerror = () => done(new Error("the browser refused to run plotly.js"));
      document.head.appendChild(script);
    };
    model.on("msg:custom", onMessage);
    model.send({ type: "plotly?" });
  });
  return window[KEY];
}

function decode(bytes) {
  if (!bytes || !bytes.byteLength) return { data: [], layout: {} };
  const view = bytes instanceof DataView ? new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength) : new Uint8Array(bytes);
  return JSON.parse(new TextDecoder().decode(view));
}

function axisRange(event, axis) {
  if (event[`${axis}.autorange`]) return "auto";
  const a = event[`${axis}.range[0]`], b = event[`${axis}.range[1]`];
  if (a !== undefined && b !== undefined) return [Number(a), Number(b)];
  const r = event[`${axis}.range`];
  return Array.isArray(r) ? [Number(r[0]), Number(r[1])] : undefined;
}

async function render({ model, el }) {
  el.classList.add("explorer-plot");
  el.style.width = "100%";
  el.style.minWidth = "0";
  const div = document.createElement("div");
  div.style.width = "100%";
  el.appendChild(div);
  const report = (where, err) => model.send({ type: "error", where, message: String((err && err.message) || err) });

  let Plotly;
  try {
    Plotly = await loadPlotly(model);
  } catch (err) {
    div.textContent = "plotly.js could not be loaded: " + err;
    report("loading plotly.js", err);
    return;
  }
  let drawing = Promise.resolve();
  let timer;
  const draw = () => {
    return drawing = drawing.then(async () => {
      const revision = model.get("revision");
      try {
        const fig = decode(model.get("spec"));
        const layout = Object.assign({}, fig.layout || {}, { autosize: true });
        delete layout.width;
        await Plotly.react(div, fig.data || [], layout, Object.assign({ responsive: true, displaylogo: false }, fig.config || {}));
        el.dataset.revision = String(revision);
        model.send({ type: "drawn", revision });
      } catch (err) {
        report("drawing the figure", err);
      }
    });
  };
  draw();
  model.on("change:spec", draw);
  await drawing;  // plotly adds .on() to the div with its first plot

  // Width follows the output area: at first render the element may not be attached yet
  // (plotly then falls back to 700 px), and JupyterLab panels resize without window events.
  const observer = new ResizeObserver(() => {
    clearTimeout(timer);
    timer = setTimeout(() => { if (div.offsetWidth > 0 && div.data) Plotly.Plots.resize(div).catch(() => {}); }, 60);
  });
  observer.observe(el);

  if (typeof div.on !== "function") return () => observer.disconnect();
  div.on("plotly_relayout", (event) => {
    const x = axisRange(event, "xaxis"), y = axisRange(event, "yaxis");
    if (x === undefined && y === undefined) return;
    model.send({ type: "relayout", x: x === undefined ? null : x, y: y === undefined ? null : y });
  });
  div.on("plotly_click", (event) => {
    const points = (event.points || []).map((p) => ({
      curve: p.curveNumber, index: Array.isArray(p.pointIndex) ? p.pointIndex : (p.pointIndex ?? p.pointNumber),
      x: p.x, y: p.y, name: p.data && p.data.name,
    }));
    model.send({ type: "click", points });
  });
  return () => {
    observer.disconnect();
    try { Plotly.purge(div); } catch (err) { /* the page is going away */ }
  };
}

export default { render };

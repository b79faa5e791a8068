// Draws the charts of an iocurve report from the JSON embedded in the page (uPlot). Every
// figure was computed by iocurve; this file only lays the numbers out. It runs once, at the
// end of the page, and builds every chart synchronously, so the page is complete when the
// browser's load event fires.
(function () {
  "use strict";

  const D = JSON.parse(document.getElementById("iocurve-data").textContent);
  const WIDTH = 560;
  const HEIGHT = 300;
  // Not blue or orange: those mark the optimum and the maximum.
  const PCT_COLORS = { p50: "#2ca02c", p90: "#17becf", p99: "#9467bd", p999: "#d62728" };
  const PCT_NAMES = { p50: "p50", p90: "p90", p99: "p99", p999: "p99.9" };
  const multiRun = D.runs.length > 1;
  // Latency beside throughput: in its own colour for one run; in a comparison the colour says
  // the run, so latency keeps it and is told apart by its points.
  // Blue and orange mark the optimum and the maximum; a single run's latency is drawn grey.
  const latColor = (s) => (multiRun ? s.color : "#555555");
  const OPTIMUM = "#1f77b4";
  const MAXIMUM = "#ff7f0e";
  // A column with only the step `at` (an index among the steps) kept: a point to mark.
  const only = (col, at) => col.map((v, i) => (i === at ? v : null));
  // The optimum's mark is the larger: where optimum and maximum are one step, a blue ring
  // shows around the orange point.
  const mark = (label, color, scale) => ({
    label, stroke: color, width: 0, scale, spanGaps: false,
    points: { show: true, size: color === OPTIMUM ? 15 : 9, stroke: color, fill: color },
  });

  // 1'234'567 above 100, 12.3 above 10, 1.23 below: the report's number style.
  function num(v) {
    if (v == null || !isFinite(v)) return "—";
    if (v === 0) return "0";
    const a = Math.abs(v);
    if (a >= 100) return Math.round(v).toString().replace(/\B(?=(\d{3})+(?!\d))/g, "'");
    if (a >= 10) return v.toFixed(1);
    return v.toFixed(2);
  }
  // 5 rather than 5.00: bounds as the user gave them.
  const plain = (v) => String(Number(v.toPrecision(4)));
  // Axis ticks with as many decimals as their steps need: 20, 40 … 100 (not 80.0), 0.25 where
  // the ticks are quarters; zero is "0", and from 100 on the report's number style.
  const decimals = (v) => {
    const t = String(Number(Math.abs(v).toPrecision(6)));
    return t.includes("e") ? 3 : t.includes(".") ? t.length - t.indexOf(".") - 1 : 0;
  };
  const tickText = (vals) => {
    const finite = vals.filter((v) => v != null && isFinite(v) && Math.abs(v) < 100);
    const dec = Math.min(3, Math.max(0, ...finite.map(decimals)));
    return vals.map((v) => (v == null || !isFinite(v) ? "" : v === 0 ? "0" : Math.abs(v) >= 100 ? num(v) : v.toFixed(dec)));
  };
  const axisValues = (u, vals) => tickText(vals);
  // Log scales cannot show zero: such points are left out.
  const positive = (arr) => arr.map((v) => (v != null && v > 0 ? v : null));
  const maxOf = (arrays) => {
    let m = 0;
    for (const a of arrays) for (const v of a) if (v != null && v > m) m = v;
    return m;
  };
  const zeroTo = (m) => [0, m > 0 ? m * 1.08 : 1];
  // Latency axes in µs up to 10 ms and in ms beyond, as the tables write latencies.
  const latAxis = (name, maxUs, extra) => {
    const ms = maxUs >= 10000;
    return Object.assign({ label: name + (ms ? " ms" : " µs"), values: (u, vals) => tickText(vals.map((v) => (ms && v != null ? v / 1000 : v))), size: 70 }, extra);
  };
  // The x of the per-step charts: worker counts (log 2), or a rate ramp's target rates (log 10).
  // A queue-depth ramp's x: its depths (log 2).
  // A rate ramp has a tick at every target rate it drove (issue 43: a log axis's own ticks fell
  // between them), in a short form that fits beside its neighbours: 10k, 25k, 1.5M.
  const short = (v) => {
    const a = Math.abs(v);
    const cut = (x) => String(Number(x.toPrecision(3)));
    return a >= 1e6 ? cut(v / 1e6) + "M" : a >= 1e4 ? cut(v / 1e3) + "k" : num(v);
  };
  const xsOf = (g) => Array.from(new Set(g.series.flatMap((s) => s.x))).filter((v) => v != null).sort((a, b) => a - b);
  // Every rate's tick is labelled (uPlot's own filter on a log axis keeps powers of ten only),
  // but a label closer than 34 px to the last one kept stays blank: an SLA search's probes may
  // lie a few pixels apart.
  const rateLabels = (u, splits) => {
    let last = -Infinity;
    return splits.map((v) => {
      const x = u.valToPos(v, "x");
      if (x - last < 34) return null;
      last = x;
      return v;
    });
  };
  const xAxis = (g) => (g.rate
    ? { label: "target " + g.unit, splits: () => xsOf(g), filter: rateLabels, values: (u, vals) => vals.map((v) => (v == null ? "" : short(v))) }
    : { label: xName(g), values: (u, vals) => vals.map((v) => (v == null ? "" : String(v))) });
  const xScale = (g) => ({ time: false, distr: 3, log: g.rate ? 10 : 2 });
  const xName = (g) => (g.rate ? "target " + g.unit : g.by_depth ? "queue depth per worker" : "workers");
  // A step as the step selector and captions name it.
  // A replay's step (issue 45): its speed, the rate it came to beside it.
  const replaySpeed = (g, x) => {
    for (const s of g.series) {
      const i = s.x.indexOf(x);
      if (i >= 0 && s.speed && s.speed[i] != null) return s.speed[i];
    }
    return null;
  };
  const stepName = (g, x) => {
    const sp = replaySpeed(g, x);
    if (sp != null) return sp + "× the trace (" + num(x) + " " + g.unit + ")";
    return g.rate ? num(x) + " " + g.unit : g.by_depth ? "qd " + x : x + (x === 1 ? " worker" : " workers");
  };

  // What each uPlot series looks like, kept before uPlot takes the options: the legend's
  // swatches and the SVG export draw from it.
  const specOf = (s) => ({
    color: s.stroke || "#000", dash: (s.dash || []).slice(), width: s.width == null ? 1 : s.width,
    alpha: s.alpha == null ? 1 : s.alpha, scale: s.scale || "y", spanGaps: !!s.spanGaps,
    points: s.points && s.points.show ? { size: s.points.size || 5, fill: s.points.fill || s.stroke } : null,
  });

  // A legend entry: a swatch (line style and colour, a point) and a name; `idx` are the uPlot
  // series it stands for (a click shows or hides them).
  const entry = (label, o) => Object.assign({ label, color: "#555", dash: [], width: 2, alpha: 1, point: null, idx: [] }, o);
  // An entry per series, drawn as the series is.
  const entriesOf = (series) => series.slice(1).map((s, k) => {
    const sp = specOf(s);
    return entry(s.label, {
      color: sp.color, dash: sp.dash, width: sp.width, alpha: sp.alpha,
      point: sp.points && { size: Math.min(sp.points.size, 9), fill: sp.points.fill }, idx: [k + 1],
    });
  });
  // Indices of the series whose label ends with `suffix` (every series label ends in a fixed
  // word of the chart's own, so a user's label cannot match by accident).
  const seriesNamed = (series, suffix) => series.flatMap((x, i) => (x.label.endsWith(suffix) ? [i] : []));
  const markEntries = (series) => [
    entry("optimum", { width: 0, point: { size: 9, fill: OPTIMUM }, idx: seriesNamed(series, " optimum") }),
    entry("maximum", { width: 0, point: { size: 9, fill: MAXIMUM }, idx: seriesNamed(series, " maximum") }),
  ];

  // The chart in `el`: uPlot without its own legend (whose value column is a row of `—` until
  // the pointer is over the chart), our legend of named entries below it, and the PNG and SVG
  // downloads. `legend` defaults to one entry per series.
  function make(el, opts, data, legend, marks) {
    opts.width = WIDTH;
    opts.height = HEIGHT;
    opts.legend = { show: false };
    const specs = opts.series.map(specOf);
    const entries = legend || entriesOf(opts.series);
    clearChart(el);
    const u = new uPlot(opts, data, el);
    // A timeline's steps and run marks (`timeMarks`): the SVG export draws them too.
    u.ioc = { specs, entries, marks: marks || [], time: (opts.plugins || []).map((p) => p.iocTime).find(Boolean) || null };
    el.uplot = u;
    el.append(legendElement(u, entries), downloads(el));
    return u;
  }

  // A chart's name in file names and exports: `throughput`, `run-timeline-targets`.
  const chartName = (el) => el.dataset.chart || (el.dataset.timeline ? "run-timeline-" + el.dataset.timeline : "chart");

  // Takes away a chart's legend and buttons (uPlot's destroy takes away the chart itself).
  function clearChart(el) {
    for (const old of el.querySelectorAll(":scope > .legend, :scope > .downloads")) old.remove();
    el.uplot = null;
  }

  // A legend entry's swatch, 24 × 12: its line (from x1 to x2 at y) and its point, if any. The
  // legend (SVG), the SVG export and the PNG export (canvas) all draw this one shape.
  const swatchShape = (e) => ({
    line: e.width > 0 ? { x1: 1, x2: 23, y: 6, color: e.color, width: Math.max(1, e.width), alpha: e.alpha, dash: e.dash.map((d) => d * 0.75) } : null,
    point: e.point ? { x: 12, y: 6, r: e.point.size / 2.5, fill: e.point.fill, stroke: e.point.fill === "#fff" ? e.color : e.point.fill } : null,
  });

  function swatchSvg(e) {
    const { line: l, point: p } = swatchShape(e);
    const dash = l && l.dash.length ? ` stroke-dasharray="${l.dash.join(" ")}"` : "";
    const line = l ? `<line x1="${l.x1}" y1="${l.y}" x2="${l.x2}" y2="${l.y}" stroke="${l.color}" stroke-width="${l.width}" stroke-opacity="${l.alpha}"${dash}/>` : "";
    const pt = p ? `<circle cx="${p.x}" cy="${p.y}" r="${p.r}" fill="${p.fill}" stroke="${p.stroke}"/>` : "";
    return `<svg class="swatch-svg" width="24" height="12" viewBox="0 0 24 12">${line}${pt}</svg>`;
  }

  function legendElement(u, entries) {
    const box = document.createElement("div");
    box.className = "legend";
    for (const e of entries) {
      const item = document.createElement("span");
      item.className = "entry";
      item.innerHTML = swatchSvg(e);
      const name = document.createElement("span");
      name.className = "name";
      name.textContent = e.label;
      item.append(name);
      if (e.idx.length) {
        item.title = "click: hide or show";
        // Entries share lines (a series' entry and the latency entry both cover its latency):
        // a click shows all of an entry's lines if any is hidden, and every entry then greys
        // out exactly when all of its lines are hidden.
        item.addEventListener("click", () => {
          const show = e.idx.some((i) => !u.series[i].show);
          for (const i of e.idx) u.setSeries(i, { show });
          box.querySelectorAll(".entry").forEach((it, k) => it.classList.toggle("off", hidden(u, entries[k])));
        });
      }
      box.append(item);
    }
    return box;
  }
  // An entry all of whose lines are hidden: greyed in the legend, left out of exports.
  const hidden = (u, e) => e.idx.length > 0 && e.idx.every((i) => !u.series[i].show);

  // PNG and SVG of the chart, named after the section and chart.
  function downloads(el) {
    const box = document.createElement("span");
    box.className = "downloads";
    const name = () => {
      const section = el.closest("section");
      const title = section ? section.querySelector("h2").textContent : "chart";
      return (title + " " + chartName(el)).replace(/[^A-Za-z0-9.%-]+/g, "-").replace(/-+$/, "");
    };
    const save = (href, ext) => {
      const a = document.createElement("a");
      a.href = href;
      a.download = name() + "." + ext;
      document.body.append(a);
      a.click();
      a.remove();
    };
    for (const [ext, get] of [["png", () => EXPORT.png(el)], ["svg", async () => "data:image/svg+xml;charset=utf-8," + encodeURIComponent(EXPORT.svg(el))]]) {
      const b = document.createElement("button");
      b.type = "button";
      b.textContent = ext.toUpperCase();
      b.title = "download this chart as " + ext.toUpperCase();
      b.addEventListener("click", async () => save(await get(), ext));
      box.append(b);
    }
    return box;
  }

  // Throughput (left axis) and mean latency (right axis) over workers, one pair per series.
  function throughputChart(g, el) {
    const tables = [];
    const series = [{ label: xName(g) }];
    const legend = [];
    for (const s of g.series) {
      tables.push([s.x, s.tput, s.mean, only(s.tput, s.opt), only(s.tput, s.max)]);
      const at = series.length;
      series.push({ label: s.label + " " + g.unit, stroke: s.color, dash: s.dash, width: 2, scale: "tput", spanGaps: true });
      series.push({
        label: s.label + " mean latency", stroke: latColor(s), dash: s.dash, width: 1, scale: "lat", spanGaps: true,
        points: { show: true, size: 6, fill: "#fff" },
      });
      series.push(mark(s.label + " optimum", OPTIMUM, "tput"));
      series.push(mark(s.label + " maximum", MAXIMUM, "tput"));
      legend.push(entry(s.label + " " + g.unit, { color: s.color, dash: s.dash, idx: [at, at + 1, at + 2, at + 3] }));
      // A host count's links: what its hosts' links carry together, a dotted line.
      // The links' transfer floor: one block's payload time, under every latency (right axis).
      if (s.floor_us != null) {
        tables.push([s.x, s.x.map(() => s.floor_us)]);
        series.push({ label: s.label + " " + s.floor_label, stroke: latColor(s), dash: [2, 3], width: 1, scale: "lat" });
        legend.push(entry(s.label + " " + s.floor_label, { color: latColor(s), dash: [2, 3], width: 1, idx: [series.length - 1] }));
      }
      if (s.ceiling) {
        tables.push([s.x, s.x.map(() => s.ceiling)]);
        series.push({ label: s.label + " links' ceiling", stroke: s.color, dash: [2, 4], width: 1, scale: "tput" });
        legend.push(entry(s.label + " links' ceiling", { color: s.color, dash: [2, 4], width: 1, idx: [series.length - 1] }));
      }
    }
    // In a comparison latency keeps its run's colour: the open points say it is latency.
    legend.push(entry("mean " + (g.rate ? "response time" : "latency") + " (right axis)", {
      color: multiRun ? "#555" : latColor(null), width: 1, point: { size: 6, fill: "#fff" },
      idx: seriesNamed(series, " mean latency"),
    }));
    legend.push(...markEntries(series));
    return make(el, {
      series,
      scales: {
        x: xScale(g),
        tput: { range: () => zeroTo(maxOf(g.series.map((s) => (s.ceiling ? s.tput.concat([s.ceiling]) : s.tput)))) },
        lat: { range: () => zeroTo(maxOf(g.series.map((s) => s.mean))) },
      },
      axes: [
        xAxis(g),
        { scale: "tput", label: g.unit, values: axisValues, size: 70 },
        latAxis("mean latency", maxOf(g.series.map((s) => s.mean)), { scale: "lat", side: 1, grid: { show: false } }),
      ],
    }, uPlot.join(tables), legend);
  }

  // p50 … p99.9 over workers on a log latency axis. One run: colour says the percentile, line
  // style the working set. A comparison: colour says the series (run and working set; a
  // backend has points), line style the percentile, so that runs can be told apart.
  const PCT_DASH = { p50: [], p90: [10, 4], p99: [4, 3], p999: [1, 3] };
  function percentileChart(g, el) {
    const tables = [];
    const series = [{ label: xName(g) }];
    const keys = Object.keys(PCT_COLORS);
    const legend = [];
    for (const s of g.series) {
      tables.push([s.x].concat(keys.map((k) => positive(s[k]))));
      const at = series.length;
      for (const k of keys) {
        series.push(multiRun
          ? { label: s.label + " " + PCT_NAMES[k], stroke: s.color, dash: PCT_DASH[k], width: 2, spanGaps: true,
            points: { show: s.ws !== "frontend", size: 5, fill: s.color } }
          : { label: s.label + " " + PCT_NAMES[k], stroke: PCT_COLORS[k], dash: s.dash, width: 2, spanGaps: true });
      }
      legend.push(multiRun
        ? entry(s.label, { color: s.color, point: s.ws !== "frontend" ? { size: 5, fill: s.color } : null, idx: keys.map((_, j) => at + j) })
        : entry(s.label, { dash: s.dash, idx: keys.map((_, j) => at + j) }));
    }
    keys.forEach((k, j) => legend.push(entry(PCT_NAMES[k], {
      color: multiRun ? "#555" : PCT_COLORS[k], dash: multiRun ? PCT_DASH[k] : [],
      idx: g.series.map((_, n) => 1 + n * keys.length + j),
    })));
    return make(el, {
      series,
      scales: { x: xScale(g), y: { distr: 3, log: 10 } },
      axes: [xAxis(g), latAxis("latency", maxOf(g.series.map((s) => s.p999)))],
    }, uPlot.join(tables), legend);
  }

  // Mean latency over throughput: the response-time curve, drawn in step order (the curve may
  // bend back when throughput falls at high load), with the SLA bounds as horizontal lines.
  function responseChart(g, el) {
    const data = [null];
    const series = [{}];
    // The same pattern driven the other way (closed against open loop) drawn over it.
    const others = (g.overlay || []).map((id) => D.groups.find((o) => o.id === id)).filter((o) => o);
    const loop = (x) => (others.length ? (x.rate ? " open loop" : " closed loop") : "");
    for (const s of g.series) {
      data.push([s.tput, s.mean]);
      series.push({ label: s.label + loop(g) + " mean", stroke: s.color, dash: s.dash, width: 2, points: { show: true, size: 6 } });
    }
    for (const o of others) {
      for (const s of o.series) {
        data.push([s.tput, s.mean]);
        series.push({ label: s.label + loop(o) + " mean", stroke: s.color, dash: o.rate ? [1, 3] : [6, 2], width: 2, alpha: 0.8, points: { show: true, size: 4 } });
      }
    }
    // The optimum and the maximum on the curve: blue and orange points, painted over it (a
    // series of one point is not drawn in this chart's mode).
    // [x, y, colour, radius, the curve's series]: a hidden curve hides its marks.
    const marks = [];
    g.series.forEach((s, k) => {
      if (s.opt != null) marks.push([s.tput[s.opt], s.mean[s.opt], OPTIMUM, 7.5, k + 1]);
      if (s.max != null) marks.push([s.tput[s.max], s.mean[s.max], MAXIMUM, 4.5, k + 1]);
    });
    const paintMarks = (u) => {
      const ctx = u.ctx;
      for (const [x, y, color, r, of] of marks) {
        if (x == null || y == null || !u.series[of].show) continue;
        ctx.beginPath();
        ctx.fillStyle = color;
        ctx.arc(u.valToPos(x, "x", true), u.valToPos(y, "y", true), r * devicePixelRatio, 0, 2 * Math.PI);
        ctx.fill();
      }
    };
    // A rate ramp's curve is the published response-time curve: mean and p99 response time.
    const withP99 = g.rate || D.runs.some((r) => r.sla_p99_us != null);
    if (withP99) {
      for (const s of g.series) {
        data.push([s.tput, s.p99]);
        series.push({ label: s.label + " p99", stroke: s.color, dash: s.dash, width: 1, alpha: 0.6, points: { show: true, size: 4 } });
      }
    }
    const maxX = maxOf(g.series.concat(others.flatMap((o) => o.series)).map((s) => s.tput)) * 1.05 || 1;
    let maxY = maxOf(data.slice(1).map((d) => d[1]));
    const bounds = [];
    for (const r of D.runs) {
      if (r.sla_mean_us != null) bounds.push(["SLA mean ≤ " + plain(r.sla_mean_us / 1000) + " ms", r.sla_mean_us]);
      if (r.sla_p99_us != null) bounds.push(["SLA p99 ≤ " + plain(r.sla_p99_us / 1000) + " ms", r.sla_p99_us]);
    }
    for (const s of g.series) {
      const who = g.series.length > 1 ? s.label + " " : "";
      if (s.stop_mean_us != null) bounds.push([who + "stop at mean > " + plain(s.stop_mean_us / 1000) + " ms", s.stop_mean_us]);
      if (s.stop_p99_us != null) bounds.push([who + "stop at p99 > " + plain(s.stop_p99_us / 1000) + " ms", s.stop_p99_us]);
    }
    const seen = new Set();
    const above = [];
    for (const [label, us] of bounds) {
      if (seen.has(label)) continue;
      seen.add(label);
      // A bound far above the curve would flatten it: keep the curve readable, say so below.
      if (us <= maxY * 3) maxY = Math.max(maxY, us);
      else above.push(label);
      data.push([[0, maxX], [us, us]]);
      series.push({ label, stroke: "#c0392b", dash: [4, 4], width: 1.5, points: { show: false } });
    }
    // The links' transfer floor: one block's payload time on a host's link (issue 42).
    for (const s of g.series) {
      if (s.floor_us == null) continue;
      const label = (g.series.length > 1 ? s.label + " " : "") + s.floor_label;
      if (seen.has(label)) continue;
      seen.add(label);
      maxY = Math.max(maxY, s.floor_us);
      data.push([[0, maxX], [s.floor_us, s.floor_us]]);
      series.push({ label, stroke: "#7f8c8d", dash: [2, 3], width: 1.5, points: { show: false } });
    }
    if (above.length) {
      const cap = el.parentNode.querySelector(".response-caption");
      cap.textContent += " — above the chart: " + above.join(", ");
    }
    const legend = entriesOf(series).concat([
      entry("optimum", { width: 0, point: { size: 9, fill: OPTIMUM } }),
      entry("maximum", { width: 0, point: { size: 9, fill: MAXIMUM } }),
    ]);
    return make(el, {
      mode: 2,
      series,
      hooks: { draw: [paintMarks] },
      scales: { x: { time: false, range: [0, maxX] }, y: { range: zeroTo(maxY) } },
      axes: [
        { label: g.unit, values: axisValues },
        latAxis("latency", maxY),
      ],
    }, data, legend, marks);
  }

  function cpuChart(g, el) {
    const tables = [];
    const series = [{ label: xName(g) }];
    const legend = [];
    for (const s of g.series) {
      tables.push([s.x, s.busy, s.iowait]);
      legend.push(entry(s.label, { color: s.color, dash: s.dash, idx: [series.length, series.length + 1] }));
      series.push({ label: s.label + " busy %", stroke: s.color, dash: s.dash, width: 2, spanGaps: true });
      series.push({ label: s.label + " iowait %", stroke: s.color, dash: s.dash, width: 1, alpha: 0.5, spanGaps: true });
    }
    legend.push(entry("busy (user + system): thick", { width: 2, idx: seriesNamed(series, " busy %") }));
    legend.push(entry("I/O wait: thin", { width: 1, alpha: 0.5, idx: seriesNamed(series, " iowait %") }));
    return make(el, {
      series,
      // Room above 100 %: a saturated host's line would lie on the frame, half hidden.
      scales: { x: xScale(g), y: { range: [0, 104] } },
      axes: [xAxis(g), { label: "% of all cores", values: axisValues, size: 60, incrs: [10, 20, 25, 50] }],
    }, uPlot.join(tables), legend);
  }

  // Seconds into a step, or minutes for a step longer than 10 minutes.
  const timeAxis = (lastS) => (lastS > 600
    ? { label: "minutes into the step", values: (u, vals) => tickText(vals.map((v) => (v == null ? v : v / 60))), incrs: [60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 28800, 86400] }
    : { label: "seconds into the step", values: axisValues });
  const lastT = (tables) => maxOf(tables.map((t) => t[0]));

  // The per-second timeline of the chosen step: throughput, mean and slowest latency of each
  // second, and the step's p99 as a line, for every series that ran that many workers.
  function timelineChart(g, el, workers) {
    const tables = [];
    const series = [{ label: "s" }];
    const legend = [];
    const p99s = [];
    for (const s of g.series) {
      const i = s.x.indexOf(workers);
      if (i < 0) continue;
      const t = s.timeline[i];
      const p99 = s.p99[i];
      p99s.push(p99);
      // The p99 line needs its two ends only: a dashed line through every second costs
      // thousands of dash segments in a long step.
      tables.push([t.t, t.tput, t.lat, t.max, t.t.map((_, k) => (k === 0 || k === t.t.length - 1 ? p99 : null))]);
      legend.push(entry(s.label + " " + g.unit, { color: s.color, dash: s.dash, idx: [series.length, series.length + 1, series.length + 2, series.length + 3] }));
      series.push({ label: s.label + " " + g.unit, stroke: s.color, dash: s.dash, width: 2, scale: "tput", spanGaps: true });
      series.push({ label: s.label + " mean latency", stroke: latColor(s), dash: s.dash, width: 1.5, scale: "lat", spanGaps: true });
      // Solid and faint: a dotted line through thousands of seconds is slow to draw.
      series.push({ label: s.label + " max latency", stroke: latColor(s), width: 1, alpha: 0.3, scale: "lat", spanGaps: true });
      series.push({ label: s.label + " step p99", stroke: latColor(s), dash: [6, 3], width: 1, alpha: 0.7, scale: "lat", spanGaps: true });
    }
    const lc = multiRun ? "#555" : latColor(null);
    legend.push(entry("mean latency per second (right axis)", { color: lc, width: 1.5, idx: seriesNamed(series, " mean latency") }));
    legend.push(entry("slowest I/O per second", { color: lc, width: 1, alpha: 0.3, idx: seriesNamed(series, " max latency") }));
    legend.push(entry("p99 of the step", { color: lc, dash: [6, 3], width: 1, alpha: 0.7, idx: seriesNamed(series, " step p99") }));
    // I/O errors per second, on their own axis, when the step had any.
    const withErrors = [];
    for (const s of g.series) {
      const i = s.x.indexOf(workers);
      if (i >= 0 && s.timeline[i].errors) withErrors.push(s);
    }
    const errTables = withErrors.map((s) => {
      const t = s.timeline[s.x.indexOf(workers)];
      return [t.t, t.errors];
    });
    for (const s of withErrors) {
      legend.push(entry(s.label + " errors/s", { color: "#c0392b", dash: s.dash, width: 1, point: { size: 5, fill: "#c0392b" }, idx: [series.length] }));
      series.push({ label: s.label + " errors/s", stroke: "#c0392b", dash: s.dash, width: 1, scale: "err", spanGaps: true, points: { show: true, size: 5 } });
    }
    // A replay's I/Os due each second (issue 45): what the trace asked for, beside what
    // completed — a replay that falls behind shows as the two lines parting.
    const intended = g.series.filter((s) => { const i = s.x.indexOf(workers); return i >= 0 && s.timeline[i].intended; });
    const intTables = intended.map((s) => {
      const t = s.timeline[s.x.indexOf(workers)];
      return [t.t, t.intended];
    });
    for (const s of intended) {
      legend.push(entry(s.label + " intended IOPS (the trace)", { color: "#7f7f7f", dash: [2, 3], width: 1.5, idx: [series.length] }));
      series.push({ label: s.label + " intended", stroke: "#7f7f7f", dash: [2, 3], width: 1.5, scale: "tput", spanGaps: true });
    }
    const joined = uPlot.join(tables.concat(errTables, intTables));
    // Scale bounds from the data of this step only. The slowest I/O of a second may be far
    // above the mean: the latency axis follows the mean and the p99, so that they stay
    // readable, and a second's maximum beyond that runs off the top.
    const tputs = [], lats = [];
    for (let k = 1; k < 1 + 4 * tables.length; k += 4) { tputs.push(joined[k]); lats.push(joined[k + 1]); }
    for (let k = joined.length - intTables.length; k < joined.length; k++) tputs.push(joined[k]);
    const latTop = Math.max(maxOf(lats), ...p99s.filter((v) => v != null));
    // The run's marks within the step (of each series' run: a comparison's runs have their own).
    const stepMarks = [];
    for (const s of g.series) {
      const i = s.x.indexOf(workers);
      if (i >= 0 && s.from) for (const m of marksIn(s.run, s.from[i], lastT(tables) + 1)) stepMarks.push(multiRun ? { t: m.t, text: s.label + ": " + m.text } : m);
    }
    return make(el, {
      plugins: [timeMarks([], stepMarks)],
      series,
      scales: {
        x: { time: false },
        tput: { range: () => zeroTo(maxOf(tputs)) },
        lat: { range: () => zeroTo(latTop * 1.5) },
      },
      axes: [
        timeAxis(lastT(tables)),
        { scale: "tput", label: g.unit, values: axisValues, size: 70 },
        latAxis("latency", latTop * 1.5, { scale: "lat", side: 1, grid: { show: false } }),
      ].concat(withErrors.length ? [{ scale: "err", side: 1, label: "errors/s", values: axisValues, size: 50, grid: { show: false } }] : []),
    }, joined, legend);
  }

  // The run's marks (issue 44) and, on the run's timeline, its steps, drawn on a chart with x in
  // seconds: `bands` [{from, to, label}] shaded behind the lines, a step's workload named above
  // it where it fits; `marks` [{t, text}] as red dashed lines, their text at the top in three
  // staggered rows (marks a few seconds apart stay readable).
  const MARK_COLOR = "#d62728";
  function timeMarks(bands, marks) {
    const px = (u, v) => u.valToPos(v, "x", true);
    const dpr = () => devicePixelRatio || 1;
    return {
      iocTime: { bands, marks },
      hooks: {
        drawClear: [(u) => {
          if (!bands.length) return;
          const ctx = u.ctx, top = u.bbox.top, h = u.bbox.height;
          ctx.save();
          // A workload's steps in a row are one stretch: its name at the stretch's foot, where
          // it fits.
          const stretches = [];
          bands.forEach((b, i) => {
            const x0 = Math.max(px(u, b.from), u.bbox.left), x1 = Math.min(px(u, b.to), u.bbox.left + u.bbox.width);
            if (x1 <= x0) return;
            ctx.fillStyle = i % 2 ? "rgba(0,0,0,0.035)" : "rgba(0,0,0,0.075)";
            ctx.fillRect(x0, top, x1 - x0, h);
            const last = stretches[stretches.length - 1];
            if (last && last.name === b.workload) last.x1 = x1;
            else stretches.push({ name: b.workload, x0, x1 });
          });
          ctx.fillStyle = "#666";
          ctx.font = 9 * dpr() + "px sans-serif";
          for (const s of stretches) {
            if (ctx.measureText(s.name).width + 4 * dpr() < s.x1 - s.x0) ctx.fillText(s.name, s.x0 + 2 * dpr(), top + h - 4 * dpr());
          }
          ctx.restore();
        }],
        draw: [(u) => {
          if (!marks.length) return;
          const ctx = u.ctx, top = u.bbox.top, h = u.bbox.height;
          ctx.save();
          ctx.strokeStyle = MARK_COLOR;
          ctx.fillStyle = MARK_COLOR;
          ctx.lineWidth = 1.5 * dpr();
          ctx.setLineDash([5 * dpr(), 3 * dpr()]);
          ctx.font = 10 * dpr() + "px sans-serif";
          marks.forEach((m, k) => {
            const x = px(u, m.t);
            if (x < u.bbox.left || x > u.bbox.left + u.bbox.width) return;
            ctx.beginPath();
            ctx.moveTo(x, top);
            ctx.lineTo(x, top + h);
            ctx.stroke();
            const text = m.text.length > 40 ? m.text.slice(0, 39) + "…" : m.text;
            const w = ctx.measureText(text).width;
            const tx = x + w + 3 * dpr() > u.bbox.left + u.bbox.width ? x - w - 3 * dpr() : x + 3 * dpr();
            ctx.fillText(text, tx, top + (11 + 11 * (k % 3)) * dpr());
          });
          ctx.restore();
        }],
      },
    };
  }
  // A run's marks in a step's time: seconds after `from` (Unix seconds; null: unknown), those
  // within [0, end] only.
  const marksIn = (run, from, end) => (from == null ? [] : (D.runs[run].marks || [])
    .map((m) => ({ t: m.t - from, text: m.text })).filter((m) => m.t >= 0 && m.t <= end));

  // The run in time: every workload's line (throughput or latency, `what`), or each target's or
  // host's, on the run's clock (UTC), over the steps' bands and under the marks.
  // The report's series colours first (not the marks' red), then the optimum's and maximum's,
  // which mean nothing on a timeline.
  const TL_COLORS = ["#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22", "#1f77b4", "#ff7f0e"];
  function runTimelineChart(tl, el, what) {
    const utc = (ts) => uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC");
    const abs = (t) => t.map((v) => (v == null ? v : tl.t0 + v));
    const arrayLine = what === "array" ? tl.array[Number(el.dataset.series)] : null;
    const lines = what === "targets" || what === "target-lat" ? tl.targets.map((l) => ({ line: l, unit: tl.unit }))
      : what === "hosts" ? tl.hosts.map((l) => ({ line: l, unit: tl.unit }))
      : arrayLine ? [{ line: arrayLine, unit: arrayLine.name }]
      : tl.workloads;
    const lat = what === "lat" || what === "target-lat";
    const units = Array.from(new Set(lines.map((l) => l.unit)));
    const tables = [], series = [{ label: "time" }];
    lines.forEach((l, k) => {
      tables.push([abs(l.line.t), lat ? positive(l.line.lat) : l.line.tput]);
      const scale = lat ? "lat" : l.unit === units[0] ? "y" : "y2";
      series.push({ label: arrayLine ? l.line.name : l.line.name + (lat ? " mean latency" : " " + l.unit), stroke: TL_COLORS[k % TL_COLORS.length], width: 1.5, scale, spanGaps: false });
    });
    if (!tables.length) return null;
    const joined = uPlot.join(tables);
    const ys = (scale) => joined.slice(1).filter((_, i) => series[i + 1].scale === scale);
    const bands = tl.steps.map((s) => ({ from: tl.t0 + s.from, to: tl.t0 + s.to, workload: s.workload }));
    const marks = tl.marks.map((m) => ({ t: tl.t0 + m.t, text: m.text }));
    // HH:MM:SS in UTC: the clock of the array's own logs and of the marks table.
    const axes = [{ label: "time (UTC)", space: 70, values: (u, vals) => vals.map((v) => (v == null ? "" : new Date(v * 1e3).toISOString().slice(11, 19))) }];
    const scales = { x: { time: true } };
    if (lat) {
      scales.lat = { distr: 3, log: 10 };
      axes.push(latAxis("mean latency", maxOf(ys("lat")), { scale: "lat" }));
    } else {
      scales.y = { range: () => zeroTo(maxOf(ys("y"))) };
      axes.push({ scale: "y", label: units[0], values: axisValues, size: 70 });
      if (units.length > 1) {
        scales.y2 = { range: () => zeroTo(maxOf(ys("y2"))) };
        axes.push({ scale: "y2", label: units[1], values: axisValues, size: 70, side: 1, grid: { show: false } });
      }
    }
    return make(el, { series, scales, axes, tzDate: utc, plugins: [timeMarks(bands, marks)] }, joined);
  }

  // A multi-host step: each host's own per-second throughput, a line per host (and per series
  // in a comparison). Null when no series has per-host figures at that step.
  const HOST_COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];
  function hostTimelineChart(g, el, workers) {
    const tables = [];
    const series = [{ label: "s" }];
    for (const s of g.series) {
      const i = s.x.indexOf(workers);
      if (i < 0 || !s.hosts || !s.hosts[i]) continue;
      s.hosts[i].forEach((h, k) => {
        tables.push([h.t, h.tput]);
        const name = (g.series.length > 1 ? s.label + " " : "") + h.host + (h.lost ? " (lost)" : "");
        series.push({ label: name, stroke: HOST_COLORS[k % HOST_COLORS.length], dash: s.dash, width: 2, spanGaps: false });
      });
    }
    if (!tables.length) return null;
    const joined = uPlot.join(tables);
    return make(el, {
      series,
      scales: { x: { time: false }, y: { range: () => zeroTo(maxOf(joined.slice(1))) } },
      axes: [timeAxis(lastT(tables)), { label: g.unit + " per host", values: axisValues, size: 70 }],
    }, joined);
  }

  // The SNIA steady-state check of the chosen step: every round's (interval's) throughput,
  // the window of 5 judged, the best-fit line through it and the band of ±10 % around its
  // mean (max − min may span 20 %). Null when no series has the check at that step.
  function steadyChart(g, el, workers) {
    const tables = [];
    const series = [{ label: "round" }];
    const words = [];
    for (const s of g.series) {
      const i = s.x.indexOf(workers);
      const c = i >= 0 && s.steady ? s.steady[i] : null;
      if (!c) continue;
      const rounds = c.rounds.map((_, k) => k + 1);
      const inWindow = (k) => k >= c.first && k < c.first + c.n;
      const fit = c.rounds.map((_, k) => (inWindow(k) ? c.intercept + c.slope * (k - c.first) : null));
      const band = (f) => c.rounds.map((_, k) => (inWindow(k) ? c.mean * f : null));
      tables.push([rounds, c.rounds, c.rounds.map((v, k) => (inWindow(k) ? v : null)), fit, band(1.1), band(0.9)]);
      const name = g.series.length > 1 ? s.label + " " : "";
      series.push({ label: name + g.unit, stroke: s.color, dash: s.dash, width: 1, points: { show: true, size: 4 } });
      series.push({ label: name + "window", stroke: s.color, width: 3, points: { show: true, size: 7 }, spanGaps: false });
      series.push({ label: name + "best fit", stroke: "#555", width: 2, spanGaps: false });
      series.push({ label: name + "mean + 10 %", stroke: "#999", dash: [4, 4], width: 1, spanGaps: false });
      series.push({ label: name + "mean − 10 %", stroke: "#999", dash: [4, 4], width: 1, spanGaps: false });
      words.push(name + (c.steady ? "steady" : "not steady") + ": rounds " + (c.first + 1) + "–" + (c.first + c.n) +
        ", mean " + num(c.mean) + " " + g.unit + ", range " + num(c.range_pct) + " % (allowed 20 %), best-fit excursion " +
        num(c.excursion_pct) + " % (allowed 10 %)");
    }
    if (!tables.length) return null;
    const joined = uPlot.join(tables);
    const chart = make(el, {
      series,
      scales: { x: { time: false }, y: { range: () => zeroTo(maxOf(joined.slice(1))) } },
      axes: [
        // Rounds are whole numbers: no ticks between them.
        { label: "round (interval)", values: (u, vals) => vals.map((v) => (Number.isInteger(v) ? String(v) : "")) },
        { label: g.unit, values: axisValues, size: 70 },
      ],
    }, joined);
    chart.words = words.join("; ");
    return chart;
  }

  // A cumulative share reads 100 % only when no I/O was slower.
  // It is cut, never rounded, to one decimal: 99.96 % below a range's top is not "100 %".
  const cumShare = (v) => (v >= 100 ? "100 %" : v > 99.9 ? "> 99.9 %" : v > 0 && v < 0.1 ? "< 0.1 %" : (Math.floor(v * 10) / 10).toFixed(1) + " %");
  // A share as the histogram prints it: never "0.0 %" for a share that is not zero, nor
  // "100 %" for one that is not all (from 99.5 % on it is cut as a cumulative share is).
  const share = (v) => (v >= 99.5 ? cumShare(v) : v <= 0 ? "0 %" : v < 0.1 ? "< 0.1 %" : (v >= 10 ? v.toFixed(0) : v.toFixed(1)) + " %");

  function histogramTable(g, el, workers) {
    const table = document.createElement("table");
    const head = table.createTHead().insertRow();
    head.insertCell().textContent = "latency";
    const cols = [];
    for (const s of g.series) {
      const i = s.x.indexOf(workers);
      if (i < 0) continue;
      cols.push([s, s.hist[i], s.hist_cum[i]]);
      head.insertCell().textContent = s.label;
    }
    for (const [s] of cols) head.insertCell().textContent = cols.length > 1 ? s.label + ", cumulative" : "cumulative";
    // Buckets above the slowest I/O of every shown series are left out: all zeros.
    let last = 0;
    for (const [, hist] of cols) hist.forEach((v, b) => { if (v > 0 && b > last) last = b; });
    const body = table.createTBody();
    D.buckets.slice(0, last + 1).forEach((name, b) => {
      const row = body.insertRow();
      row.insertCell().textContent = name;
      for (const [s, hist] of cols) {
        const cell = row.insertCell();
        cell.className = "bar";
        const v = hist[b] || 0;
        const fill = document.createElement("div");
        fill.className = "fill";
        fill.style.width = Math.min(100, v) + "%";
        fill.style.background = s.color;
        const text = document.createElement("span");
        text.textContent = share(v);
        cell.append(fill, text);
      }
      // The share below the bucket's top: `< 500 µs: 74 %`.
      const top = D.bucket_tops[b];
      for (const [, , cum] of cols) {
        const cell = row.insertCell();
        cell.className = "cum";
        cell.textContent = (top ? "< " + top : "all") + ": " + cumShare(cum[b] || 0);
      }
    });
    el.replaceChildren(table);
  }

  function stepDetail(g, section) {
    const select = section.querySelector(".step-select");
    const all = new Set();
    for (const s of g.series) for (const w of s.x) all.add(w);
    const workers = Array.from(all).sort((a, b) => a - b);
    for (const w of workers) {
      const opt = document.createElement("option");
      opt.value = String(w);
      opt.textContent = stepName(g, w);
      select.append(opt);
    }
    // Open at the first series' maximum: the step a reader asks about first.
    const first = g.series[0];
    let best = 0;
    first.tput.forEach((v, i) => { if (v > first.tput[best]) best = i; });
    select.value = String(first.x[best]);

    const holder = section.querySelector('[data-chart="timeline"]');
    const caption = section.querySelector(".timeline-caption");
    const flags = section.querySelector(".step-flags");
    const hist = section.querySelector(".histogram");
    const hostFigure = section.querySelector(".host-timeline");
    const hostHolder = section.querySelector('[data-chart="host-timeline"]');
    const steadyFigure = section.querySelector(".steady");
    const steadyHolder = section.querySelector('[data-chart="steady"]');
    const steadyCaption = section.querySelector(".steady-caption");
    let chart = null;
    let hostChart = null;
    let steady = null;
    const draw = () => {
      const w = Number(select.value);
      if (chart) chart.destroy();
      chart = timelineChart(g, holder, w);
      if (hostChart) hostChart.destroy();
      if (hostHolder) clearChart(hostHolder);
      hostChart = hostFigure ? hostTimelineChart(g, hostHolder, w) : null;
      if (hostFigure) hostFigure.hidden = !hostChart;
      if (steady) steady.destroy();
      if (steadyHolder) clearChart(steadyHolder);
      steady = steadyFigure ? steadyChart(g, steadyHolder, w) : null;
      if (steadyFigure) {
        steadyFigure.hidden = !steady;
        steadyCaption.textContent = steady ? "Steady state (SNIA) at " + stepName(g, w) + ": " + steady.words : "";
      }
      caption.textContent = "Per-second timeline at " + stepName(g, w) + ": " + g.unit + ", mean " + (g.rate ? "response time" : "latency") +
        " and slowest I/O of each second, and the step's p99 (right axis; a second's slowest I/O far above the p99 runs off the top)";
      histogramTable(g, hist, w);
      const msgs = [];
      for (const s of g.series) {
        const i = s.x.indexOf(w);
        if (i >= 0) for (const m of s.flags[i]) msgs.push(s.label + ": " + m);
      }
      flags.textContent = msgs.length ? "⚠ " + msgs.join("; ") : "";
    };
    select.addEventListener("change", draw);
    draw();
  }

  // The chart drawn in `el`, or a clear error (a step with no such chart shows none).
  function chartOf(el) {
    if (!el || !el.uplot) throw new Error("iocurveExport: no chart is drawn in this element (give a .chart element that shows one)");
    return el.uplot;
  }
  const esc = (t) => String(t).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
  const LEGEND_ROW = 16;
  // The legend's entries in rows below the chart, wrapped at its width (PNG and SVG).
  function legendLayout(entries, width) {
    const ctx = document.createElement("canvas").getContext("2d");
    ctx.font = "11px system-ui, sans-serif";
    const items = [];
    let x = 0, y = 0;
    for (const e of entries) {
      const w = 34 + ctx.measureText(e.label).width + 10;
      if (x > 0 && x + w > width) { x = 0; y += LEGEND_ROW; }
      items.push({ e, x, y });
      x += w;
    }
    return { items, height: entries.length ? y + LEGEND_ROW + 6 : 0 };
  }

  // ---- What an exported chart carries (issue 43): its run(s), chart, series and step, as an
  // SVG's <title>, <desc> and <metadata> and as a PNG's text chunks. Drawn from the embedded
  // data only.
  const STEP_CHARTS = ["timeline", "host-timeline", "steady", "heatmap"];
  // `random, 100 % read, 4k, qd 1, working set backend`: a series' parameters in words.
  const aboutWords = (a) => [a.kind, (a.read_pct >= 100 ? "100 % read" : a.read_pct <= 0 ? "100 % write" : a.read_pct + " % read"),
    a.bs, "qd " + a.qd, "working set " + a.working_set].concat(a.shape ? [a.shape] : [], a.trim_pct ? [a.trim_pct + " % trim"] : []).join(", ");
  function exportContext(el) {
    const section = el.closest("section.group");
    const chart = chartName(el);
    const box = el.closest(".matrix");
    const m = box && (D.matrices || []).find((x) => x.id === box.id);
    // A matrix's chart: its workloads (one block size's, for a chart of one), as a group.
    const g = m
      ? { title: m.title + (el.dataset.bs ? " — " + el.dataset.bs : ""), unit: m.unit,
        series: (el.dataset.bs ? m.together.find((t) => t.bs === el.dataset.bs).series : m.members).map((r) => D.groups[r.group].series[r.series]) }
      : section && D.groups.find((x) => x.id === section.id);
    if (!g) return { title: "iocurve " + chart, desc: chart, json: { software: "iocurve " + D.version, chart } };
    let step = null;
    let series = g.series;
    if (STEP_CHARTS.includes(chart)) {
      const w = Number(section.querySelector(".step-select").value);
      step = { x: w, name: stepName(g, w) };
      series = series.filter((s) => s.x.includes(w));
    }
    const runs = Array.from(new Set(series.map((s) => s.run))).sort((a, b) => a - b).map((i) => D.runs[i]);
    const title = ["iocurve " + runs.map((r) => r.title).join(" vs "), g.title, chart].concat(step ? [step.name] : []).join(" — ");
    const desc = runs.map((r) => r.title + ": started " + r.about.started + ", host " + r.about.host +
      (r.about.hosts.length ? " (agents " + r.about.hosts.join(", ") + ")" : "") + ", back-end " + r.about.backend +
      ", plan " + r.about.plan + ", iocurve " + r.about.version)
      .concat(["chart: " + chart + " of " + g.title + (step ? ", at " + step.name : "")])
      .concat(series.map((s) => "series " + s.label + ": workload " + s.name + ", " + aboutWords(s.about)))
      .join("\n");
    const json = {
      software: "iocurve " + D.version, chart, pattern: g.title, unit: g.unit, step,
      runs: runs.map((r) => Object.assign({ title: r.title }, r.about)),
      series: series.map((s) => Object.assign({ label: s.label, run: D.runs[s.run].about.id, workload: s.name }, s.about)),
    };
    return { title, desc, json };
  }
  // Text as XML character data: markup escaped, and no character XML 1.0 forbids.
  const xmlText = (t) => esc(String(t).replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\ufffe\uffff]/g, ""));
  const svgContext = (c) => `<title>${xmlText(c.title)}</title>\n<desc>${xmlText(c.desc)}</desc>\n` +
    `<metadata id="iocurve-context" data-type="application/json">${xmlText(JSON.stringify(c.json))}</metadata>`;
  // The PNG text chunks (keywords as the PNG specification names them).
  const pngEntries = (c) => [["Title", c.title], ["Description", c.desc], ["Software", "iocurve " + D.version],
    ["Source", "iocurve HTML report (uPlot chart)"], ["Comment", JSON.stringify(c.json)]];
  // CRC-32 of PNG chunks (ISO 3309, as the PNG specification gives it).
  let crcTable = null;
  function crc32(bytes) {
    if (!crcTable) {
      crcTable = new Uint32Array(256);
      for (let n = 0; n < 256; n++) {
        let c = n;
        for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
        crcTable[n] = c >>> 0;
      }
    }
    let c = 0xffffffff;
    for (const b of bytes) c = crcTable[(c ^ b) & 0xff] ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
  }
  // A tEXt chunk where keyword and text are Latin-1, else an iTXt chunk with the text in UTF-8.
  function textChunk(keyword, text) {
    const latin1 = (s) => Array.from(s, (ch) => ch.charCodeAt(0));
    const body = /^[\u0001-\u00ff]*$/.test(text)
      ? latin1(keyword).concat([0], latin1(text))
      : latin1(keyword).concat([0, 0, 0, 0, 0], Array.from(new TextEncoder().encode(text)));
    const type = latin1(/^[\u0001-\u00ff]*$/.test(text) ? "tEXt" : "iTXt");
    const out = new Uint8Array(12 + body.length);
    const view = new DataView(out.buffer);
    view.setUint32(0, body.length);
    out.set(type, 4);
    out.set(body, 8);
    view.setUint32(8 + body.length, crc32(out.subarray(4, 8 + body.length)));
    return out;
  }
  // The PNG of a data URL with text chunks put after its header chunk (IHDR), before its data.
  function pngWithText(dataUrl, entries) {
    const bin = atob(dataUrl.slice(dataUrl.indexOf(",") + 1));
    const png = Uint8Array.from(bin, (ch) => ch.charCodeAt(0));
    const ihdrEnd = 8 + 12 + new DataView(png.buffer).getUint32(8);
    const chunks = entries.map(([k, t]) => textChunk(k, t));
    const out = new Uint8Array(png.length + chunks.reduce((n, c) => n + c.length, 0));
    out.set(png.subarray(0, ihdrEnd), 0);
    let at = ihdrEnd;
    for (const c of chunks) { out.set(c, at); at += c.length; }
    out.set(png.subarray(ihdrEnd), at);
    let s = "";
    for (let i = 0; i < out.length; i += 0x8000) s += String.fromCharCode.apply(null, out.subarray(i, i + 0x8000));
    return "data:image/png;base64," + btoa(s);
  }
  // ---- end of what an exported chart carries.

  // The chart as SVG: drawn again from the same data, scales and axis ticks uPlot computed,
  // with the legend below it; a vector figure for documents.
  let svgCount = 0;
  function svgOf(el) {
    const u = chartOf(el);
    // Its own clip id: several exported charts may share one document.
    const clip = "iocurve-plot-" + ++svgCount;
    const W = u.width, H = u.height;
    const pr = devicePixelRatio || 1;
    const bb = { left: u.bbox.left / pr, top: u.bbox.top / pr, width: u.bbox.width / pr, height: u.bbox.height / pr };
    const lay = legendLayout(u.ioc.entries.filter((e) => !hidden(u, e)), W);
    const total = H + lay.height;
    const f = (v) => v.toFixed(1);
    const out = [
      `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${total}" viewBox="0 0 ${W} ${total}" font-family="system-ui, sans-serif" font-size="11" fill="#222">`,
      `<rect width="${W}" height="${total}" fill="#fff"/>`,
      `<defs><clipPath id="${clip}"><rect x="${f(bb.left)}" y="${f(bb.top)}" width="${f(bb.width)}" height="${f(bb.height)}"/></clipPath></defs>`,
    ];
    out.splice(1, 0, svgContext(exportContext(el)));
    for (const a of u.axes) {
      if (!a.show || !a._splits) continue;
      const vert = a.side % 2 === 1;
      a._splits.forEach((v, k) => {
        const text = a._values ? a._values[k] : null;
        if (v == null) return;
        const p = u.valToPos(v, a.scale);
        if (!isFinite(p)) return;
        if (vert) {
          const y = bb.top + p;
          if (y < bb.top - 0.5 || y > bb.top + bb.height + 0.5) return;
          if (a.grid && a.grid.show !== false) out.push(`<line x1="${f(bb.left)}" x2="${f(bb.left + bb.width)}" y1="${f(y)}" y2="${f(y)}" stroke="#e8e8e8"/>`);
          if (text != null && text !== "") {
            // uPlot's own place for the axis (a second right axis sits beside the first).
            const x = a.side === 3 ? a._pos - 8 : a._pos + 8;
            out.push(`<text x="${f(x)}" y="${f(y + 4)}" text-anchor="${a.side === 3 ? "end" : "start"}">${esc(text)}</text>`);
          }
        } else {
          const x = bb.left + p;
          if (x < bb.left - 0.5 || x > bb.left + bb.width + 0.5) return;
          if (a.grid && a.grid.show !== false) out.push(`<line x1="${f(x)}" x2="${f(x)}" y1="${f(bb.top)}" y2="${f(bb.top + bb.height)}" stroke="#e8e8e8"/>`);
          if (text != null && text !== "") out.push(`<text x="${f(x)}" y="${f(a._pos + 18)}" text-anchor="middle">${esc(text)}</text>`);
        }
      });
      if (a.label) {
        // Turned as uPlot turns it: a left axis's name reads upwards, a right one's downwards.
        if (vert) {
          const x = a.side === 3 ? a._lpos - 4 : a._lpos + 4;
          const y = bb.top + bb.height / 2;
          out.push(`<text x="${f(x)}" y="${f(y)}" text-anchor="middle" font-weight="bold" transform="rotate(${a.side === 3 ? -90 : 90} ${f(x)} ${f(y)})">${esc(a.label)}</text>`);
        } else {
          out.push(`<text x="${f(bb.left + bb.width / 2)}" y="${f(a._lpos + 14)}" text-anchor="middle" font-weight="bold">${esc(a.label)}</text>`);
        }
      }
    }
    out.push(`<rect x="${f(bb.left)}" y="${f(bb.top)}" width="${f(bb.width)}" height="${f(bb.height)}" fill="none" stroke="#ccc"/>`);
    out.push(`<g clip-path="url(#${clip})">`);
    const time = u.ioc.time;
    const xAt = (v) => bb.left + u.valToPos(v, "x");
    if (time) {
      time.bands.forEach((b, i) => {
        const x0 = Math.max(xAt(b.from), bb.left), x1 = Math.min(xAt(b.to), bb.left + bb.width);
        if (x1 > x0) out.push(`<rect x="${f(x0)}" y="${f(bb.top)}" width="${f(x1 - x0)}" height="${f(bb.height)}" fill="#000" fill-opacity="${i % 2 ? 0.035 : 0.075}"/>`);
      });
    }
    const facet = u.mode === 2;
    u.series.forEach((s, i) => {
      if (i === 0 || !s.show) return;
      const sp = u.ioc.specs[i];
      const xs = facet ? u.data[i][0] : u.data[0];
      const ys = facet ? u.data[i][1] : u.data[i];
      const yScale = facet ? "y" : sp.scale;
      let d = "";
      let pen = false;
      const pts = [];
      for (let k = 0; k < xs.length; k++) {
        // As uPlot draws: `undefined` (a row only another table of a join has) is passed over,
        // `null` (no value) breaks the line unless it spans gaps.
        if (ys[k] === undefined) continue;
        const px = xs[k] == null ? NaN : bb.left + u.valToPos(xs[k], "x");
        const py = ys[k] === null ? NaN : bb.top + u.valToPos(ys[k], yScale);
        if (!isFinite(px) || !isFinite(py)) {
          if (!sp.spanGaps) pen = false;
          continue;
        }
        d += (pen ? "L" : "M") + f(px) + " " + f(py);
        pen = true;
        pts.push([px, py]);
      }
      if (sp.width > 0 && d) {
        const dash = sp.dash.length ? ` stroke-dasharray="${sp.dash.join(" ")}"` : "";
        out.push(`<path d="${d}" fill="none" stroke="${sp.color}" stroke-width="${sp.width}" stroke-opacity="${sp.alpha}"${dash}/>`);
      }
      if (sp.points) {
        for (const [px, py] of pts) out.push(`<circle cx="${f(px)}" cy="${f(py)}" r="${sp.points.size / 2}" fill="${sp.points.fill}" stroke="${sp.color}"/>`);
      }
    });
    for (const [x, y, color, r, of] of u.ioc.marks) {
      if (x == null || y == null || (of != null && !u.series[of].show)) continue;
      out.push(`<circle cx="${f(bb.left + u.valToPos(x, "x"))}" cy="${f(bb.top + u.valToPos(y, "y"))}" r="${r}" fill="${color}"/>`);
    }
    if (time) {
      time.marks.forEach((m, k) => {
        const x = xAt(m.t);
        if (x < bb.left || x > bb.left + bb.width) return;
        const text = m.text.length > 40 ? m.text.slice(0, 39) + "…" : m.text;
        out.push(`<line x1="${f(x)}" x2="${f(x)}" y1="${f(bb.top)}" y2="${f(bb.top + bb.height)}" stroke="${MARK_COLOR}" stroke-width="1.5" stroke-dasharray="5 3"/>`);
        out.push(`<text x="${f(x + 3)}" y="${f(bb.top + 11 + 11 * (k % 3))}" fill="${MARK_COLOR}" font-size="10">${esc(text)}</text>`);
      });
    }
    out.push(`</g>`);
    for (const { e, x, y } of lay.items) {
      const top = H + y;
      out.push(`<g transform="translate(${f(x + 4)} ${f(top)})">${swatchSvg(e).replace(/^<svg[^>]*>|<\/svg>$/g, "")}</g>`);
      out.push(`<text x="${f(x + 32)}" y="${f(top + 10)}">${esc(e.label)}</text>`);
    }
    out.push(`</svg>`);
    return out.join("\n");
  }

  // The chart as PNG, as the page shows it (uPlot's canvas, at the screen's resolution), on
  // white and with the legend below.
  async function pngOf(el) {
    const u = chartOf(el);
    const pr = devicePixelRatio || 1;
    const lay = legendLayout(u.ioc.entries.filter((e) => !hidden(u, e)), u.width);
    const canvas = document.createElement("canvas");
    canvas.width = Math.round(u.width * pr);
    canvas.height = Math.round((u.height + lay.height) * pr);
    const ctx = canvas.getContext("2d");
    ctx.fillStyle = "#fff";
    ctx.fillRect(0, 0, canvas.width, canvas.height);
    ctx.drawImage(u.ctx.canvas, 0, 0);
    ctx.scale(pr, pr);
    ctx.font = "11px system-ui, sans-serif";
    for (const { e, x, y } of lay.items) {
      const top = u.height + y;
      // The swatch where the SVG export puts it: 4 px into the entry.
      const { line: l, point: p } = swatchShape(e);
      if (l) {
        ctx.save();
        ctx.globalAlpha = l.alpha;
        ctx.strokeStyle = l.color;
        ctx.lineWidth = l.width;
        ctx.setLineDash(l.dash);
        ctx.beginPath();
        ctx.moveTo(x + 4 + l.x1, top + l.y);
        ctx.lineTo(x + 4 + l.x2, top + l.y);
        ctx.stroke();
        ctx.restore();
      }
      if (p) {
        ctx.beginPath();
        ctx.fillStyle = p.fill;
        ctx.strokeStyle = p.stroke;
        ctx.arc(x + 4 + p.x, top + p.y, p.r, 0, 2 * Math.PI);
        ctx.fill();
        ctx.stroke();
      }
      ctx.fillStyle = "#222";
      ctx.fillText(e.label, x + 32, top + 10);
    }
    return pngWithText(canvas.toDataURL("image/png"), pngEntries(exportContext(el)));
  }

  // For the download buttons, and for tests and scripts: `iocurveExport.svg(chartElement)`.
  const EXPORT = { svg: svgOf, png: pngOf };
  window.iocurveExport = EXPORT;

  // Printing shows every table: closed sections are opened for the print and closed after.
  let closedForPrint = [];
  window.addEventListener("beforeprint", () => {
    closedForPrint = Array.from(document.querySelectorAll("details:not([open])"));
    for (const d of closedForPrint) d.open = true;
  });
  window.addEventListener("afterprint", () => {
    for (const d of closedForPrint) d.open = false;
    closedForPrint = [];
  });

  // Over block size (a matrix of workloads that differ only in block size and read share): x
  // the block size in bytes (log 2, a tick at each, named as the plan names it), a line per
  // read share.
  const sizeAxis = (m) => ({
    label: "block size", splits: () => m.bytes,
    values: (u, vals) => vals.map((v) => { const k = m.bytes.indexOf(v); return k < 0 ? "" : m.sizes[k]; }),
  });
  function blocksizeChart(m, el) {
    const series = [{ label: "block size" }];
    const cols = [m.bytes];
    const legend = [];
    for (const c of m.curves) {
      legend.push(entry(c.label, { color: c.color, idx: [series.length, series.length + 1] }));
      series.push({ label: c.label + " IOPS", stroke: c.color, width: 2, scale: "iops", spanGaps: true, points: { show: true, size: 6, fill: c.color } });
      series.push({ label: c.label + " MB/s", stroke: c.color, dash: [6, 4], width: 1.5, scale: "mbps", spanGaps: true, points: { show: true, size: 5, fill: "#fff" } });
      cols.push(c.iops, c.mbps);
    }
    legend.push(entry("IOPS (left axis)", { width: 2, idx: seriesNamed(series, " IOPS") }));
    legend.push(entry("MB/s (right axis)", { dash: [6, 4], width: 1.5, idx: seriesNamed(series, " MB/s") }));
    return make(el, {
      series,
      scales: {
        x: { time: false, distr: 3, log: 2 },
        iops: { range: () => zeroTo(maxOf(m.curves.map((c) => c.iops))) },
        mbps: { range: () => zeroTo(maxOf(m.curves.map((c) => c.mbps))) },
      },
      axes: [
        sizeAxis(m),
        { scale: "iops", label: "IOPS at the maximum", values: axisValues, size: 70 },
        { scale: "mbps", label: "MB/s at the maximum", values: axisValues, size: 60, side: 1, grid: { show: false } },
      ],
    }, cols, legend);
  }
  function blocksizeLatencyChart(m, el) {
    const series = [{ label: "block size" }];
    const cols = [m.bytes];
    for (const c of m.curves) {
      series.push({ label: c.label + " min latency", stroke: c.color, width: 2, spanGaps: true, points: { show: true, size: 6, fill: c.color } });
      cols.push(c.min_lat);
    }
    const top = maxOf(m.curves.map((c) => c.min_lat));
    return make(el, {
      series,
      scales: { x: { time: false, distr: 3, log: 2 }, y: { range: () => zeroTo(top) } },
      axes: [sizeAxis(m), latAxis("lowest latency", top)],
    }, cols);
  }
  // One block size: its read, mixed and write series (from their own groups) in one
  // throughput chart, each named by its read share.
  function togetherChart(m, el) {
    const t = m.together.find((x) => x.bs === el.dataset.bs);
    if (!t || !t.series.length) return null;
    const first = D.groups[t.series[0].group];
    const series = t.series.map((r) => Object.assign({}, D.groups[r.group].series[r.series], { label: r.label, color: r.color }));
    return throughputChart({ unit: first.unit, rate: false, by_depth: first.by_depth, series }, el);
  }
  for (const m of D.matrices || []) {
    const box = document.getElementById(m.id);
    const draw = { blocksize: blocksizeChart, "blocksize-latency": blocksizeLatencyChart, together: togetherChart };
    for (const el of box.querySelectorAll(".chart[data-chart]")) draw[el.dataset.chart](m, el);
  }

  // "Copy summary": the summary block as HTML and as text, to paste into a document; where the
  // page may not write the clipboard (a file opened without permission), its text is selected.
  for (const b of document.querySelectorAll(".copy-summary")) {
    b.addEventListener("click", async () => {
      const box = b.closest(".overview");
      const html = box.querySelector(".summary-block").innerHTML;
      const text = box.querySelector(".summary-text").textContent;
      const state = box.querySelector(".copy-state");
      try {
        await navigator.clipboard.write([new ClipboardItem({
          "text/html": new Blob([html], { type: "text/html" }),
          "text/plain": new Blob([text], { type: "text/plain" }),
        })]);
        state.textContent = "copied";
      } catch (e) {
        const plain = box.querySelector(".summary-plain");
        plain.open = true;
        getSelection().selectAllChildren(box.querySelector(".summary-text"));
        state.textContent = "the browser does not let this page copy: the text is selected, copy it with Ctrl+C";
      }
    });
  }

  for (const tl of D.timelines || []) {
    const box = document.getElementById(tl.id);
    for (const el of box.querySelectorAll(".chart[data-timeline]")) runTimelineChart(tl, el, el.dataset.timeline);
  }

  // Issue 44: the latency heat map of the chosen step and the workload's exceedance (QoS)
  // plot, from the histograms iocurve keeps per second and per step.
  // A heat map cell's shade: 61 levels (one character each in the data) of the share of its
  // second's I/Os, on a log scale from 10^-5 to all of them, light yellow to dark red.
  const HEAT_LEVELS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  const HEAT_STOPS = [[255, 247, 188], [254, 196, 79], [236, 112, 20], [204, 36, 29], [103, 0, 13]];
  const heatShade = (() => {
    const out = {};
    for (let l = 1; l < HEAT_LEVELS.length; l++) {
      const f = ((l - 1) / (HEAT_LEVELS.length - 2)) * (HEAT_STOPS.length - 1);
      const i = Math.min(HEAT_STOPS.length - 2, Math.floor(f));
      const c = HEAT_STOPS[i].map((v, k) => Math.round(v + (HEAT_STOPS[i + 1][k] - v) * (f - i)));
      out[HEAT_LEVELS[l]] = "rgb(" + c.join(",") + ")";
    }
    return out;
  })();
  // A heat map row r holds the latencies from 2^(r/4) ns to 2^((r+1)/4) ns (a quarter octave).
  const heatRowUs = (r) => Math.pow(2, r / 4) / 1000;
  // Ticks of a log latency axis over [lo, hi]: 1, 2 and 5 of each decade (1 alone over more
  // than four decades), so that a range not starting at a power of ten still reads round.
  const logSplits = (lo, hi) => {
    const out = [];
    const few = Math.log10(hi / lo) > 4;
    for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
      for (const m of few ? [1] : [1, 2, 5]) {
        const v = m * Math.pow(10, e);
        if (v >= lo * 0.999 && v <= hi * 1.001) out.push(v);
      }
    }
    return out;
  };
  function heatCells(u, h, t, dur) {
    const ctx = u.ctx;
    ctx.save();
    ctx.beginPath();
    ctx.rect(u.bbox.left, u.bbox.top, u.bbox.width, u.bbox.height);
    ctx.clip();
    h.cells.forEach((c, k) => {
      if (!c) return;
      const x0 = u.valToPos(t[k], "x", true);
      const x1 = u.valToPos(t[k] + dur, "x", true);
      for (let j = 0; j < c[1].length; j++) {
        const shade = heatShade[c[1][j]];
        if (!shade) continue;
        const r = h.r0 + c[0] + j;
        const y0 = u.valToPos(heatRowUs(r), "lat", true);
        const y1 = u.valToPos(heatRowUs(r + 1), "lat", true);
        ctx.fillStyle = shade;
        ctx.fillRect(x0, y1, Math.max(1, x1 - x0), Math.max(1, y0 - y1));
      }
    });
    ctx.restore();
  }
  // The chosen step's seconds: x the seconds into the step, y the latency (log), each cell
  // shaded by its share of that second's I/Os, and each second's own p99 (from its histogram)
  // as a line in the series' colour. One series': the first that kept its seconds' histograms
  // at that step. Null when none did.
  function heatmapChart(g, el, workers) {
    const s = g.series.find((x) => {
      const i = x.x.indexOf(workers);
      return i >= 0 && x.heat && x.heat[i];
    });
    if (!s) return null;
    const i = s.x.indexOf(workers);
    const h = s.heat[i];
    const t = s.timeline[i].t;
    const p99 = (s.p99s && s.p99s[i]) || t.map(() => null);
    const dur = t.length > 1 ? t[1] - t[0] : 1;
    let top = h.r0 + 1;
    for (const c of h.cells) if (c) top = Math.max(top, h.r0 + c[0] + c[1].length);
    const lo = heatRowUs(h.r0);
    const hi = heatRowUs(top);
    const end = t[t.length - 1] + dur;
    const series = [{ label: "s" }, { label: s.label + " p99 per second", stroke: s.color, width: 2, scale: "lat", spanGaps: false }];
    const legend = [
      entry("p99 of each second (" + s.label + ")", { color: s.color, width: 2, idx: [1] }),
      entry("few I/Os", { color: heatShade["1"], width: 8 }),
      entry("most of the second's I/Os", { color: heatShade["z"], width: 8 }),
    ];
    const u = make(el, {
      series,
      scales: { x: { time: false, range: () => [0, end] }, lat: { distr: 3, log: 10, range: () => [lo, hi] } },
      axes: [timeAxis(end), latAxis("latency", hi, { scale: "lat", splits: () => logSplits(lo, hi) })],
      hooks: { drawClear: [(x) => heatCells(x, h, t, dur)] },
    }, [t.map((v) => v + dur / 2), positive(p99)], legend);
    u.heatOf = s.label;
    return u;
  }

  // The exceedance (QoS) plot of a workload, as SSD reviews draw it: each step's latency at
  // every percentile from 0 % to 99.9999 %, x on a scale of nines (−log10(1 − p): 90 %, 99 %,
  // 99.9 % … evenly apart), y the latency (log). A line per step in its series' colour, fainter
  // for fewer workers; a line ends where its step's I/O count resolves no further nines.
  const NINES = ["0", "90", "99", "99.9", "99.99", "99.999", "99.9999"];
  function qosChart(g, el) {
    const tables = [];
    const series = [{ label: "nines" }];
    let top = 0;
    for (const s of g.series) {
      if (!s.qos) continue;
      const n = s.qos.length;
      s.qos.forEach((q, i) => {
        if (!q.x.length) return;
        tables.push([q.x, positive(q.lat)]);
        top = Math.max(top, maxOf([q.lat]));
        const alpha = n > 1 ? 0.25 + (0.75 * i) / (n - 1) : 1;
        series.push({ label: s.label + " " + stepName(g, s.x[i]) + " QoS", stroke: s.color, dash: s.dash, width: 1.5, alpha, spanGaps: true });
      });
    }
    if (!tables.length) return null;
    return make(el, {
      series,
      scales: { x: { time: false, range: [0, 6] }, y: { distr: 3, log: 10 } },
      axes: [
        { label: "percentile (%)", splits: () => [0, 1, 2, 3, 4, 5, 6], values: (u, vals) => vals.map((v) => (v == null ? "" : NINES[Math.round(v)] || "")) },
        latAxis(g.rate ? "response time" : "latency", top),
      ],
    }, uPlot.join(tables));
  }

  // The heat map follows the step selector (beside the step's other charts) and the QoS plot
  // is drawn once per workload.
  function secondsDetail(g, section) {
    const q = section.querySelector('[data-chart="qos"]');
    if (q) qosChart(g, q);
    const holder = section.querySelector('[data-chart="heatmap"]');
    if (!holder) return;
    const select = section.querySelector(".step-select");
    const figure = section.querySelector(".heatmap");
    const caption = section.querySelector(".heatmap-caption");
    let chart = null;
    const draw = () => {
      const w = Number(select.value);
      if (chart) chart.destroy();
      clearChart(holder);
      chart = heatmapChart(g, holder, w);
      figure.hidden = !chart;
      caption.textContent = chart
        ? "Latency heat map at " + stepName(g, w) + (g.series.length > 1 ? " (" + chart.heatOf + ")" : "") +
          ": each second's I/Os by latency (quarter octaves, log scale), shaded by their share of the second, and each second's own p99"
        : "";
    };
    select.addEventListener("change", draw);
    draw();
  }

  const CHARTS = { throughput: throughputChart, percentiles: percentileChart, response: responseChart, cpu: cpuChart };
  for (const g of D.groups) {
    const section = document.getElementById(g.id);
    for (const el of section.querySelectorAll(".chart[data-chart]")) {
      const draw = CHARTS[el.dataset.chart];
      if (draw) draw(g, el);
    }
    stepDetail(g, section);
    secondsDetail(g, section);
  }
})();

// weft in the browser: loads the WebAssembly module (embedded as base64 by
// `weft web` in weft_wasm.js, compiled synchronously so that the test mode
// finishes before the page's load event), draws both cloths on 2D canvases
// and runs one step a frame.
//
// URL parameters: ?test=N runs every scene N frames from rest, plain and
// corrected, then the bad-input checks and the speed measurement, and writes
// the results into #results (what the browser test reads); ?shot=N runs a
// scene (?scene=K, the first by default) N frames and draws it without
// animating (the screenshot). The editor beside the canvases shows the
// scene's file; "run" loads it as edited.
"use strict";

const bytes = Uint8Array.from(atob(WEFT_WASM), (c) => c.charCodeAt(0));
const wasm = new WebAssembly.Instance(new WebAssembly.Module(bytes), {}).exports;
const text = (ptr, len) => new TextDecoder().decode(new Uint8Array(wasm.memory.buffer, ptr, len));
const errorText = (code) => text(wasm.weft_error_text(code), wasm.weft_error_len(code));
const hex = (u) => (u >>> 0).toString(16).padStart(8, "0");
const $ = (id) => document.getElementById(id);

let correction = true, paused = false, shownError = "";
const timing = { plain: 0, physics: 0, network: 0, frames: 0, since: performance.now(), fps: 0 };

// Shows a call's error (code 0: none) on the page; the simulation goes on.
function check(code, what) {
  if (code !== 0) {
    const why = code === 7 ? text(wasm.weft_last_error(), wasm.weft_last_error_len()) : errorText(code);
    shownError = `${what}: error ${code}: ${why}`;
    $("error").textContent = shownError;
  }
  return code;
}

// Why the loaded scene lies outside the network's training envelope
// (empty: inside), where the right cloth runs the plain BDF2 fallback.
const outside = () => text(wasm.weft_outside(), wasm.weft_outside_len());

// The right cloth's caption: the network, the correction switched off, or
// the fallback of a scene outside the training envelope.
function caption() {
  const why = outside();
  $("right-title").textContent = why !== ""
    ? `plain BDF2, the fallback: outside the network's training envelope (${why})`
    : correction ? "corrected (int8 network)" : "correction off (plain on the calibrated membrane)";
}

function load(index) {
  if (check(wasm.weft_load(index), `load scene ${index}`) === 0) {
    $("error").textContent = "";
  }
  caption();
}

// The editor's scene file, run as scene `edited`; a refused file shows the
// desktop's error (naming the key) and the last good scene keeps running.
function runEditor() {
  const data = new TextEncoder().encode($("editor").value);
  new Uint8Array(wasm.memory.buffer, wasm.weft_input(data.length), data.length).set(data);
  const code = check(wasm.weft_load_text(data.length), "edit");
  if (code === 0) $("error").textContent = "";
  caption();
  return code;
}

// A built-in scene, its file shown in the editor.
function loadScene(index) {
  load(index);
  $("editor").value = text(wasm.weft_scene_text(index), wasm.weft_scene_text_len(index));
}

// One frame: the plain step, and the corrected cloth's step and correction.
function step() {
  let t0 = performance.now();
  check(wasm.weft_physics(0), "plain step");
  let t1 = performance.now();
  check(wasm.weft_physics(1), "corrected step");
  let t2 = performance.now();
  if (correction) check(wasm.weft_correct(), "network");
  let t3 = performance.now();
  const a = 0.05;
  timing.plain += a * (t1 - t0 - timing.plain);
  timing.physics += a * (t2 - t1 - timing.physics);
  timing.network += a * (t3 - t2 - timing.network);
}

// --- drawing ---------------------------------------------------------------

const eye = [1.35, 1.35, 1.75], target = [0.0, 0.55, 0.0];
const sub = (a, b) => [a[0] - b[0], a[1] - b[1], a[2] - b[2]];
const dot = (a, b) => a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
const cross = (a, b) => [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]];
const unit = (a) => { const n = Math.hypot(a[0], a[1], a[2]) || 1; return [a[0] / n, a[1] / n, a[2] / n]; };
const fwd = unit(sub(target, eye)), right = unit(cross(fwd, [0, 1, 0])), up = cross(right, fwd);
const light = unit([0.4, 1.0, 0.6]);

function project(p, canvas) {
  const d = sub(p, eye), z = dot(d, fwd), f = canvas.height * 1.25;
  return [canvas.width / 2 + (f * dot(d, right)) / z, canvas.height / 2 - (f * dot(d, up)) / z, z];
}

function draw(canvas, which, color) {
  const g = canvas.getContext("2d");
  g.clearRect(0, 0, canvas.width, canvas.height);
  // The ground, as a grid.
  g.strokeStyle = "#ddd";
  for (let k = -1.0; k <= 1.0001; k += 0.2) {
    for (const [a, b] of [[[k, 0, -1], [k, 0, 1]], [[-1, 0, k], [1, 0, k]]]) {
      const p = project(a, canvas), q = project(b, canvas);
      g.beginPath(); g.moveTo(p[0], p[1]); g.lineTo(q[0], q[1]); g.stroke();
    }
  }
  const n = wasm.weft_node_count(), m = wasm.weft_triangle_count();
  const x = new Float32Array(wasm.memory.buffer, wasm.weft_positions(which), 3 * n);
  const tri = new Uint16Array(wasm.memory.buffer, wasm.weft_triangles(), 3 * m);
  const s = new Float32Array(wasm.memory.buffer, wasm.weft_sphere(), 4);
  const items = [];
  for (let t = 0; t < m; t++) {
    const [a, b, c] = [tri[3 * t], tri[3 * t + 1], tri[3 * t + 2]];
    const pa = [x[3 * a], x[3 * a + 1], x[3 * a + 2]], pb = [x[3 * b], x[3 * b + 1], x[3 * b + 2]];
    const pc = [x[3 * c], x[3 * c + 1], x[3 * c + 2]];
    const nrm = unit(cross(sub(pb, pa), sub(pc, pa)));
    const centre = [(pa[0] + pb[0] + pc[0]) / 3, (pa[1] + pb[1] + pc[1]) / 3, (pa[2] + pb[2] + pc[2]) / 3];
    const facing = dot(nrm, sub(eye, centre)) > 0 ? 1 : -1;
    const shade = 0.35 + 0.65 * Math.max(0, facing * dot(nrm, light));
    const pts = [pa, pb, pc].map((p) => project(p, canvas));
    items.push({ z: (pts[0][2] + pts[1][2] + pts[2][2]) / 3, pts, shade, back: facing < 0 });
  }
  if (s[3] > 0) {
    const c = project([s[0], s[1], s[2]], canvas), r = (canvas.height * 1.25 * s[3]) / c[2];
    items.push({ z: c[2], sphere: [c[0], c[1], r] });
  }
  items.sort((p, q) => q.z - p.z);
  for (const it of items) {
    if (it.sphere) {
      const [cx, cy, r] = it.sphere;
      const grad = g.createRadialGradient(cx - r / 3, cy - r / 3, r / 8, cx, cy, r);
      grad.addColorStop(0, "#eee"); grad.addColorStop(1, "#888");
      g.fillStyle = grad; g.beginPath(); g.arc(cx, cy, r, 0, 2 * Math.PI); g.fill();
      continue;
    }
    const base = it.back ? [0.75 * color[0], 0.75 * color[1], 0.75 * color[2]] : color;
    g.fillStyle = `rgb(${base.map((v) => Math.round(v * it.shade)).join(",")})`;
    g.beginPath();
    g.moveTo(it.pts[0][0], it.pts[0][1]); g.lineTo(it.pts[1][0], it.pts[1][1]); g.lineTo(it.pts[2][0], it.pts[2][1]);
    g.closePath(); g.fill();
    g.strokeStyle = g.fillStyle; g.stroke();
  }
}

function render() {
  draw($("plain"), 0, [214, 80, 70]);
  draw($("corrected"), 1, [60, 110, 200]);
  const f = (v) => v.toFixed(2).padStart(6);
  $("stats").textContent =
    `frames a second ${timing.fps.toFixed(0)}   plain step ${f(timing.plain)} ms   ` +
    `corrected: step ${f(timing.physics)} ms + network ${f(timing.network)} ms   ` +
    `CG iterations ${wasm.weft_cg_iterations(0)} / ${wasm.weft_cg_iterations(1)}   ` +
    `dynamic edges ${wasm.weft_dynamic_edges()}`;
}

// --- interaction -----------------------------------------------------------

function setUp() {
  const select = $("scene");
  for (let i = 0; i < wasm.weft_scene_count(); i++) {
    const o = document.createElement("option");
    o.value = i; o.textContent = text(wasm.weft_scene_name(i), wasm.weft_scene_name_len(i));
    select.appendChild(o);
  }
  select.onchange = () => loadScene(Number(select.value));
  $("reset").onclick = () => loadScene(Number(select.value));
  $("run").onclick = runEditor;
  $("pause").onclick = () => { paused = !paused; $("pause").textContent = paused ? "run" : "pause"; };
  $("correct").onchange = (e) => {
    correction = e.target.checked;
    caption();
  };
  for (const id of ["plain", "corrected"]) {
    const canvas = $(id);
    let last = null, handle = null;
    canvas.onpointerdown = (e) => {
      last = [e.clientX, e.clientY];
      handle = [0, 1, 2].map((k) => wasm.weft_handle(k));
      canvas.setPointerCapture(e.pointerId);
    };
    canvas.onpointerup = () => { last = null; };
    canvas.onpointermove = (e) => {
      if (!last) return;
      const d = project(handle, canvas)[2], k = d / (canvas.height * 1.25);
      const dx = (e.clientX - last[0]) * k, dy = -(e.clientY - last[1]) * k;
      last = [e.clientX, e.clientY];
      handle = handle.map((v, i) => v + dx * right[i] + dy * up[i]);
      check(wasm.weft_drag(handle[0], handle[1], handle[2]), "drag");
    };
  }
}

function animate(now) {
  if (!paused) step();
  timing.frames++;
  if (now - timing.since > 500) {
    timing.fps = (1000 * timing.frames) / (now - timing.since);
    timing.frames = 0; timing.since = now;
  }
  render();
  requestAnimationFrame(animate);
}

// --- test mode -------------------------------------------------------------

function testMode(frames) {
  const out = [];
  for (let i = 0; i < wasm.weft_scene_count(); i++) {
    load(i);
    for (let f = 0; f < frames; f++) step();
    const name = text(wasm.weft_scene_name(i), wasm.weft_scene_name_len(i));
    out.push(`scene ${name} plain ${hex(wasm.weft_checksum(0))} corrected ${hex(wasm.weft_checksum(1))}`);
  }
  // Bad input: a typed error on the page, and the simulation goes on.
  const before = hex(wasm.weft_checksum(1));
  const bad = check(wasm.weft_load(99), "load scene 99");
  out.push(`error load(99) ${bad} ${errorText(bad)}`);
  const nan = check(wasm.weft_drag(NaN, 0, 0), "drag");
  out.push(`error drag(NaN) ${nan} ${errorText(nan)}`);
  out.push(`shown ${shownError}`);
  const kept = hex(wasm.weft_checksum(1));
  step();
  out.push(`after-errors kept ${before === kept} stepped ${hex(wasm.weft_checksum(1)) !== kept}`);
  // The editor: the swing's file with a larger sphere, then a bad file.
  loadScene(0);
  const swing = $("editor").value;
  $("editor").value = swing.replace("radius = 0.2\n", "radius = 0.3\n");
  runEditor();
  for (let f = 0; f < frames; f++) step();
  out.push(`edited plain ${hex(wasm.weft_checksum(0))} corrected ${hex(wasm.weft_checksum(1))}`);
  // Outside the training envelope (a cloth heavier than any trained): the
  // right cloth runs the plain BDF2 fallback, as the desktop and the board.
  $("editor").value = swing.replace("compression = 0.05\n", "compression = 0.05\ndensity = 0.8\n");
  runEditor();
  for (let f = 0; f < frames; f++) step();
  out.push(`outside plain ${hex(wasm.weft_checksum(0))} corrected ${hex(wasm.weft_checksum(1))}`);
  out.push(`outside-caption ${$("right-title").textContent}`);
  const good = hex(wasm.weft_checksum(1));
  $("editor").value = swing.replace("resolution = [16, 16]", "resolution = [1, 16]");
  const refused = runEditor();
  out.push(`error bad-scene ${refused}`);
  out.push(`shown ${shownError}`);
  const still = hex(wasm.weft_checksum(1));
  step();
  out.push(`after-bad-scene kept ${good === still} stepped ${hex(wasm.weft_checksum(1)) !== still}`);
  // Speed: corrected 16×16 steps (physics and network) a second, the
  // swing after 20 steps of warm-up.
  load(0);
  for (let f = 0; f < 20; f++) { wasm.weft_physics(1); wasm.weft_correct(); }
  const n = 200, t0 = performance.now();
  for (let f = 0; f < n; f++) { wasm.weft_physics(1); wasm.weft_correct(); }
  const ms = performance.now() - t0;
  out.push(`speed corrected-steps-per-second ${(1000 * n / ms).toFixed(1)} over ${n}`);
  $("results").textContent = out.join("\n");
}

setUp();
const params = new URLSearchParams(location.search);
if (params.has("test")) {
  testMode(Number(params.get("test")) || 60);
  render();
} else if (params.has("shot")) {
  const scene = Number(params.get("scene")) || 0;
  loadScene(scene);
  $("scene").value = scene;
  const frames = Number(params.get("shot")) || 60;
  for (let f = 0; f < frames; f++) step();
  render();
} else {
  loadScene(0);
  requestAnimationFrame(animate);
}

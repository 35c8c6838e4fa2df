// The demo page (web/index.html): load a GGUF (file picker, drag and drop, or a URL on this site), show its
// model card, chat with streamed tokens. Everything runs in the engine's Web Worker (../src/llamay.mjs).
//
// Query parameters: ?model=URL loads a model at once; &prompt=TEXT then sends it; &backend=wasm|portable;
// &max-tokens, &temperature, &top-p, &seed, &system set the controls; &max-model-bytes=N refuses larger models
// (to see the message without a huge file).
// window.llamayDemo exposes the state and a timeline of the last load and reply (bench/browser_first_token.py).

import { createEngine, deleteCachedModel, listCachedModels } from "../src/llamay.mjs";

const $ = (id) => document.getElementById(id);
const query = new URLSearchParams(location.search);
const LAST_URL = "llamay-demo:last-url";

const timeline = { bootStart: performance.now(), phases: [] };
const state = { engine: null, model: null, chatMode: true, history: [], generating: false, loading: false };
window.llamayDemo = { state, timeline };

const enginePromise = createEngine({
  onStdout: () => {},
  onStderr: (text) => console.warn(text),
}).then(
  (engine) => {
    state.engine = engine;
    timeline.bootEnd = performance.now();
    timeline.boot = engine.bootTimings;
    const iso = engine.crossOriginIsolated ? "cross-origin isolated" : "not isolated: stop acts between tokens";
    setStatus(`Engine ready · ${iso}`, "ready");
    return engine;
  },
  (err) => {
    setStatus("The engine failed to start", "failed");
    showError("The engine could not start", err);
    throw err;
  },
);

// ---------- small helpers ----------

function setStatus(text, cls = "") {
  const el = $("engine-status");
  el.textContent = text;
  el.className = `engine-status ${cls}`;
}

const TITLES = {
  "not-gguf": "This file is not a GGUF model",
  "malformed-gguf": "This GGUF file is damaged or truncated",
  "unsupported-architecture": "This model's architecture is not supported",
  "unsupported-type": "This model uses a tensor type llamay cannot run",
  "too-large": "This model is too large for the browser's memory",
  network: "The model could not be downloaded",
  model: "This model does not match its architecture",
  "no-model": "No model is loaded",
  "bad-request": "The request could not be run",
};

function showError(title, err) {
  const kind = err?.kind;
  $("banner-title").textContent = TITLES[kind] ?? title;
  $("banner-text").textContent = err?.message ?? String(err);
  $("banner").dataset.kind = kind ?? "";
  $("banner").hidden = false;
}

function hideError() {
  $("banner").hidden = true;
}

const mb = (n) =>
  n >= 1e9 ? `${(n / 1e9).toFixed(2)} GB` : n >= 1e6 ? `${(n / 1e6).toFixed(1)} MB` : `${(n / 1e3).toFixed(1)} kB`;
const ms = (t) => (t >= 1000 ? `${(t / 1000).toFixed(2)} s` : `${Math.round(t)} ms`);

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (k === "text") node.textContent = v;
    else node.setAttribute(k, v);
  }
  node.append(...children);
  return node;
}

// ---------- loading ----------

const PHASES = {
  boot: "Starting Python (Pyodide) in a Web Worker…",
  download: "Downloading",
  "cache-read": "Reading from the browser cache",
  file: "Reading the file",
  bind: "Binding the weights to the kernels…",
  "cache-write": "Keeping a copy in the browser cache",
};

function showProgress(p) {
  if (timeline.phases.at(-1) !== p.phase) timeline.phases.push(p.phase);
  $("progress").hidden = false;
  const bar = $("progress-bar");
  if (p.fraction === null || p.fraction === undefined) bar.removeAttribute("value");
  else bar.value = p.fraction;
  const bytes = p.total ? ` ${mb(p.done)} / ${mb(p.total)} (${Math.round((100 * p.done) / p.total)}%)` : "";
  $("progress-text").textContent = `${PHASES[p.phase] ?? p.phase}${bytes}`;
}

function setBusy(loading) {
  state.loading = loading;
  for (const id of ["url", "file", "backend"]) $(id).disabled = loading;
  $("url-form").querySelector("button").disabled = loading;
  updateComposer();
}

async function loadModel(source, opts = {}) {
  if (state.loading) return;
  if (state.generating) state.engine?.abort();
  hideError();
  setBusy(true);
  timeline.loadStart = performance.now();
  timeline.phases = [];
  const label = typeof source === "string" ? source : source.name;
  showProgress({ phase: "boot", fraction: null });
  try {
    const engine = await enginePromise;
    state.model = null; // the worker lets go of the old model first
    resetChat();
    const maxModelBytes = query.has("max-model-bytes") ? Number(query.get("max-model-bytes")) : undefined;
    const model = await engine.load(source, {
      backend: $("backend").value || undefined,
      maxModelBytes,
      name: opts.name,
      onProgress: showProgress,
    });
    timeline.loadEnd = performance.now();
    timeline.load = model.timings;
    timeline.source = model.source;
    state.model = model;
    state.chatMode = !!model.card.tokenizer.chat_template;
    if (typeof source === "string" && model.source !== "file") localStorage.setItem(LAST_URL, source);
    renderCard(model.card, model);
    $("progress").hidden = true;
    resetChat();
    setStatus(`${model.name} · ${model.backend}${model.variant ? `/${model.variant}` : ""}`, "ready");
    if (model.cacheError && model.source !== "cache" && model.source !== "bytes") {
      console.warn(`llamay: ${label} was not cached: ${model.cacheError}`);
    }
  } catch (err) {
    $("progress").hidden = true;
    showError(`${label} could not be loaded`, err);
    if (err.details?.card) renderCard(err.details.card, null);
    else $("card").hidden = true;
    setStatus(state.engine ? "Engine ready · no model" : "Starting the engine…", state.engine ? "ready" : "");
  } finally {
    setBusy(false);
    refreshCached();
  }
}

function loadURL(value) {
  const text = value.trim();
  if (!text) return;
  let url;
  try {
    url = new URL(text, location.href);
  } catch {
    showError("Not a URL", { message: `"${text}" is not a URL.` });
    return;
  }
  if (url.origin !== location.origin) {
    showError("Only this site's files can be loaded by URL", {
      message:
        `${url.href} is on another origin. This page is cross-origin isolated, so it can only fetch models from ` +
        `${location.origin}. Download the file and pick it here, or serve it from this site (llamay web --models DIR).`,
    });
    return;
  }
  loadModel(url.origin === location.origin ? url.pathname + url.search : url.href);
}

// ---------- the model card ----------

function renderCard(card, model) {
  const arch = card.architecture;
  const hp = arch.hyperparameters ?? {};
  const general = (key) => card.metadata?.[key]?.value;
  $("card").hidden = false;
  $("card-name").textContent = general("general.name") ?? card.file;
  const src = $("card-source");
  src.replaceChildren();
  if (model) {
    const how = { cache: "from the browser cache", url: "downloaded", file: "from a local file", bytes: "from memory" }[
      model.source
    ];
    src.append(el("span", { class: "tag", text: how }), ` · ${card.file} · loaded in ${ms(model.timings.total_ms)}`);
    if (model.source !== "cache" && model.cached) src.append(" · now cached");
  } else {
    src.append(el("span", { class: "unsupported", text: "not loaded" }), ` · ${card.file}`);
  }
  const archCell = $("card-architecture");
  archCell.replaceChildren(el("strong", { text: arch.name }));
  if (arch.supported) archCell.append(` (${arch.summary})`);
  else archCell.append(" ", el("span", { class: "unsupported", text: "not supported" }));
  $("card-size").textContent = `${mb(card.size)} · ${card.n_tensors} tensors`;
  $("card-context").textContent = hp.n_ctx_train ? `${hp.n_ctx_train.toLocaleString("en")} tokens (trained)` : "–";
  $("card-shape").textContent = hp.n_layer
    ? `${hp.n_layer} layers · dim ${hp.n_embd} · ${hp.n_head}/${hp.n_head_kv} heads · ` +
      `vocab ${hp.n_vocab?.toLocaleString("en")}`
    : "–";
  const tok = card.tokenizer;
  $("card-tokenizer").textContent =
    `${tok.kind ?? tok.model ?? "–"}${tok.pre ? ` (${tok.pre})` : ""}` +
    (tok.chat_template ? " · chat template" : " · no chat template");
  $("card-backend").textContent = model ? `${model.backend}${model.variant ? ` (${model.variant})` : ""}` : "–";
  $("card-types").replaceChildren(
    ...Object.entries(card.tensor_types).map(([t, n]) => el("span", { class: "chip", text: `${t} ×${n}` })),
  );
  const audit = card.audit;
  const a = $("card-audit");
  a.className = audit.status === "clean" ? "audit-clean" : "audit-bad";
  a.textContent = `${audit.status === "clean" ? "✓" : "⚠"} ${audit.message}`;
  if (audit.unread?.length) a.title = audit.unread.join("\n");
  const rows = Object.entries(card.metadata ?? {}).map(([k, v]) => {
    const value = typeof v.value === "object" ? JSON.stringify(v.value) : String(v.value);
    return el("tr", {}, el("td", { text: k }), el("td", { text: value }));
  });
  $("card-meta").replaceChildren(...rows);
}

// ---------- cached models and the server's models ----------

async function refreshCached() {
  const list = await listCachedModels().catch(() => []);
  $("cached-count").textContent = list.length ? `(${list.length})` : "";
  const items = list.map((m) =>
    el(
      "li",
      {},
      el("span", { class: "name", text: m.name, title: m.key }),
      el("span", { class: "size", text: mb(m.size) }),
      el("button", {
        type: "button",
        class: "secondary small",
        text: "Load",
        "aria-label": `Load ${m.name} from the cache`,
        onclick: () => loadModel(m.key, { name: m.name }),
      }),
      el("button", {
        type: "button",
        class: "icon",
        text: "×",
        "aria-label": `Remove ${m.name} from the cache`,
        onclick: async () => {
          await deleteCachedModel(m.key);
          refreshCached();
        },
      }),
    ),
  );
  $("cached-list").replaceChildren(...items);
  if (!list.length) $("cached-list").append(el("li", { class: "hint", text: "nothing yet" }));
}

async function listServerModels() {
  try {
    const res = await fetch("models/index.json", { cache: "no-store" });
    if (!res.ok) return;
    const models = await res.json();
    if (!models.length) return;
    $("model-list").replaceChildren(
      ...models.map((m) => el("option", { value: new URL(m.url, location.href).pathname })),
    );
    $("served-list").replaceChildren(
      ...models.map((m) =>
        el("button", {
          type: "button",
          class: "chip",
          text: `${m.name} · ${mb(m.size)}`,
          onclick: () => {
            $("url").value = new URL(m.url, location.href).pathname;
            loadURL($("url").value);
          },
        }),
      ),
    );
    $("served").hidden = false;
  } catch {
    // static hosting without an index: fine
  }
}

// ---------- chat ----------

function updateComposer() {
  const ready = !!state.model && !state.loading;
  $("message").disabled = !ready;
  $("send").disabled = !ready || state.generating;
  $("stop").disabled = !state.generating;
  $("mode").textContent = state.model ? (state.chatMode ? "· chat template" : "· text completion") : "";
}

function resetChat() {
  state.history = [];
  $("transcript").replaceChildren(
    el("p", {
      class: "empty",
      id: "empty",
      text: !state.model
        ? "Load a model, then say something. Models with a chat template chat; " +
          "others (like stories260K) continue your text."
        : state.chatMode
          ? "Say something: the model answers with its chat template."
          : "This model has no chat template: write the start of a text, and it continues it.",
    }),
  );
  for (const id of ["ttft", "tps", "ntok", "prompt-stats"]) $(id).textContent = "–";
  updateComposer();
}

function addMessage(role, text) {
  $("empty")?.remove();
  const body = el("div", { class: "text", "data-testid": role === "user" ? "user-text" : "assistant-text" });
  body.textContent = text;
  const who = role === "user" ? "You" : (state.model?.name ?? "Model");
  const node = el(
    "div",
    { class: `msg ${role}`, "data-testid": `msg-${role}` },
    el("span", { class: "who", text: who }),
    body,
  );
  $("transcript").append(node);
  node.scrollIntoView({ block: "end" });
  return node;
}

function samplingParams() {
  const num = (id) => {
    const v = $(id).value.trim();
    return v === "" ? undefined : Number(v);
  };
  return {
    temperature: num("temperature"),
    top_p: num("top-p"),
    max_tokens: num("max-tokens") ?? 256,
    seed: num("seed"),
  };
}

async function send(text) {
  if (!state.model || state.generating || !text.trim()) return;
  const engine = state.engine;
  state.generating = true;
  updateComposer();
  addMessage("user", text);
  const reply = addMessage("assistant", "");
  reply.classList.add("streaming");
  const out = reply.querySelector(".text");
  if (!state.chatMode) out.append(el("span", { class: "prompt-echo", text }));
  const piece = document.createTextNode("");
  out.append(piece);
  const t0 = performance.now();
  timeline.sendAt = t0;
  timeline.firstToken = undefined;
  let firstAt = null;
  let tokens = 0;
  let content = "";
  let final = null;
  for (const id of ["ttft", "tps", "ntok", "prompt-stats"]) $(id).textContent = "…";
  const params = samplingParams();
  try {
    let stream;
    if (state.chatMode) {
      const system = $("system").value.trim();
      const messages = [...(system ? [{ role: "system", content: system }] : []), ...state.history];
      messages.push({ role: "user", content: text });
      stream = engine.chat({ messages, stream: true, ...params });
    } else {
      stream = engine.complete({ prompt: text, stream: true, ...params });
    }
    for await (const chunk of stream) {
      const choice = chunk.choices[0];
      const delta = state.chatMode ? (choice.delta.content ?? "") : choice.text;
      if (delta) {
        if (firstAt === null) {
          firstAt = performance.now();
          timeline.firstToken = firstAt;
          $("ttft").textContent = ms(firstAt - t0);
        }
        content += delta;
        piece.appendData(delta);
        tokens = chunk.llamay?.completion_tokens ?? tokens + 1;
        const secs = (performance.now() - firstAt) / 1000;
        $("ntok").textContent = String(tokens);
        if (tokens > 1 && secs > 0) $("tps").textContent = `${((tokens - 1) / secs).toFixed(1)} tok/s`;
        reply.scrollIntoView({ block: "end" });
      }
      if (choice.finish_reason) final = chunk;
    }
  } catch (err) {
    showError("The reply failed", err);
  } finally {
    state.generating = false;
    reply.classList.remove("streaming");
    updateComposer();
    $("message").focus();
  }
  if (state.chatMode) {
    state.history.push({ role: "user", content: text }, { role: "assistant", content });
  }
  if (final) {
    const reason = final.choices[0].finish_reason;
    const note = { abort: "stopped", length: "max tokens reached", stop: "" }[reason] ?? reason;
    reply.append(
      el("span", { class: `finish ${reason}`, "data-testid": "finish-reason", "data-reason": reason, text: note }),
    );
    const t = final.timings ?? {};
    timeline.reply = { ...t, finish_reason: reason, content };
    if (final.usage) $("ntok").textContent = String(final.usage.completion_tokens);
    if (t.predicted_per_second) $("tps").textContent = `${t.predicted_per_second.toFixed(1)} tok/s`;
    else if (!tokens) $("tps").textContent = "–";
    if (t.prompt_n !== undefined) {
      const speed = t.prompt_per_second ? ` · ${Math.round(t.prompt_per_second)} tok/s` : "";
      $("prompt-stats").textContent =
        `${final.usage.prompt_tokens} tok${t.cache_n ? ` (${t.cache_n} reused)` : ""}${speed}`;
    } else {
      $("prompt-stats").textContent = "–";
    }
    if (firstAt === null) $("ttft").textContent = "–";
  }
}

// ---------- wiring ----------

$("banner-close").addEventListener("click", hideError);
$("url-form").addEventListener("submit", (e) => {
  e.preventDefault();
  loadURL($("url").value);
});
$("file").addEventListener("change", () => {
  const f = $("file").files[0];
  if (f) loadModel(f);
  $("file").value = "";
});

const drop = $("drop");
for (const type of ["dragenter", "dragover"]) {
  document.addEventListener(type, (e) => {
    if (![...(e.dataTransfer?.types ?? [])].includes("Files")) return;
    e.preventDefault();
    drop.classList.add("over");
  });
}
for (const type of ["dragleave", "dragend"]) {
  document.addEventListener(type, (e) => {
    if (e.type === "dragend" || e.relatedTarget === null) drop.classList.remove("over");
  });
}
document.addEventListener("drop", (e) => {
  // a file dropped anywhere on the page is a model to load (never a navigation away from it)
  e.preventDefault();
  drop.classList.remove("over");
  const f = e.dataTransfer?.files?.[0];
  if (f) loadModel(f);
});

$("chat-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const text = $("message").value;
  if (!text.trim() || state.generating) return;
  $("message").value = "";
  send(text);
});
$("message").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    $("chat-form").requestSubmit();
  } else if (e.key === "Escape" && state.generating) {
    state.engine?.abort();
  }
});
$("stop").addEventListener("click", () => state.engine?.abort());
$("clear").addEventListener("click", () => {
  if (state.generating) state.engine?.abort();
  resetChat();
});
$("temperature-range").addEventListener("input", () => ($("temperature").value = $("temperature-range").value));
$("temperature").addEventListener("input", () => ($("temperature-range").value = $("temperature").value));

if (query.get("backend")) $("backend").value = query.get("backend");
for (const name of ["max-tokens", "temperature", "top-p", "seed", "system"]) {
  if (query.has(name)) $(name).value = query.get(name);
}
$("temperature-range").value = $("temperature").value;
$("url").value = query.get("model") ?? localStorage.getItem(LAST_URL) ?? "";
updateComposer();
refreshCached();
listServerModels();

if (query.get("model")) {
  enginePromise.then(async () => {
    await loadModel(query.get("model"));
    if (query.get("prompt") && state.model) send(query.get("prompt"));
  });
}

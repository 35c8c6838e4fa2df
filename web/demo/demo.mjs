// The demo page (web/index.html): load a GGUF (file picker, drag and drop, or a URL on this site), show its
// model card, chat with streamed tokens. Everything runs in the engine's Web Worker (../src/llamay.mjs).
//
// Query parameters: ?model=URL loads a model at once; &prompt=TEXT then sends it; &backend=wasm|portable;
// &max-tokens, &temperature, &top-p, &seed, &system set the controls; &max-model-bytes=N refuses larger models
// (to see the message without a huge file); &threads=N asks for N kernel threads (the Threads control; more than
// the build has is refused by name, and the model loaded before stays).
// Replies of chat models are rendered as Markdown (../src/markdown.mjs: DOM nodes, never HTML); conversations
// are kept in this browser (conversations.mjs).
// window.llamayDemo exposes the state and a timeline of the last load and reply (bench/browser_first_token.py).

import { createEngine, deleteCachedModel, listCachedModels, THREADS_AVAILABLE } from "../src/llamay.mjs";
import { copyText, renderMarkdown } from "../src/markdown.mjs";
import { Conversations } from "./conversations.mjs";
import { $, el, mb, ms } from "./dom.mjs";
import { renderCached, renderCard, renderConversations, renderServed } from "./panels.mjs";

const query = new URLSearchParams(location.search);
const LAST_URL = "llamay-demo:last-url";
const THREADS = "llamay-demo:threads"; // the thread count of the last load that worked

const timeline = { bootStart: performance.now(), phases: [] };
const state = { engine: null, model: null, chatMode: true, generating: false, loading: false, served: [] };
const conversations = new Conversations();
window.llamayDemo = { state, timeline, conversations };

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
    showThreads();
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

function showError(title, err, kept = undefined) {
  const kind = err?.kind;
  $("banner-title").textContent = TITLES[kind] ?? title;
  $("banner-text").textContent = err?.message ?? String(err);
  $("banner").dataset.kind = kind ?? "";
  $("banner-kept").hidden = kept === undefined;
  $("banner-kept").textContent = kept
    ? `${kept} is still loaded: the conversation goes on with it.`
    : "No model is loaded now: pick another one.";
  $("banner").hidden = false;
}

function hideError() {
  $("banner").hidden = true;
}

// ---------- threads ----------

/** The Threads control: 1 to the machine's cores (or the count asked in ?threads); a count above what this build
 * runs is offered but named so, and the engine refuses it by name when picked. */
function fillThreads() {
  const cores = navigator.hardwareConcurrency || 1;
  const asked = Number(query.get("threads")) || 0;
  const top = Math.min(Math.max(cores, asked, 1), 64);
  const options = [];
  for (let n = 1; n <= top; n++) {
    const note = n > THREADS_AVAILABLE ? " (not in this build)" : n === cores ? " (all cores)" : "";
    options.push(el("option", { value: String(n), text: `${n}${note}` }));
  }
  $("threads-select").replaceChildren(...options);
  const stored = Number(localStorage.getItem(THREADS)) || 1;
  $("threads-select").value = String(Math.min(asked || stored, top));
}

/** The threads the engine runs now, in the stats and the control. */
function showThreads() {
  const engine = state.engine;
  if (!engine) return;
  const cores = navigator.hardwareConcurrency;
  $("threads").textContent = `${engine.threads}${cores ? ` of ${cores} cores` : ""}`;
  // fewer threads than asked (a page that is not cross-origin isolated runs on one): the engine says why
  $("threads").title = engine.threadsNote ?? "The kernel threads the engine runs";
  if (state.model) $("threads-select").value = String(engine.threads);
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
  for (const id of ["url", "file", "backend", "threads-select"]) $(id).disabled = loading;
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
  const before = state.model;
  try {
    const engine = await enginePromise;
    const maxModelBytes = query.has("max-model-bytes") ? Number(query.get("max-model-bytes")) : undefined;
    const model = await engine.load(source, {
      backend: $("backend").value || undefined,
      maxModelBytes,
      name: opts.name,
      threads: Number($("threads-select").value),
      onProgress: showProgress,
    });
    timeline.loadEnd = performance.now();
    timeline.load = model.timings;
    timeline.source = model.source;
    state.model = model;
    state.source = { source, name: opts.name };
    localStorage.setItem(THREADS, String(engine.threads));
    state.chatMode = !!model.card.tokenizer.chat_template;
    if (typeof source === "string" && model.source !== "file") localStorage.setItem(LAST_URL, source);
    state.loadedKey = model.cacheKey ?? null;
    renderCard(model.card, model);
    $("progress").hidden = true;
    showConversation(); // the conversation goes on with the new model
    setStatus(`${model.name} · ${model.backend}${model.variant ? `/${model.variant}` : ""}`, "ready");
    // one column (a phone): the chat moves first; show it rather than the list the model was picked from
    if (matchMedia("(max-width: 860px)").matches) requestAnimationFrame(() => $("chat-h").scrollIntoView());
    if (model.cacheError && model.source !== "cache" && model.source !== "bytes") {
      console.warn(`llamay: ${label} was not cached: ${model.cacheError}`);
    }
  } catch (err) {
    $("progress").hidden = true;
    state.model = state.engine?.model ?? null; // kept when the worker kept it (err.details.kept)
    if (!state.model) {
      state.loadedKey = null;
      state.source = null;
    }
    showError(`${label} could not be loaded`, err, before ? (state.model?.name ?? null) : undefined);
    if (err.details?.card) renderCard(err.details.card, null);
    else if (state.model) renderCard(state.model.card, state.model);
    else $("card").hidden = true;
    if (!state.model) {
      setStatus(state.engine ? "Engine ready · no model" : "Starting the engine…", state.engine ? "ready" : "");
    }
  } finally {
    setBusy(false);
    document.body.classList.toggle("has-model", !!state.model);
    showThreads();
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

// ---------- cached models, the server's models, conversations ----------

let cachedKeys = new Set();

async function refreshCached() {
  const list = await listCachedModels().catch(() => []);
  cachedKeys = new Set(list.map((m) => m.key));
  renderCached(list, {
    load: (m) => loadModel(m.key, { name: m.name }),
    remove: async (m) => {
      await deleteCachedModel(m.key);
      refreshCached();
    },
  });
  showServed();
}

function showServed() {
  renderServed(state.served, { cached: cachedKeys, loadedKey: state.model ? state.loadedKey : null, load: loadURL });
}

async function listServerModels() {
  try {
    const res = await fetch("models/index.json", { cache: "no-store" });
    if (!res.ok) return;
    const models = await res.json();
    if (!models.length) return;
    state.served = models;
    $("model-list").replaceChildren(
      ...models.map((m) => el("option", { value: new URL(m.url, location.href).pathname })),
    );
    showServed();
    $("served").hidden = false;
  } catch {
    // static hosting without an index: fine
  }
}

function showConversations() {
  renderConversations(conversations, {
    open: (id) => {
      if (state.generating) return;
      conversations.switchTo(id);
      showConversation();
    },
    remove: (id) => {
      if (state.generating && id === conversations.currentId) state.engine?.abort();
      conversations.remove(id);
      showConversation();
    },
  });
}

// ---------- chat ----------

function updateComposer() {
  const ready = !!state.model && !state.loading;
  $("message").disabled = !ready;
  $("send").disabled = !ready || state.generating;
  $("stop").disabled = !state.generating;
  $("mode").textContent = state.model ? (state.chatMode ? "· chat template" : "· text completion") : "";
  for (const b of document.querySelectorAll("[data-testid=regenerate]")) b.disabled = !ready || state.generating;
}

function emptyNote() {
  return el("p", {
    class: "empty",
    id: "empty",
    text: !state.model
      ? "Load a model, then say something. Models with a chat template chat; " +
        "others (like stories260K) continue your text."
      : state.chatMode
        ? "Say something: the model answers with its chat template."
        : "This model has no chat template: write the start of a text, and it continues it.",
  });
}

/** The current conversation in the transcript (its stored messages), and the list beside it. */
function showConversation() {
  const c = conversations.current;
  $("transcript").replaceChildren();
  c.messages.forEach((m, i) => {
    if (m.role === "user") addMessage("user", m.content);
    else {
      const reply = addMessage("assistant", "", m.mode);
      fillReply(reply, m, i === c.messages.length - 1);
    }
  });
  if (!c.messages.length) $("transcript").append(emptyNote());
  for (const id of ["ttft", "tps", "ntok", "prompt-stats"]) $(id).textContent = "–";
  showConversations();
  updateComposer();
}

function addMessage(role, text, mode = "chat") {
  $("empty")?.remove();
  const body = el("div", { class: "text", "data-testid": role === "user" ? "user-text" : "assistant-text" });
  if (role === "assistant" && mode === "chat") body.classList.add("md");
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

/** A finished reply: its text (Markdown for a chat turn; the prompt echoed, dimmed, for a continuation), the
 * finish note, and its buttons (copy; regenerate on the last one). */
function fillReply(reply, m, last) {
  const out = reply.querySelector(".text");
  if (m.mode === "chat") out.replaceChildren(renderMarkdown(m.content));
  else out.replaceChildren(el("span", { class: "prompt-echo", text: m.prompt ?? "" }), m.content);
  reply.querySelector(".finish")?.remove();
  reply.querySelector(".actions")?.remove();
  const reason = m.finish_reason;
  if (reason) {
    const note = { abort: "stopped", length: "max tokens reached", stop: "" }[reason] ?? reason;
    reply.append(
      el("span", { class: `finish ${reason}`, "data-testid": "finish-reason", "data-reason": reason, text: note }),
    );
  }
  const copy = el("button", {
    type: "button",
    class: "secondary small",
    text: "Copy",
    "data-testid": "copy-reply",
    "aria-label": "Copy this reply",
    onclick: async () => {
      const ok = await copyText(m.content);
      copy.textContent = ok ? "Copied" : "Copy failed";
      setTimeout(() => (copy.textContent = "Copy"), 1500);
    },
  });
  const actions = el("div", { class: "actions" }, copy);
  if (last) {
    for (const b of document.querySelectorAll("[data-testid=regenerate]")) b.remove();
    const again = el("button", {
      type: "button",
      class: "secondary small",
      text: "Regenerate",
      "data-testid": "regenerate",
      "aria-label": "Write this reply again",
      onclick: () => regenerate(),
    });
    again.disabled = !state.model || state.generating;
    actions.append(again);
  }
  reply.append(actions);
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

/** Write the last user turn's reply again: the old reply goes, a new one is sampled in its place. */
function regenerate() {
  const c = conversations.current;
  if (state.generating || !state.model || c.messages.at(-1)?.role !== "assistant") return;
  c.messages.pop();
  const user = c.messages.pop();
  const replies = $("transcript").querySelectorAll(".msg");
  replies[replies.length - 1]?.remove();
  replies[replies.length - 2]?.remove();
  send(user.content);
}

async function send(text) {
  if (!state.model || state.generating || !text.trim()) return;
  const engine = state.engine;
  const conv = conversations.current;
  const mode = state.chatMode ? "chat" : "complete";
  state.generating = true;
  updateComposer();
  // the turns so far, as the model sees them (a continuation sends only its prompt)
  const history = conv.messages.filter((m) => m.mode === "chat").map(({ role, content }) => ({ role, content }));
  const asked = { role: "user", content: text, mode };
  conv.messages.push(asked);
  conversations.touch(conv);
  showConversations();
  addMessage("user", text);
  const reply = addMessage("assistant", "", mode);
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
  let drawn = false; // a Markdown redraw is queued for the next frame
  for (const id of ["ttft", "tps", "ntok", "prompt-stats"]) $(id).textContent = "…";
  const params = samplingParams();
  try {
    let stream;
    if (state.chatMode) {
      const system = $("system").value.trim();
      const messages = [...(system ? [{ role: "system", content: system }] : []), ...history];
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
        if (state.chatMode) {
          if (!drawn) {
            drawn = true;
            requestAnimationFrame(() => {
              drawn = false;
              if (reply.classList.contains("streaming")) out.replaceChildren(renderMarkdown(content));
            });
          }
        } else {
          piece.appendData(delta);
        }
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
  }
  const reason = final?.choices[0].finish_reason;
  const message = { role: "assistant", content, mode, ...(reason ? { finish_reason: reason } : {}) };
  if (mode === "complete") message.prompt = text;
  // kept unless the conversation was cleared or deleted while the reply was written
  if (conversations.list.includes(conv) && conv.messages.at(-1) === asked) {
    conv.messages.push(message);
    const unsaved = conversations.touch(conv);
    if (unsaved) console.warn(`llamay demo: the conversation was not saved: ${unsaved.message}`);
    if (conversations.currentId === conv.id && reply.isConnected) fillReply(reply, message, true);
  }
  showConversations();
  updateComposer();
  $("message").focus();
  if (final) {
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
$("threads-select").addEventListener("change", () => {
  // the thread count is set when a model binds: the loaded model is loaded again with it (kept if that fails)
  if (state.source) loadModel(state.source.source, { name: state.source.name });
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
  const c = conversations.current;
  c.messages = [];
  conversations.touch(c);
  showConversation();
});
$("new-chat").addEventListener("click", () => {
  if (state.generating) state.engine?.abort();
  conversations.create();
  showConversation();
  $("message").focus();
});
$("temperature-range").addEventListener("input", () => ($("temperature").value = $("temperature-range").value));
$("temperature").addEventListener("input", () => ($("temperature-range").value = $("temperature").value));

if (query.get("backend")) $("backend").value = query.get("backend");
for (const name of ["max-tokens", "temperature", "top-p", "seed", "system"]) {
  if (query.has(name)) $(name).value = query.get(name);
}
$("temperature-range").value = $("temperature").value;
fillThreads();
$("url").value = query.get("model") ?? localStorage.getItem(LAST_URL) ?? "";
showConversation();
refreshCached();
listServerModels();

if (query.get("model")) {
  enginePromise.then(async () => {
    await loadModel(query.get("model"));
    if (query.get("prompt") && state.model) send(query.get("prompt"));
  });
}

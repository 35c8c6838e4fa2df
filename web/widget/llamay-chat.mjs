// <llamay-chat>: a chat box that runs a GGUF model in the visitor's browser. One module script and one tag:
//
//   <script type="module" src="/llamay/widget/llamay-chat.mjs"></script>
//   <llamay-chat model="/models/SmolLM2-135M-Instruct.Q4_1.gguf" system-prompt="You are a friendly baker."
//                max-tokens="200" label="Ask the kitchen"></llamay-chat>
//
// Attributes: model (a URL on the page's origin; required), system-prompt (or system: a system prompt),
// max-tokens (default 256), temperature (default 0.7), top-p, seed, backend ("wasm" | "portable"), threads
// (kernel threads, at most 16; 1 without cross-origin isolation: docs/wasm.md), label (the heading),
// placeholder, greeting (a first assistant line, shown, not sent). A model without a chat template continues the
// text sent. Chat replies are rendered as Markdown (../src/markdown.mjs: DOM nodes, never HTML).
// A model that cannot load shows a message a visitor understands (and a Try again button) inside the widget,
// and fires llamay-error.
//
// Style it from outside with CSS custom properties (it lives in a shadow root): --llamay-accent, --llamay-bg,
// --llamay-fg, --llamay-muted, --llamay-border, --llamay-radius, --llamay-font, --llamay-font-size,
// --llamay-user-bg, --llamay-user-fg, --llamay-assistant-bg, --llamay-assistant-fg, --llamay-height; or its
// parts: ::part(box | header | transcript | form | input | send | stop).
//
// Keyboard: Enter sends, Shift+Enter adds a line, Escape stops a reply. The transcript is an aria-live log.
// Test hooks (data-testid): llamay-input, llamay-send, llamay-stop, llamay-transcript, llamay-status.
// Events (bubbling, composed): llamay-ready {model}, llamay-error {kind, message}, llamay-reply {content,
// finish_reason, usage, timings}. Methods: send(text), stop(); property engine (the createEngine engine).

import { createEngine } from "../src/llamay.mjs";
import { renderMarkdown } from "../src/markdown.mjs";

// what a visitor is told when the chat cannot start, by the error's kind (the technical message follows, small)
const VISITOR_MESSAGES = {
  network: "The assistant's model could not be downloaded from this site.",
  "not-gguf": "The assistant's model file is not a model this chat can read.",
  "malformed-gguf": "The assistant's model file is damaged.",
  "too-large": "The assistant needs more memory than this browser can give it.",
  "unsupported-architecture": "The assistant's model is of a kind this chat cannot run.",
  "unsupported-type": "The assistant's model is of a kind this chat cannot run.",
  model: "The assistant's model file is damaged.",
  "bad-request": "This chat is set up in a way it cannot run.",
};

const STYLE = `
:host {
  display: block;
  --_accent: var(--llamay-accent, #2f5bd3);
  --_bg: var(--llamay-bg, #ffffff);
  --_fg: var(--llamay-fg, #1b1f27);
  --_muted: var(--llamay-muted, #646d7e);
  --_border: var(--llamay-border, #dde1e8);
  --_radius: var(--llamay-radius, 14px);
  font-family: var(--llamay-font, system-ui, -apple-system, "Segoe UI", Roboto, sans-serif);
  font-size: var(--llamay-font-size, 15px);
  color: var(--_fg);
}
:host([hidden]) { display: none; }
* { box-sizing: border-box; }
.box {
  display: flex; flex-direction: column; height: var(--llamay-height, 28rem); background: var(--_bg);
  border: 1px solid var(--_border); border-radius: var(--_radius); overflow: hidden;
}
header {
  display: flex; align-items: center; justify-content: space-between; gap: 0.5rem; padding: 0.65rem 0.9rem;
  border-bottom: 1px solid var(--_border);
}
h2 { margin: 0; font-size: 1em; font-weight: 650; flex: 0 1 auto; min-width: 0; overflow-wrap: anywhere; }
/* the status takes what the heading leaves, on one line (the whole text is its title); an error wraps */
.status {
  font-size: 0.78em; color: var(--_muted); text-align: right; flex: 1 1 0; min-width: 0;
  white-space: nowrap; overflow: hidden; text-overflow: ellipsis;
}
.status.error { color: #b3261e; white-space: normal; }
.bar { height: 3px; background: transparent; }
.bar > div { height: 100%; width: 0; background: var(--_accent); transition: width 0.2s; }
.bar.indeterminate > div { width: 30%; animation: slide 1.2s ease-in-out infinite; }
@keyframes slide { from { margin-left: -30%; } to { margin-left: 100%; } }
.transcript {
  flex: 1; overflow-y: auto; padding: 0.8rem; display: flex; flex-direction: column; gap: 0.6rem;
}
.transcript:focus-visible, textarea:focus-visible, button:focus-visible {
  outline: 3px solid color-mix(in srgb, var(--_accent) 45%, transparent); outline-offset: 1px;
}
.msg {
  max-width: 88%; padding: 0.5rem 0.75rem; border-radius: 12px; white-space: pre-wrap; overflow-wrap: anywhere;
  line-height: 1.45;
}
.user {
  align-self: flex-end; background: var(--llamay-user-bg, var(--_accent)); color: var(--llamay-user-fg, #fff);
  border-bottom-right-radius: 4px;
}
.assistant {
  align-self: flex-start; background: var(--llamay-assistant-bg, #f0f2f6);
  color: var(--llamay-assistant-fg, var(--_fg)); border-bottom-left-radius: 4px;
}
.assistant.streaming::after { content: "▍"; color: var(--_accent); animation: blink 1s steps(2) infinite; }
@keyframes blink { 50% { opacity: 0; } }
.note { align-self: flex-start; font-size: 0.75em; color: var(--_muted); margin-top: -0.35rem; }
.hello { color: var(--_muted); font-style: italic; }
form { display: flex; gap: 0.45rem; padding: 0.65rem; border-top: 1px solid var(--_border); align-items: flex-end; }
textarea {
  flex: 1; resize: none; font: inherit; color: inherit; background: transparent; min-height: 3.4em; max-height: 8em;
  border: 1px solid var(--_border); border-radius: 10px; padding: 0.45rem 0.6rem;
}
button {
  font: inherit; font-weight: 600; border-radius: 10px; padding: 0.45rem 0.8rem; cursor: pointer;
  border: 1px solid var(--_accent); background: var(--_accent); color: #fff;
}
button.stop { background: transparent; color: var(--_accent); }
button:disabled { opacity: 0.4; cursor: not-allowed; }
.sr-only {
  position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); clip-path: inset(50%);
  white-space: nowrap;
}
footer { font-size: 0.7em; color: var(--_muted); padding: 0 0.8rem 0.5rem; }
.failure {
  margin: auto 0; padding: 0.8rem 0.9rem; border-radius: 12px; background: #fdecea; color: #5b1710;
  border: 1px solid #f1b7ae; display: flex; flex-direction: column; gap: 0.4rem; align-items: flex-start;
}
.failure strong { font-size: 1em; }
.getting-ready { margin: auto 0; text-align: center; color: var(--_muted); font-size: 0.9em; }
.getting-ready p { margin: 0.2rem 0; }
.getting-ready .bytes { font-variant-numeric: tabular-nums; }
.failure p { margin: 0; }
.failure .detail { font-size: 0.8em; opacity: 0.85; overflow-wrap: anywhere; }
.failure button { background: #fff; color: #8c1d13; border-color: #d9897e; font-size: 0.85em; }
.assistant.rendered { white-space: normal; }
.md > :first-child { margin-top: 0; }
.md > :last-child { margin-bottom: 0; }
.md p, .md ul, .md ol, .md blockquote, .md .md-code { margin: 0.4rem 0; }
.md ul, .md ol { padding-left: 1.2rem; }
.md .md-heading { margin: 0.5rem 0 0.25rem; font-size: 1em; }
.md blockquote { border-left: 3px solid var(--_border); padding-left: 0.6rem; color: var(--_muted); }
.md code { background: rgba(0, 0, 0, 0.07); padding: 0.05rem 0.25rem; border-radius: 4px; font-size: 0.92em; }
.md a { color: var(--_accent); }
.md-code { border-radius: 8px; background: #151a26; color: #e6e9ef; overflow: hidden; max-width: 100%; }
.md-code-head {
  display: flex; justify-content: space-between; align-items: center; font-size: 0.75em; color: #aeb6c6;
  background: #1f2636; padding: 0.15rem 0.3rem 0.15rem 0.6rem;
}
.md-code-head button {
  font-size: 1em; padding: 0.05rem 0.45rem; background: transparent; border-color: #47506a; color: #dfe5f2;
}
.md-code pre { margin: 0; padding: 0.5rem 0.6rem; overflow-x: auto; white-space: pre; }
.md-code pre code { background: none; padding: 0; }
`;

let instances = 0;

export class LlamayChat extends HTMLElement {
  static observedAttributes = ["model", "backend", "threads", "label", "placeholder"];

  constructor() {
    super();
    this.uid = ++instances;
    this.engine = null;
    this.history = [];
    this.generating = false;
    this.chatMode = true;
    this.loadToken = 0;
    const root = this.attachShadow({ mode: "open" });
    const id = (s) => `llamay-${this.uid}-${s}`;
    root.innerHTML = `
      <style>${STYLE}</style>
      <section class="box" part="box" aria-labelledby="${id("title")}">
        <header part="header">
          <h2 id="${id("title")}"></h2>
          <span class="status" data-testid="llamay-status" role="status"></span>
        </header>
        <div class="bar" aria-hidden="true"><div></div></div>
        <div class="transcript" part="transcript" data-testid="llamay-transcript" role="log" aria-live="polite"
             aria-relevant="additions text" aria-labelledby="${id("title")}" tabindex="0"></div>
        <form part="form">
          <label class="sr-only" for="${id("input")}">Message</label>
          <textarea id="${id("input")}" part="input" rows="2" data-testid="llamay-input"
                    aria-describedby="${id("keys")}" disabled></textarea>
          <button type="submit" part="send" data-testid="llamay-send" disabled>Send</button>
          <button type="button" class="stop" part="stop" data-testid="llamay-stop" aria-label="Stop the reply"
                  disabled>Stop</button>
        </form>
        <footer id="${id("keys")}">Enter sends · Shift+Enter new line · Esc stops · runs in your browser<span
          data-testid="llamay-threads"></span></footer>
      </section>`;
    this.$ = (sel) => root.querySelector(sel);
    this.ui = {
      title: this.$("h2"),
      status: this.$(".status"),
      bar: this.$(".bar"),
      transcript: this.$(".transcript"),
      form: this.$("form"),
      input: this.$("textarea"),
      send: this.$("button[type=submit]"),
      stop: this.$("button.stop"),
      threads: this.$("[data-testid=llamay-threads]"),
    };
    this.ui.form.addEventListener("submit", (e) => {
      e.preventDefault();
      this.#submit();
    });
    this.ui.input.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        this.#submit();
      }
    });
    this.ui.stop.addEventListener("click", () => this.stop());
    this.shadowRoot.addEventListener("keydown", (e) => {
      if (e.key === "Escape" && this.generating) {
        e.preventDefault();
        this.stop();
      }
    });
  }

  connectedCallback() {
    this.#label();
    if (!this.engine && !this.loading) this.#load();
  }

  disconnectedCallback() {
    // moved within the page: connectedCallback comes right back; removed: free the worker
    queueMicrotask(() => {
      if (this.isConnected) return;
      this.loadToken++;
      this.engine?.terminate();
      this.engine = null;
      this.loading = false;
    });
  }

  attributeChangedCallback(name, before, after) {
    if (before === after) return;
    if (name === "label" || name === "placeholder") this.#label();
    else if (this.isConnected && (this.engine || this.loading)) this.#load(); // another model or backend
  }

  /** Send a message as the visitor would (returns when the reply is complete). */
  async send(text) {
    if (!this.engine?.model || this.generating || !String(text).trim()) return;
    text = String(text);
    this.generating = true;
    this.#controls();
    this.#bubble("user", text);
    const reply = this.#bubble("assistant", "");
    reply.classList.add("streaming");
    const out = document.createTextNode("");
    reply.append(out);
    // a chat reply is drawn as Markdown once a frame while it streams (a continuation stays plain text)
    const body = document.createElement("div");
    body.className = "md";
    let queued = false;
    const draw = () => {
      queued = false;
      body.replaceChildren(renderMarkdown(content));
    };
    if (this.chatMode) {
      reply.classList.add("rendered");
      out.replaceWith(body);
    }
    let content = "";
    let final = null;
    const num = (name, dflt) => (this.hasAttribute(name) ? Number(this.getAttribute(name)) : dflt);
    const params = {
      stream: true,
      max_tokens: num("max-tokens", 256),
      temperature: num("temperature", 0.7),
      top_p: num("top-p", undefined),
      seed: num("seed", undefined),
    };
    this.#status("Writing…");
    try {
      let stream;
      if (this.chatMode) {
        const system = this.getAttribute("system-prompt") ?? this.getAttribute("system");
        const messages = [...(system ? [{ role: "system", content: system }] : []), ...this.history];
        stream = this.engine.chat({ ...params, messages: [...messages, { role: "user", content: text }] });
      } else {
        stream = this.engine.complete({ ...params, prompt: text });
      }
      for await (const chunk of stream) {
        const c = chunk.choices[0];
        const delta = this.chatMode ? (c.delta.content ?? "") : c.text;
        if (delta) {
          content += delta;
          if (!this.chatMode) out.appendData(delta);
          else if (!queued) {
            queued = true;
            requestAnimationFrame(draw);
          }
          this.ui.transcript.scrollTop = this.ui.transcript.scrollHeight;
        }
        if (c.finish_reason) final = chunk;
      }
    } catch (err) {
      this.#fail(err);
    } finally {
      this.generating = false;
      reply.classList.remove("streaming");
    }
    if (this.chatMode) draw();
    if (!content) (this.chatMode ? body : out).append("…");
    if (this.chatMode) this.history.push({ role: "user", content: text }, { role: "assistant", content });
    const reason = final?.choices[0].finish_reason;
    if (reason === "abort" || reason === "length") {
      const note = document.createElement("span");
      note.className = "note";
      note.dataset.testid = "llamay-finish";
      note.dataset.reason = reason;
      note.textContent = reason === "abort" ? "stopped" : "reached the length limit";
      this.ui.transcript.append(note);
    }
    if (final) {
      const t = final.timings;
      const speed = t?.predicted_per_second ? ` · ${t.predicted_per_second.toFixed(1)} tok/s` : "";
      this.#status(`${final.usage?.completion_tokens ?? 0} tokens${speed}`);
      this.#emit("llamay-reply", { content, finish_reason: reason, usage: final.usage, timings: t });
    }
    this.#controls();
    if (this.contains(document.activeElement) || this.shadowRoot.activeElement) this.ui.input.focus();
  }

  /** Stop the reply being written. */
  stop() {
    if (this.generating) this.engine?.abort();
  }

  #label() {
    this.ui.title.textContent = this.getAttribute("label") ?? "Chat";
    this.ui.input.placeholder = this.getAttribute("placeholder") ?? "Ask something…";
  }

  async #load() {
    const token = ++this.loadToken;
    const model = this.getAttribute("model");
    this.engine?.terminate();
    this.engine = null;
    this.history = [];
    this.ui.transcript.replaceChildren();
    this.#controls();
    if (!model) {
      this.#status("No model: set the model attribute", true);
      return;
    }
    this.loading = true;
    this.#progress(null);
    this.#status("Starting…");
    const ready = this.#gettingReady();
    const name = decodeURIComponent(new URL(model, document.baseURI).pathname.split("/").pop());
    const phases = {
      boot: "Starting…",
      download: "Downloading",
      "cache-read": "Reading from cache",
      bind: "Preparing…",
    };
    try {
      const threads = this.hasAttribute("threads") ? Number(this.getAttribute("threads")) : undefined;
      const engine = await createEngine({
        model,
        threads,
        backend: this.getAttribute("backend") || undefined,
        onStdout: () => {},
        onProgress: (p) => {
          if (token !== this.loadToken) return;
          this.#progress(p.fraction);
          const pct = p.fraction === null ? "" : ` ${Math.round(100 * p.fraction)}%`;
          if (phases[p.phase]) this.#status(`${phases[p.phase]}${pct}`);
          ready.update(p);
        },
      });
      if (token !== this.loadToken) {
        engine.terminate();
        return;
      }
      this.engine = engine;
      this.ui.threads.textContent = ` · ${engine.threads} thread${engine.threads === 1 ? "" : "s"}`;
      this.chatMode = !!engine.card?.tokenizer?.chat_template;
      const from = engine.model.source === "cache" ? " (from cache)" : "";
      this.#status(`Ready · ${name}${from}`);
      ready.remove();
      this.#progress(undefined);
      const greeting = this.getAttribute("greeting");
      if (greeting) {
        const hello = this.#bubble("assistant", greeting);
        hello.classList.add("hello");
      }
      this.ui.input.placeholder =
        this.getAttribute("placeholder") ?? (this.chatMode ? "Ask something…" : "Start a story…");
      this.#emit("llamay-ready", { model: engine.model });
    } catch (err) {
      if (token === this.loadToken) {
        this.#failure(err, name);
        this.#fail(err);
      }
    } finally {
      if (token === this.loadToken) {
        this.loading = false;
        this.#progress(undefined);
        this.#controls();
      }
    }
  }

  /** While the model loads, the transcript says what is happening in a visitor's words (a first visit downloads
   * the model; later ones read it from the browser), with the bytes so far. */
  #gettingReady() {
    const box = document.createElement("div");
    box.className = "getting-ready";
    box.dataset.testid = "llamay-loading";
    const what = document.createElement("p");
    what.textContent = "The assistant is getting ready. It runs in your browser, so nothing you type leaves this page.";
    const bytes = document.createElement("p");
    bytes.className = "bytes";
    bytes.textContent = "Starting…";
    box.append(what, bytes);
    this.ui.transcript.replaceChildren(box);
    const mb = (n) => `${(n / 1e6).toFixed(1)} MB`;
    const words = {
      boot: () => "Starting…",
      download: (p) => `Downloading its model (once): ${mb(p.done ?? 0)}${p.total ? ` of ${mb(p.total)}` : ""}`,
      "cache-read": () => "Reading its model from this browser…",
      bind: () => "Almost ready…",
    };
    return {
      update: (p) => {
        if (words[p.phase]) bytes.textContent = words[p.phase](p);
      },
      remove: () => box.remove(),
    };
  }

  /** The chat could not start: say so in the transcript, in words for a visitor, with a way to try again. */
  #failure(err, name) {
    const box = document.createElement("div");
    box.className = "failure";
    box.setAttribute("role", "alert");
    box.dataset.testid = "llamay-error";
    box.dataset.kind = err.kind ?? "internal";
    const title = document.createElement("strong");
    title.textContent = "The chat could not start.";
    const what = document.createElement("p");
    what.textContent = VISITOR_MESSAGES[err.kind] ?? "Something went wrong while the assistant was starting.";
    const detail = document.createElement("p");
    detail.className = "detail";
    const message = err.message ?? String(err);
    detail.textContent = message.includes(name) ? message : `${name}: ${message}`; // the file, named once
    const retry = document.createElement("button");
    retry.type = "button";
    retry.textContent = "Try again";
    retry.dataset.testid = "llamay-retry";
    retry.addEventListener("click", () => this.#load());
    box.append(title, what, detail, retry);
    this.ui.transcript.replaceChildren(box);
  }

  #fail(err) {
    this.#status(this.engine?.model ? (err.message ?? String(err)) : "Not available", true);
    this.#emit("llamay-error", { kind: err.kind ?? "internal", message: err.message ?? String(err) });
  }

  #emit(type, detail) {
    this.dispatchEvent(new CustomEvent(type, { detail, bubbles: true, composed: true }));
  }

  #status(text, error = false) {
    this.ui.status.textContent = text;
    this.ui.status.title = text;
    this.ui.status.classList.toggle("error", error);
  }

  /** fraction in [0, 1]; null: busy without a measure; undefined: done. */
  #progress(fraction) {
    const { bar } = this.ui;
    bar.classList.toggle("indeterminate", fraction === null);
    bar.firstElementChild.style.width = fraction === null || fraction === undefined ? "" : `${100 * fraction}%`;
  }

  #controls() {
    const ready = !!this.engine?.model;
    this.ui.input.disabled = !ready;
    this.ui.send.disabled = !ready || this.generating;
    this.ui.stop.disabled = !this.generating;
  }

  #bubble(role, text) {
    const node = document.createElement("div");
    node.className = `msg ${role}`;
    node.dataset.role = role;
    node.textContent = text;
    const who = document.createElement("span");
    who.className = "sr-only";
    who.textContent = role === "user" ? "You: " : "Assistant: ";
    node.prepend(who);
    this.ui.transcript.append(node);
    this.ui.transcript.scrollTop = this.ui.transcript.scrollHeight;
    return node;
  }

  #submit() {
    const text = this.ui.input.value;
    if (!text.trim() || this.generating || !this.engine?.model) return;
    this.ui.input.value = "";
    this.send(text);
  }
}

if (!customElements.get("llamay-chat")) customElements.define("llamay-chat", LlamayChat);

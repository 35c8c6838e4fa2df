// The demo's side panels, drawn from data: the model card, the server's models, the cached models and the
// conversations. Each takes what it shows and the actions its buttons run; demo.mjs owns the state.

import { $, el, mb, ms } from "./dom.mjs";

// ---------- the model card ----------

export function renderCard(card, model) {
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

// ---------- the server's models, the cached ones, the conversations ----------

const KINDS = { chat: "chat", text: "text completion", embedding: "embeddings" };

/** What a served model is, in one line: "llama · 134.5M params · Q4_1 · 98.4 MB". */
function modelLine(m) {
  const parts = [m.architecture, m.parameter_size && `${m.parameter_size} params`, m.quantization, mb(m.size)];
  return parts.filter(Boolean).join(" · ");
}

/** The server's models (/models/index.json) as buttons: what each is, cached or loaded, or why it cannot load.
 * @param {{cached: Set<string>, loadedKey: string|null, load: (path: string) => void}} how */
export function renderServed(served, { cached, loadedKey, load }) {
  const items = served.map((m) => {
    const url = new URL(m.url, location.href);
    const usable = !m.error && m.kind !== "embedding";
    const badges = [];
    if (m.kind) badges.push(el("span", { class: `badge kind-${m.kind}`, text: KINDS[m.kind] ?? m.kind }));
    if (cached.has(url.href)) badges.push(el("span", { class: "badge cached", text: "cached" }));
    if (loadedKey === url.href) badges.push(el("span", { class: "badge loaded", text: "loaded" }));
    const why = m.error ?? (m.kind === "embedding" ? "an embedding model: it cannot chat (use engine.embed)" : "");
    const button = el(
      "button",
      {
        type: "button",
        class: "model",
        "data-testid": "server-model",
        "data-name": m.name,
        "aria-label": `Load ${m.name}`,
        onclick: () => load(url.pathname),
      },
      el("span", { class: "model-name", text: m.name }),
      el("span", { class: "model-line", text: modelLine(m) }),
      el("span", { class: "badges" }, ...badges),
    );
    if (!usable) {
      button.disabled = true;
      button.append(el("span", { class: "model-why", text: why, title: why }));
    }
    return el("li", {}, button);
  });
  $("served-list").replaceChildren(...items);
}

/** The models kept in this browser's Cache API, each with Load and Remove.
 * @param {{load: (m) => void, remove: (m) => void}} how */
export function renderCached(list, { load, remove }) {
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
        onclick: () => load(m),
      }),
      el("button", {
        type: "button",
        class: "icon",
        text: "×",
        "aria-label": `Remove ${m.name} from the cache`,
        onclick: () => remove(m),
      }),
    ),
  );
  $("cached-list").replaceChildren(...items);
  if (!list.length) $("cached-list").append(el("li", { class: "hint", text: "nothing yet" }));
}

/** The conversations kept in this browser, the current one marked, each to open or delete.
 * @param {{open: (id: string) => void, remove: (id: string) => void}} how */
export function renderConversations(conversations, { open, remove }) {
  const items = conversations.list.map((c) => {
    const current = c.id === conversations.currentId;
    const title = c.title || "New conversation";
    const when = new Date(c.updated).toLocaleString("en", { dateStyle: "medium", timeStyle: "short" });
    return el(
      "li",
      { class: current ? "current" : "", "data-testid": "conversation" },
      el(
        "button",
        { type: "button", class: "conv", "aria-current": current ? "true" : "false", onclick: () => open(c.id) },
        el("span", { class: "conv-title", text: title }),
        el("span", { class: "conv-when", text: `${c.messages.length} messages · ${when}` }),
      ),
      el("button", {
        type: "button",
        class: "icon",
        text: "×",
        "data-testid": "delete-conversation",
        "aria-label": `Delete the conversation ${title}`,
        onclick: () => remove(c.id),
      }),
    );
  });
  $("conv-list").replaceChildren(...items);
}

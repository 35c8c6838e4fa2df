// The demo's conversations, kept in this browser (localStorage): a list to start, switch and delete, that
// survives a reload. Each is {id, title, created, updated, messages: [{role, content, mode, finish_reason?}]};
// `mode` is "chat" (a chat template's turn) or "complete" (a text continued, the prompt echoed before it).
// Stored text is shown through the Markdown renderer like a live reply: it never becomes HTML.

const KEY = "llamay-demo:conversations";
const CURRENT = "llamay-demo:current";
const TITLE_CHARS = 48;

export class Conversations {
  constructor(storage = globalThis.localStorage) {
    this.storage = storage;
    this.list = this.#read();
    this.currentId = storage.getItem(CURRENT);
    if (!this.list.some((c) => c.id === this.currentId)) this.currentId = this.list[0]?.id ?? null;
  }

  #read() {
    try {
      const list = JSON.parse(this.storage.getItem(KEY) ?? "[]");
      if (!Array.isArray(list)) return [];
      // only well-formed entries: a damaged store loses what it cannot read, not the page
      return list.filter((c) => c && typeof c.id === "string" && Array.isArray(c.messages));
    } catch {
      return [];
    }
  }

  save() {
    try {
      this.storage.setItem(KEY, JSON.stringify(this.list));
      if (this.currentId) this.storage.setItem(CURRENT, this.currentId);
      else this.storage.removeItem(CURRENT);
      return null;
    } catch (err) {
      return err; // over the storage quota: the conversation goes on, unsaved
    }
  }

  /** The conversation shown now (created when there is none). */
  get current() {
    let c = this.list.find((x) => x.id === this.currentId);
    if (!c) c = this.create();
    return c;
  }

  create() {
    const now = Date.now();
    const c = { id: `c${now.toString(36)}${Math.random().toString(36).slice(2, 6)}`, title: "", created: now };
    c.updated = now;
    c.messages = [];
    this.list.unshift(c);
    this.currentId = c.id;
    this.save();
    return c;
  }

  switchTo(id) {
    if (this.list.some((c) => c.id === id)) this.currentId = id;
    this.save();
    return this.current;
  }

  remove(id) {
    this.list = this.list.filter((c) => c.id !== id);
    if (this.currentId === id) this.currentId = this.list[0]?.id ?? null;
    this.save();
  }

  /** Record that `c` changed (its title from its first message, its place first in the list). */
  touch(c) {
    c.updated = Date.now();
    if (!c.title) {
      const first =
        c.messages
          .find((m) => m.role === "user")
          ?.content.trim()
          .replace(/\s+/g, " ") ?? "";
      c.title = first.length > TITLE_CHARS ? `${first.slice(0, TITLE_CHARS - 1)}…` : first;
    }
    this.list = [c, ...this.list.filter((x) => x.id !== c.id)];
    return this.save();
  }
}

// Errors the browser runtime reports to a page: each has a `kind` a page can switch on, and a message meant
// for a person (what went wrong, with which file, and what to do).
//
//   kind                      raised when
//   not-gguf                  the file does not start with the bytes "GGUF"
//   malformed-gguf            a GGUF whose header, metadata or tensor table is broken (GGUFError from the core)
//   unsupported-architecture  general.architecture names no architecture llamay has (the core's message)
//   unsupported-type          a tensor type llamay cannot run on the chosen backend (the core's message)
//   model                     metadata or tensors that do not fit the architecture (ModelError)
//   too-large                 the model does not fit in the browser's memory for WebAssembly
//   network                   the model's URL answered with an error, or is not on the page's origin
//   no-model                  a request that needs a model before one is loaded
//   bad-request               a request the engine cannot honour (a bad response_format or sampling field, an
//                             encoder asked to chat)
//   aborted                   a request stopped by abort() before it produced anything
//   internal                  anything else (a bug: the message carries the Python traceback's last line)

export class LlamayWebError extends Error {
  /**
   * @param {string} message
   * @param {string} [kind] one of the kinds above
   * @param {object} [details] e.g. {card} for a model that was read but could not be bound
   */
  constructor(message, kind = "internal", details = undefined) {
    super(message);
    this.name = "LlamayWebError";
    this.kind = kind;
    if (details) this.details = details;
  }
}

const PYTHON_KINDS = {
  UnsupportedArchitectureError: "unsupported-architecture",
  UnsupportedTypeError: "unsupported-type",
  ModelError: "model",
  MemoryError: "too-large",
  ConstraintError: "bad-request",
  RequestFieldError: "bad-request", // a request field the sampler cannot honour (llamay.sampling.request)
  SamplerConfigError: "bad-request",
  ToolRequestError: "bad-request", // tools and tool_choice that cannot be honoured (llamay.tools)
  KeyboardInterrupt: "aborted",
  LlamayError: "bad-request",
};

/** The exception's own text from a Pyodide PythonError (whose message is the whole traceback). */
export function pythonErrorText(err) {
  const type = err.type;
  const lines = String(err.message ?? "")
    .trimEnd()
    .split("\n");
  const head = new RegExp(`^(?:[\\w.]+\\.)?${type}(?::\\s?|$)`);
  for (let i = lines.length - 1; i >= 0; i--) {
    if (head.test(lines[i])) return [lines[i].replace(head, ""), ...lines.slice(i + 1)].join("\n").trim();
  }
  return lines.at(-1) ?? String(err);
}

/** Any error (a PythonError from Pyodide, a RangeError from a memory grow, ours) as a LlamayWebError. */
export function toWebError(err) {
  if (err instanceof LlamayWebError) return err;
  if (typeof err?.type === "string" && (err.name === "PythonError" || err.constructor?.name === "PythonError")) {
    const text = pythonErrorText(err);
    let kind = PYTHON_KINDS[err.type] ?? "internal";
    if (err.type === "GGUFError") kind = /not a GGUF file/.test(text) ? "not-gguf" : "malformed-gguf";
    if (err.type === "MemoryError") {
      return new LlamayWebError(`out of memory in the browser (${text || "MemoryError"}): try a smaller model`, kind);
    }
    return new LlamayWebError(text || err.type, kind);
  }
  if (err instanceof RangeError && /memory/i.test(err.message)) {
    return new LlamayWebError(`out of memory in the browser (${err.message}): try a smaller model`, "too-large");
  }
  return new LlamayWebError(err?.message ?? String(err), err?.kind ?? "internal");
}

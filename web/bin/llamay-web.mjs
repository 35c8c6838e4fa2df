#!/usr/bin/env node
// llamay under Pyodide in Node: the browser runtime, scriptable and testable without a browser.
//
//   llamay-web run --model FILE --prompt TEXT [-n N] [--temp T] [--backend portable|wasm] [--no-echo] [--stats]
//   llamay-web test [PYTEST ARGS...]     the repository's tests/ under Pyodide (pytest), with pass counts
//   llamay-web python SCRIPT [ARGS...]   a Python file under Pyodide, with the same mounts as `test` (and the
//                                        folders of SCRIPT and of each ARG that names a file)
//
// Needs `npm ci` in web/ and `python web/build.py` (the wheels and kernel modules in web/dist).

import { existsSync, realpathSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

import { LlamayRuntime } from "../src/runtime.mjs";

const WEB = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const REPO = resolve(WEB, "..");
const USAGE = `usage:
  llamay-web run --model FILE --prompt TEXT [-n N] [--temp T] [--top-k K] [--top-p P] [--seed S]
                 [--backend portable|wasm] [--no-echo] [--stats]
  llamay-web test [PYTEST ARGS...]
  llamay-web python SCRIPT [ARGS...]`;

/** Environment variables handed to Python: llamay's own (LLAMAY_*), CI, and those given here. */
function pythonEnv(extra = {}) {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (k.startsWith("LLAMAY_") || k === "CI" || k.startsWith("HYPOTHESIS")) env[k] = v;
  }
  return { ...env, ...extra };
}

const rawStdout = { write: (buf) => (process.stdout.write(buf), buf.length) };
const rawStderr = { write: (buf) => (process.stderr.write(buf), buf.length) };

async function run(argv) {
  const { values } = parseArgs({
    args: argv,
    options: {
      model: { type: "string", short: "m" },
      prompt: { type: "string", short: "p", default: "" },
      n: { type: "string", short: "n", default: "64" },
      temp: { type: "string", default: "0.8" },
      "top-k": { type: "string" },
      "top-p": { type: "string" },
      seed: { type: "string" },
      backend: { type: "string" },
      "no-echo": { type: "boolean", default: false },
      stats: { type: "boolean", default: false },
    },
  });
  if (!values.model) throw new UsageError("run: --model FILE is required");
  const t0 = performance.now();
  const rt = await LlamayRuntime.create({ env: pythonEnv() });
  rt.pyodide.setStdout(rawStdout);
  rt.pyodide.setStderr(rawStderr);
  const t1 = performance.now();
  const info = await rt.loadModel(values.model, { backend: values.backend });
  const t2 = performance.now();
  if (!values["no-echo"]) process.stdout.write(values.prompt);
  const num = (v) => (v === undefined ? undefined : Number(v));
  const out = await rt.complete(
    values.prompt,
    {
      maxTokens: Number(values.n),
      temperature: Number(values.temp),
      topK: num(values["top-k"]),
      topP: num(values["top-p"]),
      seed: num(values.seed),
    },
    (piece) => process.stdout.write(piece),
  );
  process.stdout.write("\n");
  if (values.stats) {
    const s = out.stats;
    const ms = (a, b) => `${((b - a) / 1000).toFixed(2)} s`;
    process.stderr.write(
      `${info.name} (${info.architecture}) on ${info.backend}${info.variant ? `/${info.variant}` : ""}: ` +
        `boot ${ms(t0, t1)}, load ${ms(t1, t2)}, prompt ${s.prompt_tokens} tok at ${s.prompt_tps.toFixed(1)} tok/s, ` +
        `generated ${s.generated_tokens} tok at ${s.generate_tps.toFixed(1)} tok/s (${s.finish_reason})\n`,
    );
  }
  return 0;
}

/** Mount a host folder at the same path inside Pyodide (NODEFS), so the tests' relative paths hold. */
function mountSame(pyodide, hostPath) {
  if (!existsSync(hostPath)) return false;
  pyodide.FS.mkdirTree(hostPath);
  pyodide.FS.mount(pyodide.FS.filesystems.NODEFS, { root: realpathSync(hostPath) }, hostPath);
  return true;
}

/** Pyodide with the test wheels, and the checkout, the fixtures and the model store mounted at their paths. */
async function bootMounted(extraMounts = []) {
  const fixtures = resolve(process.env.LLAMAY_FIXTURES ?? resolve(REPO, "..", "shared", "fixtures"));
  const models = resolve(process.env.LLAMAY_MODELS_DIR ?? resolve(homedir(), ".cache", "llamay", "models"));
  const store = resolve(process.env.LLAMAY_MODELS ?? resolve(homedir(), ".cache", "llamay"));
  const env = pythonEnv({
    LLAMAY_FIXTURES: fixtures,
    LLAMAY_MODELS_DIR: models,
    LLAMAY_MODELS: store,
    PYTHONDONTWRITEBYTECODE: "1",
  });
  const rt = await LlamayRuntime.create({ groups: ["llamay", "engine", "test"], env });
  rt.pyodide.setStdout(rawStdout);
  rt.pyodide.setStderr(rawStderr);
  // the store's blobs (pulled models) and the old layout's folder, unless it lies inside the store
  const mounted = [];
  for (const p of [REPO, fixtures, store, models, ...extraMounts]) {
    // each folder once: one inside a folder mounted already is there already (a second mount would hide it)
    if (mounted.some((m) => p === m || p.startsWith(m + "/"))) continue;
    if (mountSame(rt.pyodide, p)) mounted.push(p);
  }
  return rt;
}

async function test(argv) {
  const t0 = performance.now();
  const rt = await bootMounted();
  const result = rt.runPytest(argv.length ? argv : ["-q"], REPO);
  const c = result.counts;
  const seconds = ((performance.now() - t0) / 1000).toFixed(1);
  const extra = ["error", "xfailed", "xpassed"].filter((k) => c[k]).map((k) => `, ${c[k]} ${k}`).join("");
  process.stdout.write(
    `pyodide-node: ${c.passed ?? 0} passed, ${c.failed ?? 0} failed, ${c.skipped ?? 0} skipped${extra} ` +
      `(pytest exit ${result.exit}, ${seconds} s)\n`,
  );
  return result.exit;
}

/** Run a Python file under Pyodide (its folder mounted, the checkout on sys.path), with sys.argv = [file, ...]. */
async function python(argv) {
  const [file, ...args] = argv;
  if (!file) throw new UsageError("python: a script is required");
  const script = resolve(file);
  // the script's folder, and the folder of each argument that names a file (a model linked into a temporary
  // folder by the tests, say), at their paths
  const files = args.filter((a) => a.startsWith("/") && existsSync(a) && statSync(a).isFile());
  const rt = await bootMounted([dirname(script), ...files.map((a) => dirname(a))]);
  rt.pyodide.globals.set("_argv", rt.pyodide.toPy([script, ...args]));
  rt.pyodide.runPython(
    `import os, runpy, sys\nsys.argv = list(_argv)\nsys.dont_write_bytecode = True\nsys.path[:0] = [${JSON.stringify(REPO)}]\n` +
      `os.chdir(${JSON.stringify(REPO)})\ntry:\n    runpy.run_path(sys.argv[0], run_name="__main__")\n` +
      `except SystemExit as e:\n    _code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)\nelse:\n    _code = 0`,
  );
  return rt.pyodide.globals.get("_code");
}

class UsageError extends Error {}

async function main(argv) {
  const [command, ...rest] = argv;
  if (command === "run") return run(rest);
  if (command === "test") return test(rest);
  if (command === "python") return python(rest);
  throw new UsageError(command ? `unknown command ${command}` : "no command");
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err) => {
    // a short message: Node would print the whole minified Pyodide module for an uncaught error
    if (err instanceof UsageError) process.stderr.write(`llamay-web: ${err.message}\n${USAGE}\n`);
    else process.stderr.write(`llamay-web: ${err.type ? `${err.message}` : (err.stack ?? err)}\n`);
    process.exit(2);
  },
);

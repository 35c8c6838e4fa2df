// Boot Pyodide from local files only (no CDN): the runtime of the pinned npm package, the wheels and wasm
// kernel modules of web/dist (built by `python web/build.py`), and the Python helper web/py/llamay_web.py.
// Works under Node (files read from disk) and in a browser or Web Worker (files fetched from the page's origin).

export const IS_NODE = typeof process !== "undefined" && !!process.versions?.node && typeof window === "undefined";

/** web/dist/ next to this module, as a URL (file: under Node, http(s): in a browser). */
export const DEFAULT_DIST_URL = new URL("../dist/", import.meta.url);
const HELPER_URL = new URL("../py/llamay_web.py", import.meta.url);

/** The bytes at a URL: read from disk for file: URLs under Node, fetched otherwise. */
export async function readBytes(url) {
  url = url instanceof URL ? url : new URL(url);
  if (url.protocol === "file:") {
    const { readFile } = await import("node:fs/promises");
    const { fileURLToPath } = await import("node:url");
    const buf = await readFile(fileURLToPath(url));
    return new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength);
  }
  const res = await fetch(url);
  if (!res.ok) throw new Error(`${url}: HTTP ${res.status}`);
  return new Uint8Array(await res.arrayBuffer());
}

async function importLoadPyodide(distURL) {
  if (IS_NODE) return (await import("pyodide")).loadPyodide; // web/node_modules/pyodide
  return (await import(new URL("pyodide/pyodide.mjs", distURL).href)).loadPyodide;
}

/**
 * Start Pyodide and install llamay into it.
 * @param {object} [opts]
 * @param {URL|string} [opts.distURL] where web/dist is served (default: next to this module)
 * @param {string[]} [opts.groups] wheel groups of dist/manifest.json to install ("llamay", "engine", "test")
 * @param {Record<string,string>} [opts.env] environment variables inside Python (e.g. LLAMAY_BACKEND)
 * @param {(line: string) => void} [opts.stdout] Python's stdout, line by line
 * @param {(line: string) => void} [opts.stderr] Python's stderr, line by line
 * @returns {Promise<{pyodide: object, web: object, manifest: object, timings: object, distURL: URL}>} the
 *   interpreter, the imported `llamay_web` helper module (a PyProxy), the manifest of what was installed, how long
 *   each step took ({pyodide_ms, wheels_ms, kernels_ms}: starting the interpreter, fetching + unpacking the
 *   wheels, the kernel modules), and where web/dist was read from
 */
export async function bootPyodide(opts = {}) {
  const t0 = performance.now();
  const distURL = new URL(opts.distURL ?? DEFAULT_DIST_URL);
  const groups = opts.groups ?? ["llamay", "engine"];
  const manifestURL = new URL("manifest.json", distURL);
  const manifest = JSON.parse(
    new TextDecoder().decode(
      await readBytes(manifestURL).catch((e) => {
        throw new Error(`${manifestURL} cannot be read (${e.message}): build it with \`python web/build.py\``);
      }),
    ),
  );
  const loadPyodide = await importLoadPyodide(distURL);
  const config = { env: { HOME: "/home/pyodide", ...(opts.env ?? {}) }, packages: [] };
  if (!IS_NODE) config.indexURL = new URL("pyodide/", distURL).href;
  if (opts.stdout) config.stdout = opts.stdout;
  if (opts.stderr) config.stderr = opts.stderr;
  const pyodide = await loadPyodide(config);
  const t1 = performance.now();

  // the helper first (stdlib only), then the wheels, unpacked by it into site-packages
  pyodide.FS.mkdirTree("/llamay-web");
  pyodide.FS.writeFile("/llamay-web/llamay_web.py", await readBytes(HELPER_URL));
  pyodide.runPython("import sys; sys.path.insert(0, '/llamay-web')");
  const web = pyodide.pyimport("llamay_web");
  const files = groups.flatMap((g) => {
    if (!manifest.wheels[g]) throw new Error(`no wheel group ${g} in ${distURL}manifest.json`);
    return manifest.wheels[g];
  });
  const blobs = await Promise.all(files.map((f) => readBytes(new URL(`wheels/${f}`, distURL))));
  for (const [i, name] of files.entries()) {
    const tmp = `/tmp/${name}`;
    pyodide.FS.writeFile(tmp, blobs[i]);
    web.install_wheel(tmp);
    pyodide.FS.unlink(tmp);
  }
  const t2 = performance.now();
  // the kernel modules, where llamay.wasm looks for them (unless the llamay wheel already carried them)
  if (groups.includes("llamay")) {
    for (const name of manifest.wasm ?? []) {
      const tmp = `/tmp/${name}`;
      pyodide.FS.writeFile(tmp, await readBytes(new URL(`wasm/${name}`, distURL)));
      web.install_file(tmp, "llamay.wasm", name);
    }
  }
  pyodide.runPython("import importlib; importlib.invalidate_caches()");
  const timings = { pyodide_ms: t1 - t0, wheels_ms: t2 - t1, kernels_ms: performance.now() - t2 };
  return { pyodide, web, manifest, timings, distURL };
}

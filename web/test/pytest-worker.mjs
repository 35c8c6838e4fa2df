// Boots Pyodide with llamay and pytest, unpacks a zip of the repository's tests/ (as /repo) and fixtures
// (as /shared/fixtures) into its in-memory file system, runs pytest and posts the output and the counts.

import { readBytes } from "../src/boot.mjs";
import { LlamayRuntime } from "../src/runtime.mjs";

self.onmessage = async ({ data }) => {
  const output = (text) => self.postMessage({ type: "output", text });
  try {
    const env = { LLAMAY_FIXTURES: "/shared/fixtures", ...data.env };
    const rt = await LlamayRuntime.create({ distURL: data.distURL, groups: ["llamay", "engine", "test"], env });
    const decoder = new TextDecoder();
    rt.pyodide.setStdout({ write: (buf) => (output(decoder.decode(buf)), buf.length) });
    rt.pyodide.setStderr({ write: (buf) => (output(decoder.decode(buf)), buf.length) });
    rt.pyodide.unpackArchive(await readBytes(data.bundle), "zip", { extractDir: "/" });
    const t0 = performance.now();
    const result = rt.runPytest(data.args, "/repo");
    result.seconds = (performance.now() - t0) / 1000;
    self.postMessage({ type: "done", result });
  } catch (err) {
    output(`${err.message ?? err}\n`);
    self.postMessage({ type: "done", result: { error: err.message ?? String(err) } });
  }
};

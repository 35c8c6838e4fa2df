// One kernel thread (a module worker started by kernel-threads.mjs): its own instance of the threads build on the
// shared memory, then llamay_thread_loop, which runs this thread's share of every command list part 0 posts and
// sleeps in memory.atomic.wait32 between them; it returns when part 0 calls llamay_stop_threads.
import { instantiateKernels } from "./kernel-threads.mjs";

self.onmessage = ({ data }) => {
  const { module, memory, index, ctl, gen } = data;
  let exports;
  try {
    exports = instantiateKernels(module, memory, index);
  } catch (err) {
    self.postMessage({ error: `kernel thread ${index}: ${err.message ?? err}` });
    return;
  }
  self.postMessage({ ready: true });
  exports.llamay_thread_loop(ctl, index, gen);
  self.close();
};

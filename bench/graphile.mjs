// graphile-worker on the same workload as `taskyard bench`: JOBS no-op
// jobs, 32 concurrent jobs, with graphile-worker's documented batching
// settings (local queue, batched completion). Prints one JSON line:
// {"drain_jobs_per_sec": N, "jobs": N, "mode": "backlog"|"live"}.
//
//   node bench/graphile.mjs URL JOBS backlog|live
//
// backlog: all jobs are added first, then the worker starts and the clock
// runs from its start until the last job completed. live: the worker is
// running while a producer adds the jobs (in batches of 100); the clock
// runs from the first add until the last job completed.
import { Logger, run, makeWorkerUtils } from "graphile-worker";

// Per-job log lines would cost graphile-worker more than the work; silence them.
const logger = new Logger(() => () => {});

const [url, jobsArg, mode = "backlog"] = process.argv.slice(2);
const jobs = Number(jobsArg);
if (!url || !Number.isInteger(jobs) || jobs <= 0 || !["backlog", "live"].includes(mode)) {
  console.error("usage: node bench/graphile.mjs URL JOBS backlog|live");
  process.exit(2);
}

const preset = {
  worker: {
    connectionString: url,
    logger,
    concurrentJobs: 32,
    maxPoolSize: 12,
    pollInterval: 1000,
    // https://worker.graphile.org/docs/performance#batching
    localQueue: { size: 500 },
    completeJobBatchDelay: 0,
    failJobBatchDelay: 0,
  },
};

const utils = await makeWorkerUtils({ connectionString: url, logger });
await utils.migrate();
await utils.withPgClient((c) => c.query("delete from graphile_worker._private_jobs"));

async function addAll() {
  for (let added = 0; added < jobs; added += 100) {
    const n = Math.min(100, jobs - added);
    await utils.addJobs(Array.from({ length: n }, () => ({ identifier: "noop", payload: {} })));
  }
}

let done = 0;
let finished;
const allDone = new Promise((resolve) => (finished = resolve));
const taskList = {
  noop: async () => {
    done += 1;
    if (done === jobs) finished();
  },
};

let started;
if (mode === "backlog") {
  await addAll();
  started = process.hrtime.bigint();
  var runner = await run({ preset, taskList, noHandleSignals: true });
} else {
  var runner = await run({ preset, taskList, noHandleSignals: true });
  started = process.hrtime.bigint();
  await addAll();
}
await allDone;
const seconds = Number(process.hrtime.bigint() - started) / 1e9;
await runner.stop();
await utils.release();
console.log(JSON.stringify({ drain_jobs_per_sec: jobs / seconds, jobs, mode }));

// The mock hub (mock-hub.mjs) as a process, for the CLI's tests (tests/cli_hub.rs): serves the
// repositories given as `id=folder` arguments, prints {"url"} on one line, and stops when its
// stdin closes (the test process ending closes it too).

import { startMockHub } from './mock-hub.mjs';

const repos = Object.fromEntries(process.argv.slice(2).map((arg) => arg.split('=')));
const hub = await startMockHub(repos);
console.log(JSON.stringify({ url: hub.url }));
process.stdin.resume();
process.stdin.on('end', () => hub.close().then(() => process.exit(0)));

// The pi view's latency, measured with pi-permission-system's own
// forwarding client (ParentAuthorizer, unmodified) against permfs's native
// Node client (clients/permfs.js) in the same process, interleaved.
// Copied into the installed reference package's src/ by pi_view.py.
//
// argv: childSessionDir parentInboxDir permfsJsPath rounds
// stdout: one JSON object of samples (ms).
import { readdirSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { ParentAuthorizer } from "#src/authority/approval-escalator";

const [child, inbox, clientPath, roundsText] = process.argv.slice(2);
const rounds = Number(roundsText);
const { ask } = createRequire(import.meta.url)(clientPath);
process.env.PI_SUBAGENT_PARENT_SESSION = "main";
const logger = { review: () => {}, debug: () => {} };
const ctx = {
  hasUI: false,
  ui: {},
  sessionManager: { getSessionId: () => "pi-child", getSessionDir: () => "/x", getEntries: () => [] },
};
const pi = new ParentAuthorizer(ctx as never, { forwardingDir: `${child}/pi`, logger: logger as never });
const details = (command: string) => ({
  requestId: "r", source: "tool_call", agentName: null, message: command, toolName: "bash", command,
});
const native = (command: string) => ask(child, { surface: "bash", value: command });

const now = () => Number(process.hrtime.bigint()) / 1e6;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Decides the one waiting ask as soon as it appears; returns when it wrote. */
async function decideWhenWaiting(): Promise<number> {
  for (;;) {
    const waiting = readdirSync(inbox);
    if (waiting.length > 0) {
      const at = now();
      writeFileSync(`${inbox}/${waiting[0]}`, "allow");
      return at;
    }
    await sleep(2);
  }
}

const samples: Record<string, number[]> = {
  rule_pi: [], rule_native: [], person_pi: [], person_native: [],
};
for (let i = 0; i < rounds; i++) {
  // A rule answers: the whole ask, start to decision.
  let t = now();
  if (!(await pi.authorize(details("git status") as never)).approved) throw new Error("pi: not approved");
  samples.rule_pi.push(now() - t);
  t = now();
  if (!(await native("git status")).approved) throw new Error("native: not approved");
  samples.rule_native.push(now() - t);
  // A person answers: from the decision's write to the agent holding it.
  for (const [name, run] of [
    ["person_pi", () => pi.authorize(details(`make ${i}`) as never)],
    ["person_native", () => native(`make ${i}`)],
  ] as const) {
    const answer = run();
    const decided = await decideWhenWaiting();
    if (!(await answer).approved) throw new Error(`${name}: not approved`);
    samples[name].push(now() - decided);
  }
}
console.log(JSON.stringify(samples));

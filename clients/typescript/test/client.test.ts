// Runs against a real Hindsight stack: HINDSIGHT_URL (and HINDSIGHT_API_KEY when the API wants
// one). Without HINDSIGHT_URL the tests skip locally and fail in CI (CI=true).
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { spawnSync } from "node:child_process";
import { describe, test } from "node:test";
import { fileURLToPath } from "node:url";

import { Hindsight, HindsightError } from "../src/index.js";

// Compiled to build/test/, so the package root is two folders up.
const SCHEMA_SCRIPT = fileURLToPath(new URL("../../scripts/schema.mjs", import.meta.url));

const baseUrl = process.env.HINDSIGHT_URL ?? "";
const apiKey = process.env.HINDSIGHT_API_KEY || undefined;

if (!baseUrl && process.env.CI === "true") {
  throw new Error("HINDSIGHT_URL is not set: CI must run these tests against a live stack");
}
const skip = baseUrl ? false : "HINDSIGHT_URL is not set (start a stack: hindsight up)";

function client(): Hindsight {
  return new Hindsight({ baseUrl, apiKey });
}

function freshNamespace(): string {
  return `ts-${randomUUID().slice(0, 12)}`;
}

async function rejection(promise: Promise<unknown>): Promise<HindsightError> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof HindsightError, `expected a HindsightError, got ${String(error)}`);
    return error;
  }
  assert.fail("expected the call to fail");
}

describe("Hindsight HTTP API from TypeScript", { skip }, () => {
  test("health answers ok", async () => {
    const health = await client().health();
    assert.equal(health.status, "ok");
    assert.ok(health.watermarks >= 1);
  });

  test("src/schema.ts matches the running API's /openapi.json", () => {
    // The same script as `npm run generate`, so "up to date" means what generate would write.
    const check = spawnSync(process.execPath, [SCHEMA_SCRIPT, "--check"], { encoding: "utf8" });
    assert.equal(check.status, 0, `${check.stdout}${check.stderr}`);
  });

  test("retain, then recall with waitFor finds the turn (read-your-writes)", async () => {
    const hs = client();
    const namespace = freshNamespace();
    const receipt = await hs.retain(namespace, "Our staging database runs on PostgreSQL 16.", {
      speaker: "alice",
      sessionId: "s1",
    });
    assert.equal(receipt.namespace, namespace);
    assert.ok(Number.isInteger(receipt.offset) && receipt.offset >= 0);

    const result = await hs.recall(namespace, "Which database does staging use?", {
      waitFor: receipt,
      limit: 5,
    });
    const hit = result.memories.find((memory) => memory.content.includes("PostgreSQL 16"));
    assert.ok(hit, `no recalled memory mentions PostgreSQL 16: ${JSON.stringify(result)}`);
    assert.equal(hit.namespace, namespace);
    // The context block cites memories as `mem:` + the id's first 8 characters.
    assert.ok(result.context.includes(`mem:${hit.id.slice(0, 8)}`), result.context);
    assert.ok(result.context.includes("PostgreSQL 16"), result.context);

    // An offset works as well as the receipt, and `at` before the turn finds nothing yet.
    const earlier = await hs.recall(namespace, "Which database does staging use?", {
      waitFor: receipt.offset,
      at: new Date("2001-01-01T00:00:00Z"),
    });
    assert.deepEqual(
      earlier.memories.map((memory) => memory.id),
      [],
      "nothing was said in 2001",
    );
  });

  test("a recall reports its reinforcement signal and its trace", async () => {
    const hs = client();
    const namespace = freshNamespace();
    const question = "When does the release train leave?";
    const receipt = await hs.retain(namespace, "The release train leaves every second Tuesday.", {
      speaker: "fay",
      sessionId: "s1",
    });
    const reinforced = await hs.recall(namespace, question, { waitFor: receipt });
    assert.ok(reinforced.memories.length >= 1, JSON.stringify(reinforced));
    const signal = reinforced.signal;
    assert.ok(signal, `a recall with hits publishes a signal: ${JSON.stringify(reinforced)}`);
    assert.equal(signal.namespace, namespace);
    assert.equal(signal.topic, receipt.topic);
    assert.ok(signal.offset > receipt.offset, `${JSON.stringify(signal)} after ${receipt.offset}`);
    assert.equal(reinforced.trace?.route, reinforced.route);
    assert.ok((reinforced.trace?.candidates ?? 0) >= 1, JSON.stringify(reinforced.trace));

    // The signal is an event like any other: a recall can wait for it.
    const quiet = await hs.recall(namespace, question, { waitFor: signal, reinforce: false });
    assert.equal(quiet.signal, null, "reinforce=false publishes nothing");
    const hit = quiet.memories.find((memory) => memory.content.includes("release train"));
    assert.ok(hit, JSON.stringify(quiet));
    assert.ok(hit.fused > 0, `the paths' fused score ranked it: ${JSON.stringify(hit)}`);
  });

  test("forget without waiting returns before the views apply it", async () => {
    const queued = await client().forget(freshNamespace(), { ids: ["m_unknown"] }, { wait: false });
    assert.equal(queued.command, "forget");
    assert.equal(queued.applied, false);
    // What it took is known only once applied; the command itself is in the log.
    assert.deepEqual(queued.memory_ids, []);
    assert.ok(queued.offset >= 0, JSON.stringify(queued));
  });

  test("ready reports the view caught up", async () => {
    const ready = await client().ready();
    assert.equal(ready.ready, true, JSON.stringify(ready));
    assert.ok(ready.max_lag >= 0);
  });

  test("forget by query: the memory is no longer recalled, others stay", async () => {
    const hs = client();
    const namespace = freshNamespace();
    await hs.retain(namespace, "My gym locker code is 4417.", { speaker: "bob", sessionId: "s1" });
    const kept = await hs.retain(namespace, "I drink my coffee black, no sugar.", {
      speaker: "bob",
      sessionId: "s1",
    });
    const before = await hs.recall(namespace, "gym locker code", { waitFor: kept });
    assert.ok(before.memories.some((memory) => memory.content.includes("4417")));

    const forgotten = await hs.forget(namespace, { query: "gym locker code" });
    assert.equal(forgotten.command, "forget");
    assert.equal(forgotten.applied, true);
    assert.ok(forgotten.memory_ids.length >= 1);

    const after = await hs.recall(namespace, "gym locker code", { includeHistory: true });
    assert.ok(
      !after.memories.some((memory) => memory.content.includes("4417")),
      `forgotten memory recalled: ${JSON.stringify(after.memories)}`,
    );
    const coffee = await hs.recall(namespace, "How do I take my coffee?");
    assert.ok(coffee.memories.some((memory) => memory.content.includes("black")));

    const stats = await hs.stats(namespace);
    assert.ok((stats.by_status.forgotten ?? 0) >= 1, JSON.stringify(stats));
    assert.ok((stats.by_status.active ?? 0) >= 1, JSON.stringify(stats));
  });

  test("inspect shows provenance: the turn, its session and speaker", async () => {
    const hs = client();
    const namespace = freshNamespace();
    const eventId = `turn-${randomUUID()}`;
    const receipt = await hs.retain(namespace, "I am allergic to peanuts.", {
      speaker: "carol",
      sessionId: "lunch-1",
      eventTime: new Date("2024-05-01T12:00:00Z"),
      eventId,
    });
    assert.equal(receipt.event_id, eventId);
    const result = await hs.recall(namespace, "What am I allergic to?", { waitFor: receipt });
    const hit = result.memories.find((memory) => memory.content.includes("peanuts"));
    assert.ok(hit, JSON.stringify(result));

    const memory = await hs.inspect(namespace, hit.id);
    assert.equal(memory.id, hit.id);
    assert.equal(memory.status, "active");
    const source = (memory.provenance ?? []).find((turn) => turn.event_id === eventId);
    assert.ok(source, `provenance lacks ${eventId}: ${JSON.stringify(memory.provenance)}`);
    assert.equal(source.session_id, "lunch-1");
    assert.equal(source.speaker, "carol");
    assert.equal(Date.parse(source.event_time), Date.parse("2024-05-01T12:00:00Z"));
    // Where the turn sits in the input log: the retain receipt's place, and the memory's origin.
    assert.equal(source.topic, receipt.topic);
    assert.equal(source.partition, receipt.partition);
    assert.equal(source.offset, receipt.offset);
    assert.equal(memory.origin_offset, receipt.offset);
    assert.ok((memory.history ?? []).some((entry) => entry.change === "created"));
  });

  test("stats count what was retained", async () => {
    const hs = client();
    const namespace = freshNamespace();
    const empty = await hs.stats(namespace);
    assert.equal(empty.memories, 0);
    const receipt = await hs.retain(namespace, "We deploy on Fridays only after the 2pm freeze.", {
      speaker: "dan",
      sessionId: "s1",
    });
    await hs.recall(namespace, "when do we deploy?", { waitFor: receipt, reinforce: false });
    const stats = await hs.stats(namespace);
    assert.equal(stats.namespace, namespace);
    assert.ok(stats.memories >= 1, JSON.stringify(stats));
    const byStatus = Object.values(stats.by_status).reduce((sum, count) => sum + count, 0);
    assert.equal(byStatus, stats.memories);
  });

  test("a redaction policy hides emails and an admin can reveal them", async () => {
    const hs = client();
    const namespace = freshNamespace();
    const policy = await hs.setPolicy(namespace, { enabled: true, kinds: ["EMAIL"] });
    const receipt = await hs.retain(namespace, "Send the invoices to ap@example.org please.", {
      speaker: "dan",
      sessionId: "s1",
    });
    assert.ok(receipt.offset > policy.offset);
    const result = await hs.recall(namespace, "where do invoices go?", { waitFor: receipt });
    const hit = result.memories.find((m) => m.content.includes("[EMAIL_1]"));
    assert.ok(hit, JSON.stringify(result));
    assert.ok(!result.context.includes("ap@example.org"), result.context);
    const revealed = await hs.inspectRevealed(namespace, hit.id);
    assert.ok(revealed.content.includes("ap@example.org"), revealed.content);
    // Recorded by the pipeline before the turn after it was prepared, so visible now.
    assert.deepEqual((await hs.policy(namespace)).redaction.kinds, ["EMAIL"]);
  });

  test("invalid input is a 422 that names the field", async () => {
    const hs = client();
    const namespace = freshNamespace();
    const empty = await rejection(hs.retain(namespace, "", { speaker: "eve", sessionId: "s1" }));
    assert.equal(empty.status, 422);
    assert.equal(empty.field, "text");
    assert.match(empty.message, /^text: /);

    const limit = await rejection(hs.recall(namespace, "anything", { limit: 0 }));
    assert.equal(limit.status, 422);
    assert.equal(limit.field, "limit");

    const badNamespace = await rejection(hs.stats("not a namespace!"));
    assert.equal(badNamespace.status, 422);
    assert.equal(badNamespace.field, "namespace");
  });

  test("an unknown memory is a 404 naming memory_id", async () => {
    const error = await rejection(client().inspect(freshNamespace(), "m_does_not_exist"));
    assert.equal(error.status, 404);
    assert.equal(error.field, "memory_id");
  });

  test("without the API key the API refuses (401)", { skip: !apiKey && "no HINDSIGHT_API_KEY" }, async () => {
    const anonymous = new Hindsight({ baseUrl });
    const error = await rejection(anonymous.stats(freshNamespace()));
    assert.equal(error.status, 401);
  });
});

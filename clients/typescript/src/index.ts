/**
 * A thin client for the Hindsight HTTP API (`/v1/namespaces/{namespace}/...`).
 *
 * Types come from `schema.ts`, generated from the API's `/openapi.json` (`npm run generate`);
 * the tests fail when that file drifts from the running API. No runtime dependencies: Node's
 * own `fetch`.
 */
import type { components } from "./schema.js";

export type { components, paths } from "./schema.js";

type Schemas = components["schemas"];

/** Where a turn landed in the log; pass it (or its `offset`) to `recall({ waitFor })`. */
export type TurnReceipt = Schemas["TurnReceipt"];
/** Where another event the server published landed, e.g. a recall's reinforcement `signal`. */
export type Receipt = Schemas["Receipt"];
export type RecallResult = Schemas["RecallResult"];
export type RecalledMemory = Schemas["RecalledMemory"];
export type RecallTrace = Schemas["RecallTrace"];
/** Provenance: a turn a memory came from, its place in the input log and its data key. */
export type SourceTurn = Schemas["SourceTurn"];
export type Slot = Schemas["Slot"];
/** A memory with its provenance (the turns it came from) and history of changes. */
export type Memory = Schemas["MemoryOut"];
export type ForgetResult = Schemas["ForgetOut"];
export type Stats = Schemas["StatsOut"];
export type Policy = Schemas["PolicyIn"];
export type RedactionSettings = Schemas["RedactionSettings"];
export type Health = Schemas["Health"];
export type Ready = Schemas["Ready"];
export type ErrorBody = Schemas["ErrorBody"];
export type FieldError = Schemas["FieldError"];
export type Region = Schemas["MemoryOut"]["region"];
export type Role = NonNullable<Schemas["TurnIn"]["role"]>;

/** A request body: the schema's type with the fields the server defaults left optional. */
type Body<T, Required extends keyof T> = Partial<T> & Pick<T, Required>;

/** Any non-2xx answer from the API: `status`, the bad `field` when known, and the message. */
export class HindsightError extends Error {
  override readonly name = "HindsightError";

  constructor(
    readonly status: number,
    message: string,
    readonly field: string | null = null,
    readonly errors: FieldError[] = [],
  ) {
    super(message);
  }
}

export interface HindsightOptions {
  /** The API's base URL, e.g. `http://127.0.0.1:8765` (`api` in `<data-dir>/stack.json`). */
  baseUrl: string;
  /** Sent as `Authorization: Bearer <apiKey>` (`api_key` in `stack.json`). */
  apiKey?: string;
  /** Per-request time limit; recall and forget add the time they ask the server to wait. */
  timeoutMs?: number;
  /** Another `fetch` (for a proxy or tests); default: the global one. */
  fetch?: typeof fetch;
}

export interface RetainOptions {
  speaker: string;
  sessionId: string;
  /** When it was said; default: the server's now. */
  eventTime?: Date | string;
  role?: Role;
  metadata?: Record<string, unknown>;
  /** Idempotency key: retrying with the same id never creates a second memory. */
  eventId?: string;
}

export interface RecallOptions {
  /** Read-your-writes: a receipt (or its offset) the views must have applied first. */
  waitFor?: Pick<TurnReceipt | Receipt, "offset"> | number;
  /** Seconds the server may wait for `waitFor` (default 30, at most 300); then a 504. */
  waitTimeoutSeconds?: number;
  /** Recall as of this time; default: now. */
  at?: Date | string;
  limit?: number;
  /** Also return superseded and forgotten memories with their supersede chain and history. */
  includeHistory?: boolean;
  regions?: Region[];
  budgetChars?: number;
  /** Publish the hits as a reinforcement signal (default true). */
  reinforce?: boolean;
}

/** What to forget: memory ids, a query (resolved to ids by the server and recorded), or all. */
export type ForgetTarget =
  | { ids: string[]; query?: never; all?: never }
  | { query: string; ids?: never; all?: never }
  | { all: true; ids?: never; query?: never };

export interface ForgetOptions {
  /** Erase: nothing readable is left behind (default: soft forget, kept for audit). */
  hard?: boolean;
  /**
   * Return once the views applied the command (default true). Without waiting, or when the wait
   * runs out, `applied` is false and `memory_ids` is empty: the command is in the log and applies.
   */
  wait?: boolean;
  waitTimeoutSeconds?: number;
  reason?: string;
}

const DEFAULT_TIMEOUT_MS = 60_000;
const DEFAULT_WAIT_SECONDS = 30;
// /readyz answers 503 with its usual body while the view catches up.
const NOT_READY = 503;

function isoTime(value: Date | string | undefined): string | undefined {
  return value instanceof Date ? value.toISOString() : value;
}

function withoutUndefined<T extends object>(body: T): Partial<T> {
  return Object.fromEntries(
    Object.entries(body).filter(([, value]) => value !== undefined),
  ) as Partial<T>;
}

export class Hindsight {
  readonly baseUrl: string;
  readonly #apiKey: string | undefined;
  readonly #timeoutMs: number;
  readonly #fetch: typeof fetch;

  constructor(options: HindsightOptions) {
    if (!options.baseUrl) {
      throw new TypeError("baseUrl: the API's base URL is required");
    }
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.#apiKey = options.apiKey || undefined;
    this.#timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.#fetch = options.fetch ?? globalThis.fetch;
  }

  /** Retain one conversation turn; the receipt says where it landed in the log. */
  async retain(namespace: string, text: string, options: RetainOptions): Promise<TurnReceipt> {
    const body: Body<Schemas["TurnIn"], "text" | "speaker" | "session_id"> = {
      text,
      speaker: options.speaker,
      session_id: options.sessionId,
      event_time: isoTime(options.eventTime),
      role: options.role,
      metadata: options.metadata,
      event_id: options.eventId,
    };
    return this.#request("POST", this.#namespacePath(namespace, "turns"), body);
  }

  /** Ranked memories and a context block of dated, kind-tagged lines citing memory ids. */
  async recall(
    namespace: string,
    query: string,
    options: RecallOptions = {},
  ): Promise<RecallResult> {
    const waitFor = typeof options.waitFor === "number" ? options.waitFor : options.waitFor?.offset;
    const body: Body<Schemas["RecallIn"], "query"> = {
      query,
      at: isoTime(options.at),
      limit: options.limit,
      regions: options.regions,
      wait_for_offset: waitFor,
      wait_timeout: options.waitTimeoutSeconds,
      include_history: options.includeHistory,
      budget_chars: options.budgetChars,
      reinforce: options.reinforce,
    };
    const waits = waitFor === undefined ? 0 : (options.waitTimeoutSeconds ?? DEFAULT_WAIT_SECONDS);
    return this.#request("POST", this.#namespacePath(namespace, "recall"), body, waits);
  }

  /** Forget (soft, default) or erase (`hard`) memories by ids, by query, or the whole namespace. */
  async forget(
    namespace: string,
    target: ForgetTarget,
    options: ForgetOptions = {},
  ): Promise<ForgetResult> {
    const body: Body<Schemas["ForgetIn"], never> = {
      ids: target.ids,
      query: target.query,
      all: target.all,
      hard: options.hard,
      wait: options.wait,
      wait_timeout: options.waitTimeoutSeconds,
      reason: options.reason,
    };
    const waits = options.wait === false ? 0 : (options.waitTimeoutSeconds ?? DEFAULT_WAIT_SECONDS);
    return this.#request("POST", this.#namespacePath(namespace, "forget"), body, waits);
  }

  /** One memory: content, provenance turns and the history of its updates (404 if unknown). */
  async inspect(namespace: string, memoryId: string): Promise<Memory> {
    const path = this.#namespacePath(namespace, "memories", memoryId);
    return this.#request("GET", path);
  }

  /** The memory with redacted values put back from the original turns (an `admin` key). */
  async inspectRevealed(namespace: string, memoryId: string): Promise<Memory> {
    const path = this.#namespacePath(namespace, "memories", memoryId);
    return this.#request("GET", `${path}?reveal=true`);
  }

  /** Redact the namespace's turns from this point of its log on (an `admin` key). */
  async setPolicy(namespace: string, redaction: RedactionSettings): Promise<TurnReceipt> {
    return this.#request("PUT", this.#namespacePath(namespace, "policy"), { redaction });
  }

  /** The namespace's policy as the pipeline last recorded it (an `admin` key). */
  async policy(namespace: string): Promise<Policy> {
    return this.#request("GET", this.#namespacePath(namespace, "policy"));
  }

  /** Counts by status, kind and region, and the applied offset per input partition. */
  async stats(namespace: string): Promise<Stats> {
    return this.#request("GET", this.#namespacePath(namespace, "stats"));
  }

  async health(): Promise<Health> {
    return this.#request("GET", "/healthz");
  }

  /** Whether the recall view is caught up; not ready (a 503) is answered, not thrown. */
  async ready(): Promise<Ready> {
    return this.#request("GET", "/readyz", undefined, 0, NOT_READY);
  }

  #namespacePath(namespace: string, ...rest: string[]): string {
    const parts = [namespace, ...rest].map((part) => encodeURIComponent(part));
    return `/v1/namespaces/${parts.join("/")}`;
  }

  async #request<T>(
    method: "GET" | "POST" | "PUT",
    path: string,
    body?: object,
    serverWaitSeconds = 0,
    bodyStatus?: number,
  ): Promise<T> {
    const headers: Record<string, string> = { accept: "application/json" };
    if (body !== undefined) headers["content-type"] = "application/json";
    if (this.#apiKey) headers.authorization = `Bearer ${this.#apiKey}`;
    const response = await this.#fetch(`${this.baseUrl}${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(withoutUndefined(body)),
      signal: AbortSignal.timeout(this.#timeoutMs + serverWaitSeconds * 1000),
    });
    const text = await response.text();
    if (!response.ok && response.status !== bodyStatus) {
      throw errorFrom(response.status, response.statusText, text);
    }
    return JSON.parse(text) as T;
  }
}

function errorFrom(status: number, statusText: string, text: string): HindsightError {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    // Not our error body (a proxy, a crash page): keep what was said.
  }
  if (parsed && typeof parsed === "object" && "error" in parsed) {
    const error = parsed as ErrorBody;
    return new HindsightError(status, String(error.error), error.field ?? null, error.errors ?? []);
  }
  if (parsed && typeof parsed === "object" && "detail" in parsed) {
    // FastAPI's own shape (e.g. an auth dependency raising HTTPException).
    const detail = (parsed as { detail: unknown }).detail;
    return new HindsightError(status, typeof detail === "string" ? detail : JSON.stringify(detail));
  }
  return new HindsightError(status, `HTTP ${status} ${statusText}${text ? `: ${text}` : ""}`);
}
